/*
 * chaos_nemesis.c: processes and faults of one phase (chaos_nemesis.h).
 *
 * Durations are drawn from the phase's generator and scaled by the lock's
 * TTL, so that "past the TTL" means the same at any TTL:
 *   pause       a holder's process group stopped for 1.5..3 x TTL;
 *   kill        a holder's process group killed (SIGKILL), started again;
 *   crash       redis-server killed (SIGKILL) and started again on the same
 *               port: without persistence it comes back empty (lock keys
 *               and fence counters gone), with AOF and appendfsync always
 *               it comes back with every acknowledged write;
 *   redis_stop  redis-server stopped (SIGSTOP) for 0.3..2 x TTL: slow when
 *               short, unreachable past the TTL when long;
 *   hog         two busy processes at nice 0 pinned to the clients' CPU for
 *               1..2 s, to starve the watchdog threads (pinned to one CPU
 *               also when the clients are not, to leave the other core to
 *               the rest of the machine).
 * A fault that targets "a holder" waits up to HOLDER_WAIT_MS for a client
 * that holds the lock (the board), so that it lands inside a critical
 * section, where a fault matters.
 */
#include "chaos_nemesis.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOLDER_WAIT_MS 500
#define HOGS 2
#define REAP_TIMEOUT_US 3000000

int chaos_nemesis_setup(chaos_nemesis *n, const char *dir, const char *name,
                        int persist, chaos_topology topology)
{
    snprintf(n->dir, sizeof(n->dir), "%s", dir);
    snprintf(n->key, sizeof(n->key), "chaos:%ld:%s", (long)getpid(), name);
    n->persist = persist;
    n->topology = topology;
    if (chaos_deploy_start(n) != 0)
        return -1;
    if (chaos_register_create(dir) != 0)
        return -1;
    n->board = chaos_board_map(dir, 1);
    n->events = chaos_events_open(dir);
    return n->board != NULL && n->events >= 0 ? 0 : -1;
}

/* In a forked child: its own process group, dies with us, pinned if asked,
 * output to dir/<log>. */
static void prepare_child(const chaos_nemesis *n, pid_t parent,
                          const char *log, int cpu)
{
    char path[1024];
    int fd;

    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(126);
    snprintf(path, sizeof(path), "%s/%s", n->dir, log);
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    if (cpu >= 0) {
        cpu_set_t set;

        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
}

/* Appends the option name and its value to argv. */
static void push(const char **argv, int *i, const char *name,
                 const char *value)
{
    argv[(*i)++] = name;
    argv[(*i)++] = value;
}

/* Execs chaos_client for proc p (in the child). */
static void exec_client(const chaos_nemesis *n, const chaos_proc *p)
{
    static const char *const fencing[] = {"full", "writes", "off"};
    const chaos_client_cfg *c = &n->cfg;
    char id[16], ttl[32], wait[32], work[64], think[64], wd[8], until[32];
    char seed[32];
    char cpu[16];
    const char *argv[40];
    int i = 0;

    snprintf(id, sizeof(id), "%d", p->id);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)c->ttl_ms);
    snprintf(wait, sizeof(wait), "%lld", (long long)c->wait_ms);
    snprintf(work, sizeof(work), "%lld:%lld", (long long)c->work_min_ms,
             (long long)c->work_max_ms);
    snprintf(think, sizeof(think), "%lld:%lld", (long long)c->think_min_ms,
             (long long)c->think_max_ms);
    snprintf(wd, sizeof(wd), "%d", c->watchdog);
    snprintf(until, sizeof(until), "%lld", (long long)n->until_us);
    snprintf(seed, sizeof(seed), "%llu",
             (unsigned long long)((c->seed * 1000003u + (uint64_t)p->id)
                                  & INT64_MAX));
    snprintf(cpu, sizeof(cpu), "%d", c->cpu);
    argv[i++] = c->client_bin;
    push(argv, &i, "--mode", p->cli ? "cli" : "api");
    push(argv, &i, "--dir", n->dir);
    push(argv, &i, "--id", id);
    push(argv, &i, "--url", chaos_deploy_client_url(n, p->id));
    push(argv, &i, "--key", n->key);
    push(argv, &i, "--ttl-ms", ttl);
    push(argv, &i, "--wait-ms", wait);
    push(argv, &i, "--work-ms", work);
    push(argv, &i, "--think-ms", think);
    push(argv, &i, "--watchdog", wd);
    push(argv, &i, "--until-us", until);
    push(argv, &i, "--max-cycles", "1000000");
    push(argv, &i, "--seed", seed);
    push(argv, &i, "--fencing", fencing[c->fencing]);
    push(argv, &i, "--cpu", cpu);
    if (c->sabotage != NULL)
        push(argv, &i, "--sabotage", c->sabotage);
    if (c->fair == CHAOS_FAIR_ALL
        || (c->fair == CHAOS_FAIR_SOME && p->id % 2 == 0))
        push(argv, &i, "--fair", "1");
    if (p->cli) {
        push(argv, &i, "--dlock", c->dlock_bin);
        push(argv, &i, "--step", c->step_bin);
    }
    argv[i] = NULL;
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "chaos: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int spawn_client(chaos_nemesis *n, chaos_proc *p)
{
    pid_t parent = getpid();
    char log[32];
    pid_t pid;

    snprintf(log, sizeof(log), "client-%d.err", p->id);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "chaos: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prepare_child(n, parent, log, n->cfg.cpu);
        exec_client(n, p);
    }
    setpgid(pid, pid);
    p->pid = pid;
    p->killed = 0;
    n->board[p->id].pgid = (int32_t)pid;
    return 0;
}

