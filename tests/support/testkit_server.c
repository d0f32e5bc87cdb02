/*
 * testkit_server.c: private redis-server processes for tests that must
 * restart, pause or reconfigure the server (see testkit.h).
 *
 * Why private: the shared stack's Redis serves every test running in
 * parallel, so a test may never restart it, SIGSTOP it, flush its scripts
 * or change its configuration.  Such a test gets its own server instead:
 *
 *   var/test/<name>-<pid>/redis.conf   written here, one directive a line
 *                        redis.log     the server's log, shown on failure
 *                        redis.sock    with opts.unix_socket
 *                        *.pem         with opts.tls (made by openssl)
 *
 * Ports: a free loopback port is found by binding port 0 and reading it
 * back.  Another process may take it before redis-server binds it; then the
 * server exits at once and the start is tried again with new ports.
 *
 * testkit_scratch_dir lives here too: it is the same var/test/ layout,
 * for tests that keep files of their own.
 *
 * Invariants: r->pid is the pid of our child redis-server while it runs
 * and 0 once it has been reaped; every wait is bounded; the server gets
 * PR_SET_PDEATHSIG, so it exits when the test process does, even after a
 * crash, and is only ever signalled through its own pid.
 */
#include "testkit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_ATTEMPTS 3
#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 5000

