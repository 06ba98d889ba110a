# The catalog image: serves the file-based catalog in catalog/ with `opm serve` (`make catalog-build`).
ARG OPM_IMAGE=quay.io/operator-framework/opm:v1.73.0
FROM ${OPM_IMAGE}

ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]

# The declarative config root, and a serve cache built in advance so the catalog starts fast.
ADD catalog /configs
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]

# Where the declarative config root is inside the image.
LABEL operators.operatorframework.io.index.configs.v1=/configs
