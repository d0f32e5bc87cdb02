#!/usr/bin/env bash
# tests/indexer/rabbit_private.sh: a private RabbitMQ node for the event
# tests that stop, kill and restart the broker (never the shared stack's).
#
#   rabbit_private.sh start DIR AMQP_PORT DIST_PORT EPMD_PORT
#   rabbit_private.sh stop  DIR     graceful stop (the node, even one still
#                                   booting, and its epmd)
#   rabbit_private.sh kill  DIR     SIGKILL the node (epmd stays)
#
# With RABBIT_TLS_PORT and RABBIT_TLS_DIR set at start, the node also
# listens for AMQP over TLS on 127.0.0.1:RABBIT_TLS_PORT with
# RABBIT_TLS_DIR/{ca,server}.pem and server.key (tls_certs.sh makes
# them).
#
# Modelled on scripts/stack's RabbitMQ code, and for the same reasons:
# Debian's rabbitmq-server wrapper switches user and HOME as root, so the
# scripts in /usr/lib/rabbitmq/bin are called directly with a full
# environment of our own: node name rvt<AMQP_PORT>@localhost, its own epmd
# on EPMD_PORT, Erlang distribution on DIST_PORT, all on 127.0.0.1, and
# cookie, config, mnesia and logs under DIR.  The user dlock/dlock comes
# from a definitions file imported at boot, as in scripts/stack, so no CLI
# call (1-2 s each) is needed.  Mnesia survives stop and kill, so durable
# queues and persistent messages survive a restart, as in production.
#
# Processes are signalled only through the pid files written here (the
# node writes its own), and only after /proc says they are ours, so a
# recycled pid is never hit.  Every wait is bounded.  Exit status 0 on
# success, 1 with the log's tail on stderr otherwise.
set -euo pipefail

readonly RABBIT_BIN=/usr/lib/rabbitmq/bin

die() {
    printf 'rabbit_private: %s\n' "$*" >&2
    exit 1
}

