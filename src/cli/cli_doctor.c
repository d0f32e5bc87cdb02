/*
 * cli_doctor.c: `dlock doctor [--json] [URL]`, is this Redis server safe
 * for locks?
 *
 * The library judges (dlock_doctor_run: version, eviction policy,
 * persistence, replication role and lag, clock); this prints one line per
 * check, "NAME VERDICT FOUND: WHY", then a last "verdict:" line, or with
 * --json one object {"server", "safe", "checks": [{"name", "verdict",
 * "found", "why"}]}.  The exit status is for scripts: 0 when every check
 * is safe, 78 (EX_CONFIG) when one is unsafe or could not be judged, 69
 * when the server could not be used at all.  URL is the same as --url.
 *
 * A redis+sentinel://, redlock:// or redis+cluster:// URL gets a line per
 * server instead (dlock_doctor_nodes): "ROLE host:port: NOTE", each
 * judged server's checks indented under it, then the verdict over them
 * all: every sentinel (the master it names, its counts), the master and
 * each replica (state, lag, bytes behind), every Redlock master, or every
 * master and replica of every cluster shard.  A server that cannot be
 * asked makes the verdict unsafe.  --json gives
 * {"deployment", "safe", "nodes": [{"node", "role", "answered", "note",
 * "checks"}]}.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "dlock/doctor.h"

#include "cli_client.h"
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_say.h"

static int print_text(const dlock_doctor_report *r)
{
    for (int i = 0; i < DLOCK_DOCTOR_CHECKS; i++) {
        const dlock_doctor_check *k = &r->checks[i];

        if (printf("%-12s %-8s %s%s%s\n", k->name,
                   dlock_doctor_verdict_name(k->verdict), k->found,
                   k->found[0] != '\0' ? ": " : "", k->why)
            < 0)
            return -1;
    }
    if (printf("verdict: %s\n", r->unsafe + r->unknown == 0
                                    ? "safe for locks"
                                    : "NOT safe for locks")
        < 0)
        return -1;
    return 0;
}

/* Prints the report object (NULL: it could not be built) on one line,
 * then releases o and part; 0, or -1 after saying so. */
static int print_and_free(json_t *report, json_t *o, json_t *part)
{
    int rc = -1;

    if (report != NULL && json_dumpf(report, stdout, JSON_COMPACT) == 0
        && putchar('\n') != EOF)
        rc = 0;
    if (rc != 0)
        cli_say("doctor: cannot print the report as JSON");
    json_decref(o);
    json_decref(part);
    return rc;
}

static int print_json(const char *server, const dlock_doctor_report *r)
{
    json_t *checks = json_array();
    json_t *o = NULL;
    int rc = -1;

    for (int i = 0; checks != NULL && i < DLOCK_DOCTOR_CHECKS; i++) {
        const dlock_doctor_check *k = &r->checks[i];

        if (json_array_append_new(
                checks,
                json_pack("{s:s, s:s, s:s, s:s}", "name", k->name, "verdict",
                          dlock_doctor_verdict_name(k->verdict), "found",
                          k->found, "why", k->why))
            != 0)
            goto out;
    }
    if (checks != NULL)
        o = json_pack("{s:s, s:b, s:O}", "server", server, "safe",
                      r->unsafe + r->unknown == 0, "checks", checks);
    rc = 0;
out:
    return print_and_free(rc == 0 ? o : NULL, o, checks);
}

/* 1 if node o is fine: it answered, its checks (a master's) are all
 * safe, and a replica is online. */
static int node_safe(const dlock_doctor_node *o)
{
    if (!o->answered)
        return 0;
    if (o->checked)
        return o->report.unsafe + o->report.unknown == 0;
    if (strcmp(o->role, "replica") == 0)
        return strstr(o->note, "state online") != NULL;
    return 1;
}

