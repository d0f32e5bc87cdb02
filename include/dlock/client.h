/*
 * dlock/client.h: a connection to one Redis deployment, shared by threads.
 *
 * A dlock_client owns everything libdlock needs to talk to one Redis server:
 * the parsed URL, a pool of connections, the circuit breaker, the loaded Lua
 * scripts, one subscriber connection shared by every waiter, and one
 * background thread that renews watchdog locks and probes a broken server.
 *
 * Lifetime: dlock_client_new creates it and dlock_client_free destroys it.
 * Every lock taken through a client must be released (or freed) before the
 * client is freed.  dlock_client_free(NULL) does nothing.
 *
 * Buffers: the URL and every string in dlock_client_opts are copied by
 * dlock_client_new; the caller may free them when it returns.  Strings
 * returned by the client are borrowed and say how long they stay valid.
 *
 * Threads: a dlock_client is thread-safe: any number of threads share one.
 * The only exception is dlock_client_free, which must not run concurrently
 * with any other call on the same client.  Error messages are kept per
 * thread, so one thread's failure never overwrites another's message.
 */
#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_client dlock_client;

/* Upper bound on the length of any message from dlock_client_errmsg. */
#define DLOCK_ERRMSG_MAX 512

/*
 * Client options.  Call dlock_client_opts_init first, then set what you
 * need: a zeroed field means "the default" wherever that is listed.
 */
typedef struct dlock_client_opts {
    /* Milliseconds allowed for TCP connect + TLS handshake + AUTH/SELECT.
     * Default 5000. */
    int connect_timeout_ms;
    /* Milliseconds allowed for one command's round trip.  Default 5000. */
    int io_timeout_ms;
    /* Most connections the pool opens.  It bounds connections, not
     * callers: threads' commands are pipelined on the open connections
     * (up to 6 commands at once take a connection each while the pool
     * is not full; beyond that they gather on as few connections as
     * they can, up to 64 commands on each), so 64 threads run on a pool
     * of 2.
     * Default 16. */
    int pool_size;
    /* TCP keepalive idle seconds; 0 = default 60; -1 = off. */
    int keepalive_s;

    /* Circuit breaker: consecutive transport failures that open it
     * (default 3), and milliseconds between probes while it is open
     * (default 500). */
    int breaker_threshold;
    int breaker_probe_ms;

    /* When non-zero, dlock_client_new succeeds even if the warm-up
     * connection fails: the client starts with its breaker open and the
     * background probe connects when Redis answers.  For services that
     * must start while Redis is down (fail-open callers).  Default 0. */
    int start_offline;

    /* Credentials that override the URL's user and password (NULL: use the
     * URL's).  Useful to keep secrets out of URLs and process listings. */
    const char *username;
    const char *password;

    /* TLS, for rediss:// URLs.  ca_file / ca_dir: trust anchors (NULL for
     * both: the system's default store).  cert_file / key_file: a client
     * certificate and its key (both or neither).  server_name: the name to
     * verify and send as SNI (NULL: the URL's host).  verify_peer: 1
     * (default) verifies the certificate chain and the host name; 0 turns
     * verification off, for tests only. */
    const char *tls_ca_file;
    const char *tls_ca_dir;
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_server_name;
    int tls_verify_peer;

    /* Replication.  Redis replicates asynchronously: a master can grant a
     * lock and fail before a replica has it, and the replica promoted in
     * its place grants it again.  With wait_replicas N > 0, each acquire
     * and each renewal (the watchdog's and dlock_extend's) is followed by
     * WAIT N wait_timeout_ms on its connection; a grant that fewer than N
     * replicas acknowledged in time is released again and the acquire
     * returns DLOCK_UNREPLICATED (never a lock), and such a renewal does
     * not count (the lease keeps its last acknowledged end).  Costs about
     * one replication round trip per acquire and renewal
     * (docs/benchmarks.md); renewals then go one lock at a time.  Default
     * 0 (asynchronous).  wait_timeout_ms: default 1000.  The URL's
     * ?wait_replicas=N&wait_timeout=MS apply where these are 0.  Not for
     * redlock:// (each grant is on a majority of masters already). */
    int wait_replicas;
    int wait_timeout_ms;

    /* Busy polling: microseconds a thread waiting for a reply keeps
     * reading without sleeping before it sleeps (0..1000; default 0, off).
     * Where an idle CPU halts at once, as many virtual machines' vCPUs
     * do, a reply that comes within the budget is taken without the
     * wake-up of a halted CPU: on the project's 2-vCPU test machine a
     * quiet loopback round trip halves (docs/benchmarks.md).  It costs a
     * CPU for the time spent waiting, so it is bounded: at most one
     * thread fewer than the online CPUs spins at once in the process
     * (none on one CPU), and a spin that runs out without its reply
     * makes the connection skip the next 1, 2, 4 ... 64 chances to spin.
     * Worth it for latency-bound callers with a nearby Redis and spare
     * CPUs; a reply further away than the budget only costs CPU.
     * Nothing about what a reply means, or any deadline, changes. */
    int busy_poll_us;
} dlock_client_opts;

/* Fills opts with the defaults listed above. */
DLOCK_API void dlock_client_opts_init(dlock_client_opts *opts);

