#!/usr/bin/env bash
# tests/scale/test_cli_redlock.sh /path/to/dlock: the dlock CLI on a
# redlock:// URL (scripts/stack's redlock group of five masters, started
# by the scale fixture): `dlock run` runs its command under a lock that
# the watchdog renews on a majority, `dlock status` says which masters
# hold it, `dlock doctor` judges each master, and `dlock run --every`
# and `dlock leader`, which need the
# leadership pattern (one server's atomic script), are refused with a
# message that says why (docs/deployments.md).  Each step is bounded
# with timeout(1).
set -u

DLOCK=${1:?usage: $0 /path/to/dlock}
SOURCE_DIR=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd -P)}
KEY=t:cli-redlock:$$

fail() {
    printf 'test_cli_redlock: FAILED: %s\n' "$*" >&2
    exit 1
}

URL=$("$SOURCE_DIR/scripts/stack" env redlock |
    sed -n 's/^export REDLOCK_URL=//p' | tr -d '\\')
[[ $URL == redlock://* ]] || fail "no REDLOCK_URL from scripts/stack"

# A run longer than the TTL: the watchdog must renew on the masters.
out=$(timeout 20 "$DLOCK" run --url "$URL" --ttl 600ms "$KEY:run" -- \
    sh -c 'sleep 1.5; echo ran-under-lock') || fail "dlock run exited $?"
[[ $out == ran-under-lock ]] || fail "dlock run printed '$out'"

# While a run holds it, status names the five masters that hold it.
timeout 20 "$DLOCK" run --url "$URL" --ttl 5s "$KEY:held" -- \
    sh -c "'$DLOCK' status --url '$URL' '$KEY:held'" >"${TMPDIR:-/tmp}/$$.st" ||
    fail "dlock run of status exited $?"
status=$(cat "${TMPDIR:-/tmp}/$$.st")
rm -f "${TMPDIR:-/tmp}/$$.st"
grep -q '^held: yes' <<<"$status" || fail "status while held: $status"
grep -q '^nodes: held on 5 of 5: ' <<<"$status" ||
    fail "status does not name the masters: $status"
timeout 10 "$DLOCK" status --url "$URL" "$KEY:held" |
    grep -q '^nodes: held on 0 of 5' || fail "status after the run"

# doctor judges every master (exit 78 here: the stack runs without AOF).
doc=$(timeout 20 "$DLOCK" doctor --url "$URL")
code=$?
((code == 0 || code == 78)) || fail "doctor exited $code: $doc"
(($(grep -c '^master ' <<<"$doc") == 5)) ||
    fail "doctor does not list the 5 masters: $doc"
(($(grep -c '^  persistence ' <<<"$doc") == 5)) ||
    fail "doctor does not judge each master: $doc"

err=$(timeout 10 "$DLOCK" run --url "$URL" --every 1s "$KEY:every" -- \
    true 2>&1 >/dev/null)
code=$?
((code != 0)) && grep -q 'redlock://' <<<"$err" ||
    fail "run --every exited $code: $err"
err=$(timeout 10 "$DLOCK" leader --url "$URL" "$KEY:lead" -- true 2>&1)
code=$?
((code != 0)) && grep -q 'redlock://' <<<"$err" ||
    fail "leader exited $code: $err"
printf 'test_cli_redlock: run (renewed), status (5 of 5 masters), doctor, %s\n' \
    "--every and leader refused with the reason"
