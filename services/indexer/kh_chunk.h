/*
 * kh_chunk.h: splitting a document's text into overlapping chunks.
 *
 * kh-indexer indexes (and embeds) chunks, not whole documents: a hit
 * points at the passage that matched, and an embedding model sees text of
 * a bounded size.  A chunk is at most target_bytes long and the next one
 * starts overlap_bytes before the previous one ended, so a sentence cut by
 * a boundary is whole in one of the two.  Where a chunk ends is chosen in
 * this order, looking back from the target size but never into the first
 * half of the chunk (which would make chunks tiny):
 *   1. after a paragraph break (a blank line, "\n\n");
 *   2. after a sentence end: '.', '!' or '?' followed by white space, or
 *      the CJK full stops 。！？ (U+3002, U+FF01, U+FF1F), which need no
 *      space after them;
 *   3. after white space;
 *   4. at a character boundary: never inside a UTF-8 sequence.
 * Only when the text has no character boundary within 4 bytes of the
 * target (it is not UTF-8) is the cut made at the target itself.  Chunks
 * never end inside a multi-byte sequence of valid UTF-8, and starts are
 * moved likewise.
 *
 * This is a pure function over bytes (no allocation but the result, no
 * I/O), so it can be unit-tested and fuzzed directly.  Invariants of a
 * result, for any input: spans are in order, the first starts at 0, the
 * last ends at len, each is 1..target_bytes long, each starts after the
 * previous one's start and no later than its end (no gap), and for valid
 * UTF-8 input every start and end is on a character boundary.
 *
 * Ownership: kh_chunk_split returns a malloc'd array the caller frees.
 * Threads: reentrant.
 */
#ifndef KH_CHUNK_H
#define KH_CHUNK_H

#include <stddef.h>

/* The smallest target kh_chunk_split accepts: room for a few 4-byte
 * characters, so a cut can always back off to a character boundary. */
#define KH_CHUNK_TARGET_MIN 16

typedef struct kh_chunk_opts {
    size_t target_bytes;  /* at most this many bytes per chunk */
    size_t overlap_bytes; /* less than target_bytes / 2 */
} kh_chunk_opts;

/* One chunk: text[offset .. offset + length). */
typedef struct kh_chunk_span {
    size_t offset;
    size_t length;
} kh_chunk_span;

/* Sets the defaults: 1000-byte chunks with a 100-byte overlap. */
void kh_chunk_opts_init(kh_chunk_opts *opts);

/*
 * Splits text[0..len) (NUL bytes are ordinary bytes).  On success returns
 * 0, *spans is a malloc'd array of *count spans (NULL and 0 for len 0).
 * Returns -1 with *spans NULL and *count 0 when opts are out of range
 * (target below KH_CHUNK_TARGET_MIN, or overlap not below target / 2) or
 * an allocation fails.
 */
int kh_chunk_split(const char *text, size_t len, const kh_chunk_opts *opts,
                   kh_chunk_span **spans, size_t *count);

#endif /* KH_CHUNK_H */
