#!/usr/bin/env bash
# tests/docs/test_self_contained.sh: no tracked file refers to a path
# outside the repository (docs.self_contained).
#
# A clone has only what is tracked, so a link into a sibling folder of
# the checkout (the contract and design notes once lived in one named
# "shared") or an absolute path of the machine it was written on is a
# dead link for everyone else: the contract and the design notes live in
# docs/.  The patterns are written with brackets so that this file does
# not match itself.  Lists every offending line and fails if there is one.
set -euo pipefail

root=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)}
cd "$root"
patterns=(
    '[.][.]/shared\b'       # the sibling folder the docs used to live in
    '(^|[^[:alnum:]_.])/wor[k]/'  # absolute paths of the build machine
    '\bshared/doc[s]/'      # the old contract's folder, however reached
)

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    list_files() { git ls-files -z; }
else
    # An export without .git: every file but build and state folders.
    list_files() {
        find . -type f -not -path './build*' -not -path './var/*' \
            -not -path '*/node_modules/*' -print0
    }
fi

args=()
for p in "${patterns[@]}"; do
    args+=(-e "$p")
done
# xargs may run grep in several batches and exits 123 when any batch
# matched nothing, so the verdict is whether any line came out.
hits=$(list_files | xargs -0 grep -nIE "${args[@]}" -- || true)
if [ -n "$hits" ]; then
    printf '%s\n' "$hits"
    echo "self_contained: the lines above refer to paths outside the" \
         "repository; point them at docs/api.md, docs/design.md or" \
         "another tracked file" >&2
    exit 1
fi
echo "self_contained: $(list_files | tr -cd '\0' | wc -c) tracked files," \
     "no reference outside the repository"
