#!/usr/bin/env bash
# attnjit-tune on the GPU (bench/run_device.sh tests runs it): --backward tunes a spec's
# forward returning LSE and its backward at a ragged shape into an empty database, --report
# lists both, and a second run takes both from the database without timing anything.
#
#   tests/tools/tune_on_gpu.sh DIR    (DIR: a build or staged folder holding tools/attnjit-tune)
#
# Prints what it checked; exit status 0 only when every check held.
set -u
tool=$1/tools/attnjit-tune
spec=bench/specs/startup_causal_bf16_d128.json
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
fail=0
check() {  # check WHAT COMMAND...: runs COMMAND, says whether WHAT held
    if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi
}
tune() {
    ATTNJIT_CACHE_DIR=$db ATTNJIT_DEBUG=1 "$tool" --specs "$spec" --shapes 2x4x1000x700 --backward 2>&1
}
first=$(tune); rc=$?
echo "$first" | grep -E "autotune|\[1/1\]"
check "the first run exits 0 (it exited $rc)" test "$rc" = 0
# One line per tuned bucket: "autotune: AttentionSpec(...)[ backward] BUCKET: N candidates in T s; ..."
check "the first run tunes two buckets" test "$(grep -cE 'autotune: .* q1024_k1024: [0-9]+ candidates in' <<<"$first")" = 2
check "one of them is the backward's" grep -qE "autotune: .* backward q1024_k1024: [0-9]+ candidates in" <<<"$first"
report=$(ATTNJIT_CACHE_DIR=$db "$tool" --report 2>&1)
echo "$report"
check "--report lists a forward row" grep -qE "^\| [0-9a-f]{12} \| forward \| .* \| q1024_k1024 \| [0-9.]+ \| [0-9.]+ \|" <<<"$report"
check "--report lists a backward row" grep -qE "^\| [0-9a-f]{12} \| backward_(fused|dkdv) \| .* \| q1024_k1024 \| [0-9.]+ \| [0-9.]+ \|" <<<"$report"
second=$(tune); rc=$?
check "the second run exits 0 (it exited $rc)" test "$rc" = 0
check "the second run times nothing" bash -c '! grep -q "candidates in" <<<"$1"' _ "$second"
check "the second run takes both choices from the database" test "$(grep -c 'from the tuning database' <<<"$second")" = 2
exit $fail
