#!/usr/bin/env bash
# Sets up, builds and runs the main demo: every example. With a GPU each one runs, is
# checked against the fp64 reference and prints its time; without one each kernel is
# generated and compiled for sm_90a, and the example says that it only compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build="${ATTNJIT_BUILD_DIR:-build}"
for ex in "$build"/examples/0*_*; do
  [ -x "$ex" ] || continue
  echo "== $(basename "$ex")"
  "$ex"
done
