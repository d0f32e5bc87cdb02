/*
 * url.h: Redis URLs parsed into an endpoint.
 *
 * The accepted forms (see dlock_client_new):
 *   redis://[user[:pass]@]host[:port][/db][?db=N]
 *   rediss://...            the same over TLS
 *   unix://[user[:pass]@]/absolute/path.sock[?db=N]
 * The scheme is case-insensitive; user and password are percent-decoded;
 * an IPv6 host is written in brackets.  Anything else is DLOCK_INVALID with
 * a message naming the part that is wrong (never the password).
 */
#ifndef DLOCK_SRC_URL_H
#define DLOCK_SRC_URL_H

#include "msg.h"

typedef enum dlock__transport {
    DLOCK__TCP = 0,
    DLOCK__TLS = 1,
    DLOCK__UNIX = 2
} dlock__transport;

/* Longest URL accepted, in bytes. */
#define DLOCK__URL_MAX 4096

typedef struct dlock__endpoint {
    dlock__transport transport;
    char *host;      /* TCP and TLS: host name or address, no brackets */
    int port;        /* TCP and TLS: 1..65535 */
    char *path;      /* UNIX: socket path */
    char *user;      /* NULL when absent */
    char *password;  /* NULL when absent */
    int db;          /* 0.. */
    char desc[300];  /* "host:port", "[::1]:port" or "unix:/path", for logs */
} dlock__endpoint;

/* Parses url into ep (whose previous contents are ignored).  On failure ep
 * holds nothing that needs freeing.  Returns DLOCK_OK, DLOCK_INVALID or
 * DLOCK_NOMEM. */
dlock_err dlock__url_parse(const char *url, dlock__endpoint *ep,
                           dlock__msg *m);

/* Frees what ep owns and zeroes it; safe on a zeroed endpoint. */
void dlock__endpoint_clear(dlock__endpoint *ep);

#endif /* DLOCK_SRC_URL_H */
