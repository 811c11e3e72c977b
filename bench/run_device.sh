#!/usr/bin/env bash
# The device machine's commands: GPU tests (C++, C API, Python) and the benchmarks.
#
#   Here:   bench/run_device.sh stage BUILD DEST     builds and copies the binaries and
#                                                    libattnjit_c into DEST (e.g. .carry/dev),
#                                                    and packs DEST into DEST.tar.xz (~5 MiB:
#                                                    DEST itself, ~60 MiB, no longer fits the
#                                                    64 MiB carry beside the tree)
#   Device (carry [DEST.tar.xz] and start with `tar -C .carry -xJf DEST.tar.xz`), from the
#   repository root:
#           bench/run_device.sh tests DEST COMMIT    C++ GPU tests + examples, C API GPU
#                                                    tests, the SASS check, attnjit-tune's
#                                                    check (tests/tools/tune_on_gpu.sh), Python GPU tests
#                                                    (PYTEST_ARGS="-n 8": pytest-xdist, ~4x faster)
#           bench/run_device.sh sanitize DEST COMMIT compute-sanitizer memcheck and racecheck
#                                                    on one case of each modifier, forward and
#                                                    backward, on both main loops
#           bench/run_device.sh cppbench DEST COMMIT the C++ forward benchmark beside SDPA
#           bench/run_device.sh startup DEST COMMIT  process start to the first kernel: a kernel
#                                                    bundle, a cold and a warm disk cache (docs/aot.md)
#           bench/run_device.sh bench DEST COMMIT [harness options]
#                                                    the Python harness (bench/run_bench.sh)
#           bench/run_device.sh tuned DEST COMMIT [harness options]
#                                                    the harness with --autotune, then the tuning
#                                                    database it filled (attnjit-tune --report)
# Results go to $OUT (default DEST/results).
set -u
cd "$(dirname "$0")/.."
source tests/gpu/shards.sh

case "${1:-}" in
stage)
    build=$2 dest=$3
    tests/gpu/run_on_device.sh stage "$build" "$dest" || exit 1
    cmake --build "$build" --target bench_forward bench_startup bench_startup_bundled attnjit_c capi_gpu_test \
        codegen_nvrtc_test attnjit-tune attnjit-aot -j"$(nproc)" || exit 1
    mkdir -p "$dest/bench" "$dest/capi" "$dest/tests/capi" "$dest/tests/nvrtc" "$dest/tools"
    for t in attnjit-tune attnjit-aot; do objcopy --strip-all "$build/tools/$t" "$dest/tools/$t"; done
    for b in bench_forward bench_startup bench_startup_bundled; do objcopy --strip-all "$build/bench/$b" "$dest/bench/$b"; done
    # Real files, not symlinks: the tests' RUNPATH wants the SONAME, Python the .so.
    objcopy --strip-all "$build/capi/libattnjit_c.so.1" "$dest/capi/libattnjit_c.so.1"
    cp "$dest/capi/libattnjit_c.so.1" "$dest/capi/libattnjit_c.so"
    objcopy --strip-all "$build/tests/capi/capi_gpu_test" "$dest/tests/capi/capi_gpu_test"
    # For its SASS check (Sm90Sass: HGMMA in the sm90 cubins), which needs the device's cuobjdump.
    objcopy --strip-all "$build/tests/nvrtc/codegen_nvrtc_test" "$dest/tests/nvrtc/codegen_nvrtc_test"
    du -sh "$dest"
    # The binaries share most of their code: xz's window finds it (60 MiB -> ~5 MiB).
    tar -C "$(dirname "$dest")" -cf - "$(basename "$dest")" | xz -9 -T0 >"$dest.tar.xz" || exit 1
    ls -l "$dest.tar.xz"
    ;;
