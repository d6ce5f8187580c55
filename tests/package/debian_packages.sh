#!/usr/bin/env bash
# debian_packages.sh BUILD_DIR WORK_DIR VERSION SOVERSION [CXX] [CC]
#
# ctest package.issue42_debian (issue 42): the Debian packages and the tarball of a shared build
# (BUILD_DIR, made by package.shared, configured for /usr), made with cpack
# (cmake/RecapPackaging.cmake) and checked as a user gets them, without installing anything on
# this machine:
#
#   1. cpack writes librecap<SOVERSION>, librecap-dev, recap and python3-recap (.deb) and
#      recap-<VERSION>-Linux.tar.gz, and nothing else;
#   2. dpkg-deb --info: names, version, section, and the dependencies — between recap's
#      packages at the same version, on the system's libraries from dpkg-shlibdeps; the
#      runtime package's shlibs file and ldconfig trigger;
#   3. dpkg-deb --contents: the runtime package holds the librecap_*.so.<SOVERSION> files
#      only, the development package the headers, the .so links, the CMake package and the .pc
#      files (and no library file), the command package the program and its manual page, the
#      Python package the module; no file is in two packages;
#   4. every package unpacked (dpkg-deb -x) into a scratch root: the SQLite and C hosts built
#      with pkg-config alone against it (pkgconfig_consumers.sh; the .pc files are relocatable),
#      the packaged `recap --version` and `recap proxy --help` run with LD_LIBRARY_PATH into
#      the root, the packaged Python module imported with PYTHONPATH into the root (its library
#      finds recap's relative to itself);
#   5. without the runtime package (librecap-dev alone unpacked) the C host does not link, and
#      says which library is missing;
#   6. the tarball holds the same files as the packages together, less their usr/share/doc/
#      (copyright and changelog, for the packages only);
#   7. lintian on the .deb files: no error or warning but the tags of SUPPRESSED below, each
#      with its reason (also in docs/packages.md); a suppressed tag that no longer appears
#      fails too, so that the list stays true.
#
# Exits 77 (ctest: skipped) where there is no dpkg-deb (not Debian).
set -euo pipefail

# The lintian tags left, and why (docs/packages.md lists the same).
SUPPRESSED=(
  # One runtime package for recap's five libraries (core, sqlite, http, postgres, c): they are
  # built, versioned and released together, and their SONAMEs all carry the same version.
  # Debian would name one package per SONAME (librecap-core0.1, …), five packages that would
  # always move together.
  package-name-doesnt-match-sonames
  # CPack (3.25) writes a postinst and a postrm that run ldconfig for any package with
  # libraries in /usr/lib and has no switch to leave them out. The package also has the
  # ldconfig trigger Debian wants (lacks-ldconfig-trigger is not raised); the extra run is
  # harmless.
  maintscript-calls-ldconfig
  # The changelog's one entry is not a Debian upload: recap is not in the Debian archive, so
  # there is no "intent to package" bug for it to close.
  initial-upload-closes-no-bugs
)

