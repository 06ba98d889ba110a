package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MigratedCRDs are the operator's CRDs whose stored objects migrate-storage rewrites.
var MigratedCRDs = []string{"etcdclusters.etcd.seedops.io", "etcdbackups.etcd.seedops.io"}

func newMigrateStorageCommand(k *kubeFlags, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate-storage",
		Short: "Rewrite every EtcdCluster and EtcdBackup in the storage version, then drop older versions from the CRDs' storedVersions",
		Long: "After an upgrade that changed the CRDs' storage version (v1alpha1 to v1beta1), objects written before it are still " +
			"stored as they were written. This rewrites every EtcdCluster and EtcdBackup in every namespace unchanged (the API " +
			"server stores each in the current storage version), then sets each CRD's status.storedVersions to the storage " +
			"version alone, so a later release may stop serving the old version. It changes no field and restarts no member. " +
			"It is idempotent and safe to interrupt: storedVersions is trimmed only after every object listed was rewritten. " +
			"It runs with your rights: update on etcdclusters and etcdbackups in every namespace, and on customresourcedefinitions/status.",
		Example: `  kubectl etcd migrate-storage`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := k.clientConfig().ClientConfig()
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			return MigrateStorage(cmd.Context(), cfg, streams.Out)
		},
	}
}

// MigrateStorage rewrites every object of the operator's CRDs in the storage version, then trims each CRD's
// status.storedVersions to it. Objects created while it runs are written in the storage version already:
// only those listed need rewriting. A CRD that is not installed is skipped.
func MigrateStorage(ctx context.Context, cfg *rest.Config, out io.Writer) error {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	for _, name := range MigratedCRDs {
		if err := migrateCRD(ctx, c, name, out); err != nil {
			return err
		}
	}
	return nil
}

func migrateCRD(ctx context.Context, c client.Client, name string, out io.Writer) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			_, _ = fmt.Fprintf(out, "%s: not installed, skipped\n", name)
			return nil
		}
		return fmt.Errorf("read CRD %s: %w", name, err)
	}
	storage := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		_, _ = fmt.Fprintf(out, "%s: every object is stored as %s already\n", name, storage)
		return nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(crd.Spec.Group + "/" + storage)
	list.SetKind(crd.Spec.Names.ListKind)
	rewritten, gone := 0, 0
	var failed []string
	for {
		if err := c.List(ctx, list, client.Limit(200), client.Continue(list.GetContinue())); err != nil {
			return fmt.Errorf("list %s: %w", crd.Spec.Names.Plural, err)
		}
		for i := range list.Items {
			switch err := rewrite(ctx, c, &list.Items[i]); {
			case err == nil:
				rewritten++
			case apierrors.IsNotFound(err):
				gone++ // deleted meanwhile: nothing left stored
			default:
				failed = append(failed, fmt.Sprintf("%s/%s: %v", list.Items[i].GetNamespace(), list.Items[i].GetName(), err))
			}
		}
		if list.GetContinue() == "" {
			break
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: %d objects not rewritten, storedVersions left as %v (run again once fixed):\n  %s",
			name, len(failed), crd.Status.StoredVersions, strings.Join(failed, "\n  "))
	}
	before := slices.Clone(crd.Status.StoredVersions)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		crd.Status.StoredVersions = []string{storage}
		return c.Status().Update(ctx, crd)
	})
	if err != nil {
		return errors.Join(fmt.Errorf("%s: %d objects rewritten, but storedVersions not trimmed", name, rewritten), err)
	}
	_, _ = fmt.Fprintf(out, "%s: %d objects rewritten as %s (%d deleted meanwhile); storedVersions %v -> [%s]\n",
		name, rewritten, storage, gone, before, storage)
	return nil
}

// rewrite writes obj back unchanged: the API server encodes it in the storage version. On a conflict the
// object was written since it was listed, in the storage version already; it is read and written again
// anyway, which costs nothing and leaves no doubt.
func rewrite(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := c.Update(ctx, obj)
		if apierrors.IsConflict(err) {
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
				return gerr
			}
		}
		return err
	})
}
