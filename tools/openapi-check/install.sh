#!/usr/bin/env bash
# tools/openapi-check/install.sh: install the npm packages of the OpenAPI
# check (check.mjs: yaml and ajv, pinned by package-lock.json) into this
# folder's node_modules/, offline after the first run.  Called by
# scripts/deps; costs nothing when already installed (tools/npm-ci.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
exec "$here/../npm-ci.sh" "$here" openapi-check "yaml and ajv"
