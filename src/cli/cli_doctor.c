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
 * On a Redis Cluster (redis+cluster://) every master and replica of every
 * shard is judged on its own (dlock_doctor_run_cluster): a "== SERVER
 * ROLE" line, then its checks; with --json {"server", "safe", "nodes":
 * [{"server", "role", "safe", "error", "checks": [...]}]}.  The verdict
 * is safe only if every server is, and a server that cannot be asked is
 * not.
 */
#include <jansson.h>
#include <stdio.h>

#include "dlock/doctor.h"

#include "cli_client.h"
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_say.h"

static int print_checks(const dlock_doctor_report *r)
{
    for (int i = 0; i < DLOCK_DOCTOR_CHECKS; i++) {
        const dlock_doctor_check *k = &r->checks[i];

        if (printf("%-12s %-8s %s%s%s\n", k->name,
                   dlock_doctor_verdict_name(k->verdict), k->found,
                   k->found[0] != '\0' ? ": " : "", k->why)
            < 0)
            return -1;
    }
    return 0;
}

static int print_verdict(int safe)
{
    return printf("verdict: %s\n",
                  safe ? "safe for locks" : "NOT safe for locks")
                   < 0
               ? -1
               : 0;
}

static int print_text(const dlock_doctor_report *r)
{
    if (print_checks(r) != 0)
        return -1;
    return print_verdict(r->unsafe + r->unknown == 0);
}

/* The checks of r as a JSON array (a new reference), or NULL. */
static json_t *checks_json(const dlock_doctor_report *r)
{
    json_t *checks = json_array();

    for (int i = 0; checks != NULL && i < DLOCK_DOCTOR_CHECKS; i++) {
        const dlock_doctor_check *k = &r->checks[i];

        if (json_array_append_new(
                checks,
                json_pack("{s:s, s:s, s:s, s:s}", "name", k->name, "verdict",
                          dlock_doctor_verdict_name(k->verdict), "found",
                          k->found, "why", k->why))
            != 0) {
            json_decref(checks);
            return NULL;
        }
    }
    return checks;
}

/* Prints o (a new reference, or NULL) on one line and releases it. */
static int print_object(json_t *o)
{
    int rc = -1;

    if (o != NULL && json_dumpf(o, stdout, JSON_COMPACT) == 0
        && putchar('\n') != EOF)
        rc = 0;
    if (rc != 0)
        cli_say("doctor: cannot print the report as JSON");
    json_decref(o);
    return rc;
}

static int print_json(const char *server, const dlock_doctor_report *r)
{
    json_t *checks = checks_json(r);

    return print_object(checks == NULL
                            ? NULL
                            : json_pack("{s:s, s:b, s:o}", "server", server,
                                        "safe", r->unsafe + r->unknown == 0,
                                        "checks", checks));
}

static int node_safe(const dlock_doctor_node *n)
{
    return n->err == DLOCK_OK && n->report.unsafe + n->report.unknown == 0;
}

static int print_nodes_text(const dlock_doctor_node *nodes, int n, int safe)
{
    for (int i = 0; i < n; i++) {
        if (printf("== %s %s\n", nodes[i].server, nodes[i].role) < 0)
            return -1;
        if (nodes[i].err != DLOCK_OK) {
            if (printf("unreachable  unsafe   %s\n", nodes[i].error) < 0)
                return -1;
        } else if (print_checks(&nodes[i].report) != 0) {
            return -1;
        }
    }
    return print_verdict(safe);
}

static int print_nodes_json(const char *server, const dlock_doctor_node *nodes,
                            int n, int safe)
{
    json_t *list = json_array();

    for (int i = 0; list != NULL && i < n; i++) {
        json_t *checks = nodes[i].err == DLOCK_OK
                             ? checks_json(&nodes[i].report)
                             : json_array();

        if (checks == NULL
            || json_array_append_new(
                   list, json_pack("{s:s, s:s, s:b, s:s, s:o}", "server",
                                   nodes[i].server, "role", nodes[i].role,
                                   "safe", node_safe(&nodes[i]), "error",
                                   nodes[i].error, "checks", checks))
                   != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    return print_object(list == NULL
                            ? NULL
                            : json_pack("{s:s, s:b, s:o}", "server", server,
                                        "safe", safe, "nodes", list));
}

/* doctor on a Redis Cluster: every master and replica. */
static int doctor_cluster(const struct cli_args *a, dlock_client *client)
{
    static dlock_doctor_node nodes[DLOCK_DOCTOR_NODES_MAX];
    int n = 0, safe = 1;
    dlock_err err = dlock_doctor_run_cluster(client, nodes,
                                             DLOCK_DOCTOR_NODES_MAX, &n);

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
    if (dlock_client_node_of(client, "") != NULL) {
        code = doctor_cluster(a, client);
        dlock_client_free(client);
        return code;
    }
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