int chaos_nemesis_start_clients(chaos_nemesis *n, int64_t until_us)
{
    int total = n->cfg.api_clients + n->cfg.cli_clients;

    n->until_us = until_us;
    n->nprocs = 0;
    for (int i = 0; i < total && i < CHAOS_CLIENTS_MAX; i++) {
        chaos_proc *p = &n->procs[n->nprocs++];

        p->id = i;
        p->cli = i >= n->cfg.api_clients;
        if (spawn_client(n, p) != 0)
            return -1;
    }
    return 0;
}

/* Prints the end of a client's stderr, for a failure report. */
static void show_client_log(const chaos_nemesis *n, int id)
{
    char path[1024], buf[2048];
    FILE *f;
    size_t got;

    snprintf(path, sizeof(path), "%s/client-%d.err", n->dir, id);
    f = fopen(path, "r");
    if (f == NULL)
        return;
    fseek(f, 0, SEEK_END);
    if (ftell(f) > (long)sizeof(buf) - 1)
        fseek(f, -(long)sizeof(buf) + 1, SEEK_END);
    else
        fseek(f, 0, SEEK_SET);
    got = fread(buf, 1, sizeof(buf) - 1, f);
    buf[got] = '\0';
    fclose(f);
    if (got > 0)
        fprintf(stderr, "---- %s ----\n%s\n", path, buf);
}

