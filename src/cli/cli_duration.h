/*
 * cli_duration.h: durations on the command line (--ttl, --wait, --grace).
 *
 * A duration is a decimal number with an optional unit: "500ms", "30s",
 * "5m", "1h", "1.5s"; a bare number means seconds, as in flock -w and
 * sleep(1).  Everything else is junk and is refused, so that a typo such
 * as "30x" or "5 m" is a usage error rather than a surprise TTL.  The
 * result is in milliseconds and must be a whole number of them.
 */
#ifndef DLOCK_CLI_DURATION_H
#define DLOCK_CLI_DURATION_H

#include <stdint.h>

/* The longest duration accepted: ten years, in milliseconds.  Far beyond
 * any useful lock, and far from int64 overflow in any later arithmetic. */
#define CLI_DURATION_MAX_MS ((int64_t)10 * 365 * 86400 * 1000)

/*
 * Parses text as a duration into *ms (set to 0 first).  Returns 0, or -1
 * when text is empty, negative, has junk or an unknown unit, has more
 * precision than a millisecond, or exceeds CLI_DURATION_MAX_MS.
 */
int cli_duration_parse(const char *text, int64_t *ms);

/*
 * Parses a --wait value: a duration as above, or "forever" or "-1" for no
 * limit (*ms = -1).  Returns 0 or -1.
 */
int cli_duration_parse_wait(const char *text, int64_t *ms);

#endif /* DLOCK_CLI_DURATION_H */
