#!/usr/bin/env bash
# The sanitizer job: builds everything with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DATTNJIT_SANITIZE=ON, cmake/Sanitizers.cmake) into build-asan and runs the whole test
# suite there, as scripts/test.sh does for the plain build, plus the spec fuzz target's
# bounded corpus (label fuzz; tests/fuzz/README.md). CI runs it after scripts/test.sh.
#
#   scripts/sanitize.sh                    everything but the compile-only NVRTC suites (below)
#   scripts/sanitize.sh -L fuzz            extra arguments go to ctest (here: the fuzz tests only)
#
# Environment: ATTNJIT_SANITIZE_BUILD_DIR (default build-asan), CC / CXX (gcc or clang).
set -euo pipefail
cd "$(dirname "$0")/.."
ATTNJIT_SETUP_PACKAGES_ONLY=1 bash scripts/setup.sh

build="${ATTNJIT_SANITIZE_BUILD_DIR:-build-asan}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# -O1 -g: file:line in every report; faster than -O0, fewer frames inlined away than -O2.
cmake -S . -B "$build" -DATTNJIT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DATTNJIT_BUILD_TESTS=ON -DATTNJIT_BUILD_BENCH=ON -DATTNJIT_BUILD_EXAMPLES=ON \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
      -DCUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}" "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"

# Runtime options:
#  protect_shadow_gap=0  libcuda (dlopen'ed, not instrumented) wants address space that
#                        ASan reserves as its protected shadow gap: with the default, cuInit
#                        fails with CUDA_ERROR_OUT_OF_MEMORY and every gpu test SKIPS, which
#                        looks green. With it, the gpu tests and examples pass under ASan +
#                        UBSan with leak checks on (H100). Nothing changes without a GPU.
#  detect_leaks=1        LeakSanitizer at exit (the default on x86-64 Linux; said so because
#                        the python test turns it off for the interpreter's own memory).
#  print_stacktrace=1    UBSan reports say how the code got there, not only where.
# A UBSan report already ends the process: everything is built -fno-sanitize-recover.
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Without arguments, the NVRTC suites that only hand generated kernels to NVRTC (uninstrumented
# libnvrtc does nearly all their work; the plain pass runs them, and the cpu-labelled codegen
# tests run their host code here) are left out: InputGradsCompile alone took about 5 minutes
# of this pass on two cores, and CI's two passes must finish within 90 minutes.
if [ "$#" -eq 0 ]; then
    set -- -E '^(InputGradsCompile|PaddedHeadDimsCompile|Sm90Compile|CandidateConfigsCompile)\.'
fi
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -LE perf "$@"
