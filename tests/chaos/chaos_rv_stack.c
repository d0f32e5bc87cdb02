/*
 * chaos_rv_stack.c: the private servers of a reviewd chaos run, and the
 * faults done to them (chaos_rv.h).
 *
 * Everything here is private to the run, because the faults stop and
 * crash servers: a PostgreSQL cluster in var/test/chaos-rv-<pid>/pg
 * (tests/chaos/pg_private.sh, copied from a cluster initdb'd once per
 * build tree), a redis-server without persistence (testkit), and two
 * reviewd processes (rvt_kit) on that database and that Redis, with the
 * review and submit locks' TTL cut to CHAOS_RV_LOCK_TTL_MS so that a
 * pause of a few seconds outlives the lock.  AMQP_URL is empty: the
 * outbox rows are the events the checker counts.
 *
 * The database gets one thing reviewd does not have: an audit trigger on
 * kh_document_review that records every insert and every update of a
 * review row (old and new status, reviewer, fence) in chaos_review_audit,
 * in the same transaction.  The final state of a row cannot show that it
 * was decided twice; its history can.
 *
 * Servers are stopped by pid (testkit, rvt_kit) or through pg_ctl and the
 * cluster's own postmaster.pid, never by name; every wait is bounded.
 * redis-server and reviewd die with us (PR_SET_PDEATHSIG); the postmaster,
 * which pg_ctl detaches, cannot, so a guard process of ours waits for our
 * death (a CTest timeout kills with SIGKILL) and then stops the cluster.
 */
#include "chaos_rv.h"

#include <errno.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SCRIPT_TIMEOUT_MS 120000

/* reviewd's environment on top of rvt_kit's. */
static const char *const reviewd_env[] = {"REVIEWD_REVIEW_LOCK_TTL_MS=1000",
                                          "REVIEWD_SUBMIT_LOCK_TTL_MS=1000",
                                          "REVIEWD_REDIS_CHECK_MS=200",
                                          "REVIEWD_REDIS_TIMEOUT_MS=300",
                                          "REVIEWD_PG_TIMEOUT_S=5",
                                          "AMQP_URL=",
                                          NULL};

/* The history of every review row, written by the row's own
 * transaction. */
static const char audit_sql[] =
    "CREATE TABLE chaos_review_audit ("
    " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " review_id bigint NOT NULL, old_status text, new_status text NOT NULL,"
    " reviewer text, fence numeric, at timestamptz NOT NULL"
    " DEFAULT clock_timestamp());"
    "CREATE FUNCTION chaos_review_audit() RETURNS trigger LANGUAGE plpgsql"
    " AS $fn$ BEGIN"
    " INSERT INTO chaos_review_audit (review_id, old_status, new_status,"
    " reviewer, fence) VALUES (NEW.id, CASE WHEN TG_OP = 'UPDATE' THEN"
    " OLD.status END, NEW.status, NEW.reviewer, NEW.fence);"
    " RETURN NULL; END $fn$;"
    "CREATE TRIGGER chaos_review_audit AFTER INSERT OR UPDATE ON"
    " kh_document_review FOR EACH ROW EXECUTE FUNCTION chaos_review_audit();";

typedef struct child_wait {
    pid_t pid;
    int status;
} child_wait;

static int child_done(void *arg)
{
    child_wait *w = arg;

    return waitpid(w->pid, &w->status, WNOHANG) == w->pid;
}

/* Runs pg_private.sh with up to three arguments; 0 when it exited 0. */
static int pg_script(const chaos_rv_stack *s, const char *cmd, const char *a1,
                     const char *a2)
{
    child_wait w = {0, 0};

    w.pid = fork();
    if (w.pid < 0) {
        fprintf(stderr, "chaos-rv: fork: %s\n", strerror(errno));
        return -1;
    }
    if (w.pid == 0) {
        execl(s->pg_script, s->pg_script, cmd, s->pg_dir, a1, a2,
              (char *)NULL);
        fprintf(stderr, "chaos-rv: exec %s: %s\n", s->pg_script,
                strerror(errno));
        _exit(127);
    }
    if (!testkit_wait_until(child_done, &w, SCRIPT_TIMEOUT_MS)) {
        fprintf(stderr, "chaos-rv: pg_private.sh %s took over %d s\n", cmd,
                SCRIPT_TIMEOUT_MS / 1000);
        kill(w.pid, SIGKILL);
        waitpid(w.pid, NULL, 0);
        return -1;
    }
    if (!WIFEXITED(w.status) || WEXITSTATUS(w.status) != 0) {
        fprintf(stderr,
                "chaos-rv: pg_private.sh %s %s failed (status "
                "0x%x)\n",
                cmd, a1 != NULL ? a1 : "", w.status);
        return -1;
    }
    return 0;
}