tests)
    dir=$2 commit=${3:-unknown}
    export OUT=${OUT:-$dir/results}
    mkdir -p "$OUT"
    export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-gpu-cache}
    tests/gpu/run_on_device.sh run "$dir"; cpp_rc=$?
    echo "== C API GPU tests"
    "$dir/tests/capi/capi_gpu_test" >"$OUT/capi_gpu.log" 2>&1; capi_rc=$?
    tail -5 "$OUT/capi_gpu.log"
    echo "== SASS check (cuobjdump)"
    "$dir/tests/nvrtc/codegen_nvrtc_test" --gtest_filter='Sm90Sass.*' >>"$OUT/capi_gpu.log" 2>&1 || capi_rc=1
    grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$OUT/capi_gpu.log" | tail -3
    echo "== attnjit-tune on the GPU"
    tests/tools/tune_on_gpu.sh "$dir" >"$OUT/tune_gpu.log" 2>&1; tools_rc=$?
    grep -E '^(ok|FAILED):' "$OUT/tune_gpu.log"
    echo "== Python GPU tests"
    # ATTNJIT_AOT: the bundle tests (attnjit-aot makes the bundle the GPU test launches from).
    ATTNJIT_LIBRARY=$PWD/$dir/capi/libattnjit_c.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 \
        ATTNJIT_AOT=$PWD/$dir/tools/attnjit-aot \
        python3 -m pytest -q -rs ${PYTEST_ARGS:-} python/tests 2>&1 | tee "$OUT/python_tests.log" | tail -25
    py_rc=${PIPESTATUS[0]}
    echo "commit $commit: gpu tests exit $cpp_rc, capi gpu exit $capi_rc, tools exit $tools_rc, python tests exit $py_rc" | tee -a "$OUT/summary.txt"
    [ $cpp_rc = 0 ] && [ $capi_rc = 0 ] && [ $tools_rc = 0 ] && [ $py_rc = 0 ]
    ;;
sanitize)
    dir=$2 commit=${3:-unknown}
    export OUT=${OUT:-$dir/results}
    mkdir -p "$OUT"
    # Line info names the source lines of a finding; its kernels have their own cache keys.
    export ATTNJIT_LINEINFO=1 ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-gpu-cache}
    # First what racecheck makes of the sm90 kernels' hand-offs between warps (a planted race
    # included: it must be reported).
    strict=""
    if "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -arch=sm_90a -o "$OUT/.probe" bench/tools/racecheck_probe.cu; then
        for kind in block_barrier named_barrier mbarrier named_ring unsynchronised; do
            compute-sanitizer --tool racecheck "$OUT/.probe" "$kind" >"$OUT/.p" 2>&1
            echo "racecheck probe $kind: exit $?; $(grep -hE 'words as written|RACECHECK SUMMARY' "$OUT/.p" | tr '\n' ' ')" |
                tee -a "$OUT/summary.txt"
            # Once racecheck models mbarriers, the sm90 kernels' reports are findings too.
            [ "$kind" = mbarrier ] && grep -q 'RACECHECK SUMMARY: 0 hazards' "$OUT/.p" && strict=--strict
        done
        rm -f "$OUT/.probe" "$OUT/.p"
    fi
    # One small ragged shape per modifier: forward bf16 d128 and f16 d64 on the default (sm90)
    # and the sm80 loop; backward bf16 d64 on the sm80 kernels and the sm90 ones (ordered, fast,
    # two-pass).
    fwd='Matrix*/Forward.MatchesReference/bf16_d128_*_b1_h4x2_q1000_k255:Matrix*/Forward.MatchesReference/f16_d64_*'
    bwd='Matrix/Backward.MatchesReference/bf16_d64_*_q129_k255:Matrix/Sm90Backward.MatchesReference/bf16_d64_*_q129_k255'
    jobs=${JOBS:-8} status=0
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        log=$OUT/sanitize-$tool.log
        : >"$log"
        for run in "forward_correctness_test $fwd" "backward_correctness_test $bwd"; do
            bin=${run%% *} filter=${run#* }
            run_shards "$jobs" "${SANITIZE_TIMEOUT:-400}" "$OUT/.s" compute-sanitizer --tool "$tool" \
                --error-exitcode 86 --print-limit 20 "$dir/tests/gpu/$bin" --gtest_color=no --gtest_filter="$filter"
            rcs=""
            for ((i = 0; i < jobs; i++)); do
                rcs="$rcs $(cat "$OUT/.s.$i.rc")"
                cat "$OUT/.s.$i.log" >>"$log"
                rm -f "$OUT/.s.$i.log" "$OUT/.s.$i.rc"
            done
            passed=$(grep -c '^\[       OK \]' "$log")
            echo "$tool $bin: shard exits$rcs; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';') tests ok so far: $passed" |
                tee -a "$OUT/summary.txt"
            grep -q '^\[  FAILED  \]' "$log" && status=1
            for rc in $rcs; do
                # 86: the tool found something; racecheck's findings are sorted below.
                [ "$rc" = 0 ] || { [ "$rc" = 86 ] && [ "$tool" = racecheck ]; } || status=1
            done
        done
        # racecheck reports the sm90 kernels' mbarrier / named-ring hand-offs on correct code (the
        # probe above): those are listed; a report anywhere else fails the run.
        if [ "$tool" = racecheck ]; then
            python3 bench/tools/racecheck_report.py "$log" $strict | tee -a "$OUT/summary.txt"
            [ "${PIPESTATUS[0]}" = 0 ] || status=1
        fi
    done
    echo "commit $commit: sanitize exit $status" | tee -a "$OUT/summary.txt"
    exit $status
    ;;
cppbench)
    dir=$2 commit=${3:-unknown}
    export OUT=${OUT:-$dir/results}
    mkdir -p "$OUT"
    export ATTNJIT_CACHE_DIR=$(mktemp -d)  # fresh: the first compile below is a cold one
    "$dir/bench/bench_forward" "$commit" >"$OUT/attnjit.jsonl" 2>"$OUT/bench_stderr.log" || echo "bench_forward failed: $(tail -3 "$OUT/bench_stderr.log")"
    python3 bench/sdpa_anchor.py "$commit" >"$OUT/sdpa.jsonl" 2>>"$OUT/bench_stderr.log" || echo "sdpa_anchor failed"
    python3 bench/summarize.py "$OUT/attnjit.jsonl" "$OUT/sdpa.jsonl" | tee "$OUT/summary.md"
    ;;
