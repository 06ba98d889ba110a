// Command nodetool is the local node's helper:
//
//	nodetool image --ref localhost:5000/etcd:v3.5.35 --add bin/etcd/v3.5.35/etcd:/usr/local/bin/etcd:0755 ...
//	    builds a one-layer image from local files (no base image is pulled) and pushes it to a registry,
//	    unless the registry already holds the same digest. --arch sets the image's architecture (default: this
//	    machine's), for images whose files are built for another one.
//	nodetool index --ref localhost:5000/etcd-operator:v0.2.0 localhost:5000/etcd-operator:v0.2.0-amd64 ...
//	    pushes an OCI image index of the given images, one entry per platform their configs name, as a multi-arch
//	    build (docker buildx --platform) would; the images must be in the registry already.
//	nodetool cri-cleanup --endpoint unix:///run/etcd-operator-node/containerd/containerd.sock
//	    stops and removes every pod sandbox through the CRI, so containerd tears down each pod's network
//	    (CNI DEL: veth, IP allocation, iptables rules) before the node is stopped.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "image":
		err = imageCmd(os.Args[2:])
	case "index":
		err = indexCmd(os.Args[2:])
	case "cri-cleanup":
		err = criCleanupCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodetool:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nodetool image|index|cri-cleanup [flags] (see -h of each)")
	os.Exit(2)
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// entry is one file, directory or symlink of the layer.
type entry struct {
	dest     string
	src      string // file to copy; empty for directories and symlinks
	link     string // symlink target
	dir      bool
	mode     int64
	uid, gid int
}

