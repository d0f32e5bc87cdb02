#!/usr/bin/env bash
# tests/soak/test_soak_report_verdict.sh: soak_report fails each kind of
# bad run and passes a clean one, judged from files written here.
#
#   bash test_soak_report_verdict.sh /path/to/soak_report
#
# soak.short exercises the whole soak but only ever sees a passing run, so
# a verdict that had stopped judging (a check that always passes) would go
# unnoticed there.  This test writes the files a run leaves (counts.tsv,
# events.tsv, samples.tsv, faults.tsv and the descriptor listings) for a
# clean run, then spoils one thing at a time and expects exit status 1
# with that check marked FAIL: a 503 outside every fault window, RSS
# growth past 10%, one more connection to PostgreSQL at the end, a Redis
# pool past its bound, a review decided twice, /readyz not ok, an outbox
# row left unsent, and a reviewd that did not exit 0.  A 503 inside a
# fault window or in the warm-up, a Redis pool that grew within its bound
# and PostgreSQL connections fewer at the end within their pool's bounds
# (--pool postgres=0..N) must pass.
# No server is needed; it takes well under a second.
set -u

REPORT=${1:?usage: $0 /path/to/soak_report}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/soak-verdict.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failures=0

# A clean run in folder $1: faults at t = 100..105 s, samples at 60 s
# (start) and 700 s (end), reviewd on port 8080 with Redis at 6379 and
# PostgreSQL at 5432.
write_clean_run() {
    local d=$1
    mkdir -p "$d"
    {
        printf 'route\tGET /v1/documents/{id}\t2xx\t1000\n'
        printf 'route\tGET /v1/documents/{id}\t5xx\t1\n'
        printf 'kind\tok\t1000\nkind\tunavailable\t1\n'
        printf 'stat\t%s\t%s\n' races 10 race_one_winner 10 \
            race_two_winners 0 idle_opened 4 idle_closed_by_server 4 \
            idle_not_closed 0 readyz_ok 1 quiet_start_settled 1 \
            quiet_end_settled 1 outbox_rows 20 outbox_unsent 0 \
            approval_events 10 events_processed 10
    } >"$d/counts.tsv"
    printf '100000\t105000\tpg-restart\n' >"$d/faults.tsv"
    printf '104000\tGET /v1/documents/{id}\t503\tunavailable\n' \
        >"$d/events.tsv"
    {
        printf '60000\tstart\treviewd\t10000\t4\n'
        printf '300000\trun\treviewd\t10500\t9\n'
        printf '700000\tend\treviewd\t10500\t4\n'
    } >"$d/samples.tsv"
    for phase in start end; do
        printf '%s\n' '0 /dev/null' \
            '3 tcp 127.0.0.1:8080 -> 0.0.0.0:0 state 0A' \
            '4 tcp 127.0.0.1:40000 -> 127.0.0.1:5432 state 01' \
            '5 tcp 127.0.0.1:40002 -> 127.0.0.1:6379 state 01' \
            >"$d/fds-$phase-reviewd.txt"
    done
}

judge() { # FOLDER [EXTRA ARGS] -> the report on stdout, its status in $rc
    local d=$1
    shift
    rc=0
    "$REPORT" --dir "$d" --peer redis=6379 --peer postgres=5432 \
        --http-port 8080 --pool redis=3 --reviewd-exit 0 "$@" \
        >"$d/report.txt" 2>&1 || rc=$?
}

expect_pass() { # NAME FOLDER [EXTRA ARGS]
    local name=$1
    shift
    judge "$@"
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $name: soak_report should have passed (status $rc):"
        cat "$1/report.txt"
        failures=$((failures + 1))
    fi
}

expect_fail() { # NAME CHECK-TEXT FOLDER [EXTRA ARGS]
    local name=$1 text=$2
    shift 2
    judge "$@"
    if [ "$rc" -ne 1 ] || ! grep -qF "[FAIL] $text" "$1/report.txt"; then
        echo "FAIL: $name: expected exit 1 and '[FAIL] $text', got $rc:"
        cat "$1/report.txt"
        failures=$((failures + 1))
    fi
}

# Each case starts from a clean run and spoils one thing ($1 = folder).
case_dir() {
    local d=$WORK/$1
    write_clean_run "$d"
    printf '%s\n' "$d"
}

d=$(case_dir clean)
expect_pass "a clean run with a 503 inside its fault window" "$d"

