#!/usr/bin/env bash
# The production binaries carry no test hook, and the test builds do.
#
# Usage: test_no_test_hooks.sh SOURCE_DIR REVIEWD KH_INDEXER
#                              REVIEWD_TESTING KH_INDEXER_TESTING
#
# The hooks are compiled only with REVIEWD_TESTING / KH_TESTING (see
# docs/architecture.md).  A hook's switch is a string the binary must
# hold to read it, so the strings of each binary say whether it is there.
# The testing binaries must show them, or this check could never fail.
#
# The list of hooks is read from the sources, so a new hook cannot be
# forgotten here: for services/reviewd (reviewd) and services/indexer
# (kh-indexer), outside comments,
#   - every string literal named like a hook's switch: REVIEWD_TEST_*,
#     KH_TEST_* (environment variables) and X-Test-* (request headers),
#     wherever it is (one outside an #ifdef *_TESTING would reach the
#     production binary, and this test fails on it);
#   - every function defined, not static, inside an #ifdef *_TESTING
#     block or a file that is an #error without *_TESTING, and defined
#     nowhere outside one (its name is in the testing binary's symbols).
# The hooks known when this was written must be among those read, or the
# reading is broken.  A *_TESTING guard in another form (#if, #elif, a
# macro other than REVIEWD_TESTING / KH_TESTING) fails, to be taught here.
set -u

if [ $# -ne 5 ]; then
    echo "usage: $0 SOURCE_DIR REVIEWD KH_INDEXER REVIEWD_TESTING" \
         "KH_INDEXER_TESTING" >&2
    exit 2
fi
root=$1 reviewd=$2 indexer=$3 reviewd_testing=$4 indexer_testing=$5
failed=0

# hooks DIR: the hook names of the sources under DIR, one a line; a line
# "BAD file:line text" for a guard it cannot read.
# shellcheck disable=SC2016
hooks() {
    find "$1" -name '*.[ch]' | LC_ALL=C sort | xargs awk '
    function guard(line) {
        return line ~ /_TESTING([^A-Za-z0-9_]|$)/
    }
    FNR == 1 { depth = 0; com = 0; whole = 0; split("", tst) }
    # Comments out (block comments may span lines).
    {
        line = $0; out = ""
        while (line != "") {
            if (com) {
                if (!match(line, /\*\//)) { line = ""; break }
                line = substr(line, RSTART + 2); com = 0; continue
            }
            if (match(line, /\/\*|\/\//)) {
                out = out substr(line, 1, RSTART - 1)
                if (substr(line, RSTART, 2) == "//") { line = ""; break }
                line = substr(line, RSTART + 2); com = 1; continue
            }
            out = out line; line = ""
        }
        $0 = out
    }
    /^[ \t]*#[ \t]*if/ {
        depth++
        tst[depth] = 0
        if ($0 ~ /^[ \t]*#[ \t]*ifdef[ \t]+(REVIEWD|KH)_TESTING[ \t]*$/)
            tst[depth] = 1
        else if ($0 ~ /^[ \t]*#[ \t]*ifndef[ \t]+(REVIEWD|KH)_TESTING[ \t]*$/)
            tst[depth] = -1
        else if (guard($0))
            print "BAD " FILENAME ":" FNR " " $0
        next
    }
    /^[ \t]*#[ \t]*elif/ {
        if (guard($0) || tst[depth] != 0)
            print "BAD " FILENAME ":" FNR " " $0
        next
    }
    /^[ \t]*#[ \t]*else/ { tst[depth] = -tst[depth]; next }
    /^[ \t]*#[ \t]*endif/ { if (depth > 0) depth--; next }
    # A file that refuses to build without the macro is testing-only.
    /^[ \t]*#[ \t]*error/ && depth > 0 && tst[depth] == -1 { whole = 1 }
    {
        testing = whole
        for (i = 1; i <= depth; i++)
            if (tst[i] == 1) testing = 1
        s = $0
        while (match(s, /"(REVIEWD_TEST_|KH_TEST_|X-Test-)[A-Za-z0-9_-]*"/)) {
            print "NAME " substr(s, RSTART + 1, RLENGTH - 2)
            s = substr(s, RSTART + RLENGTH)
        }
        # A function definition: at column 0, a name and "(", no ";".
        if ($0 ~ /^[A-Za-z_][A-Za-z0-9_ \t*]*[ \t*][A-Za-z_][A-Za-z0-9_]*\(/ &&
            $0 !~ /;[ \t]*$/ && $0 !~ /^(typedef|return|else|if|for|while) /) {
            f = $0
            sub(/\(.*/, "", f); sub(/.*[ \t*]/, "", f)
            if (!testing) outside[f] = 1
            else if ($0 !~ /^static[ \t]/) inside[f] = 1
        }
    }
    END {
        for (f in inside)
            if (!(f in outside)) print "NAME " f
    }' | LC_ALL=C sort -u
}

# known WORDS...: each WORD read from the sources, or the reading broke.
known() {
    local list=$1 word
    shift
    for word in "$@"; do
        printf '%s\n' "$list" | grep -qxF -- "NAME $word" && continue
        echo "FAIL: the hook $word was not read from the sources" \
             "(this check would miss hooks)" >&2
        failed=1
    done
}

rv_list=$(hooks "$root/services/reviewd")
kh_list=$(hooks "$root/services/indexer")
for list in "$rv_list" "$kh_list"; do
    bad=$(printf '%s\n' "$list" | sed -n 's/^BAD //p')
    if [ -n "$bad" ]; then
        echo "FAIL: test guards this check cannot read:" >&2
        printf '%s\n' "$bad" | sed 's/^/  /' >&2
        failed=1
    fi
done
known "$rv_list" X-Test-Pause-Ms X-Test-Fail REVIEWD_TEST_HOOKS \
    REVIEWD_TEST_NACK_PUBLISH REVIEWD_TEST_BREAK_BATCH rv_amqp_test_break
known "$kh_list" KH_TEST_DROP_ACKS kh_consumer_drop_channel
other=$(grep -rlE '[A-Z]_TESTING' --include='*.[ch]' "$root/services" |
        grep -vE '/services/(reviewd|indexer)/' || true)
if [ -n "$other" ]; then
    echo "FAIL: test hooks in sources this check does not map to a" \
         "binary:" >&2
    printf '%s\n' "$other" | sed 's/^/  /' >&2
    failed=1
fi
mapfile -t rv_hooks < <(printf '%s\n' "$rv_list" | sed -n 's/^NAME //p')
mapfile -t kh_hooks < <(printf '%s\n' "$kh_list" | sed -n 's/^NAME //p')

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
    "$(basename "$indexer"); the testing builds have theirs:" \
    "${rv_hooks[*]}; ${kh_hooks[*]}"
exit $failed
