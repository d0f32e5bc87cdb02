#!/usr/bin/env bash
# `dlock doctor [URL]` judges a server for locks, one line per check, with
# an exit status scripts can use: 0 all safe, 78 something unsafe, 69 the
# server could not be used, 64 usage.  Private servers of the test's own
# (tests/support/faultkit.sh): one set up safely (appendonly yes,
# noeviction), one as a cache (allkeys-lru, no persistence), one whose
# clock runs 60 s ahead (the wall-clock shim).
CLI_TEST_NO_REDIS=1
source "$(dirname "$0")/cli_testlib.sh"
source "$SOURCE_DIR/tests/support/faultkit.sh"

command -v redis-server >/dev/null || {
    note "skipped: redis-server is not installed"
    exit 77
}

doctor() { # doctor OUTFILE ARGS...: runs dlock doctor, returns its status
    local out=$1
    shift
    timeout "$CALL_LIMIT" "$DLOCK" doctor "$@" >"$out" 2>"$out.err"
}

fk_redis_start safe
redis-cli -p "$safe_PORT" CONFIG SET appendonly yes >/dev/null ||
    fail "appendonly yes on the safe server"
doctor "$WORK/out_safe" "$safe_URL"
expect_status 0 $? "doctor on a server with AOF and noeviction"
grep -q '^verdict: safe for locks$' "$WORK/out_safe" ||
    fail "the safe server is called safe: $(cat "$WORK/out_safe")"
[ "$(grep -Ec '^[a-z]+ +safe ' "$WORK/out_safe")" -eq 5 ] ||
    fail "five checks, each safe: $(cat "$WORK/out_safe")"
doctor "$WORK/out_safe.json" --json --url "$safe_URL"
expect_status 0 $? "doctor --json on the safe server"
jq -e '.safe == true and (.checks | length) == 5' "$WORK/out_safe.json" \
    >/dev/null || fail "--json says safe: $(cat "$WORK/out_safe.json")"

fk_redis_start cache
redis-cli -p "$cache_PORT" CONFIG SET maxmemory-policy allkeys-lru \
    >/dev/null || fail "allkeys-lru on the cache server"
doctor "$WORK/out_cache" "$cache_URL"
expect_status 78 $? "doctor on a cache (allkeys-lru, no persistence)"
grep -Eq '^eviction +unsafe +allkeys-lru: .*evict a held lock' \
    "$WORK/out_cache" ||
    fail "eviction is unsafe, and why: $(cat "$WORK/out_cache")"
grep -Eq '^persistence +unsafe .*restart .*forgets locks still held' \
    "$WORK/out_cache" ||
    fail "persistence is unsafe, and why: $(cat "$WORK/out_cache")"
grep -Eq '^version +safe ' "$WORK/out_cache" ||
    fail "the version is fine: $(cat "$WORK/out_cache")"
doctor "$WORK/out_cache.json" --json "$cache_URL"
expect_status 78 $? "doctor --json on the cache"
jq -e '.safe == false and ([.checks[] | select(.verdict == "unsafe")
       | .name] == ["eviction", "persistence"])' "$WORK/out_cache.json" \
    >/dev/null ||
    fail "--json names the unsafe checks: $(cat "$WORK/out_cache.json")"

fk_redis_start skewed --wallclock
redis-cli -p "$skewed_PORT" CONFIG SET appendonly yes >/dev/null ||
    fail "appendonly yes on the skewed server"
fk_clock_step skewed 60000
doctor "$WORK/out_skewed" "$skewed_URL"
expect_status 78 $? "doctor on a server whose clock is 60 s ahead"
grep -Eq '^clock +unsafe .* ms ahead of ours' "$WORK/out_skewed" ||
    fail "the clock is unsafe, and how: $(cat "$WORK/out_skewed")"

fk_redis_stop cache
doctor "$WORK/out_down" "$cache_URL"
expect_status 69 $? "doctor on a stopped server"
doctor "$WORK/out_usage" "$safe_URL" extra
expect_status 64 $? "doctor with two operands"
doctor "$WORK/out_usage" --url "$safe_URL" "$safe_URL"
expect_status 64 $? "doctor with --url and a URL operand"
note "ok"
