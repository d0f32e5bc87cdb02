#!/usr/bin/env bash
# tests/scale/test_cli_sentinel.sh /path/to/dlock: the dlock CLI on a
# redis+sentinel:// URL (scripts/stack's sentinel group, started by the
# scale fixture): `dlock run` runs its command under the lock, `dlock run
# --every` runs a tick per second on one node, `dlock leader` leads, and
# `dlock acquire`/`status`/`release` see the lock on the master, and
# `dlock doctor` shows every sentinel, the master and its replicas.  Each
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

# Each grant acknowledged by a replica (--wait-replicas); asking for
# more replicas than there are is refused with exit 69, never run.
out=$(timeout 20 "$DLOCK" run --url "$URL" --wait-replicas 1 --ttl 3s \
    "$KEY:acked" -- sh -c 'echo acked') || fail "run --wait-replicas 1: $?"
[[ $out == acked ]] || fail "dlock run --wait-replicas 1 printed '$out'"
err=$(DLOCK_WAIT_REPLICAS=3 timeout 20 "$DLOCK" run --url "$URL" \
    --wait-replicas-timeout 100ms --ttl 3s "$KEY:three" -- \
    sh -c 'echo must-not-run' 2>&1)
code=$?
((code == 69)) && [[ $err != *must-not-run* && $err == *released* ]] ||
    fail "DLOCK_WAIT_REPLICAS=3 exited $code: $err"

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
# doctor: the three sentinels, the master with its checks, two replicas.
doc=$(timeout 20 "$DLOCK" doctor --url "$URL")
code=$?
((code == 0 || code == 78)) || fail "doctor exited $code: $doc"
(($(grep -c '^sentinel .*names master' <<<"$doc") == 3)) &&
    (($(grep -c '^master ' <<<"$doc") == 1)) &&
    (($(grep -c '^replica .*state online, lag' <<<"$doc") == 2)) ||
    fail "doctor does not show the sentinels, master and replicas: $doc"
printf 'test_cli_sentinel: doctor, run, --every (%d ticks), leader, acquire, %s\n' \
    "$ticks" "status and release over $URL"
