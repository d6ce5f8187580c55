#!/usr/bin/env bash
# Builds recap's API reference: HTML from the public headers (include/recap) and the guides
# (docs/*.md), with Doxygen and docs/api/Doxyfile. Fails when doxygen warns — a public
# declaration without documentation, a malformed comment, a link to nothing — and lists the
# warnings; fails too when docs/api/mainpage.md leaves out a page of docs/. ctest runs it as
# `docs.issue42 api reference builds without a warning` (label `docs`).
#
#   scripts/apidoc.sh [OUTDIR]    the reference goes to OUTDIR/html (default: build-apidoc/ in
#                                 the checkout); OUTDIR/warnings.log holds doxygen's warnings
#
# Exits 0 when the reference was built without a warning, 1 when there were warnings (or a page
# is not linked), 2 when doxygen failed, and 77 when doxygen is not installed (the test's "skip";
# apt-get install doxygen).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-"$root/build-apidoc"}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! command -v doxygen >/dev/null 2>&1; then
  echo "apidoc.sh: doxygen is not installed; install it: apt-get install doxygen" >&2
  exit 77
fi
if ! command -v perl >/dev/null 2>&1; then
  echo "apidoc.sh: perl is not installed (doxygen's input filter is a perl script);" \
    "install it: apt-get install perl" >&2
  exit 2
fi
version=$(doxygen --version)
case "$version" in
  1.9.*) ;;
  *) echo "apidoc.sh: doxygen $version; the configuration is written for 1.9 (Debian 12's" \
       "1.9.4), and another version may warn differently." >&2 ;;
esac

cd "$root"

# Every page of docs/ is linked from the main page (as ../NAME.md, the link GitHub follows
# too): doxygen makes every one a page of the reference, but only a link makes it findable.
missing=()
for page in docs/*.md; do
  name=$(basename "$page")
  grep -q "](\.\./$name)" docs/api/mainpage.md || missing+=("$name")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "apidoc.sh: docs/api/mainpage.md does not link ${#missing[@]} page(s) of docs/:"
  printf '  %s\n' "${missing[@]}"
  echo "Add each to the list of guides there, as [its title](../NAME.md)."
  exit 1
fi

# The configuration, then what changes from run to run: where the output and the warnings go,
# and recap's version (from version.h, where it is written once).
recap_version=$(sed -n 's/^#define RECAP_VERSION_STRING "\(.*\)"$/\1/p' include/recap/version.h)
rm -rf "$out/html"
rm -f "$out/warnings.log" "$out/doxygen.log"
status=0
{
  cat docs/api/Doxyfile
  echo "OUTPUT_DIRECTORY = \"$out\""
  echo "WARN_LOGFILE = \"$out/warnings.log\""
  echo "PROJECT_NUMBER = \"$recap_version\""
} | doxygen - >"$out/doxygen.log" 2>&1 || status=$?

# Doxygen names files by their absolute path; the checkout's own are shown from its root.
if [[ -s "$out/warnings.log" ]]; then
  count=$(grep -c ': \(warning\|error\): ' "$out/warnings.log" || true)
  echo "apidoc.sh: doxygen $version warned $count time(s); the reference must build without one:"
  sed "s|^$root/||" "$out/warnings.log"
  echo "Document what is named (a /// comment above it, or ///< after it), or fix the comment" \
    "or link; docs/testing.md says how."
  exit 1
fi
if [[ $status -ne 0 || ! -f "$out/html/index.html" ]]; then
  echo "apidoc.sh: doxygen $version failed (exit $status) without a warning; its output:" >&2
  sed "s|^$root/||" "$out/doxygen.log" >&2
  exit 2
fi
echo "apidoc.sh: the API reference (recap $recap_version, doxygen $version) built without a" \
  "warning: $out/html/index.html"
