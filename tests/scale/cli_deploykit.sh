# shellcheck shell=bash
# tests/scale/cli_deploykit.sh: what the CLI tests over a deployment URL
# share (sourced; needs DLOCK, KEY and a fail function).
#
# cli_deploy_basics URL EVERY_S: `dlock run` runs its command under the
# lock; `dlock run --every 1s`, stopped by SIGINT after EVERY_S seconds,
# ran at least two ticks (their count is left in $ticks); `dlock leader`
# leads.  Each step is bounded with timeout(1).
cli_deploy_basics() {
    local url=$1 every_s=$2 out
    out=$(timeout 20 "$DLOCK" run --url "$url" --ttl 3s "$KEY:run" -- \
        sh -c 'echo ran-under-lock') || fail "dlock run exited $?"
    [[ $out == ran-under-lock ]] || fail "dlock run printed '$out'"

    out=$(timeout -s INT "$every_s" "$DLOCK" run --url "$url" --every 1s \
        --ttl 2s "$KEY:every" -- sh -c 'echo tick' 2>/dev/null)
    ticks=$(grep -c '^tick$' <<<"$out")
    ((ticks >= 2)) || fail "dlock run --every ran $ticks ticks in $every_s s"

    out=$(timeout -s INT 2 "$DLOCK" leader --url "$url" --ttl 2s \
        "$KEY:lead" -- sh -c 'echo leading; sleep 30' 2>/dev/null)
    [[ $out == leading ]] || fail "dlock leader printed '$out'"
}
