/*
 * msg.c: formatting of bounded error messages (see msg.h).
 */
#include "base/msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

dlock_err dlock__msg_set(dlock__msg *m, dlock_err code, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (m == NULL)
        return code;
    va_start(ap, fmt);
    n = vsnprintf(m->text, sizeof(m->text), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(m->text))
        snprintf(m->text + n, sizeof(m->text) - (size_t)n, ": %s",
                 dlock_strerror(code));
    return code;
}

/* Appends src to the NUL-terminated dst of capacity cap, truncating. */
static void append(char *dst, size_t cap, const char *src)
{
    size_t used = strnlen(dst, cap - 1);
    size_t n = strnlen(src, cap - 1 - used);

    memcpy(dst + used, src, n);
    dst[used + n] = '\0';
}

dlock_err dlock__msg_wrap(dlock__msg *m, dlock_err code, const char *fmt, ...)
{
    char prefix[DLOCK_ERRMSG_MAX];
    char old[DLOCK_ERRMSG_MAX];
    va_list ap;

    if (m == NULL)
        return code;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, m->text, sizeof(old));
    m->text[0] = '\0';
    append(m->text, sizeof(m->text), prefix);
    append(m->text, sizeof(m->text), ": ");
    append(m->text, sizeof(m->text), old);
    return code;
}

void dlock__msg_clear(dlock__msg *m)
{
    if (m != NULL)
        m->text[0] = '\0';
}
