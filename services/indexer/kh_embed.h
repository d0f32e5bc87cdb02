/*
 * kh_embed.h: the embedding step, an extension point run as a command.
 *
 * With EMBED_COMMAND set, kh-indexer pipes each chunk's text to that
 * command (run by /bin/sh -c, so it may be a pipeline) on its standard
 * input and reads a vector from its standard output: numbers separated
 * by white space or commas, optionally inside [ ], e.g. "[0.1, -2e-3]".
 * The vector is stored with the chunk (kh_chunk.embedding).  A command
 * that exits non-zero, prints no number, prints something else, or takes
 * longer than the timeout fails the event, which is then retried: a
 * half-embedded document is never committed.  The command runs without a
 * shell-visible terminal, with stdin and stdout as pipes and stderr
 * inherited (it lands in the indexer's log stream).
 *
 * Ownership: kh_embed_run returns a malloc'd array.  Threads: reentrant;
 * the indexer calls it from its one consumer thread.
 */
#ifndef KH_EMBED_H
#define KH_EMBED_H

#include <stddef.h>

/* The longest output read from the command (a vector of a few thousand
 * floats fits easily); more is an error. */
#define KH_EMBED_OUTPUT_MAX (1024 * 1024)

/*
 * Runs command with text[0..len) on its stdin, within timeout_ms (the
 * command is killed past it).  On success returns 0 with *vec a malloc'd
 * array of *dim floats (dim >= 1).  On failure returns -1, *vec NULL,
 * *dim 0, and err says why (the exit status, the timeout, the offending
 * output).
 */
int kh_embed_run(const char *command, const char *text, size_t len,
                 int timeout_ms, float **vec, size_t *dim, char *err,
                 size_t errlen);

/*
 * Parses a printed vector (see above) from out[0..len); out[len] must be
 * a NUL (as kh_embed_run leaves it).  Returns 0 with a
 * malloc'd *vec, or -1 with err set.  Exposed for unit tests.
 */
int kh_embed_parse(const char *out, size_t len, float **vec, size_t *dim,
                   char *err, size_t errlen);

/*
 * Formats vec as a PostgreSQL array literal "{0.1,-0.002}" into a
 * malloc'd string, or returns NULL on allocation failure.
 */
char *kh_embed_pg_array(const float *vec, size_t dim);

#endif /* KH_EMBED_H */
