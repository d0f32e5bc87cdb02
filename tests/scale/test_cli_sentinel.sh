#!/usr/bin/env bash
# tests/scale/test_cli_sentinel.sh /path/to/dlock: the dlock CLI on a
# redis+sentinel:// URL (scripts/stack's sentinel group, started by the
# scale fixture): `dlock run` runs its command under the lock, `dlock run
# --every` runs a tick per second on one node, `dlock leader` leads, and
# `dlock acquire`/`status`/`release` see the lock on the master.  Each
# step is bounded with timeout(1); a run with --every or leader is
# stopped by SIGINT and its output is checked.
set -u

DLOCK=${1:?usage: $0 /path/to/dlock}
SOURCE_DIR=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd -P)}
KEY=t:cli-sentinel:$$
# shellcheck source=tests/scale/cli_deploykit.sh
. "$(dirname "$0")/cli_deploykit.sh"

fail() {
    printf 'test_cli_sentinel: FAILED: %s\n' "$*" >&2
    exit 1
}

URL=$("$SOURCE_DIR/scripts/stack" env sentinel |
    sed -n 's/^export SENTINEL_URL=//p' | tr -d '\\')
[[ $URL == redis+sentinel://* ]] || fail "no SENTINEL_URL from scripts/stack"

cli_deploy_basics "$URL" 4

# acquire prints "token=<hex> fence=<n>".
out=$(timeout 10 "$DLOCK" acquire --url "$URL" --ttl 10s "$KEY:acq") ||
    fail "dlock acquire exited $?"
token=$(sed -n 's/^token=\([0-9a-f]*\) .*/\1/p' <<<"$out")
[[ -n $token ]] || fail "dlock acquire printed '$out'"
timeout 10 "$DLOCK" status --url "$URL" "$KEY:acq" | grep -q '^held: yes' ||
    fail "dlock status does not show the lock held"
DLOCK_TOKEN=$token timeout 10 "$DLOCK" release --url "$URL" "$KEY:acq" ||
    fail "dlock release exited $?"
timeout 10 "$DLOCK" status --url "$URL" "$KEY:acq" | grep -q '^held: no' ||
    fail "dlock status still shows the lock held after release"
printf 'test_cli_sentinel: run, --every (%d ticks), leader, acquire, %s\n' \
    "$ticks" "status and release over $URL"
