"""Builds the Python wheel of recap (docs/python.md, "Install with pip").

pip runs this through setuptools' build backend (pyproject.toml):

    /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps -w dist .

The package `recap` is pure Python over recap's C API, loaded with ctypes from `_recap_c.so`,
a shared library that holds recap itself (built static) and exports only the C API's
`recap_*` functions. The build step configures recap with CMake, builds that one target,
`recap_python_c`, and puts `_recap_c.so` and the modules of python/recap, as the build tree
holds them (`<build>/python/recap`), into the wheel.

Where it builds:
- RECAP_WHEEL_BUILD_DIR, when set, names a build tree that is already configured (by you, or
  by the test suite); it is built as it is (nothing is configured again, and `cmake --build`
  does nothing when the tree is up to date). It must be this source tree's, with static
  libraries (BUILD_SHARED_LIBS off) and without a sanitizer.
- Otherwise `build-wheel/cmake` in this directory, configured Release with static libraries,
  the C API, the SQLite store and the HTTP summarizers; it is kept, so the next wheel builds
  only what changed. RECAP_WHEEL_POSTGRES=ON adds the PostgreSQL store (the library then needs
  the system's libpq5); RECAP_WHEEL_CMAKE_ARGS adds arguments of your own to the configure
  (split on spaces).
- RECAP_WHEEL_CMAKE names the cmake program (default: cmake on PATH); CMAKE_BUILD_PARALLEL_LEVEL
  the number of compile jobs (default: every processor); RECAP_WHEEL_STRIP=0 keeps the
  library's symbol table (it is stripped in the wheel, not in the build tree, by default).

setuptools' own files (build/, the .egg-info) go to a temporary folder, removed when done: the
source tree gets nothing but `build-wheel/cmake` (and only without RECAP_WHEEL_BUILD_DIR).

The wheel is tagged `py3-none-<platform>`: the library does not use Python's C API, so one
wheel serves every Python 3.8 or later on machines like this one (same architecture; the
system libraries it links, below).

The library links these system libraries dynamically (Debian 12 packages): libstdc++6,
libgcc-s1, libc6, libspdlog1.10 and libfmt9 (spdlog), libsqlite3-0, libcurl4, and libpq5
with RECAP_WHEEL_POSTGRES=ON. The module says which one is missing when it cannot load the
library (python/recap/_library.py).
"""

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "_recap_c.so"


def fail(message):
    raise SystemExit("recap wheel: " + message)


try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:
    fail("%s has no package `wheel`, which setuptools builds wheels with. Build the wheel with "
         "an interpreter that has it (Debian: /usr/bin/python3 with python3-wheel) and install "
         "the .whl file; or make the virtual environment with --system-site-packages, so that "
         "`pip install --no-build-isolation .` finds Debian's setuptools and wheel; or let pip "
         "fetch them from PyPI (without --no-build-isolation)" % sys.executable)


def read_version():
    """recap's version, from the macros of include/recap/version.h."""
    path = os.path.join(HERE, "include", "recap", "version.h")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        found = re.search(r"^#define RECAP_VERSION_%s (\d+)\s*$" % part, text, re.M)
        if not found:
            fail("%s has no line `#define RECAP_VERSION_%s <number>`" % (path, part))
        parts.append(found.group(1))
    return ".".join(parts)


def read_cache(build_dir):
    """The entries of a CMake build tree's CMakeCache.txt, as a dict of name to value."""
    entries = {}
    with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8",
              errors="replace") as f:
        for line in f:
            found = re.match(r"^([A-Za-z_][\w.+-]*):[A-Z]+=(.*)$", line.rstrip("\n"))
            if found:
                entries[found.group(1)] = found.group(2)
    return entries


def is_on(value):
    return value.upper() in ("1", "ON", "YES", "TRUE", "Y") or (
        value.isdigit() and int(value) != 0)


def check_reused_tree(build_dir):
    """A tree named by RECAP_WHEEL_BUILD_DIR must be one whose _recap_c.so can stand alone."""
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        fail("RECAP_WHEEL_BUILD_DIR=%s is not a configured CMake build tree (no "
             "CMakeCache.txt); configure it first, or unset RECAP_WHEEL_BUILD_DIR to let the "
             "wheel configure its own in build-wheel/cmake" % build_dir)
    cache = read_cache(build_dir)
    source = cache.get("CMAKE_HOME_DIRECTORY", "")
    if not source or not os.path.isdir(source) or not os.path.samefile(source, HERE):
        fail("RECAP_WHEEL_BUILD_DIR=%s was configured from %s, not from this source tree %s"
             % (build_dir, source or "an unknown source", HERE))
    if is_on(cache.get("BUILD_SHARED_LIBS", "OFF")):
        fail("RECAP_WHEEL_BUILD_DIR=%s has BUILD_SHARED_LIBS=ON: its %s needs recap's own "
             "shared libraries, which the wheel would not hold; use a tree configured with "
             "static libraries (the default)" % (build_dir, LIBRARY))
    for option in ("RECAP_SANITIZE", "RECAP_SANITIZE_THREAD"):
        if is_on(cache.get(option, "OFF")):
            fail("RECAP_WHEEL_BUILD_DIR=%s is a sanitizer build (%s=ON), which has no Python "
                 "module: a library built with a sanitizer does not load into Python"
                 % (build_dir, option))


