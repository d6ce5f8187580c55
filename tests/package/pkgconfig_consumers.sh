#!/usr/bin/env bash
# pkgconfig_consumers.sh static|shared PREFIX WORK_DIR VERSION [CXX] [CC]
#
# Builds hosts of recap with nothing but pkg-config and the compiler (no CMake; issue 42) against
# the recap installed under PREFIX, runs them, and checks what pkg-config says (ctest
# package.issue42_pkgconfig_static, package.issue42_pkgconfig_shared, and package.issue42_debian against the unpacked
# Debian packages):
#
#   - every component's .pc file (recap-core, -sqlite, -http, -postgres, -c) is found, at VERSION;
#   - static: Cflags define RECAP_STATIC and the flags name no shared recap library; shared:
#     no RECAP_STATIC, and the host loads recap's libraries from PREFIX;
#   - the SQLite host (tests/package/find_package_sqlite/main.cc, C++17) builds with
#     `pkg-config [--static] --cflags --libs recap-sqlite` and runs;
#   - the C host (tests/capi/c_consumer.c) compiles as C99 with -pedantic -Werror and links with
#     the C compiler driver and `pkg-config [--static] --libs recap-c` (a static recap brings the
#     C++ runtime in its Libs.private), then runs in memory and over a SQLite file.
#
# PKG_CONFIG_LIBDIR is the install's pkgconfig folder alone: no other recap on the machine is
# seen, and no .pc file of another package is needed (recap's name none). The .pc files are
# relocatable (prefix=${pcfiledir}/…), so an install unpacked anywhere needs no sysroot.
set -euo pipefail

if [[ $# -lt 4 ]]; then
  sed -n '2,3p' "$0" >&2
  exit 2
fi
kind=$1
prefix=$(realpath "$2")
work=$3
version=$4
cxx=${5:-c++}
cc=${6:-cc}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_tests=$(cd "$here/.." && pwd)

case "$kind" in
  static) static=(--static) ;;
  shared) static=() ;;
  *) echo "pkgconfig_consumers.sh: static or shared, not '$kind'" >&2; exit 2 ;;
esac

fail() {
  echo "pkgconfig_consumers.sh ($kind): $*" >&2
  exit 1
}
run() {  # prints a command, then runs it
  echo "\$ $*"
  "$@"
}

command -v pkg-config >/dev/null || fail "pkg-config not found (apt-get install pkg-config)"

# The install's pkgconfig folder: lib/pkgconfig, or lib/<multiarch>/pkgconfig with prefix /usr.
pcdir=$(find "$prefix" -path '*/pkgconfig/recap-core.pc' -printf '%h\n' | head -n 1)
[[ -n "$pcdir" ]] || fail "no pkgconfig/recap-core.pc under $prefix"
export PKG_CONFIG_LIBDIR=$pcdir
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
echo "PKG_CONFIG_LIBDIR=$PKG_CONFIG_LIBDIR"

rm -rf "$work"
mkdir -p "$work"
cd "$work"

for module in recap-core recap-sqlite recap-http recap-postgres recap-c; do
  pkg-config --exists --print-errors "$module" || fail "pkg-config does not find $module"
  got=$(pkg-config --modversion "$module")
  [[ "$got" == "$version" ]] || fail "$module is version '$got', expected $version"
done

libdir=$(pkg-config --variable=libdir recap-core)
[[ $(realpath "$libdir") == "$prefix"/* ]] ||
  fail "recap-core's libdir $libdir is not under $prefix (the .pc file is not relocatable?)"
cflags=$(pkg-config "${static[@]}" --cflags recap-c)
libs=$(pkg-config "${static[@]}" --libs recap-c)
echo "pkg-config ${static[*]} --cflags recap-c: $cflags"
echo "pkg-config ${static[*]} --libs recap-c: $libs"
if [[ $kind == static ]]; then
  [[ " $cflags " == *" -DRECAP_STATIC "* ]] || fail "static recap: Cflags lack -DRECAP_STATIC"
  for lib in recap_core recap_sqlite recap_c; do
    [[ -f "$libdir/lib$lib.a" ]] || fail "static recap: no $libdir/lib$lib.a"
  done
else
  [[ " $cflags " != *" -DRECAP_STATIC "* ]] || fail "shared recap: Cflags define RECAP_STATIC"
  # A shared library names its own dependencies: even --static asks for no other library's
  # -dev files.
  private=$(pkg-config --static --libs recap-c)
  [[ "$private" != *-lcurl* && "$private" != *-lSQLiteCpp* ]] ||
    fail "shared recap: the .pc files list private dependencies: $private"
fi

# The C++ host over the SQLite store.
# shellcheck disable=SC2046  # pkg-config's output is meant to split into words
run "$cxx" -std=c++17 -o sqlite_host "$here/find_package_sqlite/main.cc" \
  $(pkg-config "${static[@]}" --cflags --libs recap-sqlite)

# The C host: compiled as C99, linked by the C compiler driver.
# shellcheck disable=SC2046
run "$cc" -std=c99 -pedantic -Wall -Wextra -Werror -c -o c_host.o \
  "$source_tests/capi/c_consumer.c" $(pkg-config "${static[@]}" --cflags recap-c)
# shellcheck disable=SC2046
run "$cc" -o c_host c_host.o $(pkg-config "${static[@]}" --libs recap-c)

# Which recap libraries each program loads, and from where.
check_loads() {
  local program=$1 deps
  deps=$(ldd "$program")
  if [[ $kind == static ]]; then
    if grep -q 'librecap' <<<"$deps"; then
      fail "$program, built against static recap, loads a shared one:"$'\n'"$deps"
    fi
    return
  fi
  local line path found=0
  while read -r line; do
    path=$(awk '{print $3}' <<<"$line")
    [[ "$path" == /* ]] || fail "$program: $line"
    [[ $(realpath "$path") == "$prefix"/* ]] ||
      fail "$program loads $path, not the library installed under $prefix"
    found=1
  done < <(grep 'librecap' <<<"$deps")
  [[ $found == 1 ]] || fail "$program loads no recap library:"$'\n'"$deps"
}
if [[ $kind == shared ]]; then
  # pkg-config gives no run path: the libraries are found as a host finds them when they are
  # not in the system's folders.
  export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
check_loads ./sqlite_host
check_loads ./c_host

run ./sqlite_host
run ./c_host
run ./c_host "$work/c_host.db"
[[ -s "$work/c_host.db" ]] || fail "the C host wrote no SQLite file"
echo "pkgconfig_consumers.sh ($kind): the SQLite and C hosts built with pkg-config alone and ran"
