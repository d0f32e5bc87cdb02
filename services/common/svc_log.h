/*
 * svc_log.h: the services' JSON-lines log (access and error log in
 * one stream).
 *
 * Every line is one JSON object with "ts" (RFC 3339 UTC, milliseconds),
 * "level" and "msg", plus fields given by the caller, so that a log
 * shipper can parse it without rules.  Lines go to stderr, or to the file
 * named by REVIEWD_LOG_FILE, which svc_log_reopen opens again (SIGHUP, for
 * logrotate).  Secrets are kept out by construction: callers pass only the
 * fields they choose, and svc_log_redact_url removes passwords from URLs.
 *
 * Ownership: svc_log_new creates the log, svc_log_free closes it.  Field
 * objects passed to svc_log_write are consumed (reference stolen).
 *
 * Threads: every function may be called from any thread at once; one line
 * is written with one write(2) under the log's mutex (or, buffered, is
 * appended whole under it), so lines never interleave.  An svc_log_line
 * belongs to the thread that began it.
 */
#ifndef SVC_LOG_H
#define SVC_LOG_H

#include <jansson.h>
#include <stddef.h>

typedef enum svc_log_level {
    SVC_LOG_DEBUG = 0,
    SVC_LOG_INFO = 1,
    SVC_LOG_WARN = 2,
    SVC_LOG_ERROR = 3
} svc_log_level;

typedef struct svc_log svc_log;

/*
 * Opens the log.  path: a file to append to, or NULL for stderr.
 * min_level: lines below it are dropped.  Returns NULL on failure and
 * writes why to errbuf.
 */
svc_log *svc_log_new(const char *path, svc_log_level min_level, char *errbuf,
                     size_t errlen);

/*
 * Buffers the lines of svc_log_line (the access log): they are written in
 * batches by a thread of the log's own, each batch at most flush_ms after
 * its first line was made (and at once when 512 KiB are pending), instead
 * of one write(2) per line.  Lines of svc_log_write are still written at
 * once, after whatever is pending, so the file keeps the order of the
 * lines; svc_log_reopen and svc_log_free write what is pending first.
 * Lines pending when the process dies without svc_log_free are lost.
 * Call it once, before other threads use the log.  Returns 0, or -1 with
 * why in errbuf (the log then writes every line at once, as before).
 */
int svc_log_buffer(svc_log *log, int flush_ms, char *errbuf, size_t errlen);

/* Writes what is buffered, closes the file (never stderr) and frees the
 * log.  NULL is fine. */
void svc_log_free(svc_log *log);

/* Reopens the log file (no-op for stderr).  Returns 0, or -1 and keeps the
 * old file open. */
int svc_log_reopen(svc_log *log);

/*
 * Writes one line: {"ts":..,"level":..,"msg":msg, ...fields}.  fields may
 * be NULL or a JSON object, whose reference is stolen (it is freed here),
 * so json_pack(...) can be passed directly.  A NULL log writes nothing.
 */
void svc_log_write(svc_log *log, svc_log_level level, const char *msg,
                   json_t *fields);

/*
 * A line built field by field: the object svc_log_write would write, made
 * without jansson values, for the line of every request (reviewd's access log),
 * where building, merging and dumping two jansson objects cost more than
 * the rest of the log put together.  Fields come out in the order given,
 * after "ts", "level" and "msg".  Strings are escaped as jansson escapes
 * them; a string field whose value is not UTF-8 is left out, and the rest
 * of the line is still written.  The line lives in the struct (on the
 * caller's stack) up to SVC_LOG_LINE_INLINE bytes and on the heap beyond;
 * if that allocation fails the line is dropped.
 *
 *   svc_log_line line;
 *   if (svc_log_line_begin(log, SVC_LOG_INFO, "request", &line)) {
 *       svc_log_line_str(&line, "path", path);
 *       svc_log_line_end(&line);
 *   }
 */
#define SVC_LOG_LINE_INLINE 1024

typedef struct svc_log_line {
    svc_log *log;
    char *buf; /* inline_buf, or a heap copy once it outgrew it */
    size_t len;
    size_t cap;
    int failed;
    char inline_buf[SVC_LOG_LINE_INLINE];
} svc_log_line;

/* Starts a line.  Returns 1, or 0 when the level is filtered out (or the
 * log is NULL): then no other svc_log_line_ call is needed. */
int svc_log_line_begin(svc_log *log, svc_log_level level, const char *msg,
                       svc_log_line *line);

/* Appends "key":"value" (value escaped; left out if not UTF-8). */
void svc_log_line_str(svc_log_line *line, const char *key, const char *value);

/* Appends "key":value for an integer. */
void svc_log_line_int(svc_log_line *line, const char *key, long long value);

/* Appends "key":value for a real, with three decimals (milliseconds to
 * the microsecond). */
void svc_log_line_fixed3(svc_log_line *line, const char *key, double value);

/* Closes the object, writes the line with one write(2) (or buffers it,
 * svc_log_buffer) and frees what the line allocated. */
void svc_log_line_end(svc_log_line *line);

/* Parses "debug", "info", "warn" or "error"; -1 for anything else. */
int svc_log_level_parse(const char *text);

/*
 * Copies url into out (size outlen) with any password replaced by "***",
 * for logging connection targets.  Also works for libpq key=value strings
 * (password=...).  Always NUL-terminates.
 */
void svc_log_redact_url(const char *url, char *out, size_t outlen);

/*
 * Copies text (a message about url, such as libpq's) into out (size
 * outlen) with url's password taken out wherever it shows: every
 * occurrence of the password as url writes it (a URI's user:password@,
 * ?password=, a key=value string's password, also with spaces around the
 * '=' or none) and percent-decoded, becomes "***", and so does every
 * double-quoted fragment of text that is a piece of one of them.  libpq
 * quotes the part of a connection string it could not use, which can be
 * the whole URI or a piece of the password (a '/' in it makes libpq read
 * what follows the ':' as a port: 'invalid integer value "S3" for
 * connection option "port"').  Redacts too much rather than too little.
 * Always NUL-terminates; if memory runs out, out says so and holds
 * nothing of text.
 */
void svc_log_redact_secrets(const char *url, const char *text, char *out,
                            size_t outlen);

/* Formats the current time as "2026-12-02T10:00:00.123Z" into out
 * (at least 25 bytes). */
void svc_log_timestamp(char *out, size_t outlen);

#endif /* SVC_LOG_H */
