#!/bin/sh
# Installs what `make` (build), `make demo` (demo), `make static` (static), `make test` and
# `make bench` (test) need and this machine lacks, and says what it installs and why.
# Debian 12; needs root for apt-get. Prints nothing when everything is present.
set -eu
build_pkgs="gcc make libc6-dev libyaml-dev libjansson-dev libsodium-dev pkg-config git ca-certificates"
# libibverbs1 + ibverbs-providers: rdma.verbs loads the real library (it lists no device
# without an RDMA NIC, so on a fixture tree the check skips instead of failing)
# libcurl4-openssl-dev: curl/curl.h, which test_dl_abi compares pkg/dl/dl.h's libcurl
# declarations with (the build itself needs no curl header)
static_pkgs="$build_pkgs musl-tools"
test_pkgs="$build_pkgs clang libclang-rt-14-dev libcmocka-dev musl-tools iproute2 dnsmasq-base
  libibverbs1 ibverbs-providers libcurl4-openssl-dev
  iperf3 openmpi-bin libopenmpi-dev util-linux procps psmisc
  curl openssl python3 python3-yaml unzip time clang-format dpkg-dev xz-utils
  podman debootstrap debian-archive-keyring binutils file prometheus prometheus-pushgateway
  chromium"
# chromium: test_report_html loads `preflight report --html`'s page in a real headless browser
# (console errors, the heatmap's pixels) and bench_report_html times a 4,096-rank page
# prometheus (with promtool) and prometheus-pushgateway: test_pushgateway (and test_dashboard,
# every query of the Grafana dashboard) pushes to a real
# Pushgateway, queries a real Prometheus scraping it, and runs promtool over the rules
# the demo's pods: network namespaces (iproute2), hostnames (util-linux unshare), and a DNS
# server for the headless Service's names (dnsmasq)
demo_pkgs="$build_pkgs iproute2 util-linux dnsmasq-base libibverbs1 ibverbs-providers"
case "${1:-build}" in
    build) want=$build_pkgs ;;
    demo) want=$demo_pkgs ;;
    static) want=$static_pkgs ;;
    test) want=$test_pkgs
        # Node.js for the manifest validation. A machine may carry another distribution's
        # nodejs, which bundles npm and conflicts with Debian's npm package: install
        # Debian's only for what is absent.
        command -v node >/dev/null 2>&1 || want="$want nodejs"
        command -v npm >/dev/null 2>&1 || want="$want npm" ;;
    *) echo "usage: $0 build|demo|static|test" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# make test also takes NVIDIA's NCCL and headers from PyPI (scripts/nvidia-pypi.sh): the fixture
# nodes with GPUs need a libnccl.so.2 that loads, and test_dl_abi and test_gpu_health compare
# pkg/dl and the NVML test double with the real nccl.h, cuda.h and nvml.h; none of it assumes a
# /usr/local/cuda
nvidia() { if [ "${1:-build}" = test ]; then "$(dirname "$0")/nvidia-pypi.sh" fetch; fi; }
if [ -z "$missing" ]; then nvidia "${1:-build}"; exit 0; fi
what=${1:-build}
case "$what" in test) what="test and make bench" ;; esac
echo "deps.sh: make $what needs:$missing; installing them with apt-get (Debian packages)"
if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: need root to install:$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps.sh: installed:$missing"
nvidia "${1:-build}"
