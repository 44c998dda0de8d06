# preflight's container image (docs/kubernetes.md, "Build and push the image").
#
#   docker build -t preflight:0.1.0 .                      the runtime image (default target)
#   docker build --target static -t preflight:0.1.0-static .   the static binary in scratch
#   podman build --build-arg BUILD_IMAGE=... --build-arg RUNTIME_IMAGE=... .
#
# The image runs on Debian 12 (bookworm-slim, supported by Debian's security team). The binary
# is built on Debian 11 (bullseye, glibc 2.31): a binary links against the symbol versions of
# the glibc it is built on and runs on that glibc or any newer one, so built there it runs
# inside every current CUDA training image that `preflight install` copies it into (Ubuntu
# 20.04 has 2.31, 22.04 2.35: a bookworm build would need 2.36; UBI 8 2.28 is the exception:
# use the static target there). The build stage is not part of the image; BUILD_IMAGE=
# docker.io/library/debian:bookworm builds on 12 where the training images are all newer.
# libyaml, jansson and libsodium are linked statically; libcurl, libibverbs, libnccl and
# libcuda are loaded with dlopen when present. Both binaries ship stripped (make dist; the
# symbols stay in the build stage's bin/dist/preflight.debug).
ARG BUILD_IMAGE=docker.io/library/debian:bullseye
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

# ---- build: bin/preflight (glibc) -------------------------------------------------------
FROM ${BUILD_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        gcc make libc6-dev binutils libyaml-dev libjansson-dev libsodium-dev \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# GIT: the commit shown by `preflight version` (.git is not sent to the build)
ARG GIT=unknown
RUN make -j"$(nproc)" GIT="$GIT" bin/preflight bin/dist/preflight \
 && bin/dist/preflight version \
 && echo "highest glibc symbol version needed:" \
        "$(objdump -T bin/preflight | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"

# ---- build-static: bin/preflight-static (musl, no dlopen) -------------------------------
FROM build AS build-static
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
ARG GIT=unknown
RUN PF_GIT="$GIT" scripts/build-static.sh \
 && strip --strip-all bin/preflight-static && bin/preflight-static version

# ---- static: the fully static binary alone, for scratch images (`--target static`) ------
FROM scratch AS static
COPY --from=build-static /src/bin/preflight-static /preflight
# NCCL, verbs and Kubernetes reporting skip here: a static binary cannot dlopen
USER 65532:65532
ENTRYPOINT ["/preflight"]
CMD ["--help"]

# ---- runtime (default): bin/preflight on a small Debian ----------------------------------
FROM ${RUNTIME_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# libcurl4: Kubernetes Events and the pod annotation (report.events, report.annotate), the
# Pushgateway; libibverbs1 + ibverbs-providers (mlx5 among them): the rdma.verbs check. Both
# are dlopened: without them those checks say skip, nothing else changes. ca-certificates:
# /etc/ssl/certs/ca-certificates.crt, the bundle Debian's libcurl4 reads by default (its
# build's CURL_CA_BUNDLE, and /etc/ssl/certs its CA path: both compiled into bookworm's
# libcurl.so.4), so an https:// Pushgateway with a public certificate needs no caFile;
# preflight sets no CURLOPT_CAINFO of its own unless caFile names one.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4 libibverbs1 ibverbs-providers \
        ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && install -d -m 0755 -o 65532 -g 65532 /run/preflight
COPY --from=build /src/bin/dist/preflight /usr/local/bin/preflight
LABEL org.opencontainers.image.title="preflight" \
      org.opencontainers.image.description="Network-fabric gate for distributed GPU training"
# a fixed non-root UID (no passwd entry needed); /run/preflight is where `run` writes the
# verdict when no emptyDir is mounted there
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/preflight"]
CMD ["--help"]
