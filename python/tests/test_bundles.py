"""Kernel bundles from Python (attnjit.load_bundle, docs/aot.md): the bundle attnjit-aot makes
of a spec serves that spec's kernels in a process where NVRTC cannot load and the disk cache is
off, which never maps NVRTC (the same process without the bundle cannot compile them); a
directory that is not a bundle is an ArgumentError that says so. On a GPU, a bundle's kernel
launches through torch with NVRTC unloadable and matches an fp64 reference."""
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


def without_nvrtc_env():
    """This process's environment without attnjit's settings (but the library's path), with NVRTC
    unloadable and no disk cache: what the child interpreters run in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTNJIT_") or k == "ATTNJIT_LIBRARY"}
    return dict(env, ATTNJIT_LIBNVRTC="/nonexistent/libnvrtc.so", ATTNJIT_DISABLE_DISK_CACHE="1",
                PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))


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
    env = without_nvrtc_env()
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


def device_arch_or_skip():
    """The arch attnjit compiles for on this process's GPU (sm_90a on a Hopper), or a skip."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU is visible to PyTorch")
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}" + ("a" if major == 9 else "")


def test_a_bundle_launches_on_the_gpu_without_nvrtc(tmp_path):
    """attnjit-aot's bundle of what attnjit.compile(causal=True) needs for a bf16 D 64 call
    serves that call on the GPU in a fresh interpreter where attnjit cannot load NVRTC and has no
    disk cache; its output (ragged N = 300) matches an fp64 reference within bf16's tolerance.
    (PyTorch maps an NVRTC of its own, so /proc/self/maps proves nothing here; the C++ and C
    consumers' tests check that.)"""
    aot = aot_or_skip()
    arch = device_arch_or_skip()
    spec = tmp_path / "causal.json"
    spec.write_text(attnjit.compile(causal=True).spec_json(dtype="bf16", head_dim=64))
    bundle = tmp_path / "bundle"
    subprocess.run([aot, "--specs", str(spec), "--arch", arch, "--out", str(bundle), "--quiet"], check=True,
                   timeout=300)
    code = textwrap.dedent(f"""
        import math, torch, attnjit
        print("kernels in the bundle:", attnjit.load_bundle({str(bundle)!r}))
        torch.manual_seed(7)
        q, k, v = (torch.randn(2, 4, 300, 64, device="cuda").to(torch.bfloat16) for _ in range(3))
        out = attnjit.compile(causal=True)(q, k, v)
        torch.cuda.synchronize()
        s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(64)
        s = s.masked_fill(torch.ones(300, 300, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
        ref = torch.softmax(s, dim=-1) @ v.double()
        bad = ((out.double() - ref).abs() > 2e-2 + 2e-2 * ref.abs()) | torch.isnan(out)
        assert not bad.any(), f"{{int(bad.sum())}} elements off, max err {{(out.double() - ref).abs().max()}}"
        print("launched from the bundle, max err", float((out.double() - ref).abs().max()))
    """)
    env = without_nvrtc_env()
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "launched from the bundle" in run.stdout, run.stdout + run.stderr


def test_a_directory_that_is_not_a_bundle_says_so(tmp_path):
    with pytest.raises(attnjit.ArgumentError) as info:
        attnjit.load_bundle(tmp_path)
    assert "manifest.json does not exist" in str(info.value) and "attnjit-aot" in str(info.value)
    (tmp_path / "manifest.json").write_text('{"format": "attnjit.spec/1"}')
    with pytest.raises(attnjit.ArgumentError) as info:
        attnjit.load_bundle(tmp_path)
    assert 'has format "attnjit.spec/1"' in str(info.value)
