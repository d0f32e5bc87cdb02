#!/usr/bin/env bash
# The command run by `dlock run` finds DLOCK_KEY (the key), DLOCK_TOKEN (32
# hex digits, the value stored in Redis while it runs), DLOCK_FENCE (a
# number > 0) and DLOCK_DEGRADED=0; values set by an outer dlock run are
# replaced; the rest of the environment passes through.
source "$(dirname "$0")/cli_testlib.sh"

new_key key
export DLOCK_KEY=outer DLOCK_FENCE=1 DLOCK_TOKEN=x KEEP_ME=kept
# env(1) itself, not a shell, which would merge duplicate variables.
dl run "$key" -- env >"$WORK/child.env"
expect_status 0 $? "a run that prints its environment"
dl run "$key" -- sh -c 'echo "$DLOCK_TOKEN" >"$0.token";
    redis-cli -u "$REDIS_URL" GET "$DLOCK_KEY" >"$0.stored"' "$WORK/child"
expect_status 0 $? "a run that reads its lock from Redis"
unset DLOCK_KEY DLOCK_FENCE DLOCK_TOKEN

env_of() {
    grep "^$1=" "$WORK/child.env" | cut -d= -f2-
}
for name in DLOCK_KEY DLOCK_TOKEN DLOCK_FENCE DLOCK_DEGRADED; do
    [ "$(grep -c "^$name=" "$WORK/child.env")" -eq 1 ] ||
        fail "one $name in the environment: $(grep "^$name=" "$WORK/child.env")"
done
[ "$(env_of DLOCK_KEY)" = "$key" ] ||
    fail "DLOCK_KEY is $key, got $(env_of DLOCK_KEY)"
token=$(env_of DLOCK_TOKEN)
[[ $token =~ ^[0-9a-f]{32}$ ]] ||
    fail "DLOCK_TOKEN is 32 hex digits, got '$token'"
[ "$(cat "$WORK/child.stored")" = "$(cat "$WORK/child.token")" ] ||
    fail "Redis holds DLOCK_TOKEN while the command runs:" \
        "$(cat "$WORK/child.stored") vs $(cat "$WORK/child.token")"
fence=$(env_of DLOCK_FENCE)
[[ $fence =~ ^[0-9]+$ ]] && [ "$fence" -gt 0 ] ||
    fail "DLOCK_FENCE is a number > 0, got '$fence'"
[ "$(env_of DLOCK_DEGRADED)" = 0 ] || fail "DLOCK_DEGRADED is 0"
[ "$(env_of KEEP_ME)" = kept ] || fail "the caller's variables pass through"
is_free "$key" || fail "the key is released after the run"

# None of dlock's own descriptors (Redis connections, its pipes) leak into
# the command: it sees the same ones as when the test runs it directly.
# Compared by what they are (a socket, a pipe, a file), not by number:
# under scripts/chaos --leaks, valgrind's own log files (named
# $DLOCK_LEAK_LOG.<pid>.log) stay open across dlock's fork and exec, and
# they are left out, as is the listing's own directory.
list_fds='for f in /proc/$$/fd/*; do readlink "$f"; done'
fd_kinds() {
    sed -E -e 's/^(socket|pipe|anon_inode):.*/\1/' \
        -e '\|^/proc/[0-9]+/fd$|d' |
        { if [ -n "${DLOCK_LEAK_LOG:-}" ]; then
            grep -v -F "$DLOCK_LEAK_LOG."
        else cat; fi; } | sort
}
sh -c "$list_fds" | fd_kinds >"$WORK/fds.direct"
dl run "$key" -- sh -c "$list_fds" | fd_kinds >"$WORK/fds.run"
cmp -s "$WORK/fds.direct" "$WORK/fds.run" ||
    fail "the command has dlock's descriptors:" \
        "$(tr '\n' ' ' <"$WORK/fds.run") vs $(tr '\n' ' ' <"$WORK/fds.direct")"
note "ok: token $token fence $fence"
