#!/usr/bin/env bash
# Sets up, builds and runs the main demo: every example. With a GPU each one runs, is
# checked against the fp64 reference and prints its time; without one each kernel is
# generated and compiled for sm_90a, and the example says that it only compiled.
# Builds the examples and what they need only (target attnjit_examples), not the tests: a
# new build directory is configured without them (no GoogleTest or FileCheck needed); one
# that scripts/test.sh configured keeps its options.
set -euo pipefail
cd "$(dirname "$0")/.."
ATTNJIT_SETUP_PACKAGES_ONLY=1 bash scripts/setup.sh
cuda="${CUDA_HOME:-/usr/local/cuda}"
build="${ATTNJIT_BUILD_DIR:-build}"
options=()
if [ ! -f "$build/CMakeCache.txt" ]; then
  options=(-DCMAKE_BUILD_TYPE=Release -DATTNJIT_BUILD_TESTS=OFF -DATTNJIT_BUILD_BENCH=OFF)
fi
cmake -S . -B "$build" -DCUDAToolkit_ROOT="$cuda" -DATTNJIT_BUILD_EXAMPLES=ON "${options[@]}" >/dev/null
cmake --build "$build" --target attnjit_examples -j"$(nproc)"
for ex in "$build"/examples/[0-9][0-9]_*; do
  [ -x "$ex" ] || continue
  echo "== $(basename "$ex")"
  "$ex"
done
