#!/usr/bin/env bash
# tools/openapi-check/install.sh: install the npm packages of the OpenAPI
# check (check.mjs: yaml and ajv, pinned by package-lock.json) into this
# folder's node_modules/, offline after the first run.  Called by
# scripts/deps; costs nothing when already installed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
cd "$here"
stamp=node_modules/.dlock-openapi-check

if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then
    exit 0
fi
for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "openapi-check: $tool is missing (see scripts/deps)" >&2
        exit 1
    fi
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm ci --ignore-scripts --no-audit --no-fund >"$log" 2>&1; then
    cat "$log" >&2
    echo "openapi-check: npm ci failed" >&2
    exit 1
fi
touch "$stamp"
echo "openapi-check: installed yaml and ajv"
