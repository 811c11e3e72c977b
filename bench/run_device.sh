#!/usr/bin/env bash
# The one command for the device machine: GPU tests, examples, then attnjit's forward
# benchmark beside PyTorch SDPA (flash = FlashAttention-2, cuDNN) on the same GPU.
#
#   Here:   bench/run_device.sh stage build .carry/dev       (builds, copies the binaries)
#   Device: bench/run_device.sh run .carry/dev <commit>       (carry [".carry/dev"])
# Results under $OUT: gpu_tests.log, examples.log, summary.txt, attnjit.jsonl,
# sdpa.jsonl, summary.md (printed last).
set -u
cd "$(dirname "$0")/.."

case "${1:-}" in
stage)
    build=$2 dest=$3
    tests/gpu/run_on_device.sh stage "$build" "$dest" || exit 1
    cmake --build "$build" --target bench_forward -j"$(nproc)" || exit 1
    mkdir -p "$dest/bench"
    objcopy --strip-debug "$build/bench/bench_forward" "$dest/bench/bench_forward"
    du -sh "$dest"
    ;;
run)
    dir=$2 commit=${3:-unknown}
    export OUT=${OUT:-$dir/results}
    mkdir -p "$OUT"
    [ "${RUN_GPU_TESTS:-1}" = 1 ] && { tests/gpu/run_on_device.sh run "$dir"; tests_rc=$?; } || tests_rc=skipped
    echo "== benchmarks"
    export ATTNJIT_CACHE_DIR=$(mktemp -d)  # fresh: the first compile below is a cold one
    "$dir/bench/bench_forward" "$commit" >"$OUT/attnjit.jsonl" 2>"$OUT/bench_stderr.log" || echo "bench_forward failed: $(tail -3 "$OUT/bench_stderr.log")"
    python3 bench/sdpa_anchor.py "$commit" >"$OUT/sdpa.jsonl" 2>>"$OUT/bench_stderr.log" || echo "sdpa_anchor failed"
    python3 bench/summarize.py "$OUT/attnjit.jsonl" "$OUT/sdpa.jsonl" | tee "$OUT/summary.md"
    echo "gpu tests: exit $tests_rc"
    ;;
*) sed -n '2,9p' "$0"; exit 2 ;;
esac
