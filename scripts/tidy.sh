#!/usr/bin/env bash
# Runs clang-tidy (the checks of .clang-tidy) over mdplan's own sources:
# lib/, runtime/ (not the CUDA files: clang-tidy does not take nvcc's
# flags), tools/ and fuzz/. Prints each warning once and exits 1 when
# there is any (docs/Fuzzing.md, "Static analysis").
#
#   scripts/tidy.sh [FILE-REGEX...]
#
# Builds in $BUILD_DIR (default: build) with scripts/setup.sh first, for
# its compile_commands.json and generated headers. Extra arguments narrow
# the files, e.g. `scripts/tidy.sh runtime/lib/data`.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,11s/^# \{0,1\}//p' "$0"; exit 0 ;;
  -*) echo "tidy.sh: unknown option '$1' (usage: scripts/tidy.sh [FILE-REGEX...])" >&2
      exit 2 ;;
esac
for pat in "$@"; do
  python3 -c 'import re, sys; re.compile(sys.argv[1])' "$pat" 2>/dev/null || {
    echo "tidy.sh: '$pat' is not a regular expression" >&2; exit 2; }
done

export BUILD_DIR=${BUILD_DIR:-build}
# Installs clang-tidy when missing and builds (generated headers included).
MDPLAN_EXTRA_PACKAGES="clang-tidy-14 ${MDPLAN_EXTRA_PACKAGES:-}" \
  scripts/setup.sh >/dev/null
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)

regex=("$@")
[ ${#regex[@]} -gt 0 ] || regex=('.')
files=$(python3 - "$BUILD_DIR" "$PWD" "${regex[@]}" <<'PY'
import json, re, sys
build, root, pats = sys.argv[1], sys.argv[2] + '/', sys.argv[3:]
own = re.compile(r'^(lib|runtime|tools|fuzz)/')
seen = set()
for e in json.load(open(f'{build}/compile_commands.json')):
    f = e['file']
    rel = f[len(root):] if f.startswith(root) else f
    if (own.match(rel) and not rel.endswith('.cu') and rel not in seen
            and any(re.search(p, rel) for p in pats)):
        seen.add(rel)
        print(rel)
PY
)
[ -n "$files" ] || { echo "tidy: no source matches ${regex[*]}" >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "$files" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$BUILD_DIR" --quiet \
  >"$out" 2>/dev/null || true
warnings=$(grep -E '^[^ ].*: (warning|error): ' "$out" | sort -u || true)
n=$(echo "$files" | wc -l)
if [ -n "$warnings" ]; then
  echo "$warnings"
  echo "tidy: $(echo "$warnings" | wc -l) warnings in $n files" >&2
  exit 1
fi
echo "tidy: no warnings in $n files"
