/*
 * cli_token.c: the token's operand, stdin or $DLOCK_TOKEN (cli_token.h).
 */
#include "cli_token.h"

#include <ctype.h>
#include <string.h>

/* Copies s into buf; -1 when it does not fit or is empty. */
static int take(const char *s, size_t len, char buf[CLI_TOKEN_MAX])
{
    while (len > 0 && isspace((unsigned char)*s)) {
        s++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        len--;
    if (len == 0 || len >= CLI_TOKEN_MAX)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

static int from_stdin(FILE *in, char buf[CLI_TOKEN_MAX], char *why,
                      size_t whylen)
{
    char line[CLI_TOKEN_MAX + 2];

    if (fgets(line, sizeof(line), in) == NULL) {
        snprintf(why, whylen, "TOKEN '-': nothing to read on stdin");
        return -1;
    }
    if (strchr(line, '\n') == NULL && !feof(in)) {
        snprintf(why, whylen,
                 "TOKEN '-': the line on stdin is too long "
                 "for a token");
        return -1;
    }
    if (take(line, strlen(line), buf) != 0) {
        snprintf(why, whylen, "TOKEN '-': the line on stdin is empty");
        return -1;
    }
    return 0;
}

int cli_token_resolve(const char *operand, const char *env_value, FILE *in,
                      char buf[CLI_TOKEN_MAX], char *why, size_t whylen)
{
    buf[0] = '\0';
    if (operand != NULL && strcmp(operand, "-") == 0)
        return from_stdin(in, buf, why, whylen);
    if (operand != NULL) {
        if (take(operand, strlen(operand), buf) == 0)
            return 0;
        snprintf(why, whylen, "TOKEN must be 1 to %d characters",
                 CLI_TOKEN_MAX - 1);
        return -1;
    }
    if (env_value != NULL && take(env_value, strlen(env_value), buf) == 0)
        return 0;
    snprintf(why, whylen,
             "missing TOKEN: give it after KEY, '-' to read "
             "it from stdin, or set DLOCK_TOKEN");
    return -1;
}
