/*
 * chaos_analyze.h: from a phase's logs to one row of the summary table.
 *
 * The analysis trusts no process's own verdict: it rebuilds every hold
 * from the clients' events (acquire returned .. release called, or the
 * kill that ended it), replays the register's log in its own order, and
 * derives each figure from those two histories.  See chaos_analyze.c for
 * the definition of every column, and docs/reliability.md for what each
 * one means.
 */
#ifndef DLOCK_CHAOS_ANALYZE_H
#define DLOCK_CHAOS_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

/* Longest explanation kept for the report. */
#define CHAOS_NOTE_MAX 512

typedef struct chaos_phase_result {
    char name[32];
    int64_t duration_ms;      /* phase_start .. phase_stop */
    int faults;               /* faults injected (fault events) */
    int grants;               /* holds: acquires that returned the lock */
    int acq_failures;         /* acquires that did not (busy, errors) */
    int writes_ok;            /* increments the register accepted */
    int refused;              /* accesses refused by the fence */
    int overlaps;             /* pairs of holds open at the same time */
    int outlived;             /* holds that another hold overlapped */
    int outlived_fenced;      /* ... that touched the register after a
                                * newer holder had (and were refused) */
    int overlaps_unexplained; /* pairs with no pause past the TTL, lost
                                * report or non-persistent restart */
    int unsafe;               /* overlaps that the lock must never allow:
                                * the older holder released cleanly, or a
                                * fixed-TTL lock was granted again before
                                * its TTL could have run out */
    int stale_writes;         /* writes accepted with a fence below one the
                                * register had already accepted */
    int64_t lost;             /* accepted writes - final value */
    int fence_order;          /* grants whose fence is not above that of
                                * every grant that finished before they
                                * began */
    int orphans;              /* register accesses with no hold logged */
    double availability;      /* share of the phase some client held */
    int64_t longest_gap_ms;   /* longest time nobody held the lock */
    int client_failures;      /* set by chaos_check: clients that ended
                                * in a way it did not cause */
    /* The unfenced resource (chaos.h, unfenced.log), touched by the
     * `dlock run` clients' commands: */
    int unfenced_holds;             /* holds that touched it */
    int unfenced_stale;             /* touches by an older hold after a newer
                                  * hold's first touch */
    int64_t unfenced_overlap_ms;    /* the longest such overlap */
    int unfenced_bound;             /* set by chaos_check: the phase is one
                                  * where dlock promises unfenced_stale 0 */
    char not_run[CHAOS_NOTE_MAX];   /* set by chaos_check: why the phase did
                                   * not run (then nothing else is set) */
    char remark[CHAOS_NOTE_MAX];    /* set by chaos_check: what else to say
                                   * under the table */
    char explained[CHAOS_NOTE_MAX]; /* what explains the overlaps */
    char problems[CHAOS_NOTE_MAX];  /* first bound failures, for humans */
} chaos_phase_result;

/*
 * Reads dir/events.log and dir/register.log of one phase and fills res
 * (res->name, client_failures, unfenced_bound and not_run are left as
 * they were).  Returns 0,
 * or -1 when a log cannot be read (message on stderr).
 */
int chaos_analyze_phase(const char *dir, chaos_phase_result *res);

/* 1 when res is within the asserted bounds (0 stale writes, 0 lost
 * increments, 0 unsafe or unexplained overlaps, fences in order, progress
 * made, no client failure, and where unfenced_bound is set no overlap on
 * the unfenced resource); else 0 with res->problems saying why.  A phase
 * that did not run (not_run) is within bounds. */
int chaos_phase_ok(chaos_phase_result *res);

/* Prints the table header, one row, and the notes under the table. */
void chaos_print_header(void);
void chaos_print_row(const chaos_phase_result *res);
void chaos_print_notes(const chaos_phase_result *res, size_t count);

#endif /* DLOCK_CHAOS_ANALYZE_H */