int testkit_free_port(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;

    if (fd < 0)
        return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0
        && getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

/* Creates path and its parents (mkdir -p). */
static int make_dirs(const char *path)
{
    char buf[512];

    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

char *testkit_scratch_dir(char *buf, size_t len, const char *name)
{
    int n = snprintf(buf, len, "%s/var/test/%s-%ld", testkit_source_dir(),
                     name, (long)getpid());

    if (n < 0 || (size_t)n >= len) {
        fprintf(stderr, "testkit: scratch path for %s is too long\n", name);
        return NULL;
    }
    if (make_dirs(buf) != 0) {
        fprintf(stderr, "testkit: mkdir -p %s: %s\n", buf, strerror(errno));
        return NULL;
    }
    return buf;
}

int testkit_run_logged(const char *const *argv, const char *log,
                       int64_t timeout_ms)
{
    int64_t until = testkit_now_ms() + timeout_ms;
    pid_t pid = fork();
    int status;

    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (;;) {
        pid_t got = waitpid(pid, &status, timeout_ms > 0 ? WNOHANG : 0);

        if (got == pid)
            break;
        if (got < 0 && errno != EINTR)
            return -1;
        if (got == 0 && testkit_now_ms() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        if (got == 0)
            usleep(10000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Prints the last lines of a log file to stderr. */
static void show_log_tail(const char *log)
{
    FILE *f = fopen(log, "r");
    char buf[4096];
    long size;
    size_t n;

    if (f == NULL)
        return;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0,
          SEEK_SET);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "---- tail of %s ----\n%s\n---- end ----\n", log, buf);
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    int ok;

    if (f == NULL)
        return -1;
    ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Makes a self-signed CA: <dir>/<stem>.pem and <stem>-key.pem. */
static int make_ca(const char *dir, const char *stem, const char *cn,
                   const char *log)
{
    char key[600], cert[600], subj[128];
    const char *argv[] = {
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-subj",
        subj,
        "-keyout",
        key,
        "-out",
        cert,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        NULL,
    };

    snprintf(key, sizeof(key), "%s/%s-key.pem", dir, stem);
    snprintf(cert, sizeof(cert), "%s/%s.pem", dir, stem);
    snprintf(subj, sizeof(subj), "/CN=%s", cn);
    return testkit_run_logged(argv, log, 0) == 0 ? 0 : -1;
}

/* Makes <stem>.pem / <stem>-key.pem signed by the CA "ca", with the
 * extensions in ext (an openssl extfile body). */
static int make_leaf(const char *dir, const char *stem, const char *cn,
                     const char *ext, const char *log)
{
    char key[600], csr[600], cert[600], extfile[600], subj[128];
    char ca[600], ca_key[600], serial[600];
    const char *req[] = {
        "openssl",
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        subj,
        "-keyout",
        key,
        "-out",
        csr,
        NULL,
    };
    const char *sign[] = {
        "openssl", "x509",      "-req",     "-in",
        csr,       "-CA",       ca,         "-CAkey",
        ca_key,    "-CAserial", serial,     "-CAcreateserial",
        "-days",   "2",         "-extfile", extfile,
        "-out",    cert,        NULL,
    };

    snprintf(key, sizeof(key), "%s/%s-key.pem", dir, stem);
    snprintf(csr, sizeof(csr), "%s/%s.csr", dir, stem);
    snprintf(cert, sizeof(cert), "%s/%s.pem", dir, stem);
    snprintf(extfile, sizeof(extfile), "%s/%s.ext", dir, stem);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(ca_key, sizeof(ca_key), "%s/ca-key.pem", dir);
    snprintf(serial, sizeof(serial), "%s/ca.srl", dir);
    snprintf(subj, sizeof(subj), "/CN=%s", cn);
    if (write_file(extfile, ext) != 0)
        return -1;
    return testkit_run_logged(req, log, 0) == 0
                   && testkit_run_logged(sign, log, 0) == 0
               ? 0
               : -1;
}

/* The CA, a server certificate for 127.0.0.1/localhost, a client
 * certificate, and an unrelated CA. */
static int make_certs(testkit_redis *r)
{
    char log[600];
    testkit_certs *c = &r->certs;

    snprintf(log, sizeof(log), "%s/openssl.log", r->dir);
    if (make_ca(r->dir, "ca", "dlock-test-ca", log) != 0
        || make_ca(r->dir, "other-ca", "dlock-unrelated-ca", log) != 0
        || make_leaf(r->dir, "server", "localhost",
                     "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                     "basicConstraints=CA:FALSE\n"
                     "keyUsage=critical,digitalSignature,keyEncipherment\n"
                     "extendedKeyUsage=serverAuth\n",
                     log)
               != 0
        || make_leaf(r->dir, "client", "dlock-test-client",
                     "basicConstraints=CA:FALSE\n"
                     "keyUsage=critical,digitalSignature,keyEncipherment\n"
                     "extendedKeyUsage=clientAuth\n",
                     log)
               != 0) {
        fprintf(stderr, "testkit: making test certificates failed\n");
        show_log_tail(log);
        return -1;
    }
    snprintf(c->ca_file, sizeof(c->ca_file), "%s/ca.pem", r->dir);
    snprintf(c->other_ca_file, sizeof(c->other_ca_file), "%s/other-ca.pem",
             r->dir);
    snprintf(c->server_cert, sizeof(c->server_cert), "%s/server.pem", r->dir);
    snprintf(c->server_key, sizeof(c->server_key), "%s/server-key.pem",
             r->dir);
    snprintf(c->client_cert, sizeof(c->client_cert), "%s/client.pem", r->dir);
    snprintf(c->client_key, sizeof(c->client_key), "%s/client-key.pem",
             r->dir);
    return 0;
}

/* Appends the TLS directives to the configuration in f. */
static void write_tls_conf(FILE *f, const testkit_redis *r)
{
    fprintf(f, "tls-port %d\n", r->tls_port);
    fprintf(f, "tls-cert-file %s\n", r->certs.server_cert);
    fprintf(f, "tls-key-file %s\n", r->certs.server_key);
    fprintf(f, "tls-ca-cert-file %s\n", r->certs.ca_file);
    fprintf(f, "tls-auth-clients %s\n",
            r->opts.tls_auth_clients ? "yes" : "no");
}

static int write_conf(const testkit_redis *r)
{
    FILE *f = fopen(r->conf, "w");

    if (f == NULL)
        return -1;
    fprintf(f, "# written by tests/support/testkit_server.c\n");
    fprintf(f, "bind 127.0.0.1\nport %d\n", r->port);
    fprintf(f, "dir %s\nlogfile %s\n", r->dir, r->log);
    fprintf(f, "daemonize no\nsave \"\"\nprotected-mode no\n");
    fprintf(f, "appendonly %s\n", r->opts.appendonly ? "yes" : "no");
    if (r->opts.unix_socket)
        fprintf(f, "unixsocket %s\nunixsocketperm 700\n", r->unix_path);
    if (r->opts.tls)
        write_tls_conf(f, r);
    if (r->requirepass[0])
        fprintf(f, "requirepass %s\n", r->requirepass);
    if (r->acl_user[0])
        fprintf(f, "user %s on >%s ~* &* +@all\n", r->acl_user, r->acl_pass);
    if (r->extra_conf[0])
        fprintf(f, "%s\n", r->extra_conf);
    return fclose(f) == 0 ? 0 : -1;
}

/* Fills the URLs from the ports and credentials. */
static void describe(testkit_redis *r)
{
    char auth[300] = "";

    if (r->acl_user[0])
        snprintf(auth, sizeof(auth), "%s:%s@", r->acl_user, r->acl_pass);
    else if (r->requirepass[0])
        snprintf(auth, sizeof(auth), ":%s@", r->requirepass);
    snprintf(r->url, sizeof(r->url), "redis://127.0.0.1:%d/0", r->port);
    snprintf(r->admin_url, sizeof(r->admin_url), "redis://%s127.0.0.1:%d/0",
             auth, r->port);
    if (r->opts.tls)
        snprintf(r->tls_url, sizeof(r->tls_url), "rediss://127.0.0.1:%d/0",
                 r->tls_port);
    if (r->opts.unix_socket)
        snprintf(r->unix_url, sizeof(r->unix_url), "unix://%s", r->unix_path);
}

/* Forks and execs redis-server on r->conf; the child dies with us. */
static pid_t spawn_server(const testkit_redis *r)
{
    pid_t parent = getpid();
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(126);
    {
        int fd = open(r->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
    }
    if (r->opts.wallclock
        && (setenv("LD_PRELOAD", testkit_wallclock_shim(), 1) != 0
            || setenv("DLOCK_TEST_WALLCLOCK_FILE", r->wallclock_file, 1) != 0))
        _exit(126);
    execlp("redis-server", "redis-server", r->conf, (char *)NULL);
    _exit(127);
}

/* 1 once our child has exited (and reaps it). */
static int reaped(testkit_redis *r)
{
    int status;
    pid_t got;

    if (r->pid == 0)
        return 1;
    got = waitpid(r->pid, &status, WNOHANG);
    if (got == r->pid || (got < 0 && errno == ECHILD)) {
        r->pid = 0;
        return 1;
    }
    return 0;
}

static int server_gone(void *arg)
{
    return reaped(arg);
}

typedef struct start_wait {
    testkit_redis *r;
    int exited;
} start_wait;

static int answers_or_exited(void *arg)
{
    start_wait *w = arg;

    if (reaped(w->r)) {
        w->exited = 1;
        return 1;
    }
    return testkit_redis_ping(w->r->admin_url);
}

/* Starts the server on the ports in r and waits until it answers. */
static int launch(testkit_redis *r)
{
    start_wait w = {r, 0};

    r->pid = spawn_server(r);
    if (r->pid < 0) {
        r->pid = 0;
        fprintf(stderr, "testkit: fork for redis-server: %s\n",
                strerror(errno));
        return -1;
    }
    r->paused = 0;
    if (testkit_wait_until(answers_or_exited, &w, START_TIMEOUT_MS)
        && !w.exited)
        return 0;
    fprintf(stderr, "testkit: redis-server %s on port %d %s\n", r->name,
            r->port, w.exited ? "exited at start" : "did not answer in 10 s");
    show_log_tail(r->log);
    if (!w.exited)
        testkit_redis_stop(r);
    return -1;
}

/* Copies the caller's strings into r, which owns them from then on. */
static int adopt_opts(testkit_redis *r, const testkit_redis_opts *opts)
{
    if (opts == NULL || opts->name == NULL || opts->name[0] == '\0') {
        fprintf(stderr, "testkit: testkit_redis_start needs opts.name\n");
        return -1;
    }
    r->opts = *opts;
    snprintf(r->name, sizeof(r->name), "%s", opts->name);
    snprintf(r->requirepass, sizeof(r->requirepass), "%s",
             opts->requirepass ? opts->requirepass : "");
    snprintf(r->acl_user, sizeof(r->acl_user), "%s",
             opts->acl_user ? opts->acl_user : "");
    snprintf(r->acl_pass, sizeof(r->acl_pass), "%s",
             opts->acl_pass ? opts->acl_pass : "");
    if (opts->extra_conf != NULL
        && strlen(opts->extra_conf) >= sizeof(r->extra_conf)) {
        fprintf(stderr, "testkit: extra_conf of %s is too long\n", r->name);
        return -1;
    }
    snprintf(r->extra_conf, sizeof(r->extra_conf), "%s",
             opts->extra_conf ? opts->extra_conf : "");
    r->opts.extra_conf = r->extra_conf;
    r->opts.name = r->name;
    r->opts.requirepass = r->requirepass[0] ? r->requirepass : NULL;
    r->opts.acl_user = r->acl_user[0] ? r->acl_user : NULL;
    r->opts.acl_pass = r->acl_pass[0] ? r->acl_pass : NULL;
    return 0;
}

static int prepare_dir(testkit_redis *r)
{
    if (testkit_scratch_dir(r->dir, sizeof(r->dir), r->name) == NULL)
        return -1;
    snprintf(r->conf, sizeof(r->conf), "%s/redis.conf", r->dir);
    snprintf(r->log, sizeof(r->log), "%s/redis.log", r->dir);
    snprintf(r->unix_path, sizeof(r->unix_path), "%s/redis.sock", r->dir);
    if (!r->opts.wallclock)
        return 0;
    snprintf(r->wallclock_file, sizeof(r->wallclock_file), "%s/wallclock",
             r->dir);
    return testkit_wallclock_set(r->wallclock_file, 0);
}

testkit_redis *testkit_redis_start(const testkit_redis_opts *opts)
{
    testkit_redis *r = calloc(1, sizeof(*r));

    if (r == NULL || adopt_opts(r, opts) != 0 || prepare_dir(r) != 0)
        goto fail;
    if (r->opts.tls && make_certs(r) != 0)
        goto fail;
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        r->port = testkit_free_port();
        r->tls_port = r->opts.tls ? testkit_free_port() : 0;
        if (r->port < 0 || r->tls_port < 0 || r->port == r->tls_port)
            continue;
        describe(r);
        if (write_conf(r) != 0) {
            fprintf(stderr, "testkit: writing %s failed\n", r->conf);
            goto fail;
        }
        if (launch(r) == 0)
            return r;
    }
    fprintf(stderr,
            "testkit: could not start redis-server %s after %d "
            "attempts\n",
            opts->name, START_ATTEMPTS);
fail:
    testkit_redis_free(r);
    return NULL;
}

int testkit_redis_stop(testkit_redis *r)
{
    if (r == NULL || r->pid == 0)
        return 0;
    if (r->paused)
        testkit_redis_resume(r);
    kill(r->pid, SIGTERM);
    if (testkit_wait_until(server_gone, r, STOP_TIMEOUT_MS))
        return 0;
    fprintf(stderr,
            "testkit: redis-server %s (pid %ld) ignored SIGTERM for "
            "5 s; killing it\n",
            r->name, (long)r->pid);
    kill(r->pid, SIGKILL);
    if (testkit_wait_until(server_gone, r, STOP_TIMEOUT_MS))
        return 0;
    return -1;
}

int testkit_redis_clock_step(testkit_redis *r, int64_t offset_ms)
{
    if (r == NULL || !r->opts.wallclock) {
        fprintf(stderr, "testkit: clock step on a server started without "
                        "opts.wallclock\n");
        return -1;
    }
    return testkit_wallclock_set(r->wallclock_file, offset_ms);
}

int testkit_redis_restart(testkit_redis *r)
{
    if (testkit_redis_stop(r) != 0)
        return -1;
    return launch(r);
}

int testkit_redis_restart_at(testkit_redis *r, int64_t offset_ms)
{
    if (testkit_redis_stop(r) != 0
        || testkit_wallclock_set(r->wallclock_file, offset_ms) != 0)
        return -1;
    return launch(r);
}

int testkit_redis_pause(testkit_redis *r)
{
    if (r->pid == 0 || kill(r->pid, SIGSTOP) != 0)
        return -1;
    r->paused = 1;
    return 0;
}

int testkit_redis_resume(testkit_redis *r)
{
    if (r->pid == 0 || kill(r->pid, SIGCONT) != 0)
        return -1;
    r->paused = 0;
    return 0;
}

void testkit_scratch_remove(const char *dir)
{
    const char *const argv[] = {"rm", "-rf", "--", dir, NULL};

    /* Only ever a folder this kit made. */
    if (getenv("DLOCK_TEST_KEEP") == NULL && dir[0] != '\0'
        && strstr(dir, "/var/test/") != NULL)
        testkit_run_logged(argv, "/dev/null", 0);
}

void testkit_redis_free(testkit_redis *r)
{
    if (r == NULL)
        return;
    testkit_redis_stop(r);
    testkit_scratch_remove(r->dir);
    free(r);
}
