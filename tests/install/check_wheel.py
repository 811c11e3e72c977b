"""The Python package as a user installs it: builds a wheel of python/ with the library
inside (python/setup.py, offline: pip --no-build-isolation --no-index, Debian's setuptools
and wheel), installs it into a fresh venv, and from a scratch directory outside the
checkout (no PYTHONPATH, no ATTNJIT_LIBRARY) checks that the package finds its bundled
libattnjit_c.so and runs the trace and C API tests (python/tests/test_trace*.py,
test_capi.py; no GPU needed) against it.

    check_wheel.py SOURCE_DIR LIBRARY

LIBRARY is the build's libattnjit_c.so (bundled through ATTNJIT_PREBUILT_LIBRARY, so the
test does not build the library a second time). Exits 77 (CTest: skipped) with the reason
only when no Python here has venv + ensurepip, pip, setuptools, wheel and pytest.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
MODULES = ["venv", "ensurepip", "pip", "setuptools", "wheel", "pytest"]
DEBIAN = "python3-venv python3-pip python3-setuptools python3-wheel python3-pytest"


def missing_modules(python):
    code = ("import importlib.util, sys\n"
            f"print(' '.join(m for m in {MODULES!r} if importlib.util.find_spec(m) is None))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else ["(it does not run)"]


def pick_python():
    """An interpreter with everything the test needs, or None and why not."""
    why = []
    seen = set()
    for python in [sys.executable, "/usr/bin/python3", shutil.which("python3")]:
        if not python or not os.path.exists(python) or os.path.realpath(python) in seen:
            continue
        seen.add(os.path.realpath(python))
        missing = missing_modules(python)
        if not missing:
            return python, ""
        why.append(f"{python} lacks {', '.join(missing)}")
    return None, "; ".join(why)


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        print(out.stdout + out.stderr, flush=True)
        raise SystemExit(f"failed ({out.returncode}): {' '.join(cmd)}")
    return out.stdout


def main():
    source_dir, library = sys.argv[1], sys.argv[2]
    python, why = pick_python()
    if python is None:
        print(f"SKIPPED: no Python with {', '.join(MODULES)} to build and install the wheel ({why}); "
              f"Debian/Ubuntu: apt-get install {DEBIAN}")
        return SKIP
    if not os.path.isfile(library):
        raise SystemExit(f"{library} is not built")

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "ATTNJIT_LIBRARY", "ATTNJIT_PREBUILT_LIBRARY",
                        "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    scratch = tempfile.mkdtemp(prefix="attnjit-wheel-")
    try:
        # The package sources, as `pip wheel ./python` sees them (a copy: the build writes
        # its scratch files beside the sources).
        src = os.path.join(scratch, "src")
        shutil.copytree(os.path.join(source_dir, "python"), src,
                        ignore=shutil.ignore_patterns("__pycache__", "tests", "lib", "*.egg-info", "build"))

        build_env = os.path.join(scratch, "venv-build")
        run([python, "-m", "venv", "--system-site-packages", build_env], env=env)
        dist = os.path.join(scratch, "dist")
        run([os.path.join(build_env, "bin", "python"), "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
             "--no-index", "-w", dist, src], env=dict(env, ATTNJIT_PREBUILT_LIBRARY=library), cwd=scratch)
        wheels = glob.glob(os.path.join(dist, "attnjit-*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"expected one wheel in {dist}, found {wheels}")
        print(f"built {os.path.basename(wheels[0])}")

        venv = os.path.join(scratch, "venv")  # system site-packages for pytest only
        run([python, "-m", "venv", "--system-site-packages", venv], env=env)
        vpython = os.path.join(venv, "bin", "python")
        run([vpython, "-m", "pip", "install", "--no-index", "--no-deps", wheels[0]], env=env, cwd=scratch)

        # The installed package is the one imported, and it finds its own library.
        work = os.path.join(scratch, "work")
        os.makedirs(work)
        check = ("import os, sys, attnjit\n"
                 "from attnjit import _library\n"
                 "pkg = os.path.dirname(attnjit.__file__)\n"
                 "assert pkg.startswith(sys.prefix), (pkg, sys.prefix)\n"
                 "path = _library.load().attnjit_path\n"
                 "assert path == os.path.join(pkg, 'lib', 'libattnjit_c.so'), path\n"
                 "print('installed package', pkg, 'loads', path)\n")
        print(run([vpython, "-c", check], env=env, cwd=work), end="")

        # The tests, away from the checkout and without its conftest.py (which would put
        # python/ on sys.path).
        tests = os.path.join(scratch, "tests")
        os.makedirs(tests)
        for f in glob.glob(os.path.join(source_dir, "python", "tests", "*.py")):
            if os.path.basename(f) != "conftest.py":
                shutil.copy(f, tests)
        selected = sorted(glob.glob(os.path.join(tests, "test_trace*.py"))) + [os.path.join(tests, "test_capi.py")]
        env["ATTNJIT_CACHE_DIR"] = os.path.join(scratch, "cache")
        cmd = [vpython, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", tests, *selected]
        print("+ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, env=env, cwd=work).returncode
        if rc != 0:
            raise SystemExit(f"the tests failed against the installed wheel ({rc})")
        print("wheel ok")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