func imageCmd(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	ref := fs.String("ref", "", "image reference to push, e.g. localhost:5000/etcd:v3.5.35")
	var adds, dirs, links, envs list
	fs.Var(&adds, "add", "SRC:DEST[:MODE[:UID:GID]] copy a local file into the image (repeatable)")
	fs.Var(&dirs, "dir", "DEST[:MODE[:UID:GID]] create a directory (repeatable)")
	fs.Var(&links, "symlink", "DEST:TARGET create a symbolic link (repeatable)")
	fs.Var(&envs, "env", "K=V environment variable of the image config (repeatable)")
	entrypoint := fs.String("entrypoint", "", "comma-separated entrypoint")
	cmd := fs.String("cmd", "", "comma-separated default arguments")
	user := fs.String("user", "", "user of the image config, e.g. 65532:65532")
	workdir := fs.String("workdir", "/", "working directory")
	dryRun := fs.Bool("dry-run", false, "print the digest without pushing")
	arch := fs.String("arch", runtime.GOARCH, "architecture of the image config (GOARCH names: amd64, arm64, ...)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ref == "" {
		return errors.New("--ref is required")
	}
	r, err := name.ParseReference(*ref, name.Insecure)
	if err != nil {
		return err
	}

	entries := map[string]entry{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = entry{dest: d, dir: true, mode: 0o755}
			}
		}
	}
	for _, a := range adds {
		parts := strings.Split(a, ":")
		if len(parts) < 2 {
			return fmt.Errorf("--add %q: want SRC:DEST[:MODE[:UID:GID]]", a)
		}
		e := entry{src: parts[0], dest: path.Clean(parts[1]), mode: 0o644}
		if err := parseModeOwner(parts[2:], &e); err != nil {
			return fmt.Errorf("--add %q: %w", a, err)
		}
		if _, err := os.Stat(e.src); err != nil {
			return err
		}
		entries[e.dest] = e
		addParents(e.dest)
	}
	for _, d := range dirs {
		parts := strings.Split(d, ":")
		e := entry{dest: path.Clean(parts[0]), dir: true, mode: 0o755}
		if err := parseModeOwner(parts[1:], &e); err != nil {
			return fmt.Errorf("--dir %q: %w", d, err)
		}
		entries[e.dest] = e
		addParents(e.dest)
	}
	for _, l := range links {
		dest, target, ok := strings.Cut(l, ":")
		if !ok {
			return fmt.Errorf("--symlink %q: want DEST:TARGET", l)
		}
		e := entry{dest: path.Clean(dest), link: target, mode: 0o777}
		entries[e.dest] = e
		addParents(e.dest)
	}

	layerTar, err := buildTar(entries)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture = *arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = splitList(*entrypoint)
	cf.Config.Cmd = splitList(*cmd)
	cf.Config.User = *user
	cf.Config.WorkingDir = *workdir
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, envs...)
	cf.History = []v1.History{{Created: cf.Created, CreatedBy: "nodetool image (offline build, no base image)"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if *dryRun {
		fmt.Printf("%s@%s\n", r, digest)
		return nil
	}
	return push(r, digest, func() error { return remote.Write(r, img) })
}

// push writes an image or index unless the registry already has digest under r.
func push(r name.Reference, digest v1.Hash, write func() error) error {
	if d, err := remote.Head(r); err == nil && d.Digest == digest {
		fmt.Printf("%s@%s (unchanged)\n", r, digest)
		return nil
	}
	if err := write(); err != nil {
		return fmt.Errorf("push %s: %w", r, err)
	}
	fmt.Printf("%s@%s (pushed)\n", r, digest)
	return nil
}

func indexCmd(args []string) error {
	fs := flag.NewFlagSet("index", flag.ExitOnError)
	ref := fs.String("ref", "", "image index reference to push, e.g. localhost:5000/etcd-operator:v0.2.0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ref == "" || fs.NArg() == 0 {
		return errors.New("want --ref and at least one image")
	}
	r, err := name.ParseReference(*ref, name.Insecure)
	if err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]string{}
	for _, src := range fs.Args() {
		sr, err := name.ParseReference(src, name.Insecure)
		if err != nil {
			return err
		}
		img, err := remote.Image(sr)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		platform := v1.Platform{OS: cf.OS, Architecture: cf.Architecture}
		if other, dup := seen[platform.String()]; dup {
			return fmt.Errorf("%s and %s are both %s", other, src, platform.String())
		}
		seen[platform.String()] = src
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	return push(r, digest, func() error { return remote.WriteIndex(r, idx) })
}

func parseModeOwner(parts []string, e *entry) error {
	if len(parts) > 0 && parts[0] != "" {
		m, err := strconv.ParseInt(parts[0], 8, 32)
		if err != nil {
			return fmt.Errorf("mode %q: %w", parts[0], err)
		}
		e.mode = m
	}
	if len(parts) == 3 {
		var err error
		if e.uid, err = strconv.Atoi(parts[1]); err != nil {
			return err
		}
		if e.gid, err = strconv.Atoi(parts[2]); err != nil {
			return err
		}
	} else if len(parts) > 1 {
		return errors.New("owner must be UID:GID")
	}
	return nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// buildTar writes the entries sorted by path with fixed timestamps, so the same inputs give the same digest.
func buildTar(entries map[string]entry) ([]byte, error) {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, k := range keys {
		e := entries[k]
		h := &tar.Header{Name: strings.TrimPrefix(e.dest, "/"), Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case e.dir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case e.link != "":
			h.Typeflag = tar.TypeSymlink
			h.Linkname = e.link
		default:
			data, err := os.ReadFile(e.src)
			if err != nil {
				return nil, err
			}
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func criCleanupCmd(args []string) error {
	fs := flag.NewFlagSet("cri-cleanup", flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "CRI endpoint, unix:///path/to/containerd.sock")
	timeout := fs.Duration("timeout", 60*time.Second, "overall timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	conn, err := grpc.NewClient(*endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var failed int
	for _, sb := range resp.Items {
		id := sb.Id
		label := sb.Metadata.Namespace + "/" + sb.Metadata.Name
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s: %v\n", label, err)
			failed++
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			fmt.Fprintf(os.Stderr, "remove %s: %v\n", label, err)
			failed++
			continue
		}
	}
	fmt.Printf("removed %d of %d pod sandboxes\n", len(resp.Items)-failed, len(resp.Items))
	if failed > 0 {
		return fmt.Errorf("%d pod sandboxes could not be removed", failed)
	}
	return nil
}
