/*
 * token.c: owner tokens from getrandom(2) (see token.h).
 *
 * getrandom without flags blocks only until the kernel's pool is first
 * initialised at boot, and never returns short reads for 16 bytes; EINTR is
 * retried all the same.
 */
#include "base/token.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

dlock_err dlock__token_new(char out[DLOCK_TOKEN_LEN + 1], dlock__msg *m)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[DLOCK_TOKEN_LEN / 2];
    size_t got = 0;

    out[0] = '\0';
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return dlock__msg_set(m, DLOCK_SYSTEM, "getrandom(%zu bytes): %s",
                                  sizeof(raw), strerror(errno));
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw); i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    out[DLOCK_TOKEN_LEN] = '\0';
    return DLOCK_OK;
}

int dlock__token_valid(const char *s)
{
    size_t i;

    for (i = 0; i < DLOCK_TOKEN_LEN; i++) {
        char ch = s[i];
        int is_hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')
                     || (ch >= 'A' && ch <= 'F');

        if (!is_hex)
            return 0;
    }
    return s[i] == '\0';
}
