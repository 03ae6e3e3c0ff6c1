#!/usr/bin/env bash
# Installs the Debian 12 packages this project needs, if any are missing.
# Idempotent and silent when everything is present. Needs root (or sudo) only
# when something must be installed. Usage: tools/setup_deps.sh [--guest]
#   --guest  also the packages for the Soft-RoCE qemu guest (tools/rxe_vm).
set -euo pipefail

guest=0
for arg in "$@"; do
  case "$arg" in
    --guest) guest=1 ;;
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup_deps.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

pkgs=(bazel-bootstrap g++ pkg-config libibverbs-dev librdmacm-dev libboost-dev
      libboost-program-options-dev libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libtbb-dev
      libpmix-dev openmpi-bin python3 python3-matplotlib zookeeper libzookeeper-mt-dev)
if [[ $guest -eq 1 ]]; then
  pkgs+=(qemu-system-x86 linux-image-amd64 busybox-static rdma-core ibverbs-providers ibverbs-utils
         perftest rdmacm-utils iproute2 cpio kmod xz-utils)  # the same list as tools/rxe_vm/rxe_run
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "setup_deps: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup_deps: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup_deps: done" >&2