if [[ $# -lt 4 ]]; then
  sed -n '2p' "$0" >&2
  exit 2
fi
build=$(realpath "$1")
work=$2
version=$3
soversion=$4
cxx=${5:-c++}
cc=${6:-cc}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() {
  echo "debian_packages.sh: $*" >&2
  exit 1
}
run() {
  echo "\$ $*"
  "$@"
}

if ! command -v dpkg-deb >/dev/null; then
  echo "debian_packages.sh: dpkg-deb not found (not Debian): skipped"
  exit 77
fi
command -v lintian >/dev/null || fail "lintian not found (apt-get install lintian; scripts/test.sh does)"
command -v cpack >/dev/null || fail "cpack not found"

rm -rf "$work"
mkdir -p "$work"
work=$(realpath "$work")
out=$work/out
root=$work/root

# --- 1. the packages ----------------------------------------------------------------------
run cpack --config "$build/CPackConfig.cmake" -B "$out" >"$work/cpack.log" 2>&1 || {
  cat "$work/cpack.log"
  fail "cpack failed"
}
arch=$(dpkg --print-architecture)
deb_version=$version-1
runtime=librecap$soversion
declare -A deb=(
  [runtime]="$out/${runtime}_${deb_version}_$arch.deb"
  [dev]="$out/librecap-dev_${deb_version}_$arch.deb"
  [command]="$out/recap_${deb_version}_$arch.deb"
  [python]="$out/python3-recap_${deb_version}_$arch.deb"
)
tarball=$out/recap-$version-Linux.tar.gz
for f in "${deb[@]}" "$tarball"; do
  [[ -f "$f" ]] || fail "cpack did not write $(basename "$f"); it wrote: $(ls "$out")"
done
extra=$(find "$out" -maxdepth 1 -type f \( -name '*.deb' -o -name '*.tar.gz' \) | sort)
[[ $(wc -l <<<"$extra") -eq 5 ]] || fail "cpack wrote other packages too: $extra"
echo "cpack wrote: $(xargs -n 1 basename <<<"$extra" | tr '\n' ' ')"

# --- 2. dpkg-deb --info ---------------------------------------------------------------------
field() {  # field DEB NAME: a control field's value
  dpkg-deb --field "$1" "$2"
}
expect_field() {  # expect_field DEB NAME PATTERN (bash glob)
  local value
  value=$(field "$1" "$2")
  # shellcheck disable=SC2053  # the pattern is a glob on purpose
  [[ "$value" == $3 ]] || fail "$(basename "$1"): $2 is '$value', expected $3"
}
for k in runtime dev command python; do
  dpkg-deb --info "${deb[$k]}" | sed 's/^/  /'
  expect_field "${deb[$k]}" Version "$deb_version"
  expect_field "${deb[$k]}" Architecture "$arch"
  expect_field "${deb[$k]}" Maintainer "*<*@*>"
done
expect_field "${deb[runtime]}" Package "$runtime"
expect_field "${deb[runtime]}" Section libs
# From dpkg-shlibdeps: the system libraries recap's libraries link.
expect_field "${deb[runtime]}" Depends "*libcurl4*"
expect_field "${deb[runtime]}" Depends "*libpq5*"
expect_field "${deb[runtime]}" Depends "*libsqlite3-0*"
expect_field "${deb[runtime]}" Depends "*libstdc++6*"
expect_field "${deb[dev]}" Package librecap-dev
expect_field "${deb[dev]}" Section libdevel
expect_field "${deb[dev]}" Depends "*$runtime (= $deb_version)*"
expect_field "${deb[command]}" Package recap
expect_field "${deb[command]}" Section utils
expect_field "${deb[command]}" Depends "*$runtime (= $deb_version)*"
expect_field "${deb[command]}" Depends "*libcpp-httplib*"  # `recap proxy`'s server
expect_field "${deb[python]}" Package python3-recap
expect_field "${deb[python]}" Section python
expect_field "${deb[python]}" Depends "*$runtime (= $deb_version)*"
expect_field "${deb[python]}" Depends "*python3*"

control=$work/control
dpkg-deb --control "${deb[runtime]}" "$control"
for lib in core sqlite http postgres c; do
  grep -qx "librecap_$lib $soversion $runtime (>= $deb_version)" "$control/shlibs" ||
    fail "the runtime package's shlibs file has no line for librecap_$lib:"$'\n'"$(cat "$control/shlibs")"
done
grep -qx 'activate-noawait ldconfig' "$control/triggers" ||
  fail "the runtime package has no ldconfig trigger"

# --- 3. dpkg-deb --contents -----------------------------------------------------------------
contents() {  # contents DEB: its files and links, one path a line (no ./), folders left out
  dpkg-deb --contents "$1" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./||' | sort
}
for k in runtime dev command python; do
  contents "${deb[$k]}" >"$work/$k.files"
done
not_doc() {  # the lines of a list that are not in usr/share/doc/
  grep -v '^usr/share/doc/' "$1" || true
}

# The runtime package: the libraries' files (librecap_x.so.0.1.0) and SONAME links
# (librecap_x.so.0.1), nothing else.
wrong=$(not_doc "$work/runtime.files" |
  grep -Ev "^usr/lib/[^/]+/librecap_[a-z]+\\.so\\.${soversion//./\\.}(\\.[0-9]+)?$" || true)
[[ -z "$wrong" ]] || fail "the runtime package holds more than the .so.$soversion files:"$'\n'"$wrong"
multiarch_lib=$(grep -m1 -Eo '^usr/lib/[^/]+/' "$work/runtime.files")
for lib in core sqlite http postgres c; do
  grep -qx "${multiarch_lib}librecap_$lib.so.$soversion" "$work/runtime.files" ||
    fail "the runtime package lacks librecap_$lib.so.$soversion"
done

# The development package: headers, .so links, CMake package, pkg-config files; no library.
for f in usr/include/recap/recap.h usr/include/recap/c/recap.h \
  usr/include/recap/sqlite/sqlite_store.h usr/include/recap/http/http_provider.h \
  usr/include/recap/postgres/postgres_store.h \
  "${multiarch_lib}cmake/recap/recapConfig.cmake" \
  "${multiarch_lib}cmake/recap/recapConfigVersion.cmake"; do
  grep -qx "$f" "$work/dev.files" || fail "the development package lacks $f"
done
for lib in core sqlite http postgres c; do
  grep -qx "${multiarch_lib}librecap_$lib.so" "$work/dev.files" ||
    fail "the development package lacks the link librecap_$lib.so"
  grep -qx "${multiarch_lib}pkgconfig/recap-$lib.pc" "$work/dev.files" ||
    fail "the development package lacks pkgconfig/recap-$lib.pc"
done
wrong=$(not_doc "$work/dev.files" | grep -Ev '^usr/include/recap/' |
  grep -Ev "^${multiarch_lib}(librecap_[a-z]+\\.so|cmake/recap/[^/]+\\.cmake|pkgconfig/recap-[a-z]+\\.pc)$" || true)
[[ -z "$wrong" ]] || fail "the development package holds other files:"$'\n'"$wrong"

# The command and the Python module.
[[ $(not_doc "$work/command.files") == $'usr/bin/recap\nusr/share/man/man1/recap.1.gz' ]] ||
  fail "the command package holds:"$'\n'"$(cat "$work/command.files")"
for f in __init__.py _library.py _recap_c.so; do
  grep -qx "usr/lib/python3/dist-packages/recap/$f" "$work/python.files" ||
    fail "the Python package lacks usr/lib/python3/dist-packages/recap/$f"
done
wrong=$(not_doc "$work/python.files" | grep -v '^usr/lib/python3/dist-packages/recap/' || true)
[[ -z "$wrong" ]] || fail "the Python package holds other files:"$'\n'"$wrong"

# Each package has its own copyright and changelog; no file is in two packages.
for k in runtime dev command python; do
  name=$(field "${deb[$k]}" Package)
  for f in copyright changelog.Debian.gz; do
    grep -qx "usr/share/doc/$name/$f" "$work/$k.files" ||
      fail "$name lacks usr/share/doc/$name/$f"
  done
done
twice=$(cat "$work"/{runtime,dev,command,python}.files | sort | uniq -d)
[[ -z "$twice" ]] || fail "files in two packages:"$'\n'"$twice"

# --- 4. the packages unpacked into a scratch root, used there -------------------------------
for k in runtime dev command python; do
  dpkg-deb -x "${deb[$k]}" "$root"
done
echo "unpacked the four packages into $root"

run "$here/pkgconfig_consumers.sh" shared "$root/usr" "$work/consumers" "$version" "$cxx" "$cc"

libdir=$root/${multiarch_lib%/}
recap_run() {  # the packaged command, finding the packaged libraries
  LD_LIBRARY_PATH=$libdir "$root/usr/bin/recap" "$@"
}
got=$(recap_run --version)
[[ "$got" == "recap $version"* ]] || fail "the packaged recap --version printed '$got'"
echo "packaged recap --version: $got"
recap_run proxy --help >"$work/proxy-help.txt" ||
  fail "the packaged recap proxy --help failed: $(cat "$work/proxy-help.txt")"
grep -q -- '--upstream' "$work/proxy-help.txt" ||
  fail "the packaged command has no proxy: $(head -n 3 "$work/proxy-help.txt")"
echo "packaged recap proxy --help: $(head -n 1 "$work/proxy-help.txt")"
deps=$(LD_LIBRARY_PATH=$libdir ldd "$root/usr/bin/recap")
grep -q "librecap_core.so.$soversion => $libdir/" <<<"$deps" ||
  fail "the packaged recap does not load the packaged librecap_core:"$'\n'"$deps"

# The Python module: PYTHONPATH only; its library (_recap_c.so) finds librecap_core and the
# other libraries it links through its run path ($ORIGIN/…), as it does in /usr.
python=$(command -v python3) || fail "python3 not found"
got=$(env -u LD_LIBRARY_PATH PYTHONPATH="$root/usr/lib/python3/dist-packages" "$python" -c '
import recap
loaded = [l.split()[-1] for l in open("/proc/self/maps") if "librecap_core.so" in l]
print(recap.__version__, recap.__file__, recap.library_path, loaded[0] if loaded else "-")
') || fail "the packaged Python module does not import"
echo "packaged Python module: $got"
read -r py_version py_file py_library py_loaded <<<"$got"
[[ "$py_version" == "$version" ]] || fail "the Python module says version $py_version"
[[ "$py_file" == "$root"/* && "$py_library" == "$root"/* ]] ||
  fail "python imported recap from $py_file ($py_library), not from the packages"
[[ "$py_loaded" == "$libdir"/* ]] ||
  fail "the Python module loaded $py_loaded, not the packaged librecap_core"

# --- 5. without the runtime package ---------------------------------------------------------
bare=$work/root-without-runtime
dpkg-deb -x "${deb[dev]}" "$bare"
if "$here/pkgconfig_consumers.sh" shared "$bare/usr" "$work/consumers-without-runtime" \
  "$version" "$cxx" "$cc" >"$work/without-runtime.log" 2>&1; then
  fail "hosts linked against librecap-dev without $runtime"
fi
grep -Eq "cannot find -lrecap_|librecap_[a-z]+\\.so" "$work/without-runtime.log" ||
  fail "without $runtime the link failed, but not naming recap's library:"$'\n'"$(tail -n 20 "$work/without-runtime.log")"
echo "without $runtime: $(grep -Em1 'cannot find -lrecap_|librecap_[a-z]+\.so' "$work/without-runtime.log")"

# --- 6. the tarball: the same files -----------------------------------------------------------
tar -tzf "$tarball" | grep -v '/$' | sed "s|^recap-$version-Linux/||" | sort >"$work/tarball.files"
cat "$work"/{runtime,dev,command,python}.files | grep -v '^usr/share/doc/' |
  sed 's|^usr/||' | sort >"$work/packages.files"
if ! diff -u "$work/packages.files" "$work/tarball.files" >"$work/tarball.diff"; then
  cat "$work/tarball.diff"
  fail "the tarball and the packages hold different files (above: - packages, + tarball)"
fi
echo "the tarball holds the packages' $(wc -l <"$work/tarball.files") files"

# --- 7. lintian -----------------------------------------------------------------------------
echo "\$ lintian --no-cfg ${deb[*]}"
lintian --no-cfg "${deb[@]}" >"$work/lintian.txt" 2>"$work/lintian.err" || true
cat "$work/lintian.txt"
grep -v 'running with root privileges' "$work/lintian.err" >&2 || true
# lintian's own failure (not a tag): it printed no tag line and complained.
if [[ ! -s "$work/lintian.txt" ]] && grep -qv 'running with root privileges' "$work/lintian.err"; then
  fail "lintian did not run"
fi
unexpected=()
declare -A seen=()
while read -r severity package tag _; do
  case "$severity" in
    E: | W:) ;;
    *) continue ;;
  esac
  seen[$tag]=1
  allowed=0
  for s in "${SUPPRESSED[@]}"; do
    [[ "$tag" == "$s" ]] && allowed=1
  done
  [[ $allowed == 1 ]] || unexpected+=("$severity $package $tag")
done <"$work/lintian.txt"
if [[ ${#unexpected[@]} -gt 0 ]]; then
  printf '  %s\n' "${unexpected[@]}" >&2
  fail "lintian reported the tags above: fix the packages, or add each tag with its reason to SUPPRESSED here and to docs/packages.md"
fi
for s in "${SUPPRESSED[@]}"; do
  [[ -n "${seen[$s]:-}" ]] ||
    fail "lintian no longer reports $s: remove it from SUPPRESSED here and from docs/packages.md"
done
echo "lintian: no error or warning but the ${#SUPPRESSED[@]} suppressed tags (${SUPPRESSED[*]})"
echo "debian_packages.sh: the packages are right"
