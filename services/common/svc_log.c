/*
 * svc_log.c: JSON-lines logging for the services
 * (reviewd and kh-indexer).
 *
 * Why JSON lines: operators grep by request id and ship logs to a store
 * that indexes fields; one object per line needs no parser rules.  A
 * line is built with jansson (which escapes everything, so a hostile
 * request id or path cannot forge a line), or, for the line of every
 * request, field by field by svc_log_line (escaping as jansson does and
 * leaving out what is not UTF-8, the same guarantee for a fraction of the
 * CPU), and written with a single write(2) under a mutex.  The file
 * descriptor is swapped, not closed and reused, on reopen, so a writer never sees a half-switched state.
 *
 * Why the lines of svc_log_line may be buffered (svc_log_buffer): one
 * write(2) per request was a tenth of a GET's system calls and 3 % of
 * reviewd's CPU on it.  Buffered lines are appended under the same mutex
 * and written together by a flusher thread at most flush_ms after the
 * first of them, or at once when the buffer is full; every line written
 * by svc_log_write (errors, state changes) first writes what is pending,
 * so the file keeps the order in which lines were made, and reopen and
 * free write it too, so nothing is lost on a clean exit.
 */
#include "svc_log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "svc_deadline.h"
#include "svc_json.h"

struct svc_log {
    pthread_mutex_t mu;
    int fd;     /* 2 for stderr */
    char *path; /* NULL for stderr */
    svc_log_level min_level;
    /* svc_log_buffer: lines of svc_log_line waiting for the flusher */
    char *pend;      /* NULL: every line is written at once */
    size_t pend_len; /* bytes in pend, whole lines only */
    size_t pend_cap;
    int flush_ms;
    int stopping;      /* svc_log_free: the flusher writes and exits */
    pthread_cond_t cv; /* pend became non-empty, or stopping */
    pthread_t flusher;
};

/* A buffer of this size holds some 2,000 request lines (tens of ms of
 * the busiest benchmark) before a writer has to flush it itself. */
