/*
 * dlock/once.h: single-flight, so a stampede of refreshes becomes one.
 *
 * When many instances see stale configuration (or an expired cache entry)
 * at the same moment, each would fetch it again and the origin gets the
 * whole herd.  With a single-flight named for the thing, exactly one caller
 * (the leader of the flight) refreshes; the others (followers) wait for the
 * leader's result, which is stored in Redis for them and for callers who
 * come within keep_ms after it; a follower whose wait runs out gets
 * DLOCK_BUSY and goes on with its old value.
 *
 *     static int fetch(void *arg, const void **value, size_t *len)
 *     {
 *         struct cfg *cfg = arg;               // fetch into a buffer that
 *         return load_config(cfg, value, len); // lives until dlock_once_do
 *     }                                        // returns
 *
 *     dlock_once *fl;
 *     int rc;
 *     dlock_err err = dlock_once_do(c, "config", NULL, fetch, &cfg, &rc, &fl);
 *     if (err == DLOCK_OK) {
 *         size_t len;
 *         apply_config(dlock_once_value(fl, &len), len);
 *         dlock_once_free(fl);
 *     }   // else keep the old configuration and try again later
 *
 * One Lua step decides who leads, on the record "{once:NAME}" (a hash: the
 * state "run" or "done", the leader's token, the value): no record or an
 * expired one makes the caller the leader with a lease of lease_ms; a
 * "run" record makes it a follower; a "done" record hands over the value.
 * The leader's completion stores the value with a TTL of keep_ms and
 * wakes every follower at once.  A leader that dies (or whose fn fails)
 * leaves the record only until its lease runs out (at once, on failure):
 * then one follower becomes the leader and refreshes instead.
 *
 * keep_ms is the freshness window: a caller within keep_ms of the last
 * refresh gets the stored value without refreshing.  Choose it at least as
 * long as the stampede lasts (followers that come after keep_ms refresh
 * again), and no longer than you accept the value to be stale.
 *
 * Lifetime: dlock_once_begin and dlock_once_do create a dlock_once (on
 * DLOCK_OK only); dlock_once_free frees it without talking to Redis (a
 * leader that neither completed nor aborted leaves the record to its
 * lease).  dlock_once_free(NULL) does nothing.
 *
 * Buffers: the name, the options and the value given to
 * dlock_once_complete (or by fn) are copied.  dlock_once_value returns a
 * borrowed pointer, valid until dlock_once_free.  Values are binary-safe,
 * at most DLOCK_ONCE_VALUE_MAX bytes.
 *
 * Threads: a dlock_once belongs to the thread that began it; any number of
 * threads and processes may begin flights of the same name through shared
 * clients.  dlock_once_do calls fn on the calling thread, with no library
 * lock held; fn may use the library (even the same client) freely.
 */
#ifndef DLOCK_ONCE_H
#define DLOCK_ONCE_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_once dlock_once;

/* Largest value a flight stores, in bytes. */
#define DLOCK_ONCE_VALUE_MAX ((size_t)16 * 1024 * 1024)

typedef struct dlock_once_opts {
    /* How long the leader may take before a follower takes over, in ms.
     * Default 10000. */
    int64_t lease_ms;
    /* How long a follower waits for the leader's value, in ms (0: do not
     * wait; < 0: forever).  Default 5000. */
    int64_t wait_ms;
    /* How long the value stays stored for later callers, in ms.  Default
     * 1000. */
    int64_t keep_ms;
} dlock_once_opts;

/* Fills opts with the defaults above. */
DLOCK_API void dlock_once_opts_init(dlock_once_opts *opts);

/* The caller's part in a flight. */
typedef enum dlock_once_outcome {
    /* You lead: refresh, then dlock_once_complete (or dlock_once_abort). */
    DLOCK_ONCE_LEADER = 1,
    /* The value is here: dlock_once_value. */
    DLOCK_ONCE_DONE = 2
} dlock_once_outcome;

/*
 * Joins the flight named name (1..DLOCK_KEY_MAX bytes); opts may be NULL
 * for the defaults.  Returns DLOCK_OK with *out a LEADER or DONE flight;
 * DLOCK_BUSY when another caller still leads after opts->wait_ms (use your
 * old value); DLOCK_INVALID, DLOCK_NOMEM or a transport error.  *out is
 * NULL unless DLOCK_OK.
 */
DLOCK_API dlock_err dlock_once_begin(dlock_client *client, const char *name,
                                     const dlock_once_opts *opts,
                                     dlock_once **out);

/* LEADER or DONE. */
DLOCK_API dlock_once_outcome dlock_once_status(const dlock_once *once);

/*
 * The leader stores value (len bytes, copied) for keep_ms and wakes every
 * follower.  Returns DLOCK_OK (the flight is now DONE with this value),
 * DLOCK_LOST (the lease ran out first; another caller may be refreshing),
 * DLOCK_STATE (not the leader, or finished), DLOCK_INVALID, DLOCK_NOMEM or
 * a transport error.
 */
DLOCK_API dlock_err dlock_once_complete(dlock_once *once, const void *value,
                                        size_t len);

/* The leader gives up (its refresh failed): the record is deleted and one
 * follower leads instead.  Returns DLOCK_OK, DLOCK_LOST, DLOCK_STATE or a
 * transport error. */
DLOCK_API dlock_err dlock_once_abort(dlock_once *once);

/* A DONE flight's value and its length (NUL-terminated after len bytes);
 * NULL with *len 0 for a leader that has not completed.  len may be NULL.
 * Borrowed until dlock_once_free. */
DLOCK_API const void *dlock_once_value(const dlock_once *once, size_t *len);

/* 1 if this caller led the flight (and so ran the refresh), else 0. */
DLOCK_API int dlock_once_led(const dlock_once *once);

/* Frees once without talking to Redis.  NULL is fine. */
DLOCK_API void dlock_once_free(dlock_once *once);

/*
 * The refresh of dlock_once_do: returns 0 with *value and *len set to the
 * new value (bytes fn owns, valid until dlock_once_do returns), or
 * non-zero when the refresh failed.
 */
typedef int (*dlock_once_fn)(void *arg, const void **value, size_t *len);

/*
 * The whole flight in one call: begin; as the leader call fn(arg, ...) and
 * complete with its value (or abort when it fails); as a follower wait for
 * the value.  fn_result, when not NULL, receives fn's return value (0 if fn
 * was not called).  Returns DLOCK_OK with *out a DONE flight (led or
 * followed); DLOCK_STATE when this caller led and fn failed (the flight was
 * aborted so that another caller refreshes); or the error of begin or
 * complete.  *out is NULL unless DLOCK_OK.
 */
DLOCK_API dlock_err dlock_once_do(dlock_client *client, const char *name,
                                  const dlock_once_opts *opts,
                                  dlock_once_fn fn, void *arg, int *fn_result,
                                  dlock_once **out);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_ONCE_H */
