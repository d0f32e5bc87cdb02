/*
 * chaos_phases.c: the command line and the last line that chaos_check and
 * chaos_reviewd share (chaos.h, "the orchestrators' command line").
 *
 * Both orchestrators run a list of phases drawn from a table of their
 * own, take --seconds, --seed, --keep and --phases the same way, print
 * the same usage message ending in the table's phase names, and end with
 * the same verdict line that says how to rerun the seed.  Each keeps its
 * own phase struct; the functions here read a phase's name through the
 * struct's first member (C11 6.7.2.1: a pointer to a struct, converted,
 * points to its first member).
 */
#include "chaos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name of phase i of t. */
static const char *phase_name(const chaos_phase_table *t, size_t i)
{
    const char *entry = (const char *)t->entries + i * t->size;

    return *(const char *const *)(const void *)entry;
}

void chaos_phases_usage(const chaos_phase_table *t)
{
    fprintf(stderr, "%s\nphases:", t->synopsis);
    for (size_t i = 0; i < t->count; i++)
        fprintf(stderr, " %s", phase_name(t, i));
    fprintf(stderr, "\n");
    exit(2);
}

/* --phases: list against t's names, into idx; returns how many. */
static size_t parse_phases(const chaos_phase_table *t, const char *list,
                           size_t *idx)
{
    const char *names[CHAOS_PHASES_MAX];

    for (size_t i = 0; i < t->count; i++)
        names[i] = phase_name(t, i);
    return chaos_arg_names(list, names, t->count, idx, t->count, "--phases");
}

size_t chaos_phases_args(int argc, char **argv, const chaos_phase_table *t,
                         chaos_run_args *run, size_t *idx, size_t nidx,
                         chaos_own_option own, void *ctx)
{
    if (t->count > CHAOS_PHASES_MAX) {
        fprintf(stderr, "chaos: %zu phases, at most %d\n", t->count,
                CHAOS_PHASES_MAX);
        exit(2);
    }
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (chaos_arg_run(argc, argv, &i, run))
            continue;
        if (v == NULL)
            chaos_phases_usage(t);
        i++;
        if (strcmp(o, "--phases") == 0)
            nidx = parse_phases(t, v, idx);
        else if (!own(o, v, ctx))
            chaos_phases_usage(t);
    }
    return nidx;
}

void chaos_print_verdict(const char *program, int all_ok, uint64_t seed)
{
    printf("%s: %s (seed %llu; rerun with --seed %llu)\n", program,
           all_ok ? "every phase within bounds" : "BOUNDS FAILED",
           (unsigned long long)seed, (unsigned long long)seed);
}
