"""Builds the attnjit package with libattnjit_c.so inside (attnjit/lib/libattnjit_c.so), so
that an installed package finds its library without environment variables.

    pip install ./python                                   (from the checkout's root)
    pip wheel --no-deps -w dist ./python                   a wheel in dist/

Offline, with Debian's python3-setuptools, python3-wheel and python3-pip, add
`--no-build-isolation` (pip then uses the installed setuptools instead of downloading one).

The library comes from, first match:
  1. $ATTNJIT_PREBUILT_LIBRARY: a libattnjit_c.so already built (copied as it is);
  2. a CMake build of the target attnjit_c from the checkout that holds this directory
     (<repo>/python/..), in $ATTNJIT_CMAKE_BUILD_DIR (default <repo>/build-python; kept, so
     a second install rebuilds only what changed), configured with -DCMAKE_BUILD_TYPE=Release,
     the tests, benchmarks and examples off, CUDAToolkit_ROOT=$CUDA_HOME when that is set,
     and $ATTNJIT_CMAKE_ARGS (split on spaces) last. Needs cmake, a C++17 compiler, OpenSSL's
     headers and the CUDA toolkit's headers, as the C++ build does (docs/building.md).
The wheel is tagged py3-none-<platform>: the package is pure Python, the library is not.
"""
import glob
import os
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LIBRARY_NAME = "libattnjit_c.so"


def _in_checkout() -> bool:
    return os.path.isfile(os.path.join(REPO, "capi", "CMakeLists.txt")) and \
        os.path.isfile(os.path.join(REPO, "CMakeLists.txt"))


def _cmake_build_library() -> str:
    if not _in_checkout():
        raise RuntimeError(
            f"attnjit: no attnjit checkout around {HERE} to build {LIBRARY_NAME} from; build the "
            f"package from python/ inside the checkout, or set ATTNJIT_PREBUILT_LIBRARY to a built "
            f"{LIBRARY_NAME}")
    cmake = shutil.which("cmake")
    if not cmake:
        raise RuntimeError(f"attnjit: cmake is needed to build {LIBRARY_NAME} (Debian: apt-get install "
                           f"cmake g++ libssl-dev), or set ATTNJIT_PREBUILT_LIBRARY to a built one")
    build = os.environ.get("ATTNJIT_CMAKE_BUILD_DIR") or os.path.join(REPO, "build-python")
    configure = [cmake, "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                 "-DATTNJIT_BUILD_TESTS=OFF", "-DATTNJIT_BUILD_BENCH=OFF", "-DATTNJIT_BUILD_EXAMPLES=OFF"]
    if os.environ.get("CUDA_HOME"):
        configure.append(f"-DCUDAToolkit_ROOT={os.environ['CUDA_HOME']}")
    configure += shlex.split(os.environ.get("ATTNJIT_CMAKE_ARGS", ""))
    print("attnjit: " + " ".join(shlex.quote(a) for a in configure), flush=True)
    subprocess.run(configure, check=True)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    subprocess.run([cmake, "--build", build, "--target", "attnjit_c", "-j", jobs], check=True)
    found = glob.glob(os.path.join(build, "capi", LIBRARY_NAME))
    if not found:
        raise RuntimeError(f"attnjit: the CMake build in {build} made no capi/{LIBRARY_NAME}")
    return found[0]


def library_to_bundle() -> str:
    prebuilt = os.environ.get("ATTNJIT_PREBUILT_LIBRARY")
    if prebuilt:
        if not os.path.isfile(prebuilt):
            raise RuntimeError(f"attnjit: ATTNJIT_PREBUILT_LIBRARY is '{prebuilt}', which is not a file")
        return prebuilt
    return _cmake_build_library()


class build_py(_build_py):
    """The Python modules, then the library as attnjit/lib/libattnjit_c.so (one file: the
    package loads it by path, so the SONAME's symlinks are not needed)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # `pip install -e`: the package finds the checkout's build*/ library
        library = library_to_bundle()
        dest = os.path.join(self.build_lib, "attnjit", "lib")
        os.makedirs(dest, exist_ok=True)
        target = os.path.join(dest, LIBRARY_NAME)
        if os.path.lexists(target):
            os.remove(target)
        shutil.copyfile(os.path.realpath(library), target)
        print(f"attnjit: bundled {library} as {target}", flush=True)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # platlib, and a platform wheel: the package carries a .so
        return True


cmdclass = {"build_py": build_py}
try:
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

    class bdist_wheel(_bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):  # any Python 3 (ctypes only), this platform
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = bdist_wheel
except ImportError:  # no wheel package: `pip install` without a wheel still works
    pass

options = {}
if _in_checkout():
    # setuptools' scratch files go to <repo>/build-python (git-ignored), not into python/.
    scratch = os.environ.get("ATTNJIT_CMAKE_BUILD_DIR") or os.path.join(REPO, "build-python")
    os.makedirs(scratch, exist_ok=True)
    options = {"build": {"build_base": os.path.join(scratch, "setuptools")},
               "egg_info": {"egg_base": os.path.relpath(scratch, HERE)}}

setup(cmdclass=cmdclass, distclass=BinaryDistribution, options=options)
