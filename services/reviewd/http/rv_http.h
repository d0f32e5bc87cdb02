/*
 * rv_http.h: reviewd's HTTP/1.1 server, its own (rv_http.c says why).
 *
 * A listener thread accepts (rv_listener.h) and hands each connection
 * to one of a few event-loop threads (rv_loop.h, one per CPU), which
 * read and parse its requests (rv_hparse.h), answer /healthz and the
 * console from memory, send document reads on their own PostgreSQL
 * connections, and write every answer.  Every other handler runs on one
 * of REVIEWD_THREADS workers (rv_jobs.h), each with its own PostgreSQL
 * connection, so a request blocked on a server never holds up a
 * connection that shares its event loop.  Limits: connections
 * (REVIEWD_MAX_CONNECTIONS) and per address
 * (REVIEWD_MAX_CONNECTIONS_PER_IP), the idle timeout
 * (REVIEWD_CONNECTION_TIMEOUT_S), absolute deadlines for headers and body
 * (REVIEWD_HEADER_TIMEOUT_S, REVIEWD_BODY_TIMEOUT_S), the parser's limits
 * (8 KiB target, 16 KiB headers), and the body accumulated under the
 * 1 MiB cap and the process-wide REVIEWD_BODY_BUFFER_MB.
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
 * Binds cfg->listen_host:listen_port and starts the workers and the
 * event loops.  Returns the server, with the bound port (useful when the
 * port was 0) in *port, or NULL with a message in errbuf.
 */
rv_http *rv_http_start(rv_app *app, uint16_t *port, char *errbuf,
                       size_t errlen);

/*
 * Stops accepting (the listening socket is closed: new clients are
 * refused), waits up to drain_s seconds for in-flight requests to finish
 * (their responses are sent), then joins the workers (which closes their
 * PostgreSQL connections) and the event loops, closing every connection.
 */
void rv_http_stop(rv_http *http, int drain_s);

#endif /* RV_HTTP_H */
