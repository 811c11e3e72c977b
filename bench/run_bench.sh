#!/usr/bin/env bash
# The one command of the Python benchmark (attnjit beside SDPA flash/cuDNN, FlexAttention and
# naive PyTorch): run from the repository root, on the GPU machine.
#
#   bench/run_bench.sh [LIBDIR] [bench_attention.py options]
#
# LIBDIR: the folder holding the built C library (libattnjit_c.so*), e.g. a carried
# .carry/py; or set ATTNJIT_LIBRARY to the .so itself. Options pass through to the harness:
#   bench/run_bench.sh .carry/py --quick                 smoke test (~1.5 min)
#   bench/run_bench.sh .carry/py --piece 1/3             one third of the full run (~5 min)
#   bench/run_bench.sh .carry/py --variant pair_bias --dtype bf16
# Results go to $OUT (on the device machine) or bench/results: <date>-<gpu>[-pieceIofN].jsonl,
# then report.py writes the markdown summary and plots next to them. With $OUT set (device
# machine) the README section is printed, not written; without it the README is updated.
# The commit recorded is $ATTNJIT_COMMIT, else `git rev-parse --short HEAD`, else unknown.
set -u
cd "$(dirname "$0")/.."

libdir=""
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then libdir=$1; shift; fi
if [ -n "$libdir" ]; then
    [ -d "$libdir" ] || { echo "run_bench.sh: $libdir is not a folder" >&2; exit 2; }
    if [ -z "${ATTNJIT_LIBRARY:-}" ]; then
        lib=$(ls "$libdir"/libattnjit_c.so* "$libdir"/lib/libattnjit_c.so* 2>/dev/null | head -1)
        [ -n "$lib" ] || { echo "run_bench.sh: no libattnjit_c.so* in $libdir" >&2; exit 2; }
        export ATTNJIT_LIBRARY=$(realpath "$lib")
    fi
    export LD_LIBRARY_PATH="$(realpath "$libdir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "# ATTNJIT_LIBRARY=${ATTNJIT_LIBRARY:-<unset: attnjit searches its default places>}"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
# A fresh kernel cache: attnjit's compile_s figures are cold NVRTC compiles.
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-$(mktemp -d)}
if [ -z "${ATTNJIT_COMMIT:-}" ]; then
    ATTNJIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    export ATTNJIT_COMMIT
fi

outdir=${OUT:-bench/results}
mkdir -p "$outdir"
marker=$(mktemp)
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null | sed 's/^/# gpu: /'

python3 bench/bench_attention.py --results-dir "$outdir" "$@"
rc=$?
echo "# harness exit $rc after $(( $(date +%s) - start )) s"

files=$(find "$outdir" -maxdepth 1 -name '*.jsonl' -newer "$marker" | sort)
rm -f "$marker"
if [ -z "$files" ]; then
    echo "run_bench.sh: the harness wrote no results" >&2
    exit 1
fi
if [ -n "${OUT:-}" ]; then
    # shellcheck disable=SC2086
    python3 bench/report.py $files --print-section
else
    # shellcheck disable=SC2086
    python3 bench/report.py $files
fi
echo "# total $(( $(date +%s) - start )) s"
exit $rc
