#!/usr/bin/env bash
# With Redis unreachable (a closed port): `dlock run --fail-open` runs the
# command anyway with DLOCK_FENCE=0, DLOCK_DEGRADED=1 and an empty token,
# warns on stderr, and exits with the command's status; without
# --fail-open it exits 69 without running it.  acquire, release, extend
# and status exit 69 too.
source "$(dirname "$0")/cli_testlib.sh"

# A loopback port with nothing listening: bind one, note it, close it.
port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
down=redis://127.0.0.1:$port/0
new_key key

dl run --fail-open --url "$down" "$key" -- sh -c \
    'echo "$DLOCK_FENCE $DLOCK_DEGRADED [$DLOCK_TOKEN]" >"$0"; exit 4' \
    "$WORK/open" 2>"$WORK/err"
expect_status 4 $? "run --fail-open with Redis down (the command's status)"
[ "$(cat "$WORK/open")" = "0 1 []" ] ||
    fail "the command sees fence 0, degraded 1, no token: $(cat "$WORK/open")"
grep -q '^dlock: warning: .*without lock' "$WORK/err" ||
    fail "stderr warns about running without the lock: $(cat "$WORK/err")"
grep -q "127.0.0.1:$port" "$WORK/err" ||
    fail "the warning names the server: $(cat "$WORK/err")"

dl run --fail-open --quiet --url "$down" "$key" -- true 2>"$WORK/err"
expect_status 0 $? "run --fail-open --quiet"
[ ! -s "$WORK/err" ] || fail "--quiet drops the warning: $(cat "$WORK/err")"

REDIS_URL=$down dl run "$key" -- touch "$WORK/closed-ran" 2>"$WORK/err"
expect_status 69 $? "run with Redis down (URL from REDIS_URL), fail closed"
[ ! -e "$WORK/closed-ran" ] || fail "a fail-closed run must not run the command"
grep -q "^dlock: cannot use redis: .*127.0.0.1:$port" "$WORK/err" ||
    fail "stderr says why Redis is unusable: $(cat "$WORK/err")"

token=0123456789abcdef0123456789abcdef
for args in "acquire $key" "release $key $token" "extend $key $token" \
    "status $key" "status --json $key"; do
    # shellcheck disable=SC2086
    dl $args --url "$down" >/dev/null 2>&1
    expect_status 69 $? "dlock $args with Redis down"
done
note "ok"