d=$(case_dir pool-grew)
sed -i 's/^5 tcp.*/&\n6 tcp 127.0.0.1:40004 -> 127.0.0.1:6379 state 01/' \
    "$d/fds-end-reviewd.txt"
sed -i 's/\tend\treviewd\t10500\t4/\tend\treviewd\t10500\t5/' "$d/samples.tsv"
expect_pass "the Redis pool growing within its bound" "$d"

d=$(case_dir late-503)
printf '400000\tGET /v1/documents/{id}\t503\tunavailable\n' >>"$d/events.tsv"
expect_fail "a 503 long after the fault" \
    "no 5xx and no connection error outside fault windows" "$d"

d=$(case_dir conn-error)
printf '400000\tGET /v1/documents/{id}\t-1\tconn_error\n' >>"$d/events.tsv"
expect_fail "a connection error outside a fault" \
    "no 5xx and no connection error outside fault windows" "$d"

d=$(case_dir rss)
sed -i 's/\tend\treviewd\t10500/\tend\treviewd\t11100/' "$d/samples.tsv"
expect_fail "RSS grown by 11%" "RSS growth <= 10%" "$d"
expect_pass "RSS grown by 11% when RSS is not judged" "$d" --no-rss-verdict

d=$(case_dir pg-fd)
echo '6 tcp 127.0.0.1:40006 -> 127.0.0.1:5432 state 01' \
    >>"$d/fds-end-reviewd.txt"
expect_fail "one more PostgreSQL connection at the end" \
    "open descriptors equal at start and end" "$d"

d=$(case_dir pg-gone)
sed -i '/:5432 state/d' "$d/fds-end-reviewd.txt"
sed -i 's/\tend\treviewd\t10500\t4/\tend\treviewd\t10500\t3/' "$d/samples.tsv"
expect_fail "no PostgreSQL connection at the end, with no pool for it" \
    "open descriptors equal at start and end" "$d"
expect_pass "no PostgreSQL connection at the end: threads not run since a restart" \
    "$d" --pool postgres=0..2
echo '6 tcp 127.0.0.1:40006 -> 127.0.0.1:5432 state 01' \
    >>"$d/fds-end-reviewd.txt"
for p in 40008 40010; do
    echo "9 tcp 127.0.0.1:$p -> 127.0.0.1:5432 state 01" \
        >>"$d/fds-end-reviewd.txt"
done
expect_fail "three PostgreSQL connections at the end, past a bound of 2" \
    "open descriptors equal at start and end" "$d" --pool postgres=0..2

d=$(case_dir warmup-503)
printf '59000\tGET /v1/documents/{id}\t503\tunavailable\n' >>"$d/events.tsv"
expect_pass "a 503 in the warm-up, before the start reading" "$d"
printf '61000\tGET /v1/documents/{id}\t503\tunavailable\n' >>"$d/events.tsv"
expect_fail "a 503 just after the start reading, before any fault" \
    "no 5xx and no connection error outside fault windows" "$d"

d=$(case_dir pool-over)
for p in 40004 40006 40008; do
    echo "9 tcp 127.0.0.1:$p -> 127.0.0.1:6379 state 01" \
        >>"$d/fds-end-reviewd.txt"
done
expect_fail "the Redis pool past its bound" \
    "open descriptors equal at start and end" "$d"

d=$(case_dir double)
sed -i 's/^stat\trace_two_winners\t0/stat\trace_two_winners\t1/' \
    "$d/counts.tsv"
expect_fail "a review decided twice" "no review decided twice" "$d"

d=$(case_dir unready)
sed -i 's/^stat\treadyz_ok\t1/stat\treadyz_ok\t0/' "$d/counts.tsv"
expect_fail "/readyz not ok at the end" "/readyz ok at the end" "$d"

d=$(case_dir unsent)
sed -i 's/^stat\toutbox_unsent\t0/stat\toutbox_unsent\t2/' "$d/counts.tsv"
expect_fail "an outbox row left unsent" "every committed change's event sent" \
    "$d"

d=$(case_dir exit)
expect_fail "reviewd exiting 1" "reviewd exited 1 on SIGTERM" "$d" \
    --reviewd-exit 1

if [ $failures -gt 0 ]; then
    echo "$failures case(s) failed"
    exit 1
fi
echo "every verdict case behaved"
