#!/usr/bin/env bash
# Installs the Debian 12 packages mdplan needs (only the missing ones), then
# configures and builds mdplan in $BUILD_DIR (default: build).
#
#   scripts/setup.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,5s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac

PACKAGES=(
  build-essential cmake ninja-build python3 python3-numpy zlib1g-dev
  llvm-14-dev llvm-14-tools
  libprotobuf-dev protobuf-compiler
  libflatbuffers-dev flatbuffers-compiler
  libgtest-dev libgmock-dev
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist
)
PACKAGES+=(${MDPLAN_EXTRA_PACKAGES:-})

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" > /dev/null
fi

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
echo "== configuring and building in $BUILD_DIR (-j$JOBS)"
mkdir -p "$BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > "$BUILD_DIR/cmake.log" 2>&1 \
  || { cat "$BUILD_DIR/cmake.log"; exit 1; }
ninja -C "$BUILD_DIR" -j "$JOBS"
