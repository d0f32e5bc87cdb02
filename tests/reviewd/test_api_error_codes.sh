#!/usr/bin/env bash
# docs/api.md's error-code table, and docs/openapi.yaml's Error.code enum,
# list exactly the codes reviewd can write, each with its status.
#
# Usage: test_api_error_codes.sh SOURCE_DIR
#
# Issue 15: the repository's API document matches what the service does,
# code for code.  The codes are read from reviewd's sources
# (services/reviewd/**/*.[ch], comments removed, calls joined across
# lines), in every form they are written in:
#   - a call of an emitter with a literal status and code:
#     rv_reply_error(reply, STATUS, "CODE", ...) anywhere,
#     refuse(c, STATUS, "CODE", ...) in http/rv_http.c,
#     fail(e, STATUS, "CODE", ...) in http/rv_hparse.c;
#   - a literal code assigned beside a literal status (X->status = N;
#     X->code = "CODE");
#   - a constant JSON body holding "code":"CODE" (its status is the one
#     assigned with that code in the same file).
# An error body made any other way (svc_json_error_body() called outside
# rv_reply_error(), a "code" key written by hand) fails too.
# A status or code that is not a literal (a variable, a table, a struct
# field) is accepted only where it is listed below as the pass-through of
# another emitter whose literals are read; any other is a failure, so a
# code cannot be emitted in a way this test does not see.  And a literal
# equal to a documented or emitted code anywhere else (outside those
# forms and outside a strcmp) fails too: a table of codes is noticed even
# before it is wired to an emitter.
#
# It fails listing every code emitted but not documented, documented but
# never emitted, emitted with a status the table does not give it,
# missing from (or extra in) openapi.yaml's Error.code enum, or carried
# by one of openapi.yaml's responses at a status the table does not give
# it.  DLOCK_DEBUG=1 prints every finding read from the sources.
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 SOURCE_DIR" >&2
    exit 2
fi
root=$1
src=$root/services/reviewd
api=$root/docs/api.md
oas=$root/docs/openapi.yaml
for f in "$src" "$api" "$oas"; do
    if [ ! -e "$f" ]; then
        echo "FAIL: $f is missing" >&2
        exit 1
    fi
done

# The pass-throughs: "FILE|CALL-OR-ASSIGNMENT" (as written, whitespace
# collapsed) whose status and code come from another emitter's literals.
passthrough='
http/rv_http.c|rv_reply_error(&c->h->reply, status, code, detail)
http/rv_http.c|rv_reply_error(&c->h->reply, c->body.err.status, c->body.err.code, c->body.err.detail)
http/rv_http.c|refuse(c, c->head.err.status, c->head.err.code, c->head.err.detail)
api/rv_reply.c|reply->code = code
api/rv_reply.c|svc_json_error_body(code, detail)
http/rv_hparse.c|e->code = code
'
# rv_http.c's refuse() passes its own parameters on (refuse is an
# emitter); c->head.err and c->body.err are rv_hp_errors, set only by
# rv_hparse.c's fail() (an emitter); rv_reply_error() and fail() store
# their own parameter.

