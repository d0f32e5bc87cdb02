/*
 * consumer.c: a program outside the project that uses libdlock only as
 * installed: the public header, and the flags pkg-config gives.  Built and
 * run by test_install_pkgconfig.sh, once against the shared library and
 * once statically, so that a missing header, an unexported symbol or a
 * wrong dlock.pc fails the test suite instead of a user's build.
 */
#include <dlock/dlock.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    dlock_acquire_opts opts;

    dlock_acquire_opts_init(&opts);
    if (opts.ttl_ms <= 0) {
        fprintf(stderr, "consumer: default TTL is %lld\n",
                (long long)opts.ttl_ms);
        return 1;
    }
    if (strcmp(dlock_errname(DLOCK_BUSY), "DLOCK_BUSY") != 0) {
        fprintf(stderr, "consumer: dlock_errname(DLOCK_BUSY) is %s\n",
                dlock_errname(DLOCK_BUSY));
        return 1;
    }
    printf("consumer: %s\n", dlock_strerror(DLOCK_BUSY));
    return 0;
}
