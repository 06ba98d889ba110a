// Wrapper module: nodetool, the local node's small helper (offline image builder, CRI cleanup).
module github.com/seedops/etcd-operator/hack/node/tools/nodetool

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	google.golang.org/grpc v1.68.1
	k8s.io/cri-api v0.33.13
)

require (
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	golang.org/x/net v0.38.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20241209162323-e6fa225c2576 // indirect
	google.golang.org/protobuf v1.36.5 // indirect
	gotest.tools/v3 v3.5.2 // indirect
)