# One line per finding, from every source file:
#   EMIT CODE STATUS FILE    a code written with its status
#   LIT CODE FILE            a code-like literal outside the forms above
#   BAD FILE TEXT            a form whose code or status cannot be read
# shellcheck disable=SC2016
scan='
function flush() {
    if (fname != "")
        scan(fname, text)
    text = ""
}
# clean(LINE): LINE without its comments (state kept across lines).
function clean(s,    out, i, n, c) {
    out = ""
    n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (st == 0) {
            if (substr(s, i, 2) == "/*") { st = 3; i++; out = out " "; continue }
            if (substr(s, i, 2) == "//") break
            if (c == "\"") st = 1
            else if (c == "\047") st = 2
            out = out c
        } else if (st == 1 || st == 2) {
            out = out c
            if (c == "\\") { i++; out = out substr(s, i, 1); continue }
            if ((st == 1 && c == "\"") || (st == 2 && c == "\047")) st = 0
        } else if (substr(s, i, 2) == "*/") { st = 0; i++ }
    }
    return out
}
# args(T, I): splits the arguments of the call whose "(" is at T[I] into
# A[1..n], returns n (0 if unbalanced); CEND is set past the ")".
function args(t, i,    n, depth, c, cur, s, len) {
    n = 0; depth = 0; cur = ""; s = 0; len = length(t)
    for (; i <= len; i++) {
        c = substr(t, i, 1)
        if (s) {
            cur = cur c
            if (c == "\\") { i++; cur = cur substr(t, i, 1); continue }
            if (c == "\"") s = 0
            continue
        }
        if (c == "\"") { s = 1; cur = cur c; continue }
        if (c == "(") { if (depth++ == 0) continue }
        if (c == ")") {
            if (--depth == 0) { A[++n] = trim(cur); CEND = i + 1; return n }
        }
        if (c == "," && depth == 1) { A[++n] = trim(cur); cur = ""; continue }
        cur = cur c
    }
    return 0
}
function trim(s) { gsub(/^ +| +$/, "", s); return s }
function is_code(s) { return s ~ /^"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*"$/ }
function unq(s) { return substr(s, 2, length(s) - 2) }
function scan(f, t,    rel, pos, m, name, n, call, decl, i, rest, before,
              after, st2, code, key, lit) {
    rel = f; sub(/^.*services\/reviewd\//, "", rel)
    gsub(/[ \t\n]+/, " ", t)
    gsub(/\( /, "(", t); gsub(/ \)/, ")", t)
    # Calls of the emitters.
    rest = t; pos = 0
    while (match(rest, /(^|[^A-Za-z0-9_])(rv_reply_error|refuse|fail|svc_json_error_body) ?\(/)) {
        m = substr(rest, RSTART, RLENGTH)
        name = m; sub(/^[^A-Za-z_]/, "", name); sub(/ ?\($/, "", name)
        i = pos + RSTART + RLENGTH - 1
        pos = i; rest = substr(t, pos + 1)
        if (name == "refuse" && rel != "http/rv_http.c") continue
        if (name == "fail" && rel != "http/rv_hparse.c") continue
        n = args(t, i)
        if (n == 0) { print "BAD", rel, name "(... unbalanced"; continue }
        call = name substr(t, i, CEND - i)
        # A declaration or definition, not a call: its first parameter
        # is a type and a name.
        if (A[1] ~ /^[A-Za-z_][A-Za-z0-9_]* ?\*+ ?[A-Za-z_][A-Za-z0-9_]*$/ ||
            A[1] ~ /^(const |struct |unsigned )?[A-Za-z_][A-Za-z0-9_]* [A-Za-z_][A-Za-z0-9_]*$/)
            continue
        if (name != "svc_json_error_body" && n >= 3 &&
            A[2] ~ /^[0-9][0-9][0-9]$/ && is_code(A[3])) {
            print "EMIT", unq(A[3]), A[2], rel
            continue
        }
        if ((rel "|" call) in pass) { npass[rel "|" call]++; continue }
        print "BAD", rel, call
    }
    # Assignments of a code.
    rest = t; pos = 0
    while (match(rest, /(->|\.)code = [^;]*;/)) {
        m = substr(rest, RSTART, RLENGTH - 1)
        i = pos + RSTART
        pos = pos + RSTART + RLENGTH - 1; rest = substr(t, pos + 1)
        code = m; sub(/^(->|\.)code = /, "", code)
        before = substr(t, 1, i - 1); sub(/.*[;{}] /, "", before)
        key = before m
        if (is_code(code)) {
            # Its status: a literal assigned in the statement just
            # before or after.
            st2 = ""
            before = substr(t, i > 120 ? i - 120 : 1, i > 120 ? 120 : i - 1)
            after = substr(t, i, 160)
            if (match(before, /status = [0-9][0-9][0-9];[^;]*;? ?$/))
                st2 = substr(before, RSTART + 9, 3)
            else if (match(after, /^(->|\.)code = "[A-Z0-9_]+"; [^;]*(->|\.)status = [0-9][0-9][0-9];/))
                st2 = substr(after, RSTART + RLENGTH - 4, 3)
            if (st2 == "") { print "BAD", rel, key " (no status beside it)"; continue }
            print "EMIT", unq(code), st2, rel
            assigned[rel SUBSEP unq(code)] = st2
            continue
        }
        if ((rel "|" key) in pass) { npass[rel "|" key]++; continue }
        # A comparison or a read is not an assignment.
        if (m ~ /^(->|\.)code == /) continue
        print "BAD", rel, key
    }
    # Constant bodies, and every code-like literal.
    rest = t; pos = 0
    while (match(rest, /"([^"\\]|\\.)*"/)) {
        lit = substr(rest, RSTART, RLENGTH)
        i = pos + RSTART
        pos = pos + RSTART + RLENGTH - 1; rest = substr(t, pos + 1)
        if (match(lit, /\\"code\\": ?\\"[A-Z0-9_]+\\"/)) {
            code = substr(lit, RSTART, RLENGTH)
            sub(/^\\"code\\": ?\\"/, "", code); sub(/\\"$/, "", code)
            bodies[rel SUBSEP code] = 1
            continue
        }
        if (lit == "\"code\"") {
            print "BAD", rel, "a \"code\" key: an error body built by hand"
            continue
        }
        if (!is_code(lit)) continue
        before = substr(t, i > 60 ? i - 60 : 1, i > 60 ? 60 : i - 1)
        print "LIT", unq(lit), rel, (before ~ /strn?cmp\([^()]*, ?$/ ? "cmp" : \
            (before ~ /(rv_reply_error|refuse|fail)\([^()]*, [0-9][0-9][0-9], $/ ? "emit" : \
             (before ~ /code = $/ ? "emit" : "other")))
    }
}
BEGIN {
    st = 0
    n = split(PASS, p, "\n")
    for (i = 1; i <= n; i++)
        if (p[i] != "") pass[p[i]] = 1
}
FNR == 1 { flush(); fname = FILENAME; st = 0 }
{ text = text " " clean($0) }
END {
    flush()
    for (k in bodies) {
        split(k, kv, SUBSEP)
        if (k in assigned) print "EMIT", kv[2], assigned[k], kv[1]
        else print "BAD", kv[1], "a constant body with \"code\":\"" kv[2] \
            "\" and no status assigned with it"
    }
    for (k in pass)
        if (!(k in npass)) print "STALE", k
}
'

found=$(find "$src" -name '*.[ch]' | LC_ALL=C sort |
        xargs awk -v PASS="$passthrough" "$scan") || {
    echo "FAIL: could not read the sources under $src" >&2
    exit 1
}
failed=0
# DLOCK_DEBUG=1 shows every finding.
[ -z "${DLOCK_DEBUG:-}" ] || printf '%s\n' "$found" >&2

bad=$(printf '%s\n' "$found" | sed -n 's/^BAD //p')
if [ -n "$bad" ]; then
    echo "FAIL: codes written in a form this test cannot read (add the" \
         "form to its emitters or pass-throughs, with where the code" \
         "comes from):" >&2
    printf '%s\n' "$bad" | sed 's/^/  /' >&2
    failed=1
fi
stale=$(printf '%s\n' "$found" | sed -n 's/^STALE //p')
if [ -n "$stale" ]; then
    echo "FAIL: pass-throughs listed in $0 that the sources no longer" \
         "hold (update the list):" >&2
    printf '%s\n' "$stale" | sed 's/^/  /' >&2
    failed=1
fi

# CODE STATUS pairs the sources emit.
emitted=$(printf '%s\n' "$found" | awk '$1 == "EMIT" { print $2, $3 }' |
          LC_ALL=C sort -u)
if [ "$(printf '%s\n' "$emitted" | grep -c .)" -lt 10 ]; then
    echo "FAIL: found only these codes in $src, the extraction is" \
         "broken:" >&2
    printf '%s\n' "$emitted" | sed 's/^/  /' >&2
    exit 1
fi

# CODE STATUS rows of docs/api.md's "### Error codes" table; a row of the
# table in any other shape is a failure, not skipped.
table=$(awk '
    /^#+ / { on = ($0 ~ /^### Error codes/) ; next }
    !on || !/^\|/ { next }
    /^\| *code *\| *status *\|/ || /^\|[-| :]*$/ { next }
    match($0, /^\| `[A-Z0-9_]+` \| [0-9][0-9][0-9] \|/) {
        row = substr($0, 4, RLENGTH - 3)
        sub(/` \| /, " ", row); sub(/ \|$/, "", row)
        print row; next
    }
    { print "UNREAD " $0 }
' "$api")
unread=$(printf '%s\n' "$table" | sed -n 's/^UNREAD //p')
if [ -n "$unread" ]; then
    echo "FAIL: rows of docs/api.md's error table not in the form" \
         "| \`CODE\` | STATUS | ...:" >&2
    printf '%s\n' "$unread" | sed 's/^/  /' >&2
    failed=1
fi
documented=$(printf '%s\n' "$table" | grep -v '^UNREAD ' | LC_ALL=C sort -u)
if [ "$(printf '%s\n' "$documented" | grep -c .)" -lt 10 ]; then
    echo "FAIL: no error table read from $api" >&2
    exit 1
fi
dups=$(printf '%s\n' "$documented" | awk '{ print $1 }' | uniq -d)
if [ -n "$dups" ]; then
    echo "FAIL: docs/api.md gives these codes more than one status:" \
         "$dups" >&2
    failed=1
fi

# Literals equal to a code, outside the emitters, the pass-throughs and a
# comparison.
codes=$( (printf '%s\n' "$emitted"; printf '%s\n' "$documented") |
        awk '{ print $1 }' | LC_ALL=C sort -u)
stray=$(printf '%s\n' "$found" |
        awk -v CODES="$codes" '
            BEGIN { n = split(CODES, c, "\n"); for (i = 1; i <= n; i++) k[c[i]] = 1 }
            $1 == "LIT" && ($2 in k) && $4 == "other" { print $2, "in", $3 }')
if [ -n "$stray" ]; then
    echo "FAIL: error codes written outside any form this test reads" \
         "(a table or variable: add its form to the test):" >&2
    printf '%s\n' "$stray" | sed 's/^/  /' >&2
    failed=1
fi

# compare A-NAME A B-NAME B: the CODE STATUS pairs of A and B agree.
compare() {
    local an=$1 a=$2 bn=$3 b=$4 code status other
    while read -r code status; do
        [ -n "$code" ] || continue
        other=$(printf '%s\n' "$b" | awk -v c="$code" '$1 == c { print $2 }' |
                tr '\n' ' ')
        if [ -z "$other" ]; then
            echo "FAIL: $code${status:+ ($status)} is $an but not $bn" >&2
            failed=1
        elif [ -n "$status" ] && ! printf ' %s' "$other" | grep -q " $status "; then
            echo "FAIL: $code is $status $an but ${other% } $bn" >&2
            failed=1
        fi
    done <<<"$a"
}
compare "emitted by reviewd" "$emitted" "in docs/api.md's table" "$documented"
compare "in docs/api.md's table" "$documented" "emitted by reviewd" "$emitted"

# docs/openapi.yaml: the Error schema's code enum, the same set.
enum=$(awk '
    /^    Error:/ { inerr = 1; next }
    inerr && /^    [A-Za-z]/ { inerr = 0 }
    inerr && /^        code:/ { incode = 1; next }
    incode { buf = buf " " $0; if ($0 ~ /\]/) { print buf; exit } }
' "$oas" | sed 's/.*enum: *\[//; s/\].*//' | tr ',' '\n' |
        sed 's/[" ]//g' | grep . | LC_ALL=C sort)
if [ "$(printf '%s\n' "$enum" | grep -c .)" -lt 10 ]; then
    echo "FAIL: no Error.code enum read from $oas" >&2
    failed=1
else
    dups=$(printf '%s\n' "$enum" | uniq -d)
    [ -z "$dups" ] || { echo "FAIL: openapi.yaml's enum repeats $dups" >&2
                        failed=1; }
    compare "emitted by reviewd" "$(printf '%s\n' "$emitted" |
        awk '{ print $1 }' | sort -u)" "in openapi.yaml's Error.code enum" \
        "$enum"
    compare "in openapi.yaml's Error.code enum" "$enum" \
        "emitted by reviewd" "$emitted"
fi

# docs/openapi.yaml: each response of components/responses whose body's
# code is a const or an enum, at each status an operation lists it under:
# every such code at that status is one docs/api.md gives it.  Two
# responses are listed under no operation: tools/openapi-check/check.mjs
# applies them by name to the answers it wants at these statuses.
by_name='
REF MethodNotAllowed 405
REF UnknownPath 404
'
pairs=$( (printf '%s\n' "$by_name" | grep .; awk '
    /^components:/ { comp = 1; next }
    /^[A-Za-z]/ { comp = 0 }
    comp && /^  [A-Za-z]/ { inresp = ($0 ~ /^  responses:/); next }
    inresp && /^    [A-Za-z][A-Za-z0-9_]*:/ {
        name = $1; sub(/:$/, "", name); next
    }
    inresp && /code:/ {
        s = $0
        if (s !~ /code: \{(const|enum): [^{}]*\}/) { print "UNREAD", name, s; next }
        sub(/.*code: \{(const|enum): */, "", s); sub(/\}.*/, "", s)
        gsub(/[][ ]/, "", s)
        n = split(s, a, ",")
        for (i = 1; i <= n; i++) if (a[i] != "") print "CODE", name, a[i]
        next
    }
    {
        s = $0
        while (match(s, /["\047][0-9][0-9][0-9]["\047]: \{\$ref: "#\/components\/responses\/[A-Za-z0-9_]+"/)) {
            m = substr(s, RSTART, RLENGTH)
            st = substr(m, 2, 3); sub(/.*\//, "", m); sub(/"$/, "", m)
            print "REF", m, st
            s = substr(s, RSTART + RLENGTH)
        }
    }
' "$oas") | awk '
    $1 == "UNREAD" { print; next }
    $1 == "CODE" { codes[$2] = codes[$2] " " $3; next }
    $1 == "REF" { refs[$2 " " $3] = 1 }
    END {
        for (k in refs) {
            split(k, ks, " ")
            if (!(ks[1] in codes)) continue
            seen[ks[1]] = 1
            n = split(codes[ks[1]], c, " ")
            for (i = 1; i <= n; i++) print "PAIR", c[i], ks[2], ks[1]
        }
        for (r in codes) if (!(r in seen)) print "UNUSED", r
    }' | LC_ALL=C sort -u)
unread=$(printf '%s\n' "$pairs" | sed -n 's/^UNREAD //p')
if [ -n "$unread" ]; then
    echo "FAIL: openapi.yaml response codes not in the form" \
         "code: {const: X} or code: {enum: [X, ...]} on one line:" >&2
    printf '%s\n' "$unread" | sed 's/^/  /' >&2
    failed=1
fi
unused=$(printf '%s\n' "$pairs" | sed -n 's/^UNUSED //p')
if [ -n "$unused" ]; then
    echo "FAIL: openapi.yaml responses with a code that no operation" \
         "lists under a status:" >&2
    printf '%s\n' "$unused" | sed 's/^/  /' >&2
    failed=1
fi
if [ "$(printf '%s\n' "$pairs" | grep -c '^PAIR ')" -lt 10 ]; then
    echo "FAIL: no response codes read from $oas" >&2
    failed=1
fi
while read -r _ code status response; do
    [ -n "$code" ] || continue
    if ! printf '%s\n' "$documented" | grep -qx "$code $status"; then
        echo "FAIL: openapi.yaml's $response answers $code with $status," \
             "docs/api.md's table does not" >&2
        failed=1
    fi
done < <(printf '%s\n' "$pairs" | grep '^PAIR ')

if [ $failed = 0 ]; then
    echo "ok: $(printf '%s\n' "$emitted" | grep -c .) codes emitted by" \
         "reviewd, each in docs/api.md's table with its status and in" \
         "openapi.yaml's enum, and nothing more; openapi.yaml's" \
         "responses give each code its status"
fi
exit $failed
