/*
 * evt_kit.h: what the event pipeline tests share: a test consumer on
 * kh.documents, a private RabbitMQ node, kh-indexer processes and the
 * indexer's effect as PostgreSQL shows it.
 *
 * The pipeline tests (test_events_*.c) check delivery counts, so the kit
 * is built to count exactly and to never mix one run's events with
 * another's:
 *
 *   - evt_consumer is a thread with its own AMQP connection and its own
 *     queue bound to kh.documents with "#", so it sees every event of
 *     every type.  On the shared broker the queue is server-named,
 *     exclusive and auto-delete (it vanishes with the test); on a private
 *     broker that the test stops and kills it is a durable queue of a
 *     name unique to the process, so events published while the consumer
 *     is cut off wait for it, as they wait for kh-indexer.  Each delivery
 *     is recorded (message_id, routing key, document id, redelivered) and
 *     acknowledged only after that, and the thread reconnects after any
 *     failure, so the record is at-least-once like the queue itself and
 *     never loses a message the broker kept.  Other runs' events arrive
 *     too on the shared broker: tests select theirs by document id (ids
 *     are offset per process, rvt_db_offset_ids).
 *   - evt_rabbit is a private node run by tests/indexer/rabbit_private.sh
 *     on three loopback ports that are free when it starts (node name
 *     rvt<amqp_port>, so two builds testing at once never meet), with its
 *     data under var/test/<name>-rabbit-<pid>/rabbit.  evt_rabbit_kill sends
 *     SIGKILL itself (pid file checked against /proc) rather than through
 *     the script, so a kill "during a batch" lands within a millisecond of
 *     the test deciding it.  A guardian process watches the test: if the
 *     test dies without stopping the node (a crash, CTest's timeout,
 *     which kills the test's whole process tree), the guardian, detached
 *     from that tree, stops it.
 *   - evt_indexer runs the kh-indexer binary (KH_INDEXER_BIN, or the build
 *     tree's) against a test database, with its JSON log in the test's
 *     folder; tests read what it did from that log (evt_log_count) and
 *     from PostgreSQL (evt_db_*).
 *
 * Every wait is bounded; failures are reported on stderr and returned as
 * NULL or -1, so that the test's assertion says what it needed.
 * Threads: evt_consumer_* may be called from any thread (the record is
 * under a mutex); the rest belongs to the test's main thread.
 */
#ifndef EVT_KIT_H
#define EVT_KIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rvt_kit.h"

/* ---- the test consumer --------------------------------------------------- */

/* One message as the test consumer received it. */
typedef struct evt_event {
    char message_id[64];  /* the AMQP message_id: the event id */
    char routing_key[40]; /* document.submitted / approved / rejected */
    char document_id[24]; /* from the JSON body; "" if it had none */
    int redelivered;
} evt_event;

typedef struct evt_consumer evt_consumer;

/*
 * Connects to url, declares the durable topic exchange (NULL:
 * kh.documents) as the relay does (with its alternate exchange
 * "<exchange>.unrouted" and that queue; one that exists without it is
 * used as it is), a queue (durable_queue NULL:
 * server-named, exclusive, auto-delete; else that durable queue) bound
 * with "#", and starts the consuming thread.  Returns once the queue is
 * bound (within 30 s), or NULL with the reason on stderr.
 */
evt_consumer *evt_consumer_start(const char *url, const char *exchange,
                                 const char *durable_queue);

/* Stops the thread, deletes a durable queue (best effort) and frees c.
 * NULL is fine. */
void evt_consumer_free(evt_consumer *c);

/* How many deliveries were recorded in all. */
size_t evt_consumer_total(evt_consumer *c);

/* How many deliveries carried this message_id. */
int evt_consumer_count(evt_consumer *c, const char *message_id);

/* A copy of the record (malloc'd, *n entries; free() it), or NULL with
 * *n 0 when empty or out of memory. */
evt_event *evt_consumer_events(evt_consumer *c, size_t *n);

/* Polls until c has received each of the n message ids (ids[0..n), 64
 * bytes each, borrowed for the call) at least once, up to timeout_ms.
 * 1 if so, 0 on timeout. */
