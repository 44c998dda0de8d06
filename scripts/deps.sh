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
  podman debootstrap debian-archive-keyring binutils file prometheus prometheus-pushgateway"
# prometheus (with promtool) and prometheus-pushgateway: test_pushgateway pushes to a real
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
# NVIDIA's nvml.h, which test_dl_abi compares pkg/dl/nvml.h's declarations with and
# test_gpu_health.sh compiles the NVML test double against: NVIDIA publishes it only in the
# nvidia-nvml-dev-cu12 wheel on PyPI (120 kB; its licence does not allow committing it). For
# `test`, fetched once into the cache folder with python3 (the wheel's sha256 from PyPI's JSON
# checked); without network the two tests skip their header checks and say why.
NVML_WHEEL_VERSION=12.9.79
nvml_dir="${PREFLIGHT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/preflight}/nvml-dev-cu12-$NVML_WHEEL_VERSION"
if [ "${1:-build}" = test ] && [ ! -f "$nvml_dir/include/nvml.h" ] && command -v python3 >/dev/null 2>&1; then
    if python3 - "$nvml_dir" "$NVML_WHEEL_VERSION" 2>/dev/null <<'PY'
import glob, hashlib, io, json, os, subprocess, sys, tempfile, urllib.request, zipfile
out, ver = sys.argv[1], sys.argv[2]
pkg = "nvidia-nvml-dev-cu12==" + ver
data, name = None, None
with tempfile.TemporaryDirectory() as tmp:
    # pip, where it is installed, with the index it is configured for (and its hash checks)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, pkg],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    whl = glob.glob(os.path.join(tmp, "*.whl"))
    if r.returncode == 0 and whl:
        name = os.path.basename(whl[0])
        data = open(whl[0], "rb").read()
if data is None:  # no pip: PyPI's JSON API, the sha256 it gives checked
    meta = json.load(urllib.request.urlopen(
        "https://pypi.org/pypi/nvidia-nvml-dev-cu12/%s/json" % ver, timeout=30))
    url = next(u for u in meta["urls"] if u["filename"].endswith(".whl"))
    data, name = urllib.request.urlopen(url["url"], timeout=60).read(), url["filename"]
    if hashlib.sha256(data).hexdigest() != url["digests"]["sha256"]:
        sys.exit("sha256 of %s differs from PyPI's" % name)
os.makedirs(os.path.join(out, "include"), exist_ok=True)
with zipfile.ZipFile(io.BytesIO(data)) as z:
    h = z.read("nvidia/nvml_dev/include/nvml.h")
with open(os.path.join(out, "include", "nvml.h.tmp"), "wb") as f:
    f.write(h)
os.rename(os.path.join(out, "include", "nvml.h.tmp"), os.path.join(out, "include", "nvml.h"))
print("deps.sh: nvml.h of %s (%s) in %s/include" % (pkg, name, out))
PY
    then :; else
        echo "deps.sh: nvml.h not fetched (no network to pypi.org?): test_dl_abi and test_gpu_health skip their nvml.h checks" >&2
    fi
fi
missing=""
for p in $want; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# make test also takes NVIDIA's NCCL and headers from PyPI (scripts/nvidia-pypi.sh): the fixture
# nodes with GPUs need a libnccl.so.2 that loads, and test_dl_abi compares pkg/dl with the real
# nccl.h and cuda.h (nvml.h: above); none of it assumes a /usr/local/cuda
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
