//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// The node's registry serves the operator image the way a registry serves a `make docker-buildx` build: one image
// index with an image per platform. Each platform the CSV declares must be there, and run its own binary.
var _ = Describe("The operator image", func() {
	It("is an image index with a linux image for every architecture the CSV declares, each binary built for it", func() {
		Expect(operatorImage).NotTo(BeEmpty(), "E2E_OPERATOR_IMAGE: run the suite with make test-e2e")
		base, repo, tag := registryRef(operatorImage)

		var index struct {
			MediaType string `json:"mediaType"`
			Manifests []struct {
				Digest   string `json:"digest"`
				Platform struct {
					OS           string `json:"os"`
					Architecture string `json:"architecture"`
				} `json:"platform"`
			} `json:"manifests"`
		}
		Expect(json.Unmarshal(registryGet(base, repo, "manifests/"+tag, "application/vnd.oci.image.index.v1+json"), &index)).To(Succeed())
		Expect(index.MediaType).To(Equal("application/vnd.oci.image.index.v1+json"))

		var platforms []string
		for _, m := range index.Manifests {
			Expect(m.Platform.OS).To(Equal("linux"))
			platforms = append(platforms, m.Platform.Architecture)

			var manifest struct {
				Config struct{ Digest string }   `json:"config"`
				Layers []struct{ Digest string } `json:"layers"`
			}
			Expect(json.Unmarshal(registryGet(base, repo, "manifests/"+m.Digest, "application/vnd.oci.image.manifest.v1+json"), &manifest)).To(Succeed())
			var config struct{ Architecture, OS string }
			Expect(json.Unmarshal(registryGet(base, repo, "blobs/"+manifest.Config.Digest, ""), &config)).To(Succeed())
			Expect(config.Architecture).To(Equal(m.Platform.Architecture), "config of %s", m.Digest)
			Expect(manifest.Layers).To(HaveLen(1))
			Expect(managerMachine(registryGet(base, repo, "blobs/"+manifest.Layers[0].Digest, ""))).
				To(Equal(map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[m.Platform.Architecture]),
					"/manager of the %s image", m.Platform.Architecture)
		}
		slices.Sort(platforms)
		Expect(platforms).To(Equal(csvArchitectures()))
	})
})

// registryRef splits host:port/repo:tag into the registry's base URL, the repository and the tag.
func registryRef(ref string) (base, repo, tag string) {
	host, rest, _ := strings.Cut(ref, "/")
	i := strings.LastIndex(rest, ":")
	return "http://" + host, rest[:i], rest[i+1:]
}

func registryGet(base, repo, path, accept string) []byte {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v2/%s/%s", base, repo, path), nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, resp.StatusCode).To(Equal(http.StatusOK), "GET %s: %s", req.URL, body)
	return body
}

// managerMachine reads the ELF machine of /manager in a gzipped layer.
func managerMachine(layer []byte) elf.Machine {
	gz, err := gzip.NewReader(bytes.NewReader(layer))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), "no /manager in the layer")
		if strings.TrimLeft(h.Name, "./") != "manager" {
			continue
		}
		data, err := io.ReadAll(tr)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		f, err := elf.NewFile(bytes.NewReader(data))
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return f.Machine
	}
}

// csvArchitectures are the architectures the bundle's CSV declares supported (operatorframework.io/arch.* labels).
func csvArchitectures() []string {
	data, err := os.ReadFile(filepath.Join("..", "..", "bundle", "manifests", "etcd-operator.clusterserviceversion.yaml"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var csv struct {
		Metadata struct{ Labels map[string]string } `json:"metadata"`
	}
	ExpectWithOffset(1, yaml.Unmarshal(data, &csv)).To(Succeed())
	var arches []string
	for k, v := range csv.Metadata.Labels {
		if arch, ok := strings.CutPrefix(k, "operatorframework.io/arch."); ok && v == "supported" {
			arches = append(arches, arch)
		}
	}
	slices.Sort(arches)
	return arches
}
