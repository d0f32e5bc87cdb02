#!/usr/bin/env bash
# tests/console/install.sh: install the console tests' npm packages
# (playwright-core and axe-core, pinned by package-lock.json) into this
# folder's node_modules/.  Called by scripts/deps; costs nothing when
# already installed.
#
# `npm ci --ignore-scripts` installs exactly the locked versions and runs
# no install script, so playwright never tries to download a browser: the
# tests drive Debian's chromium (/usr/bin/chromium, from scripts/deps).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
cd "$here"
stamp=node_modules/.dlock-console-tests

if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "console tests: npm is missing (see scripts/deps)" >&2
    exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm ci --ignore-scripts --no-audit --no-fund >"$log" 2>&1; then
    cat "$log" >&2
    echo "console tests: npm ci failed" >&2
    exit 1
fi
touch "$stamp"
echo "console tests: installed playwright-core and axe-core"