# pid_is PID NAME: alive, not a zombie, and named NAME.
pid_is() {
    local stat comm state
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    { read -r stat <"/proc/$1/stat" && read -r comm <"/proc/$1/comm"; } \
        2>/dev/null || return 1
    state=${stat##*) }
    state=${state%% *}
    [[ $state != Z && $state != X && $comm == "$2" ]]
}

pidfile_pid() {
    local pid=
    [[ -r $1 ]] && read -r pid <"$1" || true
    if [[ -n $pid ]] && pid_is "$pid" "$2"; then
        printf '%s\n' "$pid"
    fi
}

port_open() {
    # shellcheck disable=SC2016
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null
}

wait_gone() { # PID NAME SECS
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        pid_is "$1" "$2" || return 0
        sleep 0.1
    done
    return 1
}

setup_env() { # DIR AMQP DIST EPMD
    DIR=$1
    NODE=rvt$2@localhost
    EPMD_PORT=$4
    ENVV=(
        HOME="$DIR"
        RABBITMQ_NODENAME="$NODE"
        RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
        RABBITMQ_NODE_PORT="$2"
        RABBITMQ_DIST_PORT="$3"
        ERL_EPMD_PORT="$4"
        ERL_EPMD_ADDRESS=127.0.0.1
        RABBITMQ_MNESIA_BASE="$DIR/mnesia"
        RABBITMQ_LOG_BASE="$DIR/log"
        RABBITMQ_PID_FILE="$DIR/rabbitmq.pid"
        RABBITMQ_CONFIG_FILE="$DIR/rabbitmq.conf"
        RABBITMQ_ADVANCED_CONFIG_FILE="$DIR/advanced.config"
        RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins"
        RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf"
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -start_epmd false"
        ERL_CRASH_DUMP="$DIR/erl_crash.dump"
    )
}

# The same password hash scheme as scripts/stack (salted SHA-256).
password_hash() {
    local salt='\x9a\x2b\x3c\x4d'
    { printf '%b' "$salt"; printf 'dlock'; } | openssl dgst -sha256 -binary |
        { printf '%b' "$salt"; cat; } | base64
}

write_files() {
    mkdir -p "$DIR/mnesia" "$DIR/log"
    if [[ ! -s $DIR/.erlang.cookie ]]; then
        (umask 077 && od -An -N20 -tx1 /dev/urandom | tr -d ' \n' |
            tr a-f A-F >"$DIR/.erlang.cookie")
        chmod 400 "$DIR/.erlang.cookie"
    fi
    cat >"$DIR/definitions.json" <<EOF
{"users": [{"name": "dlock", "tags": ["administrator"], "limits": {},
            "hashing_algorithm": "rabbit_password_hashing_sha256",
            "password_hash": "$(password_hash)"}],
 "vhosts": [{"name": "/"}],
 "permissions": [{"user": "dlock", "vhost": "/", "configure": ".*",
                  "write": ".*", "read": ".*"}]}
EOF
    cat >"$DIR/rabbitmq.conf" <<EOF
log.console = false
log.file.level = warning
load_definitions = $DIR/definitions.json
EOF
    if [[ -n ${RABBIT_TLS_PORT:-} && -n ${RABBIT_TLS_DIR:-} ]]; then
        cat >>"$DIR/rabbitmq.conf" <<EOF
listeners.ssl.1 = 127.0.0.1:$RABBIT_TLS_PORT
ssl_options.cacertfile = $RABBIT_TLS_DIR/ca.pem
ssl_options.certfile = $RABBIT_TLS_DIR/server.pem
ssl_options.keyfile = $RABBIT_TLS_DIR/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
EOF
    fi
    printf '[].\n' >"$DIR/enabled_plugins"
    : >"$DIR/rabbitmq-env.conf"
}

start_epmd() {
    [[ -n $(pidfile_pid "$DIR/epmd.pid" epmd) ]] && return 0
    ERL_EPMD_ADDRESS=127.0.0.1 setsid nohup epmd -port "$EPMD_PORT" \
        -address 127.0.0.1 </dev/null >>"$DIR/epmd.log" 2>&1 &
    printf '%s\n' "$!" >"$DIR/epmd.pid"
    local i
    for ((i = 0; i < 50; i++)); do
        epmd -port "$EPMD_PORT" -names >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "epmd did not start on 127.0.0.1:$EPMD_PORT"
}

cmd_start() {
    local amqp=$2 i
    setup_env "$@"
    [[ -x $RABBIT_BIN/rabbitmq-server ]] || die "$RABBIT_BIN/rabbitmq-server is missing"
    if [[ -n $(pidfile_pid "$DIR/rabbitmq.pid" beam.smp) ]]; then
        return 0
    fi
    write_files
    start_epmd
    rm -f "$DIR/rabbitmq.pid"
    (cd "$DIR" && exec env "${ENVV[@]}" setsid nohup \
        "$RABBIT_BIN/rabbitmq-server" </dev/null >"$DIR/startup.log" 2>&1) &
    printf '%s\n' "$!" >"$DIR/launch.pid"
    for ((i = 0; i < 600; i++)); do
        if [[ -s $DIR/rabbitmq.pid ]] && port_open "$amqp"; then
            return 0
        fi
        sleep 0.1
    done
    tail -n 20 "$DIR/startup.log" "$DIR"/log/*.log >&2 2>/dev/null || true
    die "rabbitmq did not start on 127.0.0.1:$amqp within 60 s"
}

# launched PID: the process cmd_start launched (rabbitmq-server, which
# may have become beam.smp) is still there.
launched() {
    pid_is "$1" rabbitmq-server || pid_is "$1" beam.smp
}

cmd_stop() {
    local pid launch= i
    DIR=$1
    # A node still booting (a start that gave up waiting, or was killed
    # with the test) has not written rabbitmq.pid yet: wait for it, so it
    # is stopped by its pid rather than left to finish booting alone.
    [[ -r $DIR/launch.pid ]] && read -r launch <"$DIR/launch.pid" || true
    for ((i = 0; i < 600; i++)); do
        [[ -z $(pidfile_pid "$DIR/rabbitmq.pid" beam.smp) ]] || break
        launched "$launch" || break
        sleep 0.1
    done
    pid=$(pidfile_pid "$DIR/rabbitmq.pid" beam.smp)
    if [[ -n $pid ]]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone "$pid" beam.smp 30 || { kill -KILL "$pid"; wait_gone "$pid" beam.smp 5; }
    fi
    rm -f "$DIR/rabbitmq.pid"
    # A launch that never wrote its pid file goes by the launched pid.
    if launched "$launch"; then
        kill -TERM "$launch" 2>/dev/null || true
        for ((i = 0; i < 300; i++)); do
            launched "$launch" || break
            sleep 0.1
        done
        ! launched "$launch" || kill -KILL "$launch" 2>/dev/null || true
    fi
    rm -f "$DIR/launch.pid"
    pid=$(pidfile_pid "$DIR/epmd.pid" epmd)
    if [[ -n $pid ]]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone "$pid" epmd 5 || true
    fi
    rm -f "$DIR/epmd.pid"
}

cmd_kill() {
    local pid
    DIR=$1
    pid=$(pidfile_pid "$DIR/rabbitmq.pid" beam.smp)
    [[ -n $pid ]] || die "no running node in $DIR"
    kill -KILL "$pid"
    wait_gone "$pid" beam.smp 10 || die "pid $pid survived SIGKILL"
    rm -f "$DIR/rabbitmq.pid"
}

case ${1:-} in
start) shift; [[ $# -eq 4 ]] || die "usage: start DIR AMQP DIST EPMD"; cmd_start "$@" ;;
stop) shift; [[ $# -eq 1 ]] || die "usage: stop DIR"; cmd_stop "$@" ;;
kill) shift; [[ $# -eq 1 ]] || die "usage: kill DIR"; cmd_kill "$@" ;;
*) die "usage: rabbit_private.sh start|stop|kill DIR ..." ;;
esac
