#!/usr/bin/env bash
# tests/scale/test_cli_cluster.sh /path/to/dlock: the dlock CLI on a
# redis+cluster:// URL (scripts/stack's cluster group, started by the
# scale fixture): `dlock run` runs its command under the lock, `dlock run
# --every` ticks on one node, `dlock leader` leads, `dlock acquire`,
# `status` (with the master that serves the key) and `release` see the
# lock, a `dlock run --wait` is woken by the release long before the
# holder's TTL, and `dlock doctor` judges all six nodes.  Each step is
# bounded with timeout(1); a run with --every or leader is stopped by
# SIGINT and its output is checked.
set -u

DLOCK=${1:?usage: $0 /path/to/dlock}
SOURCE_DIR=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd -P)}
KEY=t:cli-cluster:$$
# shellcheck source=tests/scale/cli_deploykit.sh
. "$(dirname "$0")/cli_deploykit.sh"

fail() {
    printf 'test_cli_cluster: FAILED: %s\n' "$*" >&2
    exit 1
}

URL=$("$SOURCE_DIR/scripts/stack" env cluster |
    sed -n 's/^export CLUSTER_URL=//p' | tr -d '\\')
[[ $URL == redis+cluster://* ]] || fail "no CLUSTER_URL from scripts/stack"
SEED=${URL#redis+cluster://127.0.0.1:}
SEED=${SEED%%,*}

cli_deploy_basics "$URL" 3

# acquire prints "token=<hex> fence=<n> ...".
out=$(timeout 10 "$DLOCK" acquire --url "$URL" --ttl 20s "$KEY:acq") ||
    fail "dlock acquire exited $?"
token=$(sed -n 's/^token=\([0-9a-f]*\) .*/\1/p' <<<"$out")
[[ -n $token ]] || fail "dlock acquire printed '$out'"
status=$(timeout 10 "$DLOCK" status --url "$URL" "$KEY:acq")
grep -q '^held: yes' <<<"$status" || fail "dlock status: '$status'"
# The master of the key's slot, as the cluster itself says: the only node
# that answers EXISTS with 1 (the others redirect).
ports=$(redis-cli -p "$SEED" cluster nodes |
    sed -n 's/^[^ ]* [^:]*:\([0-9]*\)@.*/\1/p')
master=
for port in $ports; do
    [[ $(redis-cli -p "$port" exists "$KEY:acq") == 1 ]] &&
        master=127.0.0.1:$port
done
[[ -n $master ]] || fail "no node holds $KEY:acq"
grep -qx "node: $master" <<<"$status" ||
    fail "dlock status names '$(grep node: <<<"$status")', the slot's" \
        "master is $master"

# A waiter in another process, woken by the release: the holder's TTL is
# 20 s, so only the notification ends the wait soon after the release.
timeout 20 "$DLOCK" run --url "$URL" --wait 15s "$KEY:acq" -- true &
waiter=$!
subscribed() {
    local port
    for port in $ports; do
        redis-cli -p "$port" pubsub numsub "dlock:released:$KEY:acq" |
            tail -1 | grep -qv '^0$' && return 0
        redis-cli -p "$port" pubsub shardnumsub "dlock:released:$KEY:acq" |
            tail -1 | grep -qv '^0$' && return 0
    done
    return 1
}
for _ in $(seq 100); do
    subscribed && break
    sleep 0.1
done
subscribed || fail "the waiter never subscribed to the release channel"
start=$(date +%s%N)
DLOCK_TOKEN=$token timeout 10 "$DLOCK" release --url "$URL" "$KEY:acq" ||
    fail "dlock release exited $?"
wait "$waiter" || fail "the waiter exited $?"
waited=$((($(date +%s%N) - start) / 1000000))
# Unwoken, its next try would come seconds later (the fallback follows
# the holder's TTL, at most 10 s apart).
((waited < 5000)) || fail "the waiter ended $waited ms after the release"
timeout 10 "$DLOCK" status --url "$URL" "$KEY:acq" | grep -q '^held: no' ||
    fail "dlock status still shows the lock held after release"

timeout 20 "$DLOCK" doctor --url "$URL" >"${TMPDIR:-/tmp}/doctor.$$" 2>&1
# One line per server ("master 127.0.0.1:7001: shard 0", "replica ..."),
# each with its five checks under it.
sections=$(grep -cE '^(master|replica) +[^ ]+: shard|^replica +[^ ]+: replica of' \
    "${TMPDIR:-/tmp}/doctor.$$")
checks=$(grep -cE '^  clock ' "${TMPDIR:-/tmp}/doctor.$$")
rm -f "${TMPDIR:-/tmp}/doctor.$$"
((sections == 6 && checks == 6)) ||
    fail "dlock doctor listed $sections nodes and $checks clock checks, not 6"
printf 'test_cli_cluster: run, --every (%d ticks), leader, acquire, %s\n' \
    "$ticks" "status (node $master), a waiter done $waited ms after the release, \
release and doctor (6 nodes) over $URL"
