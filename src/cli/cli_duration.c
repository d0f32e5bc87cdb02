/*
 * cli_duration.c: parses "500ms", "30s", "1.5m", "1h" and bare seconds
 * (cli_duration.h).
 *
 * Integer arithmetic throughout: the number is read as a whole part and up
 * to nine fractional digits, and both are scaled by the unit's length in
 * milliseconds, so "0.5s" is exactly 500 and "0.0001s" is refused instead
 * of being rounded to nothing.  strtod would accept "1e3", "inf", "0x10"
 * and leading blanks, which we do not want, so the digits are read by
 * hand; it is a dozen lines.
 */
#include "cli_duration.h"

#include <string.h>

/* Digits after the point that are looked at; more is refused. */
#define FRACTION_DIGITS_MAX 9

struct unit {
    const char *suffix;
    int64_t ms;
};

/* Suffixes are matched exactly, so their order does not matter. */
static const struct unit units[] = {
    {"ms", 1}, {"s", 1000}, {"", 1000}, {"m", 60 * 1000}, {"h", 3600 * 1000},
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads the digits at *p into *value and advances *p past them.  Returns
 * how many were read, or -1 when there are more than max_digits (which
 * keeps *value far from overflow). */
static int read_digits(const char **p, int64_t *value, int max_digits)
{
    int n = 0;

    *value = 0;
    while (is_digit(**p)) {
        if (n == max_digits)
            return -1;
        *value = *value * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    return n;
}

static const struct unit *unit_of(const char *suffix)
{
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(suffix, units[i].suffix) == 0)
            return &units[i];
    return NULL;
}

int cli_duration_parse(const char *text, int64_t *ms)
{
    const char *p = text;
    int64_t whole, frac = 0, scale = 1, total;
    int whole_digits, frac_digits = 0;
    const struct unit *u;

    *ms = 0;
    whole_digits = read_digits(&p, &whole, 12);
    if (whole_digits < 0)
        return -1;
    if (*p == '.') {
        p++;
        frac_digits = read_digits(&p, &frac, FRACTION_DIGITS_MAX);
        if (frac_digits <= 0)
            return -1;
    }
    if (whole_digits == 0)
        return -1;
    u = unit_of(p);
    if (u == NULL)
        return -1;
    for (int i = 0; i < frac_digits; i++)
        scale *= 10;
    /* frac / scale of a unit must come out as whole milliseconds. */
    if (frac * u->ms % scale != 0)
        return -1;
    if (whole > CLI_DURATION_MAX_MS / u->ms)
        return -1;
    total = whole * u->ms + frac * u->ms / scale;
    if (total > CLI_DURATION_MAX_MS)
        return -1;
    *ms = total;
    return 0;
}

int cli_duration_parse_wait(const char *text, int64_t *ms)
{
    if (strcmp(text, "forever") == 0 || strcmp(text, "-1") == 0) {
        *ms = -1;
        return 0;
    }
    return cli_duration_parse(text, ms);
}
