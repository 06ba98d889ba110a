# Build the manager binary. The builder runs on the build machine's platform and cross-compiles (Go needs no
# emulation), so `make docker-buildx` builds every platform at native speed.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Copy the Go Modules manifests and cache the dependencies before copying the sources,
# so that source changes don't invalidate the downloaded layer.
COPY go.mod go.mod
COPY go.sum go.sum
RUN go mod download

# Copy the go source
COPY cmd/ cmd/
COPY api/ api/
COPY controllers/ controllers/
COPY internal/ internal/

# Build. GOARCH has no default so that the binary matches the platform of the image being built
# (docker buildx sets TARGETARCH).
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -a -o manager ./cmd

# Use distroless as minimal base image to package the manager binary.
# Refer to https://github.com/GoogleContainerTools/distroless for more details.
# Offline, hack/node/images.sh builds the same image (binary /manager, user 65532:65532) without a base image.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532

ENTRYPOINT ["/manager"]