/*
 * Parses url, connects, authenticates, selects the database, loads the Lua
 * scripts and PINGs once (the warm-up), so that a wrong URL, password or
 * certificate fails here and not on the first lock.
 *
 * url: redis://[user:pass@]host[:port][/db]  (default port 6379, db 0)
 *      rediss://... the same over TLS
 *      unix:///path/to/redis.sock[?db=N]
 *      redis+sentinel://host:port,host:port,.../MASTER[?db=N]  (and
 *      rediss+sentinel://): the master that the sentinels name, checked
 *      with ROLE and followed through failovers (docs/deployments.md).
 *      Credentials and TLS apply to the sentinels and the master alike.
 *      redlock://host:port,host:port,host:port[/db] (and redlocks://):
 *      3 or more independent masters, locks granted by a majority with a
 *      majority fence, renewed by the watchdog in majority rounds,
 *      reentrant and woken on release; fair locks and the patterns are
 *      refused (docs/deployments.md).
 *      redis+cluster:// URLs are refused (not served yet).
 *      Every form takes ?wait_replicas=N&wait_timeout=MS (see the options).
 *      User and password are percent-decoded; IPv6 hosts go in brackets.
 * opts: may be NULL for all defaults.
 * out: receives the client, or NULL on failure.
 * errbuf, errlen: when errbuf is not NULL, receives a NUL-terminated message
 *      saying why the call failed (truncated to errlen); untouched on
 *      success.
 *
 * Returns DLOCK_OK, DLOCK_INVALID (bad URL or options), DLOCK_UNAVAILABLE,
 * DLOCK_TIMEOUT, DLOCK_TLS, DLOCK_AUTH, DLOCK_PROTOCOL, DLOCK_SERVER,
 * DLOCK_SYSTEM or DLOCK_NOMEM.
 */
DLOCK_API dlock_err dlock_client_new(const char *url,
                                     const dlock_client_opts *opts,
                                     dlock_client **out, char *errbuf,
                                     size_t errlen);

/*
 * Stops the background threads, closes every connection and frees the
 * client.  Locks still held are not released in Redis (they expire by their
 * TTL) and their objects become invalid: release them first.
 */
DLOCK_API void dlock_client_free(dlock_client *client);

/*
 * Sends PING through the pool.  rtt_us, when not NULL, receives the round
 * trip in microseconds (0 on failure).  A health check: it bypasses the
 * breaker's fast-fail so that it always says how the server is now, and
 * its result feeds the breaker.
 */
DLOCK_API dlock_err dlock_client_ping(dlock_client *client, int64_t *rtt_us);

/*
 * Returns the message of the last failed call made on this client by the
 * calling thread: what was being done, the server (host:port or socket
 * path), what was expected and what came back, how long we waited, then the
 * dlock_strerror text.  Empty string if that call succeeded.  Borrowed:
 * valid until the calling thread's next call on this client.
 */
DLOCK_API const char *dlock_client_errmsg(const dlock_client *client);

/*
 * After an acquire by the calling thread returned DLOCK_BUSY: how many
 * milliseconds the current holder's TTL still runs (-1 if the holder has no
 * TTL, 0 if unknown).  Per thread, like dlock_client_errmsg.
 */
DLOCK_API int64_t dlock_client_busy_ttl_ms(const dlock_client *client);

/* The circuit breaker's states. */
typedef enum dlock_breaker_state {
    /* Calls go to Redis. */
    DLOCK_BREAKER_CLOSED = 0,
    /* Redis failed repeatedly: calls fail fast until a probe succeeds. */
    DLOCK_BREAKER_OPEN = 1
} dlock_breaker_state;

/* The breaker's state now; a snapshot, for health checks and metrics. */
DLOCK_API dlock_breaker_state dlock_client_breaker(const dlock_client *client);

/* Counters since the client was created, for metrics.  A snapshot. */
typedef struct dlock_client_stats {
    uint64_t commands;         /* round trips sent */
    uint64_t transport_errors; /* connects or round trips that failed */
    uint64_t reconnects;       /* connections opened after the first */
    uint64_t breaker_opens;    /* times the breaker opened */
    uint64_t fast_fails;       /* calls refused by the open breaker */
    uint64_t renewals;         /* successful watchdog renewals */
    uint64_t locks_lost;       /* locks the watchdog found gone */
    int pool_open;             /* connections open now */
    int pool_in_use;           /* connections lent out now */
    uint64_t busy_polls;       /* waits that busy-polled (busy_poll_us) */
    uint64_t busy_poll_hits;   /* of which the reply came while polling */
} dlock_client_stats;

DLOCK_API void dlock_client_stats_get(const dlock_client *client,
                                      dlock_client_stats *out);

/* A description of the endpoint, such as "127.0.0.1:6379" or
 * "unix:/run/redis.sock", for logs.  Borrowed for the client's life. */
DLOCK_API const char *dlock_client_endpoint(const dlock_client *client);

/* For a client of a Redis Cluster (redis+cluster://), "host:port" of the
 * master that serves key: the owner of the key's slot in the client's
 * slot map, which every command about the key corrects when the cluster
 * answers MOVED (so right after dlock_inspect it names the master that
 * answered).  NULL for other deployments, whose one endpoint (or set of
 * Redlock masters) serves every key.  Borrowed for the client's life.  No
 * round trip. */
DLOCK_API const char *dlock_client_node_of(dlock_client *client,
                                           const char *key);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_CLIENT_H */
