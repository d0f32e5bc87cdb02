#!/usr/bin/env bash
# tools/npm-ci.sh: install one folder's pinned npm packages, once.
#
#   tools/npm-ci.sh DIR NAME WHAT
#
# Runs `npm ci --ignore-scripts` in DIR, which installs exactly what DIR's
# package-lock.json says into DIR/node_modules and runs no install script
# (nothing downloads a binary), then leaves a stamp, so the next call
# costs nothing until package-lock.json changes.  NAME prefixes messages;
# WHAT names the packages in the one line printed after an install.  The
# test tools' install.sh files (tools/openapi-check, tests/console) are
# this call, tools/mongo-test-server's begins with it, and scripts/deps
# runs them.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: tools/npm-ci.sh DIR NAME WHAT" >&2
    exit 2
fi
dir=$1 name=$2 what=$3
cd "$dir"
stamp="node_modules/.dlock-npm-ci"

if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then
    exit 0
fi
for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "$name: $tool is missing (see scripts/deps)" >&2
        exit 1
    fi
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm ci --ignore-scripts --no-audit --no-fund >"$log" 2>&1; then
    cat "$log" >&2
    echo "$name: npm ci failed" >&2
    exit 1
fi
touch "$stamp"
echo "$name: installed $what"
