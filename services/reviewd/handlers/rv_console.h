/*
 * rv_console.h: the review console's files as built into reviewd.
 *
 * rv_embed_console.cmake writes rv_console_data.c at build time from the
 * tree's console/ folder: one entry per file with its URL path
 * ("/app.js"), media type, entity tag (from its SHA-256) and bytes.  The
 * table is static const data; rv_console.c serves it (GET / is
 * index.html) with the console's security headers.
 *
 * Threads: read-only data, shared by every worker.
 */
#ifndef RV_CONSOLE_H
#define RV_CONSOLE_H

#include <stddef.h>

typedef struct rv_console_file {
    const char *path;         /* "/index.html" */
    const char *content_type; /* "text/javascript; charset=utf-8" */
    const char *etag;         /* quoted, as the ETag header carries it */
    const char *data;         /* len bytes (and a NUL after them) */
    size_t len;
} rv_console_file;

/* The files, rv_console_files_count of them (then an empty entry). */
extern const rv_console_file rv_console_files[];
extern const size_t rv_console_files_count;

/* The Content-Security-Policy of every console response: scripts, styles
 * and fetches from reviewd itself only, no inline script or style, no
 * plugins, no framing. */
#define RV_CONSOLE_CSP                                          \
    "default-src 'none'; script-src 'self'; style-src 'self'; " \
    "connect-src 'self'; img-src 'self'; base-uri 'none'; "     \
    "form-action 'self'; frame-ancestors 'none'"

/* The file served at path ("/" is "/index.html"), or NULL. */
const rv_console_file *rv_console_find(const char *path);

#endif /* RV_CONSOLE_H */
