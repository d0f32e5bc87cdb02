#!/usr/bin/env bash
# Usage errors exit 64 with one line on stderr that starts with "dlock: "
# and never touch Redis; help and version exit 0 on stdout.
source "$(dirname "$0")/cli_testlib.sh"

# usage_error WHAT ARGS...: dlock ARGS must exit 64 with one "dlock: " line.
usage_error() {
    local what=$1
    shift
    dl "$@" >"$WORK/out" 2>"$WORK/err"
    expect_status 64 $? "$what (dlock $*)"
    [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -q '^dlock: ' "$WORK/err" ||
        fail "$what: one 'dlock: ' line on stderr, got: $(cat "$WORK/err")"
    [ ! -s "$WORK/out" ] || fail "$what: nothing on stdout"
}

new_key key
usage_error "no command"
usage_error "an unknown command" lock "$key"
usage_error "junk duration" run --ttl 30x "$key" -- true
usage_error "empty duration" run --ttl "" "$key" -- true
usage_error "negative duration" run --ttl -5s "$key" -- true
usage_error "spaced duration" run --ttl "5 s" "$key" -- true
usage_error "zero TTL" acquire --ttl 0 "$key"
usage_error "junk wait" run --wait soon "$key" -- true
usage_error "junk grace" run --grace 1x "$key" -- true
usage_error "exit code out of range" run --conflict-exit-code 256 "$key" -- true
usage_error "an unknown option" run --frobnicate "$key" -- true
usage_error "an option missing its value" acquire "$key" --ttl
usage_error "run without KEY" run
usage_error "run without COMMAND" run "$key"
usage_error "run with only --" run "$key" --
usage_error "an option after KEY" run "$key" --ttl 5s -- true
usage_error "an option another command uses" status --ttl 5s "$key"
usage_error "release without TOKEN" release "$key"
usage_error "release with a token that is not hex" release "$key" not-a-token
usage_error "extend with a short token" extend "$key" abc123
usage_error "two keys" status "$key" other
usage_error "a malformed URL" status --url 'http://example' "$key"
usage_error "help on an unknown command" help nope
usage_error "a key that JSON cannot hold" status --json $'bad\xff'"$key"
usage_error "junk --every" run --every 1x "$key" -- true
usage_error "zero --every" run --every 0 "$key" -- true
usage_error "--every with --wait" run --every 1s --wait 5s "$key" -- true
usage_error "--every with --fail-open" run --every 1s --fail-open "$key" -- true
usage_error "--every with -E" run --every 1s -E 3 "$key" -- true
usage_error "--every after KEY" run "$key" --every 1s -- true
usage_error "leader without KEY" leader
usage_error "leader without COMMAND" leader "$key"
usage_error "leader with only --" leader "$key" --
usage_error "leader with --wait" leader --wait 1s "$key" -- true
usage_error "leader with --every" leader --every 1s "$key" -- true
usage_error "leader with a junk TTL" leader --ttl soon "$key" -- true
usage_error "leader with an option after KEY" leader "$key" --ttl 1s -- true
[ "$(rcli EXISTS "$key")" = 0 ] || fail "no usage error touched the key"
[ "$(rcli EXISTS "{leader:$key}")" = 0 ] ||
    fail "no usage error campaigned for the key"

dl --help >"$WORK/out" 2>&1
expect_status 0 $? "dlock --help"
grep -q '^usage: dlock' "$WORK/out" || fail "--help prints usage"
dl help run >"$WORK/out" 2>&1
expect_status 0 $? "dlock help run"
grep -q -- '--conflict-exit-code' "$WORK/out" ||
    fail "help run lists its options"
dl run --help >"$WORK/out" 2>&1
expect_status 0 $? "dlock run --help"
cmp -s "$WORK/out" <(dl help run) || fail "run --help is help run"
dl help leader >"$WORK/out" 2>&1
expect_status 0 $? "dlock help leader"
grep -q '^usage: dlock leader' "$WORK/out" ||
    fail "help leader prints its usage"
grep -q -- '--every' <(dl help run) || fail "help run lists --every"
dl --version >"$WORK/out" 2>&1
expect_status 0 $? "dlock --version"
grep -Eq '^dlock [0-9]+\.[0-9]+\.[0-9]+ \(libdlock [0-9.]+\)$' "$WORK/out" ||
    fail "--version prints the versions: $(cat "$WORK/out")"
note "ok"
