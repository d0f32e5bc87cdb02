#!/usr/bin/env bash
# tests/scale/groups.sh up|down: the CTest fixture of the scale suite.
#
# `up` starts scripts/stack's sentinel, cluster and redlock groups once for every
# test of the suite (a cold start of each costs about 10 s, too much to
# pay per test), writing the groups it started itself to
# var/stack/scale-started; `down` stops exactly those, so a run leaves
# running what it found running and stops what it started.  Tests that
# kill a node bring it back with scripts/stack up <group> themselves.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly ROOT
readonly MARK=$ROOT/var/stack/scale-started

case ${1:-} in
up)
    mkdir -p "$ROOT/var/stack"
    : >"$MARK"
    for group in sentinel cluster redlock; do
        # A bare env lists the groups of which any node runs.
        if ! "$ROOT/scripts/stack" env | grep -qi "^export ${group}_URL="
        then
            printf '%s\n' "$group" >>"$MARK"
        fi
        "$ROOT/scripts/stack" up "$group"
    done
    ;;
down)
    [[ -r $MARK ]] || exit 0
    while read -r group; do
        "$ROOT/scripts/stack" down "$group"
    done <"$MARK"
    rm -f "$MARK"
    ;;
*)
    printf 'usage: tests/scale/groups.sh up|down\n' >&2
    exit 2
    ;;
esac
