/*
 * rvt_mongo.c: the private MongoDB-wire server of the content-store tests
 * (see rvt_mongo.h).
 *
 * Readiness is "the port accepts a TCP connection": server.mjs listens
 * only once it is ready to answer, so no protocol probe is needed.
 */
#include "rvt_mongo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testkit.h"

static int tcp_answers(void *arg)
{
    const rvt_mongo *m = arg;
    struct sockaddr_in sa;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    int ok;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)m->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void print_log(const char *path)
{
    char line[512];
    FILE *f = fopen(path, "r");

    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        fprintf(stderr, "  | %s", line);
    if (f != NULL)
        fclose(f);
}

int rvt_mongo_start(rvt_mongo *m)
{
    char tool[600], port[16];
    int status;

    snprintf(tool, sizeof(tool), "%s/tools/mongo-test-server",
             testkit_source_dir());
    snprintf(port, sizeof(port), "%d", m->port);
    m->pid = fork();
    if (m->pid < 0) {
        fprintf(stderr, "mongo: fork: %s\n", strerror(errno));
        m->pid = 0;
        return -1;
    }
    if (m->pid == 0) {
        const int fd = open(m->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || chdir(tool) != 0)
            _exit(126);
        execlp("node", "node", "server.mjs", "--port", port, (char *)NULL);
        _exit(127);
    }
    if (testkit_wait_until(tcp_answers, m, 15000))
        return 0;
    fprintf(stderr, "mongo: server.mjs did not listen on %d; its log:\n",
            m->port);
    print_log(m->log);
    kill(m->pid, SIGKILL);
    waitpid(m->pid, &status, 0);
    m->pid = 0;
    return -1;
}

static int child_gone(void *arg)
{
    rvt_mongo *m = arg;
    int status;

    return waitpid(m->pid, &status, WNOHANG) == m->pid;
}

int rvt_mongo_stop(rvt_mongo *m)
{
    int status;

    if (m->pid <= 0)
        return 0;
    kill(m->pid, SIGTERM);
    if (!testkit_wait_until(child_gone, m, 5000)) {
        kill(m->pid, SIGKILL);
        waitpid(m->pid, &status, 0);
        m->pid = 0;
        return -1;
    }
    m->pid = 0;
    return 0;
}

/* Installs the server's npm packages if they are not there (a no-op that
 * costs a few milliseconds when they are). */
static int install(void)
{
    char cmd[700];

    snprintf(cmd, sizeof(cmd), "'%s/tools/mongo-test-server/install.sh'",
             testkit_source_dir());
    if (system(cmd) != 0) {
        fprintf(stderr, "mongo: %s failed\n", cmd);
        return -1;
    }
    return 0;
}

int rvt_mongo_open(rvt_mongo *m, const char *name, const char *db)
{
    char dir[512];

    memset(m, 0, sizeof(*m));
    if (install() != 0 || testkit_scratch_dir(dir, sizeof(dir), name) == NULL)
        return -1;
    snprintf(m->dir, sizeof(m->dir), "%s", dir);
    snprintf(m->log, sizeof(m->log), "%s/mongo.log", dir);
    m->port = testkit_free_port();
    if (m->port <= 0) {
        fprintf(stderr, "mongo: no free port\n");
        return -1;
    }
    snprintf(m->url, sizeof(m->url),
             "mongodb://127.0.0.1:%d/%s?serverSelectionTimeoutMS=1000",
             m->port, db);
    return rvt_mongo_start(m);
}

void rvt_mongo_close(rvt_mongo *m, int remove_dir)
{
    rvt_mongo_stop(m);
    if (remove_dir && m->dir[0] != '\0')
        testkit_scratch_remove(m->dir);
}