def find_cmake():
    cmake = os.environ.get("RECAP_WHEEL_CMAKE") or shutil.which("cmake")
    if not cmake:
        fail("CMake is needed to build recap's C library. Debian or Ubuntu: apt-get install "
             "build-essential cmake ninja-build nlohmann-json3-dev libspdlog-dev libfmt-dev "
             "libsqlitecpp-dev libsqlite3-dev libcurl4-openssl-dev")
    return cmake


def run(command):
    print("recap wheel: " + " ".join(command), flush=True)
    try:
        subprocess.run(command, check=True)
    except subprocess.CalledProcessError as error:
        fail("`%s` failed (exit %d); its output is above (pip shows it with -v, or when "
             "the build fails)" % (" ".join(command), error.returncode))


def configure(cmake, build_dir):
    """Configures (again) the wheel's own build tree."""
    postgres = os.environ.get("RECAP_WHEEL_POSTGRES", "OFF")
    command = [cmake, "-S", HERE, "-B", build_dir,
               "-DCMAKE_BUILD_TYPE=Release",
               "-DBUILD_SHARED_LIBS=OFF",
               "-DRECAP_BUILD_C=ON",
               "-DRECAP_BUILD_PYTHON=ON",
               "-DRECAP_BUILD_SQLITE=ON",
               "-DRECAP_BUILD_HTTP=ON",
               "-DRECAP_BUILD_POSTGRES=" + ("ON" if is_on(postgres) else "OFF"),
               # Only the module is built; what else a plain configure offers is left out.
               "-DRECAP_BUILD_CLI=OFF",
               "-DRECAP_BUILD_TESTS=OFF",
               "-DRECAP_BUILD_EXAMPLES=OFF",
               "-DRECAP_INSTALL=OFF",
               "-DRECAP_PYTHON_EXECUTABLE=" + sys.executable]
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")) and shutil.which("ninja"):
        command += ["-G", "Ninja"]
    command += os.environ.get("RECAP_WHEEL_CMAKE_ARGS", "").split()
    run(command)


def build_library():
    """Builds the target recap_python_c; returns the package directory <build>/python/recap
    and the names of the package's modules."""
    cmake = find_cmake()
    reused = os.environ.get("RECAP_WHEEL_BUILD_DIR")
    if reused:
        build_dir = os.path.abspath(reused)
        check_reused_tree(build_dir)
    else:
        build_dir = os.path.join(HERE, "build-wheel", "cmake")
        configure(cmake, build_dir)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    run([cmake, "--build", build_dir, "--target", "recap_python_c", "--parallel", jobs])
    package = os.path.join(build_dir, "python", "recap")
    if not os.path.isfile(os.path.join(package, LIBRARY)):
        fail("the build did not leave %s in %s: CMake skipped the Python module there (its "
             "configure output says why: no Python 3.7 or later, RECAP_BUILD_PYTHON or "
             "RECAP_BUILD_C off)" % (LIBRARY, package))
    # Every module of the source package must be in the build tree's copy
    # (python/CMakeLists.txt lists them).
    sources = sorted(n for n in os.listdir(os.path.join(HERE, "python", "recap"))
                     if n.endswith(".py"))
    missing = [n for n in sources if not os.path.isfile(os.path.join(package, n))]
    if missing:
        fail("%s lacks %s, which python/recap has: add them to the list in "
             "python/CMakeLists.txt" % (package, ", ".join(missing)))
    return package, sources


class BuildPackage(build_py):
    """Builds recap's C library with CMake and puts the package, library and modules as the
    build tree holds them, where the wheel is assembled."""

    def run(self):
        package, modules = build_library()
        target = os.path.join(self.build_lib, "recap")
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.makedirs(target)
        for name in modules + [LIBRARY]:
            shutil.copy2(os.path.join(package, name), os.path.join(target, name))
        library = os.path.join(target, LIBRARY)
        # The build's symbol table and debug sections are of no use to the module: the copy
        # is stripped (only what dlopen needs stays), the build tree's file left as it is.
        strip = shutil.which("strip")
        if strip and os.environ.get("RECAP_WHEEL_STRIP", "1") != "0":
            run([strip, "--strip-unneeded", library])


class PlatformWheel(bdist_wheel):
    """A wheel for this platform that any Python 3 takes: py3-none-linux_x86_64. It holds a
    native library (so not py3-none-any), but no extension module built against one
    interpreter's C API (so not cp311-cp311)."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


class NativeDistribution(Distribution):
    """The package holds a native library: installed into platlib, not purelib."""

    def has_ext_modules(self):
        return True


# setuptools' own files (build/lib, build/bdist.*, the .egg-info) go to a folder of this
# process's, removed when it ends: nothing is left in the source tree, and two builds at once
# do not share one.
STAGING = tempfile.mkdtemp(prefix="recap-wheel-")
atexit.register(shutil.rmtree, STAGING, ignore_errors=True)
setup(
    version=read_version(),
    packages=["recap"],
    package_dir={"recap": "python/recap"},
    distclass=NativeDistribution,
    cmdclass={"build_py": BuildPackage, "bdist_wheel": PlatformWheel},
    zip_safe=False,
    options={
        "build": {"build_base": os.path.join(STAGING, "build")},
        "egg_info": {"egg_base": STAGING},
    },
)
