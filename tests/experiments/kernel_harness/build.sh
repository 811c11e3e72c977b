#!/usr/bin/env bash
# An experiment, not a test: never built by CMake or CTest (README.md).
# Builds the standalone kernel harness (no CMake): ./build.sh [out_dir]  (default: .carry
# at the repository root). Also builds the NVRTC checker.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$root/.carry}"
mkdir -p "$out/obj"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
FLAGS="-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I $root/templates -I $here -Xptxas -v"
pids=()
for f in main kernels_f16 kernels_bf16 kernels_f32 kernels_bench; do
  $NVCC $FLAGS -c "$here/$f.cu" -o "$out/obj/$f.o" > "$out/obj/$f.ptxas.txt" 2>&1 &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
if [ $fail -ne 0 ]; then cat "$out"/obj/*.ptxas.txt | grep -v "^ptxas info" | head -50; exit 1; fi
$NVCC -gencode=arch=compute_90a,code=sm_90a -o "$out/attnjit_kernel_harness" "$out"/obj/*.o
g++ -std=c++17 -O2 -I /usr/local/cuda/include -o "$out/nvrtc_check" "$here/nvrtc_check.cpp" -ldl
echo "built $out/attnjit_kernel_harness and $out/nvrtc_check"
