"""The Python wheel (issue 42; docs/python.md, "Install with pip"): built with pip from the
source tree as a user builds it, reusing this build tree (RECAP_WHEEL_BUILD_DIR, so nothing is
compiled again), checked file by file, installed with `pip install --no-index` into a fresh
virtual environment, and run there — a per-turn loop with a Python summarizer
(wheel_turn_loop.py) — by the venv's interpreter in an environment holding only PATH and HOME,
from a folder outside the source and build trees. The scratch folder's name holds a space.

    python3 wheel_in_venv.py SOURCE_DIR BUILD_DIR SCRATCH_DIR

Exits 77 (skipped, saying why) when the interpreter lacks pip, setuptools, wheel or venv
(Debian: python3-pip python3-setuptools python3-wheel python3-venv).
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile

SKIP = 77
source, build, scratch = (os.path.abspath(a) for a in sys.argv[1:4])
started = time.monotonic()


def step(what):
    print("[%5.1f s] %s" % (time.monotonic() - started, what), flush=True)


def run(command, **kwargs):
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, **kwargs)
    if done.returncode != 0:
        print(done.stdout)
        sys.exit("FAILED (exit %d): %s" % (done.returncode, " ".join(command)))
    return done.stdout


def check(condition, what):
    if not condition:
        sys.exit("FAILED: " + what)


# What the build needs of this interpreter.
wanted = {"pip": "python3-pip", "setuptools": "python3-setuptools", "wheel": "python3-wheel",
          "ensurepip": "python3-venv"}
lacking = [package for module, package in wanted.items()
           if subprocess.run([sys.executable, "-c", "import " + module],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode]
if lacking:
    print("SKIPPED: %s cannot build and install the wheel without %s (Debian: apt-get install "
          "%s)" % (sys.executable, ", ".join(lacking), " ".join(lacking)))
    sys.exit(SKIP)

with open(os.path.join(source, "include", "recap", "version.h"), encoding="utf-8") as f:
    header = f.read()
version = ".".join(re.search(r"^#define RECAP_VERSION_%s (\d+)$" % part, header, re.M).group(1)
                   for part in ("MAJOR", "MINOR", "PATCH"))

if os.path.exists(scratch):
    shutil.rmtree(scratch)
os.makedirs(scratch)
dist = os.path.join(scratch, "dist")

# What setuptools would leave in the source tree if it built there.
junk = [os.path.join(source, name) for name in
        ("recap_llm.egg-info", "python/recap_llm.egg-info", "build/lib", "dist",
         "build/bdist." + sysconfig.get_platform())]
junk_before = {path for path in junk if os.path.exists(path)}

# 1. The wheel, as docs/python.md builds it, from this build tree.
step("pip wheel %s (RECAP_WHEEL_BUILD_DIR=%s)" % (source, build))
env = {k: v for k, v in os.environ.items()
       if k not in ("PYTHONPATH", "RECAP_C_LIBRARY") and not k.startswith("PIP_")}
env.update(RECAP_WHEEL_BUILD_DIR=build, PIP_DISABLE_PIP_VERSION_CHECK="1",
           PIP_ROOT_USER_ACTION="ignore", PYTHONDONTWRITEBYTECODE="1")
run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
     "--no-cache-dir", "-w", dist, source], env=env, cwd=scratch)
made = [p for p in junk if os.path.exists(p) and p not in junk_before]
check(not made, "the wheel's build left %s in the source tree" % made)

# 2. The wheel's file name and contents.
platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
expected = "recap_llm-%s-py3-none-%s.whl" % (version, platform)
check(os.listdir(dist) == [expected], "dist holds %s, not %s" % (os.listdir(dist), expected))
wheel = os.path.join(dist, expected)
step("the wheel: %s, %d bytes" % (expected, os.path.getsize(wheel)))
info = "recap_llm-%s.dist-info" % version
package_files = sorted("recap/" + n for n in os.listdir(os.path.join(source, "python", "recap"))
                       if n.endswith(".py")) + ["recap/_recap_c.so"]
with zipfile.ZipFile(wheel) as archive:
    check(archive.testzip() is None, "a file of the wheel is damaged")
    names = sorted(archive.namelist())
    inside = sorted(n for n in names if not n.startswith(info + "/"))
    check(inside == sorted(package_files),
          "the wheel holds %s beside its metadata, not %s" % (inside, sorted(package_files)))
    for part in ("METADATA", "WHEEL", "RECORD", "top_level.txt"):
        check(info + "/" + part in names, "the wheel has no %s/%s" % (info, part))
    metadata = archive.read(info + "/METADATA").decode("utf-8")
    check("\nName: recap-llm\n" in metadata and "\nVersion: %s\n" % version in metadata,
          "METADATA does not name recap-llm %s:\n%s" % (version, metadata[:300]))
    check("Requires-Python: >=3.8" in metadata, "METADATA has no Requires-Python")
    wheel_file = archive.read(info + "/WHEEL").decode("utf-8")
    check("Root-Is-Purelib: false" in wheel_file and
          "Tag: py3-none-%s" % platform in wheel_file, "WHEEL says:\n" + wheel_file)
    check(archive.read(info + "/top_level.txt").decode("utf-8").split() == ["recap"],
          "top_level.txt is not recap")
    # RECORD lists every file with its hash and size, and the hashes are right.
    record = {}
    for line in archive.read(info + "/RECORD").decode("utf-8").splitlines():
        name, digest, size = line.rsplit(",", 2)
        record[name] = (digest, size)
    check(sorted(record) == names, "RECORD lists %s, the wheel holds %s" % (sorted(record), names))
    for name in names:
        if name == info + "/RECORD":
            continue
        data = archive.read(name)
        digest = "sha256=" + base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        check(record[name] == (digest, str(len(data))), "RECORD is wrong for " + name)
    for name in package_files[:-1]:
        with open(os.path.join(source, "python", name), "rb") as f:
            check(archive.read(name) == f.read(), name + " differs from the source's")
    library = os.path.join(scratch, "_recap_c.so")
    with open(library, "wb") as f:
        f.write(archive.read("recap/_recap_c.so"))

# The library exports recap's C API and nothing else, carries no path of this machine's build
# (no RPATH or RUNPATH) and links only system libraries.
nm, readelf = shutil.which("nm"), shutil.which("readelf")
if nm and readelf:
    table = run([nm, "-D", "--defined-only", library])
    exported = [line.split()[-1] for line in table.splitlines() if line.strip()]
    check("recap_prepare" in exported and "recap_provider_new_callback" in exported,
          "the library does not export the C API")
    leaks = [n for n in exported if not n.startswith("recap_") and n not in ("_init", "_fini")]
    check(not leaks, "the library exports more than recap_*: %s" % leaks[:20])
    dynamic = run([readelf, "-d", library])
    check("RPATH" not in dynamic and "RUNPATH" not in dynamic,
          "the library carries a search path:\n" + dynamic)
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic)
    check(not [n for n in needed if "recap" in n], "the library needs %s" % needed)
    step("the library: %d functions exported, all recap_*; needs %s" % (
        len(exported), " ".join(needed)))
else:
    step("nm or readelf missing: the library's symbols are not checked")

# 3. A fresh virtual environment, and the wheel installed into it from the file alone.
venv = os.path.join(scratch, "venv")
clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
quiet = dict(clean, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore",
             PIP_NO_CACHE_DIR="1")
step("python3 -m venv")
run([sys.executable, "-m", "venv", venv], env=clean, cwd=scratch)
python = os.path.join(venv, "bin", "python")
step("pip install --no-index the wheel")
run([python, "-m", "pip", "install", "--no-index", wheel], env=quiet, cwd=scratch)
shown = run([python, "-m", "pip", "show", "-f", "recap-llm"], env=quiet, cwd=scratch)
check("Version: %s" % version in shown and "recap/_recap_c.so" in shown, "pip show:\n" + shown)

# 4. The host's loop, from a folder of its own.
work = os.path.join(scratch, "host")
os.makedirs(work)
script = os.path.join(work, "turn_loop.py")
shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "wheel_turn_loop.py"),
                script)
step("the per-turn loop in the venv")
print(run([python, script, venv, version, work], env=clean, cwd=work), end="")

# 5. Uninstalled, nothing of it remains, and recap no longer imports.
run([python, "-m", "pip", "uninstall", "-y", "recap-llm"], env=quiet, cwd=work)
gone = subprocess.run([python, "-c", "import recap"], env=clean, cwd=work,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
check(gone.returncode != 0, "recap still imports after pip uninstall")
left = [os.path.join(root, n) for root, dirs, files in os.walk(venv) for n in dirs + files
        if "recap" in n]
check(not left, "pip uninstall left %s" % left)
step("passed")
shutil.rmtree(scratch)