/* Runs sql on the cluster's "postgres" database; 0 or -1. */
static int admin_exec(const chaos_rv_stack *s, const char *sql)
{
    PGconn *c = PQconnectdb(s->db.admin_url);
    PGresult *res = NULL;
    int ok = PQstatus(c) == CONNECTION_OK;

    if (ok) {
        res = PQexec(c, sql);
        ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    }
    if (!ok)
        fprintf(stderr, "chaos-rv: %s: %s", sql, PQerrorMessage(c));
    PQclear(res);
    PQfinish(c);
    return ok ? 0 : -1;
}

/* Names the run's folder, cluster, template and database. */
static int stack_paths(chaos_rv_stack *s)
{
    if (testkit_scratch_dir(s->dir, sizeof(s->dir), "chaos-rv") == NULL)
        return -1;
    snprintf(s->pg_dir, sizeof(s->pg_dir), "%s/pg", s->dir);
    snprintf(s->pg_script, sizeof(s->pg_script),
             "%s/tests/chaos/pg_private.sh", testkit_source_dir());
    snprintf(s->pg_template, sizeof(s->pg_template),
             "%s/tests/chaos/pg-template", testkit_build_dir());
    s->pg_port = testkit_free_port();
    if (s->pg_port <= 0)
        return -1;
    snprintf(s->db.name, sizeof(s->db.name), "chaos_rv");
    snprintf(s->db.url, sizeof(s->db.url),
             "host=127.0.0.1 port=%d "
             "user=postgres dbname=chaos_rv connect_timeout=5",
             s->pg_port);
    snprintf(s->db.admin_url, sizeof(s->db.admin_url),
             "host=127.0.0.1 "
             "port=%d user=postgres dbname=postgres connect_timeout=5",
             s->pg_port);
    return 0;
}

/* The guard (in the child): SIGUSR1 when the run died, SIGTERM when the
 * run stopped the cluster itself. */
static void guard_main(const chaos_rv_stack *s, pid_t parent)
{
    sigset_t set;
    int sig = 0;

    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGUSR1) != 0 || getppid() != parent)
        sig = SIGUSR1;
    while (sig == 0 && sigwait(&set, &sig) != 0) {
    }
    if (sig == SIGUSR1)
        execl(s->pg_script, s->pg_script, "stop", s->pg_dir, (char *)NULL);
    _exit(0);
}

static int start_guard(chaos_rv_stack *s)
{
    const pid_t parent = getpid();

    s->guard = fork();
    if (s->guard < 0) {
        fprintf(stderr, "chaos-rv: fork: %s\n", strerror(errno));
        return -1;
    }
    if (s->guard == 0)
        guard_main(s, parent);
    return 0;
}

static void stop_guard(chaos_rv_stack *s)
{
    if (s->guard > 0) {
        kill(s->guard, SIGTERM);
        waitpid(s->guard, NULL, 0);
        s->guard = 0;
    }
}

static int start_postgres(chaos_rv_stack *s)
{
    char port[16];

    snprintf(port, sizeof(port), "%d", s->pg_port);
    if (pg_script(s, "init", port, s->pg_template) != 0 || start_guard(s) != 0
        || pg_script(s, "start", NULL, NULL) != 0)
        return -1;
    s->pg_running = 1;
    return admin_exec(s, "CREATE DATABASE chaos_rv");
}

