#!/usr/bin/env bash
# Sets up, builds and runs every test. With no GPU the `gpu` tests report SKIPPED with a
# reason and the examples only compile their kernels; with a GPU everything runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir "${ATTNJIT_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" -LE perf
