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
 */
#include <jansson.h>
#include <stdio.h>

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
    if (o != NULL && json_dumpf(o, stdout, JSON_COMPACT) == 0
        && putchar('\n') != EOF)
        rc = 0;
out:
    if (rc != 0)
        cli_say("doctor: cannot print the report as JSON");
    json_decref(o);
    json_decref(checks);
    return rc;
}

int cli_cmd_doctor(const struct cli_args *a)
{
    dlock_client *client = NULL;
    dlock_doctor_report report;
    dlock_err err;
    int code = cli_client_open(a, 0, &client);

    if (code != CLI_EXIT_OK)
        return CLI_EXIT_UNAVAILABLE;
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