int evt_consumer_wait_all(evt_consumer *c, char (*ids)[64], int n,
                          int64_t timeout_ms);

/*
 * The stack's RabbitMQ (testkit_amqp_url), made to answer: if a test
 * consumer cannot connect, runs "scripts/stack up rabbitmq" and tries
 * again.  Returns a consumer as evt_consumer_start does, or NULL.
 */
evt_consumer *evt_consumer_start_shared(void);

/*
 * Direct broker operations for the unroutable-event tests, each on a
 * connection of its own (no declaration besides what it says): declare
 * `exchange` as a durable topic exchange WITHOUT an alternate exchange
 * (a deployment from before reviewd gave it one); delete a queue; take
 * (basic.get, auto-ack) up to max messages from queue, their routing
 * keys into keys.  Each returns 0 (take: how many it took), or -1 with
 * the reason on stderr (take: also when the queue does not exist).
 */
int evt_amqp_plain_exchange(const char *url, const char *exchange);
int evt_amqp_delete_queue(const char *url, const char *queue);
int evt_amqp_take(const char *url, const char *queue, char (*keys)[40],
                  int max);

/*
 * The end of a test program's fixture: stops the reviewd s (which must
 * exit 0), frees the consumer c, drops the database and removes the
 * server's folder when all was clean.  Returns 1 if reviewd exited 0.
 */
int evt_fixture_close(rvt_server *s, evt_consumer *c, rvt_db *db);

/*
 * A test program's group fixture (cmocka's group setup and teardown).
 * evt_group_setup allocates a zeroed fixture of size bytes and has open_fn
 * fill it (0, or -1 when it could not); when open_fn fails, close_fn
 * frees what it made, the fixture is freed and *state stays NULL, and it
 * returns -1.  So close_fn must take a fixture open_fn left half made:
 * zeroed parts are nothing to free (rvt_db_drop, rvt_server_terminate,
 * evt_rabbit_free, evt_tokens_free and evt_consumer_free all take them).
 * close_fn returns 1 when all it stopped exited cleanly, else 0.
 * evt_group_teardown does nothing for a NULL fixture (the setup failed
 * before it had one); else it closes and frees it, and returns -1 when
 * close_fn said 0.
 */
typedef int (*evt_fixture_fn)(void *fixture);
int evt_group_setup(void **state, size_t size, evt_fixture_fn open_fn,
                    evt_fixture_fn close_fn);
int evt_group_teardown(void **state, evt_fixture_fn close_fn);

/* Defines a test program's static group setup and teardown, for
 * cmocka_run_group_tests: a fixture of type, made by open_fn and ended
 * by close_fn, as above. */
#define EVT_GROUP_FIXTURE(type, open_fn, close_fn)                      \
    static int setup(void **state)                                      \
    {                                                                   \
        return evt_group_setup(state, sizeof(type), open_fn, close_fn); \
    }                                                                   \
    static int teardown(void **state)                                   \
    {                                                                   \
        return evt_group_teardown(state, close_fn);                     \
    }

/*
 * testkit_wait_until predicates: 1 once the reviewd (an rvt_server *) or
 * the kh-indexer (an evt_indexer *) has logged that it refused the
 * broker's TLS handshake because the broker's certificate did not verify
 * against the CA it was given (AMQP_CACERT).
 */
int evt_server_refused_ca(void *server);
int evt_indexer_refused_ca(void *indexer);

/*
 * Deletes a durable queue and an exchange a test declared on the stack's
 * broker under names of its own (REVIEWD_AMQP_EXCHANGE, KH_EXCHANGE,
 * KH_QUEUE), so no run leaves them behind.  Best effort; returns 0 if
 * both deletes were accepted.
 */
int evt_amqp_forget(const char *url, const char *exchange, const char *queue);

/* The two users every event test acts as: an author and a reviewer. */
typedef struct evt_tokens {
    char *author;
    char *reviewer;
} evt_tokens;

/* Makes both tokens (valid for an hour).  Returns 0, or -1 (none kept). */
int evt_tokens_make(evt_tokens *t);
void evt_tokens_free(evt_tokens *t);

/* 1 when the process *(pid_t *)arg is gone or a zombie (for waits on
 * processes that are not the caller's children). */
int evt_pid_gone(void *arg);

