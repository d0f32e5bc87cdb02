/*
 * rv_http.h: reviewd's HTTP server on GNU libmicrohttpd.
 *
 * libmicrohttpd runs an epoll loop in each of REVIEWD_THREADS worker
 * threads (MHD_USE_EPOLL_INTERNAL_THREAD with a thread pool); a request is
 * handled start to end on the thread that accepted it, which is why each
 * worker can own its PostgreSQL connection.  Limits are MHD's own: the
 * connection limit (REVIEWD_MAX_CONNECTIONS), the idle/slow-client timeout
 * (REVIEWD_CONNECTION_TIMEOUT_S), and a per-connection memory pool that
 * bounds headers; the body is accumulated here under the 1 MiB cap.
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
 * Stops accepting, waits up to drain_s seconds for in-flight requests to
 * finish (their responses are sent), then closes every connection and
 * joins the workers (which closes their PostgreSQL connections).
 */
void rv_http_stop(rv_http *http, int drain_s);

#endif /* RV_HTTP_H */
