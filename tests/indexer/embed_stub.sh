#!/usr/bin/env bash
# tests/indexer/embed_stub.sh: the EMBED_COMMAND of the tests, a stand-in
# for an embedding model that is deterministic and checkable from outside.
#
# It reads the chunk's text on stdin and prints an 8-dimensional vector
# made of the first 8 bytes of the text's SHA-256: component i is
# byte_i / 256, printed as "[0.1015625, 0.99609375, ...]".  A test
# computes the same from the stored chunk text and compares, so a vector
# stored with the wrong chunk, or not stored, is seen.
#
# For the failure paths kh_embed.h documents, EMBED_STUB_MODE chooses:
#   (unset)  the vector;
#   fail     a message on stderr and exit status 3;
#   garbage  "not a vector" on stdout, exit 0;
#   empty    nothing at all, exit 0;
#   slow     runs "sleep 30" as its child and waits for it (the caller's
#            timeout must kill both).
# And to fail one chunk of a document for as long as a test wants: while
# the file EMBED_STUB_FAIL_FILE names exists, a text containing
# EMBED-FAIL fails as "fail" does.
set -euo pipefail

mode=${EMBED_STUB_MODE:-}
text=$(cat; printf x)   # keep trailing newlines; the x goes below
text=${text%x}

fail() {
    printf 'embed_stub: refusing this chunk (%s)\n' "$1" >&2
    exit 3
}

case $mode in
fail) fail "EMBED_STUB_MODE=fail" ;;
garbage) printf 'not a vector\n'; exit 0 ;;
empty) exit 0 ;;
slow)
    # A child of the script, as a real model's helper would be: the
    # caller must kill it too.  Its pid goes to EMBED_STUB_PID_FILE.
    sleep 30 &
    printf '%s\n' "$!" >"${EMBED_STUB_PID_FILE:-/dev/null}"
    wait
    ;;
'') ;;
*) printf 'embed_stub: unknown EMBED_STUB_MODE %s\n' "$mode" >&2; exit 2 ;;
esac
if [[ -n ${EMBED_STUB_FAIL_FILE:-} && -e $EMBED_STUB_FAIL_FILE &&
      $text == *EMBED-FAIL* ]]; then
    fail "the text holds EMBED-FAIL and $EMBED_STUB_FAIL_FILE exists"
fi

hex=$(printf '%s' "$text" | sha256sum | cut -c1-16)
bytes=
for ((i = 0; i < 16; i += 2)); do
    bytes+=" $((16#${hex:i:2}))"
done
awk -v bytes="$bytes" 'BEGIN {
    n = split(bytes, b, " ")
    printf "["
    for (i = 1; i <= n; i++) printf "%s%.8g", (i > 1 ? ", " : ""), b[i] / 256
    printf "]\n"
}'
