#!/usr/bin/env bash
# `dlock leader` stops its command's whole process group as `dlock run`
# does (issue 13, item 2): a grandchild dies when the leadership is lost
# (the lease deleted behind its back), and when dlock itself is SIGKILLed
# (the guardian kills the group).
source "$(dirname "$0")/cli_testlib.sh"

# A grandchild under a shell, writing its pid (and term) to a new line.
GRANDCHILD='sh -c "echo \$\$ \$DLOCK_TERM >>$0; exec sleep 30" & wait'

gone() {
    not_running "$1"
}

new_role key
pids=$WORK/pids
spawn_bg leader "$DLOCK" leader --ttl 1500ms --grace 1s "$key" -- \
    sh -c "$GRANDCHILD" "$pids" >/dev/null 2>"$WORK/err"
wait_for 10 has_lines "$pids" 1
read -r gc1 term1 <"$pids"
BG_PIDS+=("$gc1")
[ "$(rcli DEL "{leader:$key}")" = 1 ] || fail "the lease existed to be deleted"
wait_for 3 gone "$gc1"
note "leadership lost: grandchild stopped"

# dlock campaigns again and runs the command anew; then it is SIGKILLed.
wait_for 10 has_lines "$pids" 2
read -r gc2 term2 < <(sed -n 2p "$pids")
BG_PIDS+=("$gc2")
[ "$term2" -gt "$term1" ] || fail "the new term $term2 is above $term1"
disown "$leader"
kill -KILL "$leader"
wait_for 10 not_running "$leader"
forget_bg "$leader"
wait_for 3 gone "$gc2"
note "dlock leader SIGKILLed: grandchild stopped"
note ok
