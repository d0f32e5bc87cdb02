/*
 * scalekit.c: the deployments of scripts/stack for the scale-out tests
 * (see scalekit.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scalekit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "testkit.h"

/* The group this process started, which scalekit_group_done stops. */
static char started_group[32];

/* Runs scripts/stack with the arguments; returns its exit status. */
static int stack(const char *args)
{
    char cmd[1400];
    int rc;

    snprintf(cmd, sizeof(cmd), "'%.900s/scripts/stack' %.300s",
             testkit_source_dir(), args);
    rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

const char *scalekit_group_url(const char *group)
{
    static char url[2048];
    char cmd[1200], line[2048];
    const char *src = testkit_source_dir();
    FILE *p;
    int found = 0;

    /* A bare env lists the groups of which any node runs: one that is
     * only slow to answer is still not ours to stop. */
    snprintf(line, sizeof(line), "env | grep -qi '^export %.40s_URL='", group);
    if (started_group[0] == '\0' && stack(line) != 0)
        snprintf(started_group, sizeof(started_group), "%s", group);
    snprintf(cmd, sizeof(cmd),
             "'%s/scripts/stack' up %s >&2 && "
             "'%s/scripts/stack' env %s",
             src, group, src, group);
    p = popen(cmd, "r");
    if (p == NULL) {
        fprintf(stderr, "scalekit: cannot run scripts/stack\n");
        return NULL;
    }
    while (fgets(line, sizeof(line), p) != NULL) {
        const char *eq = strchr(line, '=');
        size_t j = 0;

        if (strncmp(line, "export ", 7) != 0 || eq == NULL)
            continue;
        /* The value is printed with %q: drop its backslashes. */
        for (const char *c = eq + 1; *c != '\0' && *c != '\n'; c++)
            if (*c != '\\' && j + 1 < sizeof(url))
                url[j++] = *c;
        url[j] = '\0';
        found = 1;
    }
    if (pclose(p) != 0 || !found) {
        fprintf(stderr, "scalekit: scripts/stack up %s failed\n", group);
        return NULL;
    }
    return url;
}

void scalekit_deployment(const char *url, dlock__deployment *d)
{
    dlock__msg m;

    dlock__msg_clear(&m);
    TK_EXPECT(url != NULL, "the deployment's URL is known");
    TK_EXPECT(dlock__url_parse_deployment(url, d, &m) == DLOCK_OK,
              "%s parses: %s", url, m.text);
}

int scalekit_signal_node(const char *group, int port, int sig)
{
    char path[800], comm[64] = "";
    FILE *f;
    int pid = -1;

    snprintf(path, sizeof(path), "%s/var/stack/%s/%d/redis.pid",
             testkit_source_dir(), group, port);
    f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%d", &pid) != 1)
        pid = -1;
    if (f != NULL)
        fclose(f);
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    f = fopen(path, "r");
    if (f == NULL || fgets(comm, sizeof(comm), f) == NULL)
        comm[0] = '\0';
    if (f != NULL)
        fclose(f);
    if (strncmp(comm, "redis-server", 12) != 0 || kill(pid, sig) != 0)
        return -1;
    return pid;
}

const char *scalekit_node_url(int port, char *buf, size_t size)
{
    snprintf(buf, size, "redis://127.0.0.1:%d/0", port);
    return buf;
}

void scalekit_group_done(void)
{
    char args[64];

    if (started_group[0] == '\0')
        return;
    snprintf(args, sizeof(args), "down %s >/dev/null", started_group);
    if (stack(args) != 0)
        fprintf(stderr, "scalekit: scripts/stack %s failed\n", args);
    started_group[0] = '\0';
}
