/*
 * rv_hooks.c: reviewd's test hooks (see rv_hooks.h).  Compiled only into
 * reviewd_core_testing, with REVIEWD_TESTING; the production library has
 * no such file, so none of its strings reach the reviewd binary.
 */
#ifndef REVIEWD_TESTING
#error "rv_hooks.c is built only with REVIEWD_TESTING"
#endif

#include "tx/rv_hooks.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rv_config.h"
#include "svc_deadline.h"

#define RV_HOOK_PAUSE_MAX_MS 60000

/* The X-Test-Pause-Ms value in ms, or 0 when absent, off or malformed. */
static long pause_ms(const rv_request *req)
{
    char *end = NULL;
    long ms;

    if (!req->app->cfg->test_hooks || req->hook_pause == NULL)
        return 0;
    ms = strtol(req->hook_pause, &end, 10);
    if (end == req->hook_pause || *end != '\0' || ms <= 0
        || ms > RV_HOOK_PAUSE_MAX_MS)
        return 0;
    return ms;
}

rv_db_status rv_hook_pause(const rv_request *req, rv_db_conn *c)
{
    const long ms = pause_ms(req);
    struct timespec ts;
    rv_db_status st;

    if (ms == 0)
        return RV_DB_OK;
    st = rv_db_conn_send_begin(c);
    if (st != RV_DB_OK)
        return st;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
    /* The pause stands for slow work, not for a slow dependency: it is
     * not taken from the request's budget (svc_deadline.h). */
    svc_deadline_extend((int)ms);
    return RV_DB_OK;
}

int rv_hook_fail_after_event(const rv_request *req)
{
    return req->app->cfg->test_hooks && req->hook_fail != NULL
           && strcmp(req->hook_fail, "after-event") == 0;
}
