/*
 * replwait.h: a write that waits for replicas to acknowledge it.
 *
 * Redis replicates asynchronously, so a master can grant a lock and fail
 * before any replica has the grant; the replica promoted in its place
 * then grants the same lock again.  WAIT N timeout, sent on the same
 * connection right after the write, returns how many replicas have
 * acknowledged every write of that connection so far.  A grant or renewal
 * that reached N replicas survives the failover of its master to any of
 * them.  (WAITAOF, on Redis 7.2 and later, also waits for the fsync of the
 * append-only file; the servers we test on are 7.0, which lack it.)
 *
 * The write and the WAIT go out in one send, so they cost one round trip
 * when the replicas keep up, and at most the WAIT timeout when they do
 * not.
 *
 * Threads: the connection is the caller's for the call, as for
 * dlock__conn_call.
 */
#ifndef DLOCK_SRC_REPLWAIT_H
#define DLOCK_SRC_REPLWAIT_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "transport/conn.h"
#include "dlock/client.h"
#include "base/msg.h"
#include "transport/url.h"

/* wait_timeout_ms when neither the options nor the URL give one. */
#define DLOCK__WAIT_TIMEOUT_MS 1000

/*
 * Completes the client's replication options from its URL: the URL's
 * ?wait_replicas and ?wait_timeout fill the fields of o that are 0, and
 * wait_timeout_ms gets its default.  Refuses wait_replicas on a Redlock
 * deployment (DLOCK_INVALID): its masters are independent, and a grant
 * is on a majority of them already.
 */
dlock_err dlock__replwait_opts(dlock_client_opts *o,
                               const dlock__deployment *d, dlock__msg *m);

/* 1 when a write that acked replicas acknowledged falls short of what
 * the options ask for (never when they ask for none). */
int dlock__replwait_short(const dlock_client_opts *o, int acked);

/*
 * Sends the command and then WAIT replicas timeout_ms, and reads both
 * replies, all before deadline_us (which should leave room for
 * timeout_ms).  *reply is the command's reply (the caller's; an error
 * reply is returned as a reply), *acked the number of replicas that
 * acknowledged (0 when the command failed).  Returns DLOCK_OK, a
 * transport error, or DLOCK_PROTOCOL when WAIT answers something other
 * than an integer (a server without replication support, a proxy) to a
 * command that did not fail: a command answered with an error (READONLY
 * from a demoted master, whose WAIT fails too) returns DLOCK_OK with that
 * answer and *acked 0.
 */
dlock_err dlock__call_with_wait(dlock__conn *conn, int argc, const char **argv,
                                const size_t *lens, int replicas,
                                int timeout_ms, int64_t deadline_us,
                                redisReply **reply, int *acked, dlock__msg *m);

#endif /* DLOCK_SRC_REPLWAIT_H */
