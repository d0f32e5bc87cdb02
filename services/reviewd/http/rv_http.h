/*
 * rv_http.h: reviewd's HTTP server on GNU libmicrohttpd.
 *
 * libmicrohttpd runs an epoll loop in each of a few event-loop threads
 * (MHD_USE_EPOLL_INTERNAL_THREAD with a pool, one per CPU); they read
 * requests, write answers and answer /healthz from memory.  The
 * listening socket is ours, not MHD's: a thread of its own accepts and
 * hands each connection over (rv_listener.h says why).  Every other
 * handler runs on one of REVIEWD_THREADS workers (rv_jobs.h), each with
 * its own PostgreSQL connection, while its connection is suspended, so a
 * request blocked on a server never holds up a connection that shares
 * its event loop.  Limits: MHD's connection
 * limit (REVIEWD_MAX_CONNECTIONS) and per-address limit
 * (REVIEWD_MAX_CONNECTIONS_PER_IP), its idle timeout
 * (REVIEWD_CONNECTION_TIMEOUT_S) and a per-connection memory pool that
 * bounds headers; ours: absolute deadlines for headers and body
 * (rv_conns.h), JSON 414/431 under MHD's pool, and the body accumulated
 * under the 1 MiB cap and the process-wide REVIEWD_BODY_BUFFER_MB.
 *
 * Ownership: rv_http_start / rv_http_stop.  Threads: start and stop are
 * called from main only.
 */
#ifndef RV_HTTP_H
#define RV_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/rv_app.h"

typedef struct rv_http rv_http;

/*
 * Binds cfg->listen_host:listen_port and starts the workers.  Returns the
 * server, with the bound port (useful when the port was 0) in *port, or
 * NULL with a message in errbuf.
 */
rv_http *rv_http_start(rv_app *app, uint16_t *port, char *errbuf,
                       size_t errlen);

/*
 * Stops accepting (the listening socket is closed: new clients are
 * refused), waits up to drain_s seconds for in-flight requests to finish
 * (their responses are sent), then joins the workers (which closes their
 * PostgreSQL connections) and closes every connection.
 */
void rv_http_stop(rv_http *http, int drain_s);

#endif /* RV_HTTP_H */
