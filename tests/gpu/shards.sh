# Sourced by tests/gpu/run_on_device.sh and bench/run_device.sh (sanitize): runs one gtest
# binary as parallel shards.
#
#   run_shards JOBS LIMIT PREFIX COMMAND...
#
# Starts COMMAND JOBS times at once, shard i with GTEST_TOTAL_SHARDS=JOBS and
# GTEST_SHARD_INDEX=i in its environment (so a wrapper such as compute-sanitizer passes them
# on to the test binary), each under `timeout LIMIT` (seconds), its stdout and stderr in
# PREFIX.i.log; waits for all of them and writes each one's exit status to PREFIX.i.rc.

run_shards() {
    local jobs=$1 limit=$2 prefix=$3 i
    shift 3
    local pids=()
    for ((i = 0; i < jobs; i++)); do
        GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$i timeout "$limit" "$@" >"$prefix.$i.log" 2>&1 &
        pids+=($!)
    done
    for ((i = 0; i < jobs; i++)); do
        wait "${pids[$i]}"
        echo "$?" >"$prefix.$i.rc"
    done
}
