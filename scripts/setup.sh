#!/usr/bin/env bash
# Installs what attnjit needs to build from Debian's packages and configures + builds it.
# The CUDA toolkit (for nvrtc.h/cuda.h and libnvrtc) is expected under /usr/local/cuda or
# $CUDA_HOME; the GPU driver (libcuda) is only needed to run kernels.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make pkg-config libgtest-dev llvm-14-tools nlohmann-json3-dev libcli11-dev
          python3 python3-pytest python3-venv python3-pip python3-setuptools python3-wheel)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "[setup] installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "[setup] no CUDA toolkit at $cuda (nvrtc.h missing): install the CUDA toolkit or set CUDA_HOME" >&2
  exit 1
fi

# scripts/sanitize.sh and scripts/demo.sh want the packages only; they configure their own build.
[ "${ATTNJIT_SETUP_PACKAGES_ONLY:-0}" = 1 ] && exit 0

build="${ATTNJIT_BUILD_DIR:-build}"
# Everything: the libraries, tests, benchmarks and examples (docs/building.md has the options).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda" \
      -DATTNJIT_BUILD_TESTS=ON -DATTNJIT_BUILD_BENCH=ON -DATTNJIT_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
