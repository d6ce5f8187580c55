#!/usr/bin/env bash
# Builds and installs recap: the libraries (core and the SQLite, HTTP, PostgreSQL and C
# components), the `recap` command and the Python module — not the tests, the examples or the
# benchmarks (those are scripts/test.sh's).
#
#   scripts/install.sh                   into /usr/local (root, or a prefix you can write)
#   scripts/install.sh --prefix DIR      into DIR (e.g. --prefix "$HOME/.local")
#   scripts/install.sh --shared          shared libraries instead of static ones
#
# Installs the missing Debian packages first (as root; otherwise prints the command). The
# build is in build-install/ (its whole output in build-install/build.log); running this again
# rebuilds only what changed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

prefix=/usr/local
shared=OFF
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prefix)
      [[ $# -ge 2 && -n "$2" ]] || { echo "scripts/install.sh: --prefix needs a folder" >&2; exit 2; }
      prefix="$2"
      shift
      ;;
    --shared) shared=ON ;;
    -h | --help)
      sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "scripts/install.sh: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
mkdir -p "$prefix" 2>/dev/null || true
if [[ ! -d "$prefix" || ! -w "$prefix" ]]; then
  echo "scripts/install.sh: cannot write to $prefix; run as root, or choose another folder" \
    "with --prefix DIR (e.g. --prefix \"\$HOME/.local\")" >&2
  exit 2
fi
prefix=$(cd "$prefix" && pwd)

start=$SECONDS
recap_ensure_packages "${RECAP_INSTALL_PACKAGES[@]}"

BUILD="$ROOT/build-install"
mkdir -p "$BUILD"
log="$BUILD/build.log"
: >"$log"
generator=()
[[ -f "$BUILD/CMakeCache.txt" ]] || generator=(-G Ninja)
echo "configuring (build-install/, Release, shared libraries $shared) ..."
# A plain configure: the libraries, the command and the Python module, nothing else.
if ! cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS="$shared" -DCMAKE_INSTALL_PREFIX="$prefix" >>"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "scripts/install.sh: configuring the build failed (above; all of it in $log)" >&2
  exit 1
fi
echo "building ..."
recap_build_with_progress "$BUILD" "$log" || exit 1

echo "installing into $prefix ..."
if ! cmake --install "$BUILD" >>"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "scripts/install.sh: installing failed (above; all of it in $log)" >&2
  exit 1
fi
if [[ $shared == ON && $(id -u) -eq 0 ]] && command -v ldconfig >/dev/null; then
  ldconfig
fi

files=$(wc -l <"$BUILD/install_manifest.txt")
python_dir=$(grep -m1 '/recap/__init__.py$' "$BUILD/install_manifest.txt" || true)
echo
echo "recap $("$prefix/bin/recap" --version | sed 's/^recap //') installed in $prefix" \
  "($files files, $((SECONDS - start)) s):"
echo "  the command        $prefix/bin/recap"
echo "  the libraries      $prefix/lib/librecap_*  (headers in $prefix/include/recap)"
echo "  CMake              find_package(recap CONFIG REQUIRED COMPONENTS core sqlite)"
echo "  pkg-config         pkg-config --cflags --libs recap-sqlite  (or recap-core, -http, -postgres, -c)"
if [[ -n "$python_dir" ]]; then
  echo "  the Python module  ${python_dir%/recap/__init__.py}/recap"
fi
if [[ "$prefix" != /usr/local && "$prefix" != /usr ]]; then
  echo
  pc_file=$(grep -m1 '/recap-core\.pc$' "$BUILD/install_manifest.txt" || true)
  echo "$prefix is not searched by default:"
  echo "  export PATH=\"$prefix/bin:\$PATH\""
  echo "  cmake ... -DCMAKE_PREFIX_PATH=$prefix"
  [[ -z "$pc_file" ]] || echo "  export PKG_CONFIG_PATH=${pc_file%/recap-core.pc}"
  [[ -z "$python_dir" ]] || echo "  export PYTHONPATH=${python_dir%/recap/__init__.py}"
fi
