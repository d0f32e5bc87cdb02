#!/usr/bin/env bash
# When Redis goes away under `dlock leader` (a private redis-server of the
# test's own, killed by its pid), the lease cannot be renewed: once this
# node's own view of it ends (within one TTL), the command is stopped, so
# it never runs on past the point where another node could lead.  When
# Redis is back, dlock campaigns again and starts the command anew.
source "$(dirname "$0")/cli_testlib.sh"

command -v redis-server >/dev/null || {
    note "skipped: redis-server is not installed"
    exit 77
}

# start_redis PORT: a private, non-persistent server; REDIS_PID is its pid.
start_redis() {
    spawn_bg REDIS_PID redis-server --port "$1" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$WORK" >"$WORK/redis-$1.log" 2>&1
    local deadline=$(($(now_ms) + 5000))
    until redis-cli -p "$1" PING 2>/dev/null | grep -q PONG; do
        not_running "$REDIS_PID" && return 1
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.02
    done
}

port=
for try in 0 1 2 3 4 5 6 7; do
    candidate=$((21000 + ($$ * 7 + try * 131) % 20000))
    if start_redis "$candidate"; then
        port=$candidate
        break
    fi
done
[ -n "$port" ] || fail "no private redis-server could start"
url=redis://127.0.0.1:$port/0

new_key key
started=$WORK/started
spawn_bg pid "$DLOCK" leader --url "$url" --ttl 1s --grace 300ms "$key" -- \
    sh -c 'echo "$$" >>"$0"; exec sleep 30' "$started" 2>"$WORK/err"
wait_for 10 has_lines "$started" 1
child1=$(head -1 "$started")

kill -KILL "$REDIS_PID"
gone_at=$(now_ms)
wait_exit "$REDIS_PID" 5
wait_for 5 not_running "$child1"
stopped=$(($(now_ms) - gone_at))
[ "$stopped" -le 1600 ] ||
    fail "the command stops within one TTL (1000 ms + a round trip)," \
        "took $stopped ms"
grep -Eq "^dlock: leadership of $key (was lost|was not renewed in time|ran out).*: stopping 'sh'" "$WORK/err" ||
    fail "stderr says the leadership was lost: $(cat "$WORK/err")"
not_running "$pid" && fail "dlock leader keeps campaigning while Redis is away"

start_redis "$port" || fail "the private redis-server restarts on $port"
back_at=$(now_ms)
wait_for 10 has_lines "$started" 2
again=$(($(now_ms) - back_at))
kill -TERM "$pid"
wait_exit "$pid" 5
expect_status 0 "$EXIT_STATUS" "dlock leader stopped by SIGTERM"
note "ok: stopped ${stopped} ms after Redis died; led again ${again} ms" \
    "after it came back"
