#!/usr/bin/env bash
# tests/scale/test_cli_redlock.sh /path/to/dlock: the dlock CLI on a
# redlock:// URL (scripts/stack's redlock group of five masters, started
# by the scale fixture): `dlock run` runs its command under a lock that
# the watchdog renews on a majority, `dlock status` says which masters
# hold it, `dlock doctor` judges each master; two `dlock run --every`
# on one key run each tick once between them (the majority tick
# register); `dlock leader` leads while a second one waits, and SIGTERM
# makes the first resign so the second leads at once, in a higher term.
# Each step is bounded with timeout(1) or a bounded wait.
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

# A run longer than the TTL: the watchdog must renew on the masters.  A
# renewal round that cannot finish within the TTL stops the command (exit
# 76), rightly: the TTL leaves a loaded machine's rounds two thirds of it.
out=$(timeout 20 "$DLOCK" run --url "$URL" --ttl 1s "$KEY:run" -- \
    sh -c 'sleep 2.5; echo ran-under-lock') || fail "dlock run exited $?"
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

DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

# wait_for SECONDS TEST...: polls TEST every 50 ms for at most SECONDS.
wait_for() {
    local until=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS <= until)) || return 1
        sleep 0.05
    done
}
lines_at_least() { [[ -f $2 ]] && (($(wc -l <"$2") >= $1)); }

# Two nodes on one schedule: every tick of 300 ms runs on one of them,
# never on both (the tick numbers written are unique).
for node in a b; do
    timeout 20 "$DLOCK" run --url "$URL" --every 300ms --ttl 1s \
        "$KEY:every" -- sh -c "echo \$DLOCK_TICK $node >>'$DIR/ticks'" \
        2>"$DIR/every.$node.err" &
    eval "every_$node=\$!"
done
wait_for 10 lines_at_least 5 "$DIR/ticks" ||
    fail "run --every: $(cat "$DIR"/ticks "$DIR"/every.*.err 2>&1)"
kill -TERM "$every_a" "$every_b"
wait "$every_a" || fail "run --every (a) exited $? on SIGTERM"
wait "$every_b" || fail "run --every (b) exited $? on SIGTERM"
ticks=$(wc -l <"$DIR/ticks")
dups=$(cut -d' ' -f1 "$DIR/ticks" | sort | uniq -d)
[[ -z $dups ]] || fail "ticks run twice: $dups in $(cat "$DIR/ticks")"

# One leader and a second that waits; SIGTERM makes the first resign.
# With a 5 s lease renewed every 5/3 s, the lease the first leaves runs
# at least 3.3 s after SIGTERM: a take-over sooner than 3 s is the
# resignation's doing, not the lease running out.
leader() { # leader NAME: leads $KEY:lead, writing its term to $DIR/NAME
    timeout 20 "$DLOCK" leader --url "$URL" --ttl 5s "$KEY:lead" -- \
        sh -c "echo \$DLOCK_TERM >'$DIR/$1.tmp'; mv '$DIR/$1.tmp' \
            '$DIR/$1'; exec sleep 30" 2>"$DIR/$1.err" &
}
leader first
first=$!
wait_for 5 test -s "$DIR/first" ||
    fail "the first leader did not lead: $(cat "$DIR/first.err")"
leader second
second=$!
# The second campaigns (its campaign rounds are a few ms) and waits.
sleep 0.5
[[ ! -e $DIR/second ]] || fail "two leaders at once: $(cat "$DIR"/*.err)"
start=$(date +%s%N)
kill -TERM "$first"
wait "$first" || fail "the first leader exited $? on SIGTERM"
wait_for 5 test -s "$DIR/second" ||
    fail "the second did not take over: $(cat "$DIR/second.err")"
took=$((($(date +%s%N) - start) / 1000000))
((took < 3000)) || fail "took over $took ms after SIGTERM: not resigned"
(($(cat "$DIR/second") > $(cat "$DIR/first"))) ||
    fail "terms $(cat "$DIR/first") then $(cat "$DIR/second")"
st=$(timeout 10 "$DLOCK" status --url "$URL" --leader "$KEY:lead")
grep -q '^held: yes' <<<"$st" &&
    grep -q "^last_term: $(cat "$DIR/second")\$" <<<"$st" ||
    fail "status --leader while the second leads: $st"
kill -TERM "$second"
wait "$second" || fail "the second leader exited $? on SIGTERM"
printf 'test_cli_redlock: run (renewed), status (5 of 5 masters), doctor, %s\n' \
    "--every ($ticks ticks on 2 nodes, none twice), leader (handed over in $took ms, terms $(cat "$DIR/first") < $(cat "$DIR/second"))"
