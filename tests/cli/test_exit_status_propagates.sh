#!/usr/bin/env bash
# `dlock run` exits with its command's status, 128+N when signal N killed
# it (exit 3 -> 3, SIGKILL -> 137), 127 for a command that is not found,
# 126 for one that cannot be executed, and releases the lock each time.
source "$(dirname "$0")/cli_testlib.sh"

new_key key
dl run "$key" -- true
expect_status 0 $? "a command that succeeds"
dl run "$key" -- sh -c 'exit 3'
expect_status 3 $? "a command that exits 3"
is_free "$key" || fail "the key is released after exit 3"
dl run "$key" -- sh -c 'kill -KILL $$'
expect_status 137 $? "a command killed by SIGKILL"
is_free "$key" || fail "the key is released after SIGKILL"
dl run "$key" -- sh -c 'kill -TERM $$'
expect_status 143 $? "a command killed by SIGTERM"
dl run "$key" -- "$WORK/no-such-command" 2>"$WORK/err"
expect_status 127 $? "a command that does not exist"
grep -q "^dlock: cannot run '.*no-such-command': No such file" "$WORK/err" ||
    fail "stderr names the missing command: $(cat "$WORK/err")"
printf 'not a program\n' >"$WORK/not-executable"
dl run "$key" -- "$WORK/not-executable" 2>/dev/null
expect_status 126 $? "a file that is not executable"
is_free "$key" || fail "the key is released after a failed exec"
note "ok"