#define PEND_CAP (512 * 1024)

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static int open_log_file(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

svc_log *svc_log_new(const char *path, svc_log_level min_level, char *errbuf,
                     size_t errlen)
{
    svc_log *log = calloc(1, sizeof(*log));

    if (log == NULL) {
        snprintf(errbuf, errlen, "log: out of memory");
        return NULL;
    }
    pthread_mutex_init(&log->mu, NULL);
    log->fd = STDERR_FILENO;
    log->min_level = min_level;
    if (path == NULL || path[0] == '\0')
        return log;
    log->path = strdup(path);
    log->fd = log->path != NULL ? open_log_file(path) : -1;
    if (log->fd < 0) {
        snprintf(errbuf, errlen, "REVIEWD_LOG_FILE: cannot open %s: %s", path,
                 strerror(errno));
        log->fd = STDERR_FILENO;
        svc_log_free(log);
        return NULL;
    }
    return log;
}

void svc_log_free(svc_log *log)
{
    if (log == NULL)
        return;
    if (log->pend != NULL) {
        pthread_mutex_lock(&log->mu);
        log->stopping = 1;
        pthread_cond_signal(&log->cv);
        pthread_mutex_unlock(&log->mu);
        pthread_join(log->flusher, NULL); /* it writes what is pending */
        pthread_cond_destroy(&log->cv);
        free(log->pend);
    }
    if (log->fd != STDERR_FILENO && log->fd >= 0)
        close(log->fd);
    pthread_mutex_destroy(&log->mu);
    free(log->path);
    free(log);
}

/* Writes all of buf, retrying short writes and EINTR. */
static void write_fully(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        const ssize_t n = write(fd, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

/* Writes the buffered lines, in one write(2); the caller holds log->mu. */
static void write_pending(svc_log *log)
{
    if (log->pend_len > 0)
        write_fully(log->fd, log->pend, log->pend_len);
    log->pend_len = 0;
}

int svc_log_reopen(svc_log *log)
{
    int fd;
    int old;

    if (log == NULL || log->path == NULL)
        return 0;
    fd = open_log_file(log->path);
    if (fd < 0)
        return -1;
    pthread_mutex_lock(&log->mu);
    write_pending(log); /* to the file the lines were made for */
    old = log->fd;
    log->fd = fd;
    pthread_mutex_unlock(&log->mu);
    close(old);
    return 0;
}

/* strftime writes the date and time (it returns 0, and we write "", when
 * out is too small), then the milliseconds, an unsigned value below 1000,
 * so no field can outgrow its width: snprintf with a year of any size was
 * what -O3's -Wformat-truncation rightly doubted. */
void svc_log_timestamp(char *out, size_t outlen)
{
    struct timespec ts;
    struct tm tm;
    size_t n;

    if (outlen == 0)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(out, outlen, "%Y-%m-%dT%H:%M:%S", &tm);
    if (n == 0) {
        out[0] = '\0';
        return;
    }
    snprintf(out + n, outlen - n, ".%03uZ",
             (unsigned)(ts.tv_nsec / 1000000) % 1000u);
}

/* Writes text[0..len) and a newline as one line, in one write(2), after
 * the lines still buffered; text has room for the newline at text[len]
 * (its NUL). */
static void write_line(svc_log *log, char *text, size_t len)
{
    text[len] = '\n';
    pthread_mutex_lock(&log->mu);
    write_pending(log);
    write_fully(log->fd, text, len + 1);
    pthread_mutex_unlock(&log->mu);
}

/* Adds a line (with room for its newline, as write_line) to the buffer
 * when there is one, else writes it at once.  The flusher is woken only
 * by the first line of a batch. */
static void buffer_line(svc_log *log, char *text, size_t len)
{
    text[len] = '\n';
    pthread_mutex_lock(&log->mu);
    if (log->pend == NULL || len + 1 > log->pend_cap) {
        write_pending(log);
        write_fully(log->fd, text, len + 1);
    } else {
        if (log->pend_len + len + 1 > log->pend_cap)
            write_pending(log);
        if (log->pend_len == 0)
            pthread_cond_signal(&log->cv);
        memcpy(log->pend + log->pend_len, text, len + 1);
        log->pend_len += len + 1;
    }
    pthread_mutex_unlock(&log->mu);
}

/* Waits for a first buffered line, then flush_ms more (so a batch is
 * written at most flush_ms after its first line was made), writes the
 * batch, and again, until svc_log_free; then writes what is left. */
static void *flusher_main(void *arg)
{
    svc_log *log = arg;

    pthread_mutex_lock(&log->mu);
    while (!log->stopping) {
        struct timespec until;

        while (log->pend_len == 0 && !log->stopping)
            pthread_cond_wait(&log->cv, &log->mu);
        until = svc_deadline_timespec_in(log->flush_ms);
        while (!log->stopping
               && pthread_cond_timedwait(&log->cv, &log->mu, &until)
                      != ETIMEDOUT)
            ; /* a writer's wake-up after it flushed a full buffer */
        write_pending(log);
    }
    write_pending(log);
    pthread_mutex_unlock(&log->mu);
    return NULL;
}

int svc_log_buffer(svc_log *log, int flush_ms, char *errbuf, size_t errlen)
{
    pthread_condattr_t attr;
    int rc;

    if (log == NULL || log->pend != NULL || flush_ms < 1) {
        snprintf(errbuf, errlen, "log: cannot buffer this log (flush %d ms)",
                 flush_ms);
        return -1;
    }
    log->pend = malloc(PEND_CAP);
    if (log->pend == NULL) {
        snprintf(errbuf, errlen, "log: out of memory for the line buffer");
        return -1;
    }
    log->pend_cap = PEND_CAP;
    log->flush_ms = flush_ms;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&log->cv, &attr);
    pthread_condattr_destroy(&attr);
    rc = pthread_create(&log->flusher, NULL, flusher_main, log);
    if (rc != 0) {
        snprintf(errbuf, errlen, "log: cannot start the flusher: %s",
                 strerror(rc));
        pthread_cond_destroy(&log->cv);
        free(log->pend);
        log->pend = NULL;
        return -1;
    }
    return 0;
}

void svc_log_write(svc_log *log, svc_log_level level, const char *msg,
                   json_t *fields)
{
    char ts[32];
    json_t *line;
    char *text;

    if (log == NULL || level < log->min_level) {
        json_decref(fields);
        return;
    }
    svc_log_timestamp(ts, sizeof(ts));
    line = json_pack("{s:s,s:s,s:s}", "ts", ts, "level", level_names[level],
                     "msg", msg);
    if (line == NULL) {
        json_decref(fields);
        return;
    }
    if (json_is_object(fields))
        json_object_update_missing(line, fields);
    json_decref(fields);
    text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER
                                | JSON_REAL_PRECISION(6));
    json_decref(line);
    if (text == NULL)
        return;
    /* json_dumps leaves room for the newline: it overwrites the NUL. */
    write_line(log, text, strlen(text));
    free(text);
}

/* ---- lines built field by field ------------------------------------------ */

/* Makes room for n more bytes and the final newline; -1 once it failed. */
static int line_reserve(svc_log_line *line, size_t n)
{
    size_t cap = line->cap;
    char *p;

    if (line->failed)
        return -1;
    if (line->len + n + 1 <= line->cap)
        return 0;
    while (cap < line->len + n + 1)
        cap *= 2;
    p = malloc(cap);
    if (p == NULL) {
        line->failed = 1;
        return -1;
    }
    memcpy(p, line->buf, line->len);
    if (line->buf != line->inline_buf)
        free(line->buf);
    line->buf = p;
    line->cap = cap;
    return 0;
}

static void line_append(svc_log_line *line, const char *s, size_t n)
{
    if (line_reserve(line, n) == 0) {
        memcpy(line->buf + line->len, s, n);
        line->len += n;
    }
}

static void line_literal(svc_log_line *line, const char *s)
{
    line_append(line, s, strlen(s));
}

/* The escape of c (a quote, a backslash or a control character) as
 * jansson writes it, into esc; returns its length. */
static size_t escape_of(unsigned char c, char esc[6])
{
    static const char hex[] = "0123456789abcdef";
    static const char shorts[] = "\"\"\\\\\bb\ff\nn\rr\tt";

    esc[0] = '\\';
    for (size_t i = 0; shorts[i] != '\0'; i += 2) {
        if ((unsigned char)shorts[i] == c) {
            esc[1] = shorts[i + 1];
            return 2;
        }
    }
    memcpy(esc + 1, "u00", 3);
    esc[4] = hex[c >> 4];
    esc[5] = hex[c & 15];
    return 6;
}

/* Appends s as the inside of a JSON string. */
static void line_escaped(svc_log_line *line, const char *s)
{
    const char *run = s;
    char esc[6];

    for (; *s != '\0'; s++) {
        const unsigned char c = (unsigned char)*s;

        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        line_append(line, run, (size_t)(s - run));
        line_append(line, esc, escape_of(c, esc));
        run = s + 1;
    }
    line_append(line, run, (size_t)(s - run));
}

/* Appends ,"key": (the key is one of ours, escaped all the same). */
static void line_key(svc_log_line *line, const char *key)
{
    line_literal(line, ",\"");
    line_escaped(line, key);
    line_literal(line, "\":");
}

int svc_log_line_begin(svc_log *log, svc_log_level level, const char *msg,
                       svc_log_line *line)
{
    char ts[32];

    if (log == NULL || level < log->min_level)
        return 0;
    line->log = log;
    line->buf = line->inline_buf;
    line->cap = sizeof(line->inline_buf);
    line->len = 0;
    line->failed = 0;
    svc_log_timestamp(ts, sizeof(ts));
    line_literal(line, "{\"ts\":\"");
    line_literal(line, ts);
    line_literal(line, "\",\"level\":\"");
    line_literal(line, level_names[level]);
    line_literal(line, "\",\"msg\":\"");
    line_escaped(line, msg);
    line_literal(line, "\"");
    return 1;
}

void svc_log_line_str(svc_log_line *line, const char *key, const char *value)
{
    if (value == NULL || !svc_utf8_valid(value, strlen(value)))
        return;
    line_key(line, key);
    line_literal(line, "\"");
    line_escaped(line, value);
    line_literal(line, "\"");
}

void svc_log_line_int(svc_log_line *line, const char *key, long long value)
{
    char num[24];

    snprintf(num, sizeof(num), "%lld", value);
    line_key(line, key);
    line_literal(line, num);
}

void svc_log_line_fixed3(svc_log_line *line, const char *key, double value)
{
    char num[48];

    /* JSON has no NaN or infinity, and a duration is never that long. */
    if (!isfinite(value) || fabs(value) > 1e15)
        value = 0;
    snprintf(num, sizeof(num), "%.3f", value);
    line_key(line, key);
    line_literal(line, num);
}

void svc_log_line_end(svc_log_line *line)
{
    line_literal(line, "}");
    if (!line->failed)
        buffer_line(line->log, line->buf, line->len);
    if (line->buf != line->inline_buf)
        free(line->buf);
    line->buf = line->inline_buf;
}

int svc_log_level_parse(const char *text)
{
    size_t i;

    for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (strcmp(text, level_names[i]) == 0)
            return (int)i;
    return -1;
}

/* Appends n bytes of src to out (capacity outlen, length *used). */
static void append(char *out, size_t outlen, size_t *used, const char *src,
                   size_t n)
{
    if (*used + 1 >= outlen)
        return;
    if (n > outlen - 1 - *used)
        n = outlen - 1 - *used;
    memcpy(out + *used, src, n);
    *used += n;
    out[*used] = '\0';
}

/* Copies s to out with the value of "password=" (a libpq key=value
 * string) replaced by "***". */
static void redact_keyword(const char *s, char *out, size_t outlen)
{
    const char *p = strstr(s, "password=");
    size_t used = 0;

    out[0] = '\0';
    if (p == NULL) {
        append(out, outlen, &used, s, strlen(s));
        return;
    }
    p += strlen("password=");
    append(out, outlen, &used, s, (size_t)(p - s));
    append(out, outlen, &used, "***", 3);
    p += strcspn(p, " &");
    append(out, outlen, &used, p, strlen(p));
}

/* A URI may also carry ?password=... in its query string. */
static void redact_query_password(char *out, size_t outlen)
{
    char *copy;

    if (strstr(out, "password=") == NULL)
        return;
    copy = strdup(out);
    if (copy == NULL) {
        out[0] = '\0';
        return;
    }
    redact_keyword(copy, out, outlen);
    free(copy);
}

void svc_log_redact_url(const char *url, char *out, size_t outlen)
{
    const char *auth;
    const char *at;
    const char *colon;
    size_t used = 0;

    if (outlen == 0)
        return;
    out[0] = '\0';
    url = url != NULL ? url : "";
    auth = strstr(url, "://");
    if (auth == NULL) {
        redact_keyword(url, out, outlen);
        return;
    }
    auth += 3;
    at = auth + strcspn(auth, "@/?#");
    colon = memchr(auth, ':', (size_t)(at - auth));
    if (*at != '@' || colon == NULL) {
        redact_keyword(url, out, outlen);
        return;
    }
    append(out, outlen, &used, url, (size_t)(colon + 1 - url));
    append(out, outlen, &used, "***", 3);
    append(out, outlen, &used, at, strlen(at));
    redact_query_password(out, outlen);
}

/* ---- the password of a connection string, wherever a message shows it --- */

#define SECRETS_MAX 8

/* The forms of one password that a message may show. */
typedef struct secrets {
    char *s[SECRETS_MAX];
    size_t n;
    int failed; /* out of memory */
} secrets;

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Adds p[0..len) and, when it holds '%', its percent-decoded form. */
static void secrets_add(secrets *z, const char *p, size_t len)
{
    char *copy;
    size_t i, o = 0;

    if (len == 0 || z->n + 2 > SECRETS_MAX)
        return;
    copy = strndup(p, len);
    if (copy == NULL) {
        z->failed = 1;
        return;
    }
    z->s[z->n++] = copy;
    if (memchr(p, '%', len) == NULL)
        return;
    copy = strndup(p, len);
    if (copy == NULL) {
        z->failed = 1;
        return;
    }
    for (i = 0; i < len; i++) {
        const int hi = i + 2 < len ? hex_value(p[i + 1]) : -1;
        const int lo = i + 2 < len ? hex_value(p[i + 2]) : -1;

        if (p[i] == '%' && hi >= 0 && lo >= 0) {
            copy[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            copy[o++] = p[i];
        }
    }
    copy[o] = '\0';
    z->s[z->n++] = copy;
}

/* A URI's user:password@: from the first ':' after "://" to the last
 * '@' (a '/' or '?' in the password must not end it early). */
static void secrets_userinfo(secrets *z, const char *url)
{
    const char *auth = strstr(url, "://");
    const char *at;
    const char *colon;

    if (auth == NULL)
        return;
    auth += 3;
    at = strrchr(auth, '@');
    colon = at != NULL ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon != NULL)
        secrets_add(z, colon + 1, (size_t)(at - colon - 1));
}

/* Every "password" keyword or parameter: its value, quoted or a word,
 * after an optional '=' with spaces around it. */
static void secrets_keywords(secrets *z, const char *url)
{
    const char *p = url;

    while ((p = strstr(p, "password")) != NULL) {
        const int starts = p == url || strchr(" \t?&", p[-1]) != NULL;
        const char *v = p + strlen("password");
        size_t len;

        p = v;
        if (!starts || strchr(" \t=", *v) == NULL || *v == '\0')
            continue;
        v += strspn(v, " \t");
        v += *v == '=';
        v += strspn(v, " \t");
        if (*v == '\'') {
            v++;
            len = strcspn(v, "'");
        } else {
            len = strcspn(v, " \t&#");
        }
        secrets_add(z, v, len);
    }
}

/* The length of the form of a password that text starts with, or 0. */
static size_t secret_at(const secrets *z, const char *text)
{
    size_t i, best = 0;

    for (i = 0; i < z->n; i++) {
        const size_t len = strlen(z->s[i]);

        if (len > best && strncmp(text, z->s[i], len) == 0)
            best = len;
    }
    return best;
}

/* 1 if p[0..len) is a piece of a form of the password. */
static int secret_piece(const secrets *z, const char *p, size_t len)
{
    size_t i;

    for (i = 0; i < z->n && len > 0; i++)
        if (memmem(z->s[i], strlen(z->s[i]), p, len) != NULL)
            return 1;
    return 0;
}

static void redact_with(const secrets *z, const char *text, char *out,
                        size_t outlen)
{
    size_t used = 0;

    out[0] = '\0';
    while (*text != '\0') {
        const size_t hit = secret_at(z, text);
        const char *close = text[0] == '"' ? strchr(text + 1, '"') : NULL;

        if (hit > 0) {
            append(out, outlen, &used, "***", 3);
            text += hit;
        } else if (close != NULL
                   && secret_piece(z, text + 1, (size_t)(close - text - 1))) {
            append(out, outlen, &used, "\"***\"", 5);
            text = close + 1;
        } else {
            append(out, outlen, &used, text, 1);
            text++;
        }
    }
}

void svc_log_redact_secrets(const char *url, const char *text, char *out,
                            size_t outlen)
{
    secrets z;
    size_t i;

    if (outlen == 0)
        return;
    memset(&z, 0, sizeof(z));
    secrets_userinfo(&z, url != NULL ? url : "");
    secrets_keywords(&z, url != NULL ? url : "");
    if (z.failed)
        snprintf(out, outlen, "(message withheld: out of memory)");
    else
        redact_with(&z, text != NULL ? text : "", out, outlen);
    for (i = 0; i < z.n; i++)
        free(z.s[i]);
}
