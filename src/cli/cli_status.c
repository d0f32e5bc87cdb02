/*
 * cli_status.c: `dlock status [--json] KEY`, what Redis says about a lock
 * now (dlock_inspect: one round trip).
 *
 * Text output is one "name: value" pair per line, for people and grep:
 *   key: nightly-report
 *   held: yes
 *   ttl_ms: 28341
 *   last_fence: 1764698811123456
 *   waiters: 2
 *   next_waiter_ms: 29410
 * On a Redis Cluster (redis+cluster://) a last line says which master
 * serves the key's slot, the one that just answered:
 *   node: 10.0.0.7:6379
 * and --json adds "node": "10.0.0.7:6379".
 * waiters counts a fair lock's queue (run --fair); next_waiter_ms, shown
 * only with waiters, is how long the first waiter's entry still lives
 * unless it tries again (an entry that lapses is skipped).
 * --json prints the same as one object, {"key": ..., "held": true,
 * "ttl_ms": ..., "last_fence": ...}, built with jansson so that any key is
 * escaped correctly; a key that is not UTF-8 cannot be a JSON string, so
 * --json refuses it as a usage error.  The holder's token is not shown:
 * it is what lets a process release or extend the lock.  Exit 0 whether
 * the lock is held or not; the output says which.
 *
 * On a redlock:// URL the lock is held when a majority of the masters
 * hold one token, and the text output goes on with which of them do
 * (dlock_inspect_nodes), for example:
 *   nodes: held on 3 of 5: 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7004
 *   node: 127.0.0.1:7001 holds it (ttl_ms 2900)
 *   node: 127.0.0.1:7003 no answer (timed out)
 *
 * `dlock status --leader ROLE` reads a role of `dlock leader` and `run
 * --every` instead (dlock_leader_inspect, also one round trip):
 *   role: nightly-report
 *   held: yes
 *   leader: host-a:4242
 *   term: 17
 *   ttl_ms: 8123
 *   last_term: 17
 * The leader's id is what the candidate campaigned with (host:pid for the
 * CLI); like a lock's token, the lease's secret is not shown.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "dlock/leader.h"

#include "cli_client.h"
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_say.h"

/* jansson's own check, so that it agrees with json_pack below. */
static int is_utf8(const char *text)
{
    json_t *probe = json_string(text);
    const int ok = probe != NULL;

    json_decref(probe);
    return ok;
}

static int print_text(const char *key, const dlock_lock_info *info)
{
    if (printf("key: %s\nheld: %s\nttl_ms: %" PRId64 "\n"
               "last_fence: %" PRIu64 "\nwaiters: %" PRId64 "\n",
               key, info->held ? "yes" : "no", info->ttl_ms, info->last_fence,
               info->waiters)
        < 0)
        return -1;
    if (info->waiters > 0
        && printf("next_waiter_ms: %" PRId64 "\n", info->next_waiter_ms) < 0)
        return -1;
    return 0;
}

/* The cluster master serving key, as one more line of text. */
static int print_node_text(dlock_client *client, const char *key)
{
    const char *node = dlock_client_node_of(client, key);

    return node == NULL || printf("node: %s\n", node) >= 0 ? 0 : -1;
}