/* ---- concurrent clients -------------------------------------------------- */

/*
 * Runs fn(item, arg) for item = 0..items-1 from `clients` threads at once,
 * each taking the next item when it is done with one (so `clients`
 * requests are in flight as long as items remain).  Returns 0, or -1 if
 * the threads could not start.
 */
int evt_parallel(int clients, int items, void (*fn)(int item, void *arg),
                 void *arg);

/* ---- documents through reviewd's API ------------------------------------- */

/* Creates a draft with this title and content (any UTF-8; JSON-escaped
 * here); its id into id (24 bytes).  Returns 0, or -1 with the answer on
 * stderr. */
int evt_create_doc(int port, const char *token, const char *title,
                   const char *content, char *id);
/* Submits a document; its review id into review_id (24 bytes). */
int evt_submit(int port, const char *token, const char *doc_id,
               char *review_id);
/* Approves (approve != 0) or rejects a review.  Returns 0 on 200. */
int evt_decide(int port, const char *token, const char *review_id,
               int approve);

/* ---- a private RabbitMQ node --------------------------------------------- */

typedef struct evt_rabbit {
    char dir[512];    /* its data, logs and pid files */
    char script[512]; /* tests/indexer/rabbit_private.sh */
    int amqp_port, dist_port, epmd_port;
    char url[128];     /* amqp://dlock:dlock@127.0.0.1:PORT/%2f */
    int tls_port;      /* evt_rabbit_begin_tls: the TLS listener */
    char tls_dir[512]; /* its PKI: ca.pem, wrong-ca.pem, server.* */
    char tls_url[128]; /* amqps://dlock:dlock@localhost:TLS_PORT/%2f */
    pid_t booting;     /* the start script while it runs */
    int guard_fd;      /* the guardian's pipe; closing it = "stop" */
    int running;
} evt_rabbit;

/* Starts a node under var/test/<name>-rabbit-<pid>/rabbit on free ports
 * (a folder apart from the test's other processes, whose removal must not
 * take the node's pid files before it is stopped) and
 * waits until it accepts AMQP (the script bounds that at 60 s).  Returns
 * 0, or -1 with the script's output on stderr. */
int evt_rabbit_start(evt_rabbit *r, const char *name);
/* The same in two steps, so a test can do other work while the node
 * boots (14-25 s): evt_rabbit_begin starts the boot and returns at once;
 * evt_rabbit_wait_booted waits for it to end.  Both return 0 or -1. */
int evt_rabbit_begin(evt_rabbit *r, const char *name);
/* evt_rabbit_begin with a TLS listener too: makes a test CA, a broker
 * certificate it signed (localhost, 127.0.0.1) and a wrong CA with
 * tests/indexer/tls_certs.sh under the node's folder (tls_dir), and sets
 * tls_port and tls_url. */
int evt_rabbit_begin_tls(evt_rabbit *r, const char *name);
int evt_rabbit_wait_booted(evt_rabbit *r);
/* Graceful stop (data kept).  Returns 0 or -1. */
int evt_rabbit_stop(evt_rabbit *r);
/* Starts the stopped or killed node again on the same ports and data. */
int evt_rabbit_restart(evt_rabbit *r);
/* SIGKILL to the node at once, then waits until it is gone (10 s).
 * Returns 0 or -1. */
int evt_rabbit_kill(evt_rabbit *r);
/* Stops the node, lets the guardian go and removes the folder (kept with
 * DLOCK_TEST_KEEP). */
void evt_rabbit_free(evt_rabbit *r);

/* ---- kh-indexer processes ------------------------------------------------ */

typedef struct evt_indexer {
    pid_t pid;
    char dir[512];
    char log[600]; /* KH_LOG_FILE, and stdout/stderr beside it */
    int exit_status;
} evt_indexer;

/* The kh-indexer binary (KH_INDEXER_BIN, or the build tree's). */
const char *evt_indexer_bin(void);

/*
 * Starts kh-indexer with DATABASE_URL=db->url, AMQP_URL=amqp_url, short
 * retry and backoff, and extra_env ("NAME=value", NULL-terminated, may be
 * NULL) on top; waits up to 30 s for its "consuming" log line.  Returns 0,
 * or -1 with the log's tail on stderr.
 */
