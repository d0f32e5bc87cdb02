#!/usr/bin/env bash
# docs/dlock.1 renders with man -l, without groff warnings, and has the
# sections a manual needs, every exit code, option and subcommand the tool
# has; so the manual and `dlock help` cannot drift apart unnoticed.
# Needs man-db and groff (Debian: man-db, groff-base); skips (77) without.
CLI_TEST_NO_REDIS=1
source "$(dirname "$0")/cli_testlib.sh"

page=$SOURCE_DIR/docs/dlock.1
command -v man >/dev/null && command -v groff >/dev/null || {
    note "skipped: man or groff is not installed"
    exit 77
}
[ -s "$page" ] || fail "no manual at $page"

warnings=$(groff -man -ww -z -Tutf8 "$page" 2>&1)
[ -z "$warnings" ] || fail "groff warns: $warnings"
# Piped, man-db renders plain text (no overstrikes).
MANWIDTH=80 man -l "$page" >"$WORK/page" 2>"$WORK/err"
[ ! -s "$WORK/err" ] || fail "man -l complains: $(cat "$WORK/err")"

for section in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS ENVIRONMENT \
    "EXIT STATUS" EXAMPLES "SEE ALSO"; do
    grep -q "^$section" "$WORK/page" || fail "no $section section"
done
for code in 64 69 70 75 76 78; do
    grep -Eq "^ +$code( |$)" "$WORK/page" || fail "EXIT STATUS lists $code"
done
for word in run acquire release extend status leader doctor; do
    grep -q "dlock $word" "$WORK/page" || fail "the manual covers dlock $word"
done
# Every long option that `dlock help` shows is in the manual.
for cmd in run acquire release extend status leader doctor; do
    for opt in $(dl help "$cmd" | grep -o -- '--[a-z-]*' | sort -u); do
        grep -q -- "$opt" "$WORK/page" || fail "the manual has $opt ($cmd)"
    done
done
grep -q 'flock(1)' "$WORK/page" || fail "SEE ALSO names flock(1)"
for var in DLOCK_FENCE DLOCK_TERM DLOCK_TICK; do
    grep -q "$var" "$WORK/page" || fail "ENVIRONMENT has $var"
done
grep -q 'REDIS_URL' "$WORK/page" || fail "ENVIRONMENT has REDIS_URL"
note "ok"
