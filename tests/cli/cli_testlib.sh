# tests/cli/cli_testlib.sh: what every shell test of the dlock tool shares.
# Sourced by tests/cli/test_*.sh, which CTest runs as
#   bash test_<behaviour>.sh /path/to/dlock
#
# - DLOCK is the binary under test; REDIS_URL is the shared stack's Redis
#   (DLOCK_TEST_REDIS_URL, or the scripts/stack default), exported so that
#   dlock finds it the way a user's shell would.  If it does not answer,
#   scripts/stack up redis is run once.
# - Keys are unique to the test and the process, "cli:<test>:<pid>:<n>",
#   because every test shares that one Redis; they and their fence keys
#   (for a role, its leader keys: new_role) are deleted at exit.  Nothing
#   here flushes or reconfigures the server.
# - WORK is a private scratch folder under var/test/, removed at exit.
# - Background processes are started with spawn_bg and killed at exit by
#   their pid, never by name.
# - Waiting is always for a condition, with a bound (wait_for); every
#   dlock invocation runs under timeout(1), so a hang fails the test.
# - A failed expectation prints what should have happened and exits 1.
set -u

DLOCK=${1:?usage: $0 /path/to/dlock}
TEST_NAME=$(basename "$0" .sh)
SOURCE_DIR=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd -P)}
export REDIS_URL=${DLOCK_TEST_REDIS_URL:-redis://127.0.0.1:16379/0}
# The longest any single dlock call may take before the test fails.
CALL_LIMIT=${CALL_LIMIT:-30}
# What a test multiplies the times it races against by: the harness's
# RVT_TIMEOUT_SCALE, which scripts/chaos --leaks sets to 10 for every test
# since dlock under valgrind memcheck is 20-50x slower, else 1.
TIME_SCALE=${RVT_TIMEOUT_SCALE:-1}

WORK=$SOURCE_DIR/var/test/$TEST_NAME-$$
KEYS_USED=()
BG_PIDS=()
KEY_SEQ=0

fail() {
    printf '%s: FAILED: %s\n' "$TEST_NAME" "$*" >&2
    exit 1
}

note() {
    printf '%s: %s\n' "$TEST_NAME" "$*"
}

rcli() {
    redis-cli -u "$REDIS_URL" "$@"
}

cleanup() {
    local pid key
    for pid in "${BG_PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null
    done
    for key in "${KEYS_USED[@]}"; do
        rcli DEL "$key" "#dlock:fence:{$key}" "{$key}:fence" >/dev/null 2>&1
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

ensure_redis() {
    if rcli PING 2>/dev/null | grep -q PONG; then
        return 0
    fi
    "$SOURCE_DIR/scripts/stack" up redis >/dev/null ||
        fail "no Redis at $REDIS_URL and scripts/stack up redis failed"
    rcli PING 2>/dev/null | grep -q PONG ||
        fail "Redis at $REDIS_URL does not answer PING"
}

# new_key VAR: stores in VAR a key unique to this test and process, and
# records it for cleanup.  (Not $(new_key): a subshell would lose both.)
new_key() {
    KEY_SEQ=$((KEY_SEQ + 1))
    local made="cli:$TEST_NAME:$$:$KEY_SEQ"
    KEYS_USED+=("$made")
    printf -v "$1" '%s' "$made"
}

# new_role VAR: as new_key, for `dlock leader` and `run --every`: also
# records the role's keys ({leader:KEY}, its :term and :tick) for cleanup.
new_role() {
    new_key "$1"
    local made=${!1}
    KEYS_USED+=("{leader:$made}" "{leader:$made}:term" "{leader:$made}:tick")
}

# leader_of KEY: the id ("host:pid") of the node leading KEY, or nothing.
leader_of() {
    rcli HGET "{leader:$1}" id 2>/dev/null
}

# dl ARGS...: runs dlock under the time limit.
dl() {
    timeout -k 5 "$CALL_LIMIT" "$DLOCK" "$@"
}

# spawn_bg VAR COMMAND...: starts COMMAND in the background, records its pid
# for cleanup and stores it in VAR.
spawn_bg() {
    local var=$1
    shift
    "$@" &
    BG_PIDS+=($!)
    printf -v "$var" '%s' "$!"
}

# wait_for SECONDS COMMAND...: polls COMMAND every 20 ms until it succeeds;
# fails the test with the command's text when SECONDS pass first.
wait_for() {
    local limit=$1
    shift
    local deadline=$(($(date +%s%N) + limit * 1000000000))
    until "$@"; do
        if [ "$(date +%s%N)" -ge "$deadline" ]; then
            fail "waited ${limit}s for: $*"
        fi
        sleep 0.02
    done
}

# wait_exit PID SECONDS: waits for a background child to end, at most
# SECONDS; stores its status in EXIT_STATUS.
wait_exit() {
    local pid=$1 limit=$2
    wait_for "$limit" not_running "$pid"
    wait "$pid" 2>/dev/null
    EXIT_STATUS=$?
    forget_bg "$pid"
}

# forget_bg PID: a reaped child is no longer ours to kill at exit (its pid
# may be reused).
forget_bg() {
    local keep=() p
    for p in "${BG_PIDS[@]}"; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    BG_PIDS=("${keep[@]}")
}

not_running() {
    ! kill -0 "$1" 2>/dev/null ||
        # A zombie still answers kill -0; it has ended all the same.
        [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = Z ]
}

is_held() {
    dl status "$1" 2>/dev/null | grep -qx 'held: yes'
}

is_free() {
    dl status "$1" 2>/dev/null | grep -qx 'held: no'
}

file_exists() {
    [ -s "$1" ]
}

# has_lines FILE N: FILE exists and holds exactly N lines.
has_lines() {
    [ -s "$1" ] && [ "$(wc -l <"$1")" -eq "$2" ]
}

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# expect_status WANT GOT WHAT
expect_status() {
    [ "$2" -eq "$1" ] || fail "$3: expected exit $1, got $2"
}

[ -x "$DLOCK" ] || fail "no dlock binary at $DLOCK"
command -v redis-cli >/dev/null || fail "redis-cli is not installed"
mkdir -p "$WORK"
# A test that never talks to Redis sets CLI_TEST_NO_REDIS=1 first.
[ "${CLI_TEST_NO_REDIS:-0}" = 1 ] || ensure_redis