int evt_indexer_start(evt_indexer *ix, const rvt_db *db, const char *amqp_url,
                      const char *const *extra_env, const char *name);
/* The same without the wait: returns 0 once the process is spawned (or
 * -1), whatever it does next; for a kh-indexer that is not meant to
 * consume. */
int evt_indexer_spawn(evt_indexer *ix, const rvt_db *db, const char *amqp_url,
                      const char *const *extra_env, const char *name);
/* 1 if text shows anywhere in what the kh-indexer wrote: its log file
 * or its stdout and stderr (log.out). */
int evt_indexer_output_has(const evt_indexer *ix, const char *text);
/*
 * kh-indexer writes an event's event_done line after the commit that
 * evt_db_wait_indexed and evt_db_processed see, so a test that counts
 * those lines waits for them first.  evt_indexer_wait_logged: until the
 * log has an event_done line with outcome "indexed" for event_id;
 * evt_indexer_wait_indexed_lines: until it has at least n of them, any
 * event.  1 once there, 0 if timeout_ms ran out.
 */
int evt_indexer_wait_logged(const evt_indexer *ix, const char *event_id,
                            int timeout_ms);
int evt_indexer_wait_indexed_lines(const evt_indexer *ix, int n,
                                   int timeout_ms);
/* SIGTERM, waits up to 15 s (then SIGKILL).  Returns 1 if it exited 0. */
int evt_indexer_stop(evt_indexer *ix);

/*
 * Counts the JSON lines of the log at path whose "msg" is msg and whose
 * fields match the (name, value) pairs that follow, NULL-terminated:
 * strings compare as strings, booleans as "true"/"false", integers as
 * their decimal text.  Returns -1 if the file cannot be read.
 */
int evt_log_count(const char *path, const char *msg, ...);

/* ---- the pipeline's effect in PostgreSQL --------------------------------- */

/* Chunks of a document in kh_chunk (-1 on error). */
long long evt_db_chunks(rvt_db *db, const char *doc_id);
/* Unsent outbox rows with that routing key (-1 on error). */
long long evt_db_unsent(rvt_db *db, const char *routing_key);
/* kh_processed_event rows with that outcome ("indexed", "stale"). */
long long evt_db_processed(rvt_db *db, const char *outcome);
/* Waits up to timeout_ms until each of the n documents docs[] has
 * chunks; 1 once they all have, 0 if the time ran out first. */
int evt_db_wait_docs_indexed(rvt_db *db, char (*docs)[24], int n,
                             int timeout_ms);

/*
 * 1 if the document's chunks are exactly what kh_chunk_split gives for its
 * stored content with opts (target, overlap): same count, numbering 0..n-1,
 * offsets and texts, all written by event_id at the current version; 0
 * (with the first difference on stderr) otherwise.
 */
int evt_db_chunks_match(rvt_db *db, const char *doc_id, size_t target,
                        size_t overlap, const char *event_id);

/*
 * The event ids of the database's outbox with that routing key (NULL:
 * all), in id order, as one malloc'd string of ids separated by ',' (free
 * it), or NULL on error.  *n receives the number of ids.
 */
char *evt_db_outbox_ids(rvt_db *db, const char *routing_key, size_t *n);

/* The event id the outbox holds for a document's change of that type
 * (the newest), into out (64 bytes); 0 or -1. */
int evt_db_event_id(rvt_db *db, const char *doc_id, const char *routing_key,
                    char *out);

/* kh_processed_event rows of one event with that outcome (-1 on error). */
long long evt_db_event_processed(rvt_db *db, const char *event_id,
                                 const char *outcome);

/* Polls until each of the n event ids (ids[0..n), 64 bytes each, borrowed
 * for the call) has exactly one "indexed" row in kh_processed_event, up to
 * timeout_ms.  1 if so, 0 on timeout. */
int evt_db_wait_indexed(rvt_db *db, char (*ids)[64], int n,
                        int64_t timeout_ms);

/* Polls until the outbox has no unsent row, up to timeout_ms.  1 if so. */
int evt_db_wait_outbox_empty(rvt_db *db, int64_t timeout_ms);

#endif /* EVT_KIT_H */
