#!/usr/bin/env bash
# test_install_pkgconfig.sh BUILD-DIR SOURCE-DIR [CFLAGS]: installs the build into a
# scratch prefix with `cmake --install`, then builds consumer.c from the
# outside with nothing but `pkg-config --cflags --libs dlock` (shared) and
# `pkg-config --static` (static archive), and runs both.  What a user of
# the installed library does; a broken dlock.pc, a header that is not
# installed or a symbol that is not exported fails here.  CFLAGS: what the
# build compiled with that a consumer must share (the sanitizer build
# passes its -fsanitize flags, as a sanitized library needs its runtime).
set -euo pipefail
build=$1 src=$2
read -ra extra <<<"${3:-}"
prefix=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build" --prefix "$prefix" >"$prefix/install.log" ||
    { cat "$prefix/install.log" >&2; echo "cmake --install failed" >&2; exit 1; }
pc=$(dirname "$(find "$prefix" -name dlock.pc -print -quit)")
[ -f "$pc/dlock.pc" ] || { echo "no dlock.pc installed under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH=$pc
libdir=$(pkg-config --variable=libdir dlock)

cc -std=c11 -Wall -Wextra -Werror "${extra[@]}" "$src/tests/package/consumer.c" \
    $(pkg-config --cflags --libs dlock) -Wl,-rpath,"$libdir" \
    -o "$prefix/consumer-shared"
out=$("$prefix/consumer-shared")
# ldd's output is read whole before grep: `ldd | grep -q` under pipefail
# fails at random when grep exits on a match while ldd still writes.
libs=$(ldd "$prefix/consumer-shared")
grep -q "$libdir/libdlock.so" <<<"$libs" ||
    { printf 'consumer-shared does not load the installed libdlock.so:\n%s\n' \
          "$libs" >&2; exit 1; }

cc -std=c11 -Wall -Wextra -Werror "${extra[@]}" "$src/tests/package/consumer.c" \
    $(pkg-config --cflags dlock) "$libdir/libdlock.a" \
    $(pkg-config --libs-only-l --libs-only-L --static dlock | sed 's/-ldlock//') \
    -o "$prefix/consumer-static"
"$prefix/consumer-static" >/dev/null
libs=$(ldd "$prefix/consumer-static")
! grep -q libdlock <<<"$libs" ||
    { echo "consumer-static still loads libdlock.so" >&2; exit 1; }

soname=$(objdump -p "$libdir/libdlock.so" | awk '/SONAME/ {print $2}')
[[ $soname =~ ^libdlock\.so\.[0-9]+$ ]] ||
    { echo "libdlock.so has SONAME '$soname', not libdlock.so.N" >&2; exit 1; }
echo "installed, pkg-config works (shared and static), SONAME $soname: $out"