static int start_reviewd(chaos_rv_stack *s, int i)
{
    char name[32];

    snprintf(name, sizeof(name), "chaos-rv-reviewd%d", i);
    if (rvt_server_start(&s->rvd[i], &s->db, s->redis->url, reviewd_env, name)
        != 0)
        return -1;
    atomic_store(&s->port[i], s->rvd[i].port);
    return 0;
}

int chaos_rv_stack_start(chaos_rv_stack *s)
{
    const testkit_redis_opts ro = {.name = "chaos-rv-redis"};

    memset(s, 0, sizeof(s[0]));
    if (stack_paths(s) != 0 || start_postgres(s) != 0)
        return -1;
    s->redis = testkit_redis_start(&ro);
    if (s->redis == NULL)
        return -1;
    /* The first instance migrates the schema; the trigger goes on top,
     * before any client runs. */
    if (start_reviewd(s, 0) != 0 || rvt_sql(&s->db, audit_sql, NULL, 0) != 0)
        return -1;
    return start_reviewd(s, 1);
}

int chaos_rv_stack_stop(chaos_rv_stack *s, int keep)
{
    int unclean = 0;

    for (int i = 0; i < CHAOS_RV_INSTANCES; i++) {
        if (s->rvd[i].pid > 0 && !rvt_server_terminate(&s->rvd[i]))
            unclean++;
        atomic_store(&s->port[i], 0);
    }
    rvt_db_close(&s->db);
    testkit_redis_free(s->redis);
    s->redis = NULL;
    if (s->pg_running) {
        pg_script(s, "stop", NULL, NULL);
        s->pg_running = 0;
    }
    stop_guard(s);
    if (!keep && unclean == 0) {
        for (int i = 0; i < CHAOS_RV_INSTANCES; i++)
            rvt_server_remove_dir(&s->rvd[i]);
        testkit_scratch_remove(s->dir);
    }
    return unclean;
}

/* ---- faults -------------------------------------------------------------- */

int chaos_rv_redis_stop(chaos_rv_stack *s, int64_t ms)
{
    if (testkit_redis_pause(s->redis) != 0) {
        fprintf(stderr, "chaos-rv: cannot pause redis-server\n");
        return -1;
    }
    chaos_sleep_us(ms * 1000);
    return testkit_redis_resume(s->redis);
}

int chaos_rv_redis_restart(chaos_rv_stack *s)
{
    kill(s->redis->pid, SIGKILL);
    if (testkit_redis_restart(s->redis) != 0) {
        fprintf(stderr, "chaos-rv: redis-server did not come back\n");
        return -1;
    }
    return 0;
}

int chaos_rv_pg_restart(chaos_rv_stack *s, const char *mode)
{
    /* Our own connection dies with the server; the next query reopens
     * it. */
    rvt_db_close(&s->db);
    return pg_script(s, "restart", mode, NULL);
}

int chaos_rv_reviewd_pause(chaos_rv_stack *s, int i, int64_t ms)
{
    if (s->rvd[i].pid <= 0 || kill(s->rvd[i].pid, SIGSTOP) != 0) {
        fprintf(stderr, "chaos-rv: cannot stop reviewd %d\n", i);
        return -1;
    }
    chaos_sleep_us(ms * 1000);
    return kill(s->rvd[i].pid, SIGCONT);
}

static int reviewd_gone(void *arg)
{
    rvt_server *r = arg;

    return waitpid(r->pid, &r->exit_status, WNOHANG) == r->pid;
}

int chaos_rv_reviewd_kill(chaos_rv_stack *s, int i)
{
    rvt_server *r = &s->rvd[i];

    if (r->pid <= 0 || kill(r->pid, SIGKILL) != 0) {
        fprintf(stderr, "chaos-rv: cannot kill reviewd %d\n", i);
        return -1;
    }
    if (!testkit_wait_until(reviewd_gone, r, 10000)) {
        fprintf(stderr, "chaos-rv: reviewd %d survived SIGKILL\n", i);
        return -1;
    }
    r->pid = 0;
    /* Clients get connection errors until the new process listens. */
    atomic_store(&s->port[i], 0);
    s->restarts[i]++;
    return start_reviewd(s, i);
}
