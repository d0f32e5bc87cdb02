#!/bin/sh
# run_example.sh EXAMPLE [ARGS...]: runs one of the examples as a test.
#
# The examples need a Redis: $DLOCK_TEST_REDIS_URL (set by scripts/test),
# else the shared stack's.  If it does not answer, this starts it with
# "$DLOCK_SOURCE_DIR/scripts/stack up redis" (as every test that finds no
# server does), then runs the example, whose exit status is the verdict.
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
src=${DLOCK_SOURCE_DIR:-$(dirname "$here")}
url=${DLOCK_TEST_REDIS_URL:-redis://127.0.0.1:16379/0}
if ! redis-cli -u "$url" ping >/dev/null 2>&1; then
    "$src/scripts/stack" up redis >/dev/null
fi
export DLOCK_TEST_REDIS_URL="$url"
exec "$@"
