#!/usr/bin/env bash
# `dlock status --leader ROLE` says who leads a role of `dlock leader`, the
# leader's term (the DLOCK_FENCE its command sees) and the lease's TTL;
# after the leader resigns the role is free and the last term remains.
# --json gives the same as one object.
source "$(dirname "$0")/cli_testlib.sh"

new_role key
started=$WORK/started
spawn_bg pid "$DLOCK" leader --ttl 5s "$key" -- \
    sh -c 'echo "$DLOCK_FENCE" >"$0"; while :; do sleep 0.05; done' \
    "$started" 2>>"$WORK/err"
wait_for 10 file_exists "$started"
wait_for 2 has_lines "$started" 1
term=$(cat "$started")

dl status --leader "$key" >"$WORK/out"
expect_status 0 $? "status --leader of a led role"
grep -qx "role: $key" "$WORK/out" || fail "names the role: $(cat "$WORK/out")"
grep -qx "held: yes" "$WORK/out" || fail "led: $(cat "$WORK/out")"
grep -qx "leader: $(hostname):$pid" "$WORK/out" ||
    fail "the leader is host:pid of the dlock leading: $(cat "$WORK/out")"
grep -qx "term: $term" "$WORK/out" ||
    fail "the term is the command's DLOCK_FENCE $term: $(cat "$WORK/out")"
ttl=$(sed -n 's/^ttl_ms: //p' "$WORK/out")
[ "$ttl" -gt 0 ] && [ "$ttl" -le 5000 ] ||
    fail "ttl_ms within the 5 s lease: $ttl"

dl status --leader --json "$key" >"$WORK/json"
expect_status 0 $? "status --leader --json"
json=$(cat "$WORK/json")
case $json in
"{\"role\":\"$key\",\"held\":true,\"leader\":\"$(hostname):$pid\",\"term\":$term,\"ttl_ms\":"[0-9]*",\"last_term\":$term}") ;;
*) fail "one JSON object with the same: $json" ;;
esac

kill -TERM "$pid"
wait_exit "$pid" 5
expect_status 0 "$EXIT_STATUS" "the leader stopped by SIGTERM"
dl status --leader "$key" >"$WORK/out"
grep -qx "held: no" "$WORK/out" || fail "free after resigning: $(cat "$WORK/out")"
grep -qx "term: 0" "$WORK/out" || fail "no term when free: $(cat "$WORK/out")"
grep -qx "last_term: $term" "$WORK/out" ||
    fail "the last term granted remains: $(cat "$WORK/out")"
note "ok (term $term)"
