#!/usr/bin/env bash
# The production binaries carry no test hook, and the test builds do.
#
# Usage: test_no_test_hooks.sh REVIEWD KH_INDEXER REVIEWD_TESTING
#                              KH_INDEXER_TESTING
#
# The hooks (X-Test-Pause-Ms, X-Test-Fail, REVIEWD_TEST_HOOKS in reviewd;
# KH_TEST_DROP_ACKS and kh_consumer_drop_channel in kh-indexer) are
# compiled only with REVIEWD_TESTING / KH_TESTING (see
# docs/architecture.md).  A hook's switch is a string the binary must
# hold to read it, so the strings of each binary say whether it is there.
# The testing binaries must show them, or this check could never fail.
set -u

if [ $# -ne 4 ]; then
    echo "usage: $0 REVIEWD KH_INDEXER REVIEWD_TESTING KH_INDEXER_TESTING" >&2
    exit 2
fi
reviewd=$1 indexer=$2 reviewd_testing=$3 indexer_testing=$4
rv_hooks=(X-Test-Pause-Ms X-Test-Fail REVIEWD_TEST_HOOKS)
kh_hooks=(KH_TEST_DROP_ACKS kh_consumer_drop_channel)
failed=0

# holds BINARY WORD: whether the printable strings of BINARY contain WORD.
holds() {
    strings -a "$1" | grep -qF -- "$2"
}

# expect WANT BINARY WORDS...: each WORD in BINARY (WANT=1) or in none.
expect() {
    local want=$1 bin=$2 word
    shift 2
    if [ ! -x "$bin" ]; then
        echo "FAIL: no binary at $bin" >&2
        failed=1
        return
    fi
    for word in "$@"; do
        if holds "$bin" "$word"; then
            [ "$want" = 1 ] && continue
            echo "FAIL: $(basename "$bin") holds the test hook $word" >&2
        else
            [ "$want" = 0 ] && continue
            echo "FAIL: $(basename "$bin") lacks the test hook $word" \
                 "(this check would not see one)" >&2
        fi
        failed=1
    done
}

expect 0 "$reviewd" "${rv_hooks[@]}"
expect 0 "$indexer" "${kh_hooks[@]}"
expect 1 "$reviewd_testing" "${rv_hooks[@]}"
expect 1 "$indexer_testing" "${kh_hooks[@]}"
[ $failed = 0 ] && echo "ok: no test hook in $(basename "$reviewd") or" \
    "$(basename "$indexer"); the testing builds have theirs"
exit $failed