static int print_nodes_text(const dlock_doctor_node *nodes, int n, int safe)
{
    for (int i = 0; i < n; i++) {
        const dlock_doctor_node *o = &nodes[i];

        if (printf("%-8s %s%s%s\n", o->role, o->node,
                   o->note[0] != '\0' ? ": " : "", o->note)
            < 0)
            return -1;
        for (int k = 0; o->checked && k < DLOCK_DOCTOR_CHECKS; k++) {
            const dlock_doctor_check *c = &o->report.checks[k];

            if (printf("  %-12s %-8s %s%s%s\n", c->name,
                       dlock_doctor_verdict_name(c->verdict), c->found,
                       c->found[0] != '\0' ? ": " : "", c->why)
                < 0)
                return -1;
        }
    }
    return printf("verdict: %s\n",
                  safe ? "safe for locks" : "NOT safe for locks")
                   < 0
               ? -1
               : 0;
}

static int print_nodes_json(const char *deployment,
                            const dlock_doctor_node *nodes, int n, int safe)
{
    json_t *list = json_array(), *o = NULL;
    int rc = -1;

    for (int i = 0; list != NULL && i < n; i++) {
        const dlock_doctor_node *d = &nodes[i];
        json_t *checks = json_array();

        for (int k = 0;
             checks != NULL && d->checked && k < DLOCK_DOCTOR_CHECKS; k++)
            json_array_append_new(checks,
                                  json_pack("{s:s, s:s, s:s, s:s}", "name",
                                            d->report.checks[k].name,
                                            "verdict",
                                            dlock_doctor_verdict_name(
                                                d->report.checks[k].verdict),
                                            "found", d->report.checks[k].found,
                                            "why", d->report.checks[k].why));
        if (checks == NULL
            || json_array_append_new(list,
                                     json_pack("{s:s, s:s, s:b, s:s, s:o}",
                                               "node", d->node, "role",
                                               d->role, "answered",
                                               d->answered, "note", d->note,
                                               "checks", checks))
                   != 0)
            goto out;
    }
    if (list != NULL)
        o = json_pack("{s:s, s:b, s:O}", "deployment", deployment, "safe",
                      safe, "nodes", list);
    rc = 0;
out:
    return print_and_free(rc == 0 ? o : NULL, o, list);
}

/* A Sentinel, Redlock or Cluster deployment: every server
 * (dlock_doctor_nodes).
 * Returns the exit code, or -1 when the client serves one server. */
static int doctor_deployment(const struct cli_args *a, dlock_client *client)
{
    static dlock_doctor_node nodes[DLOCK_DOCTOR_NODES_MAX];
    int n = 0, safe = 1;
    dlock_err err = dlock_doctor_nodes(client, nodes, DLOCK_DOCTOR_NODES_MAX,
                                       &n);

    if (err == DLOCK_INVALID)
        return -1; /* one server */
    if (err != DLOCK_OK) {
        cli_say("doctor: %s", dlock_client_errmsg(client));
        return CLI_EXIT_UNAVAILABLE;
    }
    for (int i = 0; i < n; i++)
        safe &= node_safe(&nodes[i]);
    if ((a->json
             ? print_nodes_json(dlock_client_endpoint(client), nodes, n, safe)
             : print_nodes_text(nodes, n, safe))
            != 0
        || fflush(stdout) != 0)
        return CLI_EXIT_INTERNAL;
    return safe && n > 0 ? CLI_EXIT_OK : CLI_EXIT_UNSAFE;
}

int cli_cmd_doctor(const struct cli_args *a)
{
    dlock_client *client = NULL;
    dlock_doctor_report report;
    dlock_err err;
    int code = cli_client_open(a, 0, &client);

    if (code != CLI_EXIT_OK)
        return CLI_EXIT_UNAVAILABLE;
    code = doctor_deployment(a, client);
    if (code >= 0) {
        dlock_client_free(client);
        return code;
    }
    code = CLI_EXIT_OK;
    err = dlock_doctor_run(client, &report);
    if (err != DLOCK_OK) {
        cli_say("doctor: %s", dlock_client_errmsg(client));
        dlock_client_free(client);
        return CLI_EXIT_UNAVAILABLE;
    }
    if ((a->json ? print_json(dlock_client_endpoint(client), &report)
                 : print_text(&report))
            != 0
        || fflush(stdout) != 0)
        code = CLI_EXIT_INTERNAL;
    else if (report.unsafe + report.unknown > 0)
        code = CLI_EXIT_UNSAFE;
    dlock_client_free(client);
    return code;
}
