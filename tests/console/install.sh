#!/usr/bin/env bash
# tests/console/install.sh: install the console tests' npm packages
# (playwright-core and axe-core, pinned by package-lock.json) into this
# folder's node_modules/.  Called by scripts/deps; costs nothing when
# already installed (tools/npm-ci.sh).
#
# npm ci runs no install script, so playwright never tries to download a
# browser: the tests drive Debian's chromium (/usr/bin/chromium, from
# scripts/deps).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
exec "$here/../../tools/npm-ci.sh" "$here" "console tests" \
    "playwright-core and axe-core"
