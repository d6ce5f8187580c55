# shellcheck shell=bash
# Shared by scripts/test.sh and scripts/demo.sh: the Debian packages recap builds with, and
# installing the missing ones. Source it, then call `recap_ensure_packages`.

# Everything recap and its optional components, tests and benchmarks build with (Debian 12).
RECAP_DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libspdlog-dev libfmt-dev catch2
  libsqlitecpp-dev libsqlite3-dev libcurl4-openssl-dev libbenchmark-dev
  # scripts/check_format.sh (the formatting step of scripts/test.sh): Debian 12's clang-format
  # 14, the version the tree is formatted with.
  clang-format
  # The PostgreSQL session store: libpq to build it, and the server (initdb, pg_ctl, postgres
  # in /usr/lib/postgresql/15/bin) for its tests, which start a private server of their own
  # (tests/support/pg_server.h); the package's own cluster is never used.
  postgresql libpq-dev
  # The shell host loop of docs/cli.md (examples/cli/host_loop.sh), which a cli test runs.
  jq
  # The Python module (python/) and its pytest tests, run with Debian's /usr/bin/python3.
  python3 python3-pytest
  # `recap proxy`'s HTTP server (src/cli/proxy_server.cc; docs/proxy.md says why this one).
  libcpp-httplib-dev
  # `recap report`'s browser test (tests/report/run_browser.sh): Debian's chromium, headless.
  chromium
  # The Python wheel (pyproject.toml, setup.py): built with Debian's pip, setuptools and wheel,
  # and installed by its test into a fresh virtual environment.
  python3-pip python3-setuptools python3-wheel python3-venv
  # The packages (cmake/RecapPackaging.cmake): their test checks them with lintian.
  lintian
  # The API reference (scripts/apidoc.sh), built and checked for warnings by the suite.
  doxygen
)

# What scripts/demo.sh needs and nothing more: the compiler, CMake and Ninja, and the libraries
# of the core, the SQLite store and the command (it builds without the HTTP, PostgreSQL, C and
# Python components, the tests and the proxy).
RECAP_DEMO_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libspdlog-dev libfmt-dev
  libsqlitecpp-dev libsqlite3-dev
)

# What scripts/install.sh needs: the compiler and build tools, the libraries of every component
# (core, SQLite, HTTP, PostgreSQL, C), the command's proxy server and Python for the module.
RECAP_INSTALL_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libspdlog-dev libfmt-dev
  libsqlitecpp-dev libsqlite3-dev libcurl4-openssl-dev libpq-dev libcpp-httplib-dev
  python3
)

# recap_missing_packages PKG...: prints the packages that are not installed, one a line.
recap_missing_packages() {
  local pkg status
  for pkg in "$@"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != "installed" ]]; then
      echo "$pkg"
    fi
  done
}

# recap_ensure_packages [PKG...]: installs whichever of PKG (default: all of the above) is
# missing. Runs `apt-get update` only when something is missing. Not root and something
# missing: prints the command to run and fails. Without dpkg (not Debian): says so and trusts
# the machine to have the tools; CMake will name anything that is not there.
recap_ensure_packages() {
  local wanted=("$@")
  if [[ ${#wanted[@]} -eq 0 ]]; then
    wanted=("${RECAP_DEBIAN_PACKAGES[@]}")
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "recap: dpkg-query not found (not Debian?); not checking packages." >&2
    return 0
  fi
  local missing
  mapfile -t missing < <(recap_missing_packages "${wanted[@]}")
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "recap: all ${#wanted[@]} Debian packages are installed."
    return 0
  fi
  local cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "recap: missing Debian packages: ${missing[*]}" >&2
    echo "recap: install them as root, then run this again:" >&2
    echo "  sudo sh -c '$cmd'" >&2
    return 1
  fi
  echo "recap: installing missing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
}

# recap_jobs: parallel build jobs (the number of processors).
recap_jobs() {
  nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2
}

# recap_build_with_progress DIR LOG [cmake --build options...]: builds DIR, showing Ninja's
# "[done/total]" as "compiling: N of M steps" (on one line on a terminal, every tenth step
# otherwise). The whole output goes to LOG; on failure its end is shown and this fails.
recap_build_with_progress() {
  local dir=$1 log=$2
  shift 2
  local status line done_steps total
  set +e
  cmake --build "$dir" -j "$(recap_jobs)" "$@" 2>&1 | tee -a "$log" |
    while IFS= read -r line; do
      if [[ "$line" =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
        done_steps=${BASH_REMATCH[1]}
        total=${BASH_REMATCH[2]}
        if [[ -t 1 ]]; then
          printf '\r  compiling: %s of %s steps' "$done_steps" "$total"
        elif ((done_steps % 10 == 0 || done_steps == total)); then
          printf '  compiling: %s of %s steps\n' "$done_steps" "$total"
        fi
      fi
    done
  status=${PIPESTATUS[0]}
  set -e
  if [[ -t 1 ]]; then printf '\n'; fi
  if [[ $status -ne 0 ]]; then
    tail -n 40 "$log" >&2
    echo "recap: the build failed (the end of its output is above; all of it in $log)" >&2
    return 1
  fi
}