/* Adds the cluster master serving key to o (NULL stays NULL). */
static json_t *with_node(json_t *o, dlock_client *client, const char *key)
{
    const char *node = dlock_client_node_of(client, key);

    if (o != NULL && node != NULL
        && json_object_set_new(o, "node", json_string(node)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* One node's line: "node: 127.0.0.1:7001 holds it (ttl_ms 2900)". */
static int print_node(const dlock_node_info *n, const dlock_lock_info *info)
{
    if (!n->answered)
        return printf("node: %s no answer (%s)\n", n->node, n->why) < 0;
    if (!n->held)
        return printf("node: %s free\n", n->node) < 0;
    if (info->held && strcmp(n->token, info->token) == 0)
        return printf("node: %s holds it (ttl_ms %" PRId64 ")\n", n->node,
                      n->ttl_ms)
               < 0;
    return printf("node: %s another token (ttl_ms %" PRId64 ")\n", n->node,
                  n->ttl_ms)
           < 0;
}

/* For a lock decided by several servers (redlock://), which of them hold
 * it: "nodes: held on 3 of 5: a,b,c", then a line per node.  Nothing for
 * one server.  Returns 0, or -1 when printing failed. */
static int print_nodes(dlock_client *client, const char *key,
                       const dlock_lock_info *info)
{
    dlock_node_info nodes[16];
    int n = 0, holding = 0;

    if (dlock_inspect_nodes(client, key, nodes, 16, &n) != DLOCK_OK)
        return 0;
    for (int i = 0; i < n; i++)
        holding += info->held && nodes[i].held
                   && strcmp(nodes[i].token, info->token) == 0;
    if (printf("nodes: held on %d of %d:", holding, n) < 0)
        return -1;
    for (int i = 0, listed = 0; i < n; i++)
        if (info->held && nodes[i].held
            && strcmp(nodes[i].token, info->token) == 0
            && printf("%s%s", listed++ ? "," : " ", nodes[i].node) < 0)
            return -1;
    if (putchar('\n') == EOF)
        return -1;
    for (int i = 0; i < n; i++)
        if (print_node(&nodes[i], info) != 0)
            return -1;
    return 0;
}

/* Prints o (a new reference, or NULL when json_pack failed) on one line
 * and releases it. */
static int print_object(json_t *o, const char *what, const char *name)
{
    int rc;

    if (o == NULL) {
        cli_say("cannot print %s %.64s as JSON: out of memory", what, name);
        return -1;
    }
    rc = json_dumpf(o, stdout, JSON_COMPACT) == 0 && putchar('\n') != EOF ? 0
                                                                          : -1;
    json_decref(o);
    return rc;
}

static int print_json(dlock_client *client, const char *key,
                      const dlock_lock_info *info)
{
    json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I}", "key", key, "held",
                          info->held, "ttl_ms", (json_int_t)info->ttl_ms,
                          "last_fence", (json_int_t)info->last_fence,
                          "waiters", (json_int_t)info->waiters,
                          "next_waiter_ms", (json_int_t)info->next_waiter_ms);

    return print_object(with_node(o, client, key), "lock", key);
}

static int print_leader_text(const char *role, const dlock_leader_info *in)
{
    if (printf("role: %s\nheld: %s\nleader: %s\nterm: %" PRIu64 "\n"
               "ttl_ms: %" PRId64 "\nlast_term: %" PRIu64 "\n",
               role, in->held ? "yes" : "no", in->id, in->term, in->ttl_ms,
               in->last_term)
        < 0)
        return -1;
    return 0;
}

static int print_leader_json(const char *role, const dlock_leader_info *in)
{
    /* The id came from a candidate: it need not be UTF-8. */
    json_t *o = json_pack("{s:s, s:b, s:s?, s:I, s:I, s:I}", "role", role,
                          "held", in->held, "leader",
                          is_utf8(in->id) ? in->id : NULL, "term",
                          (json_int_t)in->term, "ttl_ms",
                          (json_int_t)in->ttl_ms, "last_term",
                          (json_int_t)in->last_term);

    return print_object(o, "role", role);
}

/* status --leader: the role named a->key. */
static int status_leader(const struct cli_args *a, dlock_client *client)
{
    dlock_leader_info info;
    const dlock_err err = dlock_leader_inspect(client, a->key, &info);

    if (err != DLOCK_OK) {
        cli_say("cannot inspect role %.64s: %s", a->key,
                dlock_client_errmsg(client));
        return cli_exit_of(err, CLI_EXIT_BUSY);
    }
    if ((a->json ? print_leader_json(a->key, &info)
                 : print_leader_text(a->key, &info))
            != 0
        || fflush(stdout) != 0)
        return CLI_EXIT_INTERNAL;
    return CLI_EXIT_OK;
}

int cli_cmd_status(const struct cli_args *a)
{
    dlock_client *client = NULL;
    dlock_lock_info info;
    dlock_err err;
    int code;

    /* JSON strings are UTF-8: refuse such a key before connecting. */
    if (a->json && !is_utf8(a->key)) {
        cli_say("status --json: KEY is not valid UTF-8");
        return CLI_EXIT_USAGE;
    }
    code = cli_client_open(a, 0, &client);
    if (code != CLI_EXIT_OK)
        return code;
    if (a->leader) {
        code = status_leader(a, client);
        dlock_client_free(client);
        return code;
    }
    err = dlock_inspect(client, a->key, &info);
    if (err != DLOCK_OK) {
        cli_say("cannot inspect lock %.64s: %s", a->key,
                dlock_client_errmsg(client));
        code = cli_exit_of(err, CLI_EXIT_BUSY);
    } else if ((a->json ? print_json(client, a->key, &info)
                        : print_text(a->key, &info)
                              || print_node_text(client, a->key))
                   != 0
               || (!a->json && print_nodes(client, a->key, &info) != 0)
               || fflush(stdout) != 0) {
        code = CLI_EXIT_INTERNAL;
    }
    dlock_client_free(client);
    return code;
}
