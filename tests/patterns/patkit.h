/*
 * patkit.h: helpers shared by the tests of libdlock's patterns.
 *
 * The pattern tests link dlock_testing (the static library with the
 * allocation failure hook), so that one suite can walk every allocation of
 * each pattern's constructors, and use the shared stack's Redis with keys
 * unique to the test and the process (testkit_key).  These helpers make
 * the setup steps one call that fails the running cmocka test with the
 * library's message, and give the tests a few probes of Redis's state
 * taken behind the library's back (a key's existence, a hash field, the
 * subscribers of a channel), which is what the tests wait on instead of
 * sleeping.
 *
 * Threads: like TK_EXPECT, the failing helpers must be called on the
 * test's own thread.  The probes may be called from any thread.
 */
#ifndef DLOCK_PATKIT_H
#define DLOCK_PATKIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dlock/patterns.h"
#include "testkit.h"
#include "testkit_threads.h"

/* The shared Redis's URL, started if need be; fails the test without it. */
const char *patkit_url(void);

/* A client with short timeouts (connect 1 s, I/O 2 s, probe 100 ms) that
 * must be made. */
dlock_client *patkit_client(void);

/* The same client for another server (a private one, or a proxy), with
 * an I/O timeout of io_timeout_ms. */
dlock_client *patkit_client_of(const char *url, int io_timeout_ms);

/* 1 if key exists. */
int patkit_exists(const char *key);

/* The integer value of hash field (or, with field NULL, of the string
 * key); 0 when missing. */
long long patkit_int(const char *key, const char *field);

/* The key's PTTL (-2 missing, -1 no TTL). */
long long patkit_pttl(const char *key);

/* How many connections are subscribed to channel. */
long long patkit_subscribers(const char *channel);

/* The server's clock in microseconds (TIME), or -1. */
int64_t patkit_server_time_us(void);

/* Deletes the keys (NULL-terminated list) to leave the server tidy. */
void patkit_forget(const char *key, ...);

/* Waits (bounded by timeout_ms) until channel has a subscriber, or until
 * the integer at key/field reaches at least min; 1 if it did. */
int patkit_wait_subscribed(const char *channel, int64_t timeout_ms);
int patkit_wait_int_at_least(const char *key, const char *field, long long min,
                             int64_t timeout_ms);
/* Waits until key no longer exists; 1 if it went. */
int patkit_wait_gone(const char *key, int64_t timeout_ms);

/* "{kind:name}suffix", the pattern key layout, into buf. */
char *patkit_pkey(char buf[TESTKIT_KEY_MAX + 64], const char *kind,
                  const char *name, const char *suffix);

/* Sleeps ms: only to simulate work while holding something (never to wait
 * for something to happen). */
void patkit_work_ms(int64_t ms);

/*
 * What every threaded case of a pattern test keeps, in static storage
 * (one case at a time; a failed expectation leaves by longjmp while the
 * threads still run): the case's client and another one for its threads,
 * the pattern's name, and the threads.  patkit_case_begin zeroes pc and
 * makes both clients (failing the test if it cannot).  patkit_case_end
 * ends a case's teardown, once the test has woken its threads, joined
 * them and let go of what they took: it forgets the name's keys with
 * forget (when a name was made), frees both clients and zeroes pc.
 * Threads: the case's own thread.
 */
typedef struct patkit_case {
    dlock_client *c;     /* the case's */
    dlock_client *other; /* its threads' */
    char name[TESTKIT_KEY_MAX];
    testkit_threads threads;
} patkit_case;

void patkit_case_begin(patkit_case *pc);
void patkit_case_end(patkit_case *pc, void (*forget)(const char *name));

#endif /* DLOCK_PATKIT_H */
