package kubectlplugin

import (
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
)

// bind registers the flags kubectl users expect, with kubectl's names and shorthands.
func (k *kubeFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&k.rules.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests.")
	clientcmd.BindOverrideFlags(k.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
}