/* Judges how p ended; 1 if it was a failure. */
static int ended_badly(const chaos_nemesis *n, const chaos_proc *p, int status)
{
    if (p->killed)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    fprintf(stderr, "chaos: client %d (pid %ld) %s %d\n", p->id, (long)p->pid,
            WIFEXITED(status) ? "exited with status" : "was killed by signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    show_client_log(n, p->id);
    return 1;
}

void chaos_nemesis_reap(chaos_nemesis *n)
{
    for (int i = 0; i < n->nprocs; i++) {
        chaos_proc *p = &n->procs[i];
        int status;

        if (p->pid == 0 || waitpid(p->pid, &status, WNOHANG) != p->pid)
            continue;
        n->board[p->id].pgid = 0;
        n->board[p->id].holding = 0;
        if (ended_badly(n, p, status)) {
            n->failures++;
            p->pid = 0;
            if (chaos_now_us() < n->until_us)
                spawn_client(n, p);
            continue;
        }
        p->pid = 0;
    }
}

static int any_client_running(const chaos_nemesis *n)
{
    for (int i = 0; i < n->nprocs; i++)
        if (n->procs[i].pid != 0)
            return 1;
    return 0;
}

void chaos_nemesis_wait_clients(chaos_nemesis *n, int64_t deadline_us)
{
    while (any_client_running(n) && chaos_now_us() < deadline_us) {
        chaos_nemesis_reap(n);
        chaos_sleep_us(20000);
    }
    for (int i = 0; i < n->nprocs; i++) {
        chaos_proc *p = &n->procs[i];

        if (p->pid == 0)
            continue;
        fprintf(stderr,
                "chaos: client %d (pid %ld) did not stop in time; "
                "killing it\n",
                p->id, (long)p->pid);
        show_client_log(n, p->id);
        n->failures++;
        kill(-p->pid, SIGCONT);
        kill(-p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = 0;
    }
}

void chaos_nemesis_teardown(chaos_nemesis *n)
{
    for (int i = 0; i < n->nprocs; i++) {
        if (n->procs[i].pid != 0) {
            kill(-n->procs[i].pid, SIGKILL);
            waitpid(n->procs[i].pid, NULL, 0);
            n->procs[i].pid = 0;
        }
    }
    chaos_deploy_stop(n);
    chaos_board_unmap(n->board);
    n->board = NULL;
    if (n->events >= 0)
        close(n->events);
    n->events = -1;
}

/* ---- faults ------------------------------------------------------------- */

int64_t chaos_fault_ms(chaos_nemesis *n, int64_t lo_ms, int64_t hi_ms)
{
    int64_t ms = chaos_rng_range(&n->rng, lo_ms, hi_ms);
    int64_t left = (n->until_us - chaos_now_us()) / 1000;

    return ms < left ? ms : left > 0 ? left : 0;
}

chaos_proc *chaos_pick_holder(chaos_nemesis *n)
{
    int64_t until = chaos_now_us() + HOLDER_WAIT_MS * 1000;

    while (chaos_now_us() < until) {
        chaos_proc *holders[CHAOS_CLIENTS_MAX];
        int count = 0;

        for (int i = 0; i < n->nprocs; i++) {
            chaos_proc *p = &n->procs[i];

            if (p->pid != 0
                && __atomic_load_n(&n->board[p->id].holding, __ATOMIC_ACQUIRE))
                holders[count++] = p;
        }
        if (count > 0)
            return holders[chaos_rng_range(&n->rng, 0, count - 1)];
        chaos_sleep_us(1000);
    }
    return NULL;
}

int chaos_fault_pause(chaos_nemesis *n)
{
    chaos_proc *p = chaos_pick_holder(n);
    int64_t ms = chaos_fault_ms(n, n->cfg.ttl_ms * 3 / 2, n->cfg.ttl_ms * 3);

    if (p == NULL)
        return 0;
    chaos_event(n->events, "fault pause %d %lld", p->id, (long long)ms);
    kill(-p->pid, SIGSTOP);
    chaos_sleep_us(ms * 1000);
    kill(-p->pid, SIGCONT);
    chaos_event(n->events, "fault_end pause %d", p->id);
    return 1;
}

/* Waits for a client we killed, bounded (SIGKILL is not blockable). */
static void reap_killed(chaos_proc *p)
{
    int64_t until = chaos_now_us() + REAP_TIMEOUT_US;

    while (chaos_now_us() < until) {
        if (waitpid(p->pid, NULL, WNOHANG) == p->pid)
            break;
        chaos_sleep_us(1000);
    }
    p->pid = 0;
}

int chaos_fault_kill(chaos_nemesis *n)
{
    chaos_proc *p = chaos_pick_holder(n);

    if (p == NULL)
        return 0;
    chaos_event(n->events, "fault kill %d 0", p->id);
    p->killed = 1;
    kill(-p->pid, SIGKILL);
    reap_killed(p);
    n->board[p->id].holding = 0;
    chaos_event(n->events, "fault_end kill %d", p->id);
    chaos_event(n->events, "respawn %d", p->id);
    return spawn_client(n, p) == 0 ? 1 : -1;
}

int chaos_fault_crash(chaos_nemesis *n)
{
    const char *kind = n->persist ? "crash_aof" : "crash_nopersist";
    int rc;

    chaos_event(n->events, "fault %s 0 0", kind);
    kill(n->redis->pid, SIGKILL);
    rc = testkit_redis_restart(n->redis);
    chaos_event(n->events, "fault_end %s 0", kind);
    if (rc != 0)
        fprintf(stderr, "chaos: redis-server did not come back after the "
                        "crash\n");
    return rc == 0 ? 1 : -1;
}

int chaos_fault_redis_stop(chaos_nemesis *n)
{
    int64_t ms = chaos_fault_ms(n, n->cfg.ttl_ms * 3 / 10, n->cfg.ttl_ms * 2);

    chaos_event(n->events, "fault redis_stop 0 %lld", (long long)ms);
    if (testkit_redis_pause(n->redis) != 0)
        return -1;
    chaos_sleep_us(ms * 1000);
    testkit_redis_resume(n->redis);
    chaos_event(n->events, "fault_end redis_stop 0");
    return 1;
}

/* A busy process pinned to cpu until until_us (in the child). */
static void hog(const chaos_nemesis *n, int64_t until_us)
{
    volatile uint64_t spin = 0;

    prepare_child(n, getppid(), "hog.err", n->cfg.hog_cpu);
    while (chaos_now_us() < until_us)
        for (int i = 0; i < 1000000; i++)
            spin++;
    _exit(0);
}

int chaos_fault_hog(chaos_nemesis *n)
{
    int64_t ms = chaos_fault_ms(n, 1000, 2000);
    int64_t until = chaos_now_us() + ms * 1000;
    pid_t pids[HOGS];

    chaos_event(n->events, "fault hog 0 %lld", (long long)ms);
    for (int i = 0; i < HOGS; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            hog(n, until);
    }
    chaos_sleep_until(until);
    for (int i = 0; i < HOGS; i++) {
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    }
    chaos_event(n->events, "fault_end hog 0");
    return 1;
}

int chaos_fault_mixed(chaos_nemesis *n)
{
    switch (chaos_rng_range(&n->rng, 0, 4)) {
    case 0: return chaos_fault_pause(n);
    case 1: return chaos_fault_kill(n);
    case 2: return chaos_fault_crash(n);
    case 3: return chaos_fault_redis_stop(n);
    default: return chaos_fault_hog(n);
    }
}
