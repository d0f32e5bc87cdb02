#!/usr/bin/env bash
# tests/chaos/pg_private.sh: a private PostgreSQL 15 cluster for the
# reviewd checker (chaos_reviewd), which restarts it on purpose; the
# shared stack's server is never touched.
#
#   pg_private.sh init    DIR PORT [TEMPLATE]
#                                    make DIR/data and write its config
#   pg_private.sh start   DIR        start it and wait until it answers
#   pg_private.sh restart DIR MODE   pg_ctl restart -m fast|immediate
#   pg_private.sh stop    DIR        pg_ctl stop -m fast (SIGQUIT after 10 s)
#
# init runs initdb into TEMPLATE (a folder in the build tree) when it
# holds no cluster yet, and then copies it to DIR/data: initdb costs
# 10-30 s on this shared machine, a copy well under a second, and every
# copy starts as the same empty cluster.  Without TEMPLATE it runs initdb
# into DIR/data directly.
#
# Modelled on scripts/stack's PostgreSQL code, for the same reasons:
# PostgreSQL refuses to run as root, so as root every server command runs
# as the postgres OS user (which must be able to enter DIR, hence mode
# 755).  The cluster listens on 127.0.0.1:PORT and on a socket in DIR,
# with trust authentication: it is a throwaway test cluster that lives for
# one run and connecting through SCRAM costs each reconnect a lot of CPU.
# fsync is off (the test crashes PostgreSQL, never the machine, so what
# reached the kernel survives) but synchronous_commit stays on: a commit
# is acknowledged only after its WAL was written, which is what makes an
# immediate restart (a crash, with recovery) keep every acknowledged
# decision.  Processes are stopped only through pg_ctl and the cluster's
# own postmaster.pid.  Every wait is bounded; exit status 0 on success, 1
# with the log's tail on stderr otherwise.
set -euo pipefail

readonly PG_BIN=/usr/lib/postgresql/15/bin

die() {
    printf 'pg_private: %s\n' "$*" >&2
    if [[ -n ${DIR:-} && -s $DIR/postgres.log ]]; then
        tail -n 20 "$DIR/postgres.log" >&2
    fi
    exit 1
}

is_root() { [[ $(id -u) == 0 ]]; }

# Runs "$@" as the cluster's owner, from a folder that user may enter.
as_owner() {
    if is_root; then
        (cd "$DIR" && runuser -u postgres -- "$@")
    else
        (cd "$DIR" && "$@")
    fi
}

# Writes stdin to file $1 and gives it to the cluster's owner.
owned_file() {
    cat >"$1"
    if is_root; then
        chown postgres:postgres "$1"
    fi
}

# A folder the cluster's owner may enter and write.
owned_dir() {
    mkdir -p "$1"
    chmod 755 "$1"
    if is_root; then
        chown postgres:postgres "$1"
        runuser -u postgres -- test -x "$1" ||
            die "the postgres OS user cannot enter $1"
    fi
}

# initdb into $1/data (a cluster without PG_VERSION is an interrupted
# initdb and is made again).
make_cluster() {
    [[ -f $1/data/PG_VERSION ]] && return 0
    owned_dir "$1"
    rm -rf "$1/data"
    as_owner "$PG_BIN/initdb" -D "$1/data" -U postgres \
        -E UTF8 --locale=C.UTF-8 --auth=trust --no-instructions --no-sync \
        >"$1/initdb.log" 2>&1 ||
        { tail -n 20 "$1/initdb.log" >&2; die "initdb failed"; }
}

cmd_init() {
    local port=$1 template=${2:-}
    [[ -x $PG_BIN/initdb ]] || die "no $PG_BIN/initdb (scripts/deps)"
    owned_dir "$DIR"
    if [[ -n $template ]]; then
        # Two runs in one build tree must not initdb the template at once.
        mkdir -p "$(dirname "$template")"
        exec 8>"$template.lock"
        flock -w 120 8 || die "the template $template stays locked"
        make_cluster "$template"
        exec 8>&-
        cp -a "$template/data" "$DIR/data"
    else
        make_cluster "$DIR"
    fi
    owned_file "$DIR/data/postgresql.auto.conf" <<EOF
# Written by tests/chaos/pg_private.sh.
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '${DIR//\'/\'\'}'
max_connections = 60
shared_buffers = 32MB
fsync = off
synchronous_commit = on
full_page_writes = off
EOF
}

cmd_start() {
    as_owner "$PG_BIN/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w \
        -t 60 -s start >/dev/null 2>&1 9>&- || die "start failed"
}

cmd_restart() {
    case $1 in
    fast|immediate) ;;
    *) die "restart mode must be fast or immediate, not '$1'" ;;
    esac
    as_owner "$PG_BIN/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w \
        -t 60 -s -m "$1" restart >/dev/null 2>&1 9>&- ||
        die "restart -m $1 failed"
}

cmd_stop() {
    local pid=
    [[ -r $DIR/data/postmaster.pid ]] &&
        read -r pid <"$DIR/data/postmaster.pid"
    as_owner "$PG_BIN/pg_ctl" -D "$DIR/data" -m fast -w -t 10 -s stop \
        >/dev/null 2>&1 && return 0
    # SIGQUIT is PostgreSQL's immediate shutdown, should fast have failed;
    # only a postmaster of this cluster is signalled.
    if [[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) == \
        postgres ]]; then
        kill -QUIT "$pid" 2>/dev/null || true
    fi
}

[[ $# -ge 2 ]] || die "usage: pg_private.sh init|start|restart|stop DIR ..."
cmd=$1
DIR=$2
shift 2
case $cmd in
init) [[ $# == 1 || $# == 2 ]] || die "init needs a port"; cmd_init "$@" ;;
start) cmd_start ;;
restart) [[ $# == 1 ]] || die "restart needs a mode"; cmd_restart "$1" ;;
stop) cmd_stop ;;
*) die "unknown command $cmd" ;;
esac
