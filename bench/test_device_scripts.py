"""The device machine's shell scripts on this machine, with stand-ins for the GPU programs:
tests/gpu/run_on_device.sh (`run`) and bench/run_device.sh (`sanitize`) run each gtest binary
as parallel shards through tests/gpu/shards.sh, and count and judge what the shards report.

    python3 -m pytest bench/test_device_scripts.py
"""
import os
import stat
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A gtest binary: one test per shard, named after the shard it ran in; FAIL_SHARD fails one,
# CRASH_SHARD ends one with CRASH_CODE before any result line.
FAKE_GTEST = """#!/usr/bin/env bash
echo "args: $*"
echo "[ RUN      ] Fake.Shard$GTEST_SHARD_INDEX"
if [ "${CRASH_SHARD:-x}" = "$GTEST_SHARD_INDEX" ]; then
    exit "${CRASH_CODE:-139}"  # a crash, a timeout or a sanitizer's finding: no FAILED line
fi
if [ "${FAIL_SHARD:-x}" = "$GTEST_SHARD_INDEX" ]; then
    echo "[  FAILED  ] Fake.Shard$GTEST_SHARD_INDEX (1 ms)"
    exit 1
fi
echo "[       OK ] Fake.Shard$GTEST_SHARD_INDEX of $GTEST_TOTAL_SHARDS (1 ms)"
"""
# compute-sanitizer: runs the program after its options, then prints its summary.
FAKE_SANITIZER = """#!/usr/bin/env bash
while [ "${1#--}" != "$1" ]; do shift 2; done
"$@"; rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
"""


def executable(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


@pytest.fixture()
def staged(tmp_path):
    for name in ("forward_correctness_test", "backward_correctness_test"):
        executable(str(tmp_path / "stage" / "tests" / "gpu" / name), FAKE_GTEST)
    executable(str(tmp_path / "bin" / "compute-sanitizer"), FAKE_SANITIZER)
    executable(str(tmp_path / "bin" / "nvcc"), "#!/bin/sh\nexit 1\n")  # no racecheck probe
    executable(str(tmp_path / "bin" / "nvidia-smi"), "#!/bin/sh\necho 'GPU 0: stand-in'\n")
    return tmp_path


def run(staged, argv, **env):
    e = dict(os.environ, PATH=f"{staged / 'bin'}:{os.environ['PATH']}", OUT=str(staged / "out"),
             ATTNJIT_CACHE_DIR=str(staged / "cache"), **env)
    return subprocess.run(argv, cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)


def test_run_counts_every_shard(staged):
    r = run(staged, ["bash", "tests/gpu/run_on_device.sh", "run", str(staged / "stage")],
            JOBS="3", TESTS="forward_correctness_test", RUN_EXAMPLES="0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "== forward_correctness_test: 3 passed, 0 failed, 0 skipped; shard exit codes:       3 0" in r.stdout
    log = (staged / "out" / "gpu_tests.log").read_text()
    assert all(f"Fake.Shard{i} of 3" in log for i in range(3)) and "--gtest_color=no" in log
    assert "backward_correctness_test" not in r.stdout  # TESTS picks the binaries


def test_run_fails_on_a_failing_shard(staged):
    r = run(staged, ["bash", "tests/gpu/run_on_device.sh", "run", str(staged / "stage")],
            JOBS="2", TESTS="forward_correctness_test", RUN_EXAMPLES="0", FAIL_SHARD="1")
    assert r.returncode == 1
    assert "1 passed, 1 failed" in r.stdout and "Fake.Shard1" in r.stdout and "== FAIL" in r.stdout


def test_run_fails_on_a_shard_that_ends_without_a_result(staged):
    r = run(staged, ["bash", "tests/gpu/run_on_device.sh", "run", str(staged / "stage")],
            JOBS="2", TESTS="forward_correctness_test", RUN_EXAMPLES="0", CRASH_SHARD="0")
    assert r.returncode == 1
    assert "1 passed, 0 failed" in r.stdout and "139" in r.stdout and "== FAIL" in r.stdout


def test_sanitize_runs_the_shards_under_the_tool(staged):
    r = run(staged, ["bash", "bench/run_device.sh", "sanitize", str(staged / "stage"), "abc1234"],
            JOBS="2", SANITIZE_TOOLS="memcheck")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = (staged / "out" / "summary.txt").read_text()
    assert "memcheck forward_correctness_test: shard exits 0 0;" in summary
    assert "memcheck backward_correctness_test: shard exits 0 0;" in summary and "tests ok so far: 4" in summary
    log = (staged / "out" / "sanitize-memcheck.log").read_text()
    assert "--gtest_filter=Matrix*/Forward.MatchesReference" in log and log.count("ERROR SUMMARY: 0 errors") == 4
    assert log.count(" of 2 (1 ms)") == 4  # the shard variables reach the binary through the tool
    assert not [f for f in os.listdir(staged / "out") if f.startswith(".s")]  # shard files cleaned up
    r = run(staged, ["bash", "bench/run_device.sh", "sanitize", str(staged / "stage"), "abc1234"],
            JOBS="2", SANITIZE_TOOLS="memcheck", FAIL_SHARD="0")
    assert r.returncode == 1 and "sanitize exit 1" in r.stdout
    # memcheck's finding: exit 86 and no FAILED line
    r = run(staged, ["bash", "bench/run_device.sh", "sanitize", str(staged / "stage"), "abc1234"],
            JOBS="2", SANITIZE_TOOLS="memcheck", CRASH_SHARD="1", CRASH_CODE="86")
    assert r.returncode == 1 and "shard exits 0 86" in r.stdout and "sanitize exit 1" in r.stdout
