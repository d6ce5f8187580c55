#!/usr/bin/env bash
# Checks the floors of src/core (src/core/README.md): a file in a room includes only its own
# room, the rooms on its README's "May include:" line, the public headers and the private seam
# (recap_internal/); the adapters (src/sqlite, src/postgres, src/http, src/cli) include no room
# at all, only the public headers, the seam and their own files. Prints each include that
# breaks a rule and exits 1; exits 0 when there is none. ctest runs it as `layout.rooms`.
#
#   scripts/check_rooms.sh [ROOT]     ROOT: the checkout (default: this script's)
set -uo pipefail

root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
core="$root/src/core"
if [[ ! -f "$core/README.md" ]]; then
  echo "check_rooms: $core/README.md not found; give the checkout as the argument." >&2
  exit 2
fi

rooms=()
declare -A allowed=()
for readme in "$core"/*/README.md; do
  room=$(basename "$(dirname "$readme")")
  [[ $room == internal ]] && continue
  line=$(grep -m1 '^May include:' "$readme") || {
    echo "check_rooms: $readme has no 'May include:' line." >&2
    exit 2
  }
  line=${line#May include:}
  line=${line//,/ }
  line=${line//(no other room)/}
  rooms+=("$room")
  allowed[$room]=" $room $line "
done

is_room() {
  local r
  for r in "${rooms[@]}"; do [[ $r == "$1" ]] && return 0; done
  return 1
}

bad=0
checked=0
# check FILE OWNER: OWNER is the file's room, or "" for an adapter.
check() {
  local file=$1 owner=$2 inc dir
  while IFS= read -r inc; do
    [[ $inc == */* ]] || continue
    dir=${inc%%/*}
    is_room "$dir" || continue
    if [[ -z $owner ]]; then
      echo "${file#"$root"/}: includes \"$inc\": an adapter reaches the core only through the public headers and recap_internal/"
      bad=1
    elif [[ ${allowed[$owner]} != *" $dir "* ]]; then
      echo "${file#"$root"/}: includes \"$inc\": room $owner/ may include only:${allowed[$owner]}(src/core/$owner/README.md)"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
  checked=$((checked + 1))
}

for room in "${rooms[@]}"; do
  for file in "$core/$room"/*.cc "$core/$room"/*.h; do
    [[ -f $file ]] && check "$file" "$room"
  done
done
# Files directly in src/core (none are expected): every one is reported.
for file in "$core"/*.cc "$core"/*.h; do
  [[ -f $file ]] || continue
  echo "${file#"$root"/}: a source file outside every room; move it into the room of its idea"
  bad=1
done
for adapter in sqlite postgres http cli; do
  for file in "$root/src/$adapter"/*.cc "$root/src/$adapter"/*.h; do
    [[ -f $file ]] && check "$file" ""
  done
done

if [[ $bad -ne 0 ]]; then
  echo "check_rooms: the includes above break the floors of src/core (src/core/README.md)."
  exit 1
fi
echo "check_rooms: ${#rooms[@]} rooms, $checked files, every include within its floor."
