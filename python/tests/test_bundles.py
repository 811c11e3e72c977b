"""Kernel bundles from Python (attnjit.load_bundle, docs/aot.md): the bundle attnjit-aot makes
of a spec serves that spec's kernels in a process where NVRTC cannot load and the disk cache is
off, which never maps NVRTC (the same process without the bundle cannot compile them); a
directory that is not a bundle is an ArgumentError that says so."""
import os
import subprocess
import sys
import textwrap

import pytest

import attnjit
from library_or_skip import load_library_or_skip

load_library_or_skip()

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def aot_or_skip():
    aot = os.environ.get("ATTNJIT_AOT")
    if not aot:
        pytest.skip("ATTNJIT_AOT names no attnjit-aot (ctest's python.pytest sets it)")
    return aot


def compile_without_nvrtc(spec_path, bundle):
    """Runs a fresh interpreter that loads `bundle` (if any) and compiles the spec's forward for
    sm_90a on both loops, with NVRTC unloadable and no disk cache; returns (ok, output)."""
    code = textwrap.dedent(f"""
        import attnjit
        from attnjit import capi
        if {bundle!r}:
            print("kernels in the bundle:", attnjit.load_bundle({bundle!r}), "bundles:", attnjit.num_bundles())
        text = open({spec_path!r}).read()
        for loop in (None, "sm80"):
            capi.Kernel(capi.Spec.from_json(text), "sm_90a", mainloop=loop)
        assert "libnvrtc" not in open("/proc/self/maps").read(), "NVRTC was mapped"
        print("compiled from the bundle")
    """)
    env = dict(os.environ, ATTNJIT_LIBNVRTC="/nonexistent/libnvrtc.so", ATTNJIT_DISABLE_DISK_CACHE="1",
               PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    return run.returncode == 0 and "compiled from the bundle" in run.stdout, run.stdout + run.stderr


def test_a_bundle_serves_its_kernels_without_nvrtc(tmp_path):
    aot = aot_or_skip()
    spec = tmp_path / "causal.json"
    spec.write_text(attnjit.spec_json(causal=True, dtype="bf16", head_dim=64))
    bundle = tmp_path / "bundle"
    subprocess.run([aot, "--specs", str(spec), "--arch", "sm_90a", "--out", str(bundle), "--quiet"], check=True,
                   timeout=300)
    ok, out = compile_without_nvrtc(str(spec), str(bundle))
    assert ok, out
    assert "kernels in the bundle: 2 bundles: 1" in out, out  # the sm90 forward and its sm80 fallback
    ok, out = compile_without_nvrtc(str(spec), "")
    assert not ok and "it is not in a kernel bundle (none is loaded or linked)" in out, out


def test_a_directory_that_is_not_a_bundle_says_so(tmp_path):
    with pytest.raises(attnjit.ArgumentError) as info:
        attnjit.load_bundle(tmp_path)
    assert "manifest.json does not exist" in str(info.value) and "attnjit-aot" in str(info.value)
    (tmp_path / "manifest.json").write_text('{"format": "attnjit.spec/1"}')
    with pytest.raises(attnjit.ArgumentError) as info:
        attnjit.load_bundle(tmp_path)
    assert 'has format "attnjit.spec/1"' in str(info.value)
