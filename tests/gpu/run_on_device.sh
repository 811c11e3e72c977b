#!/usr/bin/env bash
# Runs the GPU correctness tests (label gpu) and the examples on the device machine.
#
#   Here (builds, strips and copies the binaries into a folder git ignores, to carry):
#     tests/gpu/run_on_device.sh stage build-gpu .carry/gpu   (.carry/ is git-ignored)
#   On the device machine (from the repository root; DIR is a build dir or a staged one):
#     tests/gpu/run_on_device.sh run .carry/gpu    (or: run build-gpu, carrying build-gpu)
#
# The binaries are run directly, not through ctest: CTest files hold this machine's
# absolute paths, which do not exist on the device machine. Each test binary runs as
# JOBS parallel gtest shards (JOBS defaults to the core count, at most 16), sharing one
# disk kernel cache so every kernel is compiled once; then each example runs alone (its
# timing needs the GPU to itself).
#
# Environment: OUT (results folder; default DIR/gpu-results), JOBS, GTEST_FILTER,
# TESTS (test binary names to run, e.g. "forward_correctness_test"; default all),
# TEST_TIMEOUT (s per shard, default 420), EXAMPLE_TIMEOUT (s per example, default 120),
# RUN_TESTS=0 / RUN_EXAMPLES=0 to skip a part, ATTNJIT_CACHE_DIR.
# Writes OUT/gpu_tests.log, OUT/examples.log and OUT/summary.txt (three files: the device
# tool brings back at most eight), and prints the summary last. Exit status 0 only when
# every test passed (or skipped) and every example exited 0.
set -u
source "$(dirname "$0")/shards.sh"

TEST_BINARIES=(tests/runtime/runtime_gpu_test tests/gpu/device_buffer_test tests/gpu/cache_and_args_test
              tests/gpu/forward_correctness_test tests/gpu/backward_correctness_test tests/gpu/score_conv_test
              tests/gpu/score_conv_backward_test tests/gpu/score_conv_grads_test tests/gpu/reciprocal_band_test
              tests/gpu/latent_test tests/gpu/latent_backward_test)
EXAMPLES=(examples/01_causal_alibi examples/02_softcap_sliding_window examples/03_bias_broadcast
          examples/04_document_mask examples/05_training_softcap examples/06_mta_layer
          examples/07_evoformer_msa_row examples/08_reciprocal_band examples/09_mla_latent
          examples/10_ra_mla examples/11_mla_training)

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

stage() {
    local build=$1 dest=$2
    cmake --build "$build" --target "${TEST_BINARIES[@]##*/}" "${EXAMPLES[@]##*/}" -j"$(nproc)" || exit 1
    rm -rf "$dest"
    local f
    for f in "${TEST_BINARIES[@]}" "${EXAMPLES[@]}"; do
        [ -x "$build/$f" ] || { echo "missing $build/$f"; exit 1; }
        mkdir -p "$dest/$(dirname "$f")"
        # Debug info and symbols: the carried tree, binaries and sources together, is limited
        # to 64 MiB (with --strip-debug alone these binaries and the tree came to 67 MiB).
        objcopy --strip-all "$build/$f" "$dest/$f"
    done
    du -sh "$dest"
    echo "carry '$dest' and run: tests/gpu/run_on_device.sh run $dest"
}

run() {
    local dir=$1
    OUT=${OUT:-$dir/gpu-results}
    mkdir -p "$OUT"
    local jobs=${JOBS:-$(nproc)}
    [ "$jobs" -gt 16 ] && jobs=16
    export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-gpu-cache}
    local tmp
    tmp=$(mktemp -d)
    local tests_log=$OUT/gpu_tests.log examples_log=$OUT/examples.log summary=$OUT/summary.txt
    : >"$tests_log"
    : >"$examples_log"
    local status=0 start
    start=$(date +%s)
    {
        echo "== device"
        nvidia-smi -L 2>&1 || echo "nvidia-smi failed"
        echo "jobs $jobs, kernel cache $ATTNJIT_CACHE_DIR, filter ${GTEST_FILTER:-*}"
    } | tee "$summary"

    if [ "${RUN_TESTS:-1}" = 1 ]; then
        local bin name i
        for bin in "${TEST_BINARIES[@]}"; do
            name=${bin##*/}
            [ -n "${TESTS:-}" ] && [[ " $TESTS " != *" $name "* ]] && continue
            [ -x "$dir/$bin" ] || { echo "MISSING $dir/$bin" | tee -a "$summary"; status=1; continue; }
            run_shards "$jobs" "${TEST_TIMEOUT:-420}" "$tmp/$name" "$dir/$bin" --gtest_color=no
            for ((i = 0; i < jobs; i++)); do
                echo "===== $name shard $i (exit $(cat "$tmp/$name.$i.rc"))" >>"$tests_log"
                cat "$tmp/$name.$i.log" >>"$tests_log"
            done
            local passed failed skipped rcs
            passed=$(cat "$tmp/$name".*.log | grep -c '^\[       OK \]')
            failed=$(cat "$tmp/$name".*.log | grep -c '^\[  FAILED  \] .*(.*ms)$')
            skipped=$(cat "$tmp/$name".*.log | grep -c '^\[  SKIPPED \] .*(.*ms)$')
            rcs=$(cat "$tmp/$name".*.rc | sort | uniq -c | tr '\n' ' ')
            {
                echo "== $name: $passed passed, $failed failed, $skipped skipped; shard exit codes: $rcs"
                cat "$tmp/$name".*.log | grep '^\[  FAILED  \] .*(.*ms)$' | sed 's/^/   /'
                [ "$skipped" -gt 0 ] && cat "$tmp/$name".*.log | grep -m1 -A1 'no usable GPU' | sed 's/^/   skipped: /'
                grep -l -E 'Segmentation|terminate called|Aborted' "$tmp/$name".*.log 2>/dev/null |
                    sed 's/^/   crashed: /'
            } | tee -a "$summary"
            if [ "$failed" -gt 0 ] || grep -qv '^0$' "$tmp/$name".*.rc; then status=1; fi
        done
    fi

    if [ "${RUN_EXAMPLES:-1}" = 1 ]; then
        echo "== examples" | tee -a "$summary"
        local ex rc
        for ex in "${EXAMPLES[@]}"; do
            [ -x "$dir/$ex" ] || { echo "MISSING $dir/$ex" | tee -a "$summary"; status=1; continue; }
            echo "===== $ex" >>"$examples_log"
            timeout "${EXAMPLE_TIMEOUT:-120}" "$dir/$ex" >"$tmp/example.log" 2>&1
            rc=$?
            cat "$tmp/example.log" >>"$examples_log"
            echo "exit $rc" >>"$examples_log"
            {
                echo "   ${ex##*/}: exit $rc"
                grep -E '^(check|timing|compiled only|nothing ran|error)' "$tmp/example.log" | sed 's/^/      /'
            } | tee -a "$summary"
            [ "$rc" = 0 ] || status=1
        done
    fi
    echo "== $( [ $status = 0 ] && echo PASS || echo FAIL ) in $(($(date +%s) - start)) s; logs in $OUT" |
        tee -a "$summary"
    rm -rf "$tmp"
    return $status
}

case "${1:-}" in
stage) [ $# = 3 ] || usage; stage "$2" "$3" ;;
run) [ $# = 2 ] || usage; run "$2"; exit $? ;;
*) usage ;;
esac
