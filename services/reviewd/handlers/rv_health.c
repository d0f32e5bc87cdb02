/*
 * rv_health.c: /healthz, /readyz and /metrics.
 *
 * /healthz says only that the process answers, from memory: it touches
 * no dependency, and the bulkheads (svc_bulkhead.h: a concurrency cap
 * per dependency below the worker count) keep workers free to run it
 * whatever PostgreSQL and MongoDB do.  /readyz says whether the service
 * can do its work: PostgreSQL is checked live on this worker's own
 * connection (a request would use the same one) within
 * REVIEWD_READYZ_TIMEOUT_MS (its breaker, when open, answers "down"
 * without a probe), Redis comes from the
 * monitor thread's last check, AMQP from the outbox relay's connection
 * state ("off" when AMQP_URL is empty and no relay runs) and a MongoDB
 * content store from its last call (rv_content.h), so the probe never
 * waits on a stopped server.  /metrics reads the outbox backlog live (a
 * count over a small partial index).  Only PostgreSQL being down makes it
 * 503: without Redis the service still serves, degraded, as API.md says.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/rv_config.h"
#include "svc_deadline.h"
#include "tx/rv_admit.h"
#include "tx/rv_content.h"
#include "handlers/rv_handlers.h"
#include "bg/rv_monitor.h"
#include "db/rv_query.h"
#include "bg/rv_relay.h"

void rv_handle_healthz(rv_request *req, rv_reply *reply)
{
    (void)req;
    rv_reply_json(reply, 200, json_pack("{s:s}", "status", "ok"));
}

static int ping_once(rv_request *req)
{
    rv_db_conn *c = rv_db_thread_conn(req->app->db);

    return c != NULL && rv_db_conn_ping(c) == RV_DB_OK;
}

/* PostgreSQL answers SELECT 1, within /readyz's own short deadline; one
 * reconnect, since the connection may be stale after a restart. */
static int postgres_up(rv_request *req)
{
    const int64_t outer = svc_deadline_tighten(
        req->app->cfg->readyz_timeout_ms);
    const int up = ping_once(req) || ping_once(req);

    svc_deadline_restore(outer);
    return up;
}

void rv_handle_readyz(rv_request *req, rv_reply *reply)
{
    const int pg = postgres_up(req);
    const rv_dep_state redis = rv_monitor_redis(req->app->monitor);
    /* off without AMQP_URL (no relay), else the relay's connection. */
    const rv_dep_state amqp = rv_relay_state(req->app->relay);
    const char *content = rv_content_state(req->app->content, pg);
    const char *status = "ok";

    if (!pg)
        status = "down";
    else if (redis != RV_DEP_OK || amqp == RV_DEP_DOWN
             || strcmp(content, "down") == 0)
        status = "degraded";
    rv_reply_json(reply, pg ? 200 : 503,
                  json_pack("{s:s,s:s,s:s,s:s,s:s}", "status", status,
                            "postgres", pg ? "ok" : "down", "redis",
                            rv_dep_state_name(redis), "amqp",
                            rv_dep_state_name(amqp), "content_store",
                            content));
}

/* The outbox backlog and its oldest row's age; -1s when unreadable. */
static void outbox_gauges(rv_request *req, rv_metrics_gauges *g)
{
    rv_db_conn *c = rv_db_thread_conn(req->app->db);
    PGresult *res = NULL;

    g->outbox_backlog = -1;
    g->outbox_oldest_ms = -1;
    if (c != NULL
        && rv_db_conn_exec(c, RV_QUERY_OUTBOX_BACKLOG, NULL, &res)
               == RV_DB_OK) {
        g->outbox_backlog = atoll(PQgetvalue(res, 0, 0));
        g->outbox_oldest_ms = atoll(PQgetvalue(res, 0, 1));
        PQclear(res);
    }
}

static void relay_gauges(rv_app *app, rv_metrics_gauges *g)
{
    rv_relay_stats rs;

    rv_relay_stats_get(app->relay, &rs);
    g->amqp_configured = app->relay != NULL;
    g->amqp_up = rv_relay_state(app->relay) == RV_DEP_OK;
    g->relay_publishes = rs.publishes;
    g->relay_confirms = rs.confirms;
    g->relay_nacks = rs.nacks;
    g->relay_reconnects = rs.reconnects;
}

static void content_gauges(rv_app *app, rv_metrics_gauges *g)
{
    rv_content_stats cs;

    rv_content_stats_get(app->content, &cs);
    g->content_mongo = strcmp(rv_content_name(app->content), "mongo") == 0;
    g->content_ok = cs.ok;
    g->content_missing = cs.missing;
    g->content_unavailable = cs.unavailable;
    g->content_errors = cs.errors;
    g->content_breaker_open = cs.bulkhead.state != SVC_BREAKER_CLOSED;
    g->content_breaker_opens = cs.bulkhead.opened;
    g->content_refused = cs.bulkhead.refused_open + cs.bulkhead.refused_full;
}

void rv_handle_metrics(rv_request *req, rv_reply *reply)
{
    rv_app *app = req->app;
    rv_metrics_gauges g = {0};
    rv_db_stats db;

    rv_locks_gauges(app->locks, &g);
    g.redis_up = rv_monitor_redis(app->monitor) == RV_DEP_OK;
    rv_db_stats_get(app->db, &db);
    g.pg_open = db.open;
    g.pg_loop_ready = db.loop_ready;
    g.pg_in_use = db.in_use;
    g.pg_connects = db.connects;
    g.pg_connect_failures = db.failures;
    g.pg_pool_size = app->cfg->threads;
    g.pg_breaker_open = db.bulkhead.state != SVC_BREAKER_CLOSED;
    g.pg_breaker_opens = db.bulkhead.opened;
    g.pg_refused = db.bulkhead.refused_open + db.bulkhead.refused_full;
    g.http_connections = atomic_load(&app->connections);
    g.http_inflight = atomic_load(&app->inflight);
    g.idem_swept = atomic_load(&app->idem_swept);
    g.loop_reads = atomic_load(&app->loop_reads);
    if (app->writes != NULL) {
        rv_admit_stats ws;

        rv_admit_stats_get(app->writes, &ws);
        g.writes_running = ws.running;
        g.writes_waiting = ws.waiting;
        g.write_admission_timeouts = ws.timeouts;
    }
    outbox_gauges(req, &g);
    relay_gauges(app, &g);
    content_gauges(app, &g);
    rv_reply_clear(reply);
    reply->status = 200;
    reply->body = rv_metrics_render(app->metrics, &g);
    reply->content_type = "text/plain; version=0.0.4; charset=utf-8";
    if (reply->body == NULL)
        rv_reply_error(reply, 500, "INTERNAL", "out of memory");
}