bench)
    dir=$2 commit=${3:-unknown}
    shift 3
    export OUT=${OUT:-$dir/results}
    ATTNJIT_COMMIT=$commit bench/run_bench.sh "$dir/capi" "$@"
    ;;
tuned)
    dir=$2 commit=${3:-unknown}
    shift 3
    export OUT=${OUT:-$dir/results}
    mkdir -p "$OUT"
    # A fresh cache: the tuned first calls are cold tunings (or database hits of an earlier case).
    # ATTNJIT_DEBUG: the tuner's line per bucket (candidates, time, winner) goes to autotune.log;
    # the rest of the debug output is dropped. HARNESS_TIMEOUT (s) stops the harness early and
    # still reads the database.
    export ATTNJIT_CACHE_DIR=$(mktemp -d) ATTNJIT_DEBUG=1
    : >"$OUT/autotune.log"
    ATTNJIT_COMMIT=$commit timeout "${HARNESS_TIMEOUT:-0}" bench/run_bench.sh "$dir/capi" --autotune "$@" 2>&1 |
        awk -v tunelog="$OUT/autotune.log" '/^\[attnjit\] autotune:/ { print >> tunelog; fflush(tunelog); next }
                                         /^\[attnjit\] / { next } { print; fflush() }'
    rc=${PIPESTATUS[0]}
    echo "== the tuner's choices"
    cat "$OUT/autotune.log" 2>/dev/null
    echo "== the tuning database (attnjit-tune --report)"
    ATTNJIT_DEBUG=0 "$dir/tools/attnjit-tune" --report | tee "$OUT/tuning_report.txt"
    exit $rc
    ;;
startup)
    dir=$2 commit=${3:-unknown}
    export OUT=${OUT:-$dir/results}
    mkdir -p "$OUT"
    echo "commit $commit" | tee "$OUT/startup.md"
    # Persistence mode changes cuInit's time: off, the driver sets the GPU up again in every process.
    nvidia-smi --query-gpu=name,persistence_mode --format=csv,noheader | sed 's/^/GPU, persistence mode: /' |
        tee -a "$OUT/startup.md"
    python3 bench/startup.py --build "$dir" --reps 5 --jsonl "$OUT/startup.jsonl" | tee -a "$OUT/startup.md"
    ;;
*) sed -n '2,25p' "$0"; exit 2 ;;
esac
