/*
 * fence.h: where a lock's fence counter lives, which names are reserved,
 * and the highest fence a client has seen.
 *
 * Derived keys.  A lock named K keeps its last fence in
 *     #dlock:fence:{K}      (K without a cluster hash tag)
 *     #dlock:fence:K        (K with one; its tag is then the key's first)
 * so the counter shares K's cluster slot, and no lock name can reach it:
 * names that begin with DLOCK__RESERVED_PREFIX are refused, as are names
 * that begin like a pattern's keys ("{sem:", "{rw:", ...; see
 * dlock__pattern_kinds below).  Before this layout the counter was "{K}:fence" (or
 * "K:fence"), a valid lock name.  It is read, never written, so an
 * upgrade never lowers a fence: the fair scripts and inspect take the
 * larger of the two counters; the plain acquire reads the legacy one only
 * while the new one is absent or unreadable, since every script that
 * writes the new counter writes a fence above the legacy counter it read
 * (so while the new counter exists it is the larger).
 *
 * The floor.  Each client keeps the highest fence and the highest server
 * time (TIME, in microseconds) it has seen in any reply; an acquire sends
 * it, and the script refuses to grant a fence that is not above it (see
 * lock.c).  Fences are server microseconds or a counter just past them,
 * so the floor only stops a grant when the server's clock is behind what
 * this client saw before and its counter cannot show a higher number: a
 * restart that lost the counter, a failover to a replica that missed the
 * last grants, or a clock stepped back.
 *
 * Threads: the floor is one atomic per client; everything here may be
 * called from any thread.
 */
#ifndef DLOCK_SRC_FENCE_H
#define DLOCK_SRC_FENCE_H

#include <stdint.h>

#include "client/client_internal.h"

/* Lock names may not begin with this; derived keys do. */
#define DLOCK__RESERVED_PREFIX "#dlock:"

/* How long a fence counter outlives its last grant: 30 days past the
 * grant's TTL, for the core lock's counters and the patterns' alike
 * (every grant sets it again).  After that the clock (server
 * microseconds, 30 days on) is far above the expired counter, so the
 * next fence, max(counter + 1, clock), is still higher; where the clock
 * is not (stepped back, or a restart behind), the client's floor refuses
 * the grant.  DLOCK__FENCE_KEEP_LUA is the same in a Lua expression. */
#define DLOCK__FENCE_KEEP_DAYS 30
#define DLOCK__FENCE_KEEP_MS ((int64_t)DLOCK__FENCE_KEEP_DAYS * 86400 * 1000)
#define DLOCK__FENCE_STR2(x) #x
#define DLOCK__FENCE_STR(x) DLOCK__FENCE_STR2(x)
#define DLOCK__FENCE_KEEP_LUA \
    DLOCK__FENCE_STR(DLOCK__FENCE_KEEP_DAYS) " * 86400000"

/* 1 if key has a non-empty cluster hash tag ({...}), as Redis Cluster
 * defines it: the text between the first '{' and the first '}' after it. */
int dlock__fence_has_hash_tag(const char *key);

/* The fence counter key of lock key, malloc'd; NULL when out of memory. */
char *dlock__fence_key(const char *key);

/* Another key derived from lock key, in the reserved namespace and key's
 * cluster slot: "#dlock:<kind>:{K}" (or "#dlock:<kind>:K" with a hash
 * tag); malloc'd, NULL when out of memory.  The fair lock's queue uses
 * it. */
char *dlock__fence_derived_key(const char *kind, const char *key);

/* The counter key of versions before the reserved prefix ("{K}:fence" or
 * "K:fence"), malloc'd; NULL when out of memory.  Read, never written. */
char *dlock__fence_legacy_key(const char *key);

/*
 * Every name a lock on K uses, built at once: K itself, its fence counter
 * (as dlock__fence_key), the legacy counter (dlock__fence_legacy_key),
 * the fair lock's queue and waiters keys (dlock__fence_derived_key
 * "queue" and "waiters") and channel_prefix + K, the same strings those
 * functions give, in one allocation and with no formatting: each acquire
 * makes a lock object, and building them one by one cost it seven
 * snprintf calls and eight allocations.  Returns 0 with every pointer set
 * into one block that names->key owns (free it, and only it, with
 * dlock__free), or -1 when out of memory with every pointer NULL.
 */
typedef struct dlock__lock_names {
    char *key;
    char *fence;
    char *legacy_fence;
    char *queue;
    char *waiters;
    char *channel;
} dlock__lock_names;

int dlock__fence_lock_names(const char *key, const char *channel_prefix,
                            dlock__lock_names *names);

/*
 * The kinds of pattern object, NULL-terminated: "sem", "rw", "leader",
 * "rl", "once", "idem".  Every pattern key begins with "{kind:", so a lock
 * name that begins so is refused (dlock__pattern_owns_key): a core lock can
 * never reach a semaphore's holders or a leader's lease.
 */
extern const char *const dlock__pattern_kinds[];

/* 1 if key begins with "{kind:" for one of the kinds above, else 0. */
int dlock__pattern_owns_key(const char *key);

/* 1 if a lock name would reach a key the library derives (it begins with
 * the reserved prefix or with a pattern's "{kind:"), else 0. */
int dlock__fence_name_reserved(const char *key);

/* The client's floor: the highest fence or server time it has seen. */
uint64_t dlock__fence_floor(dlock_client *c);

/* Raises the client's floor to seen if that is higher. */
void dlock__fence_floor_raise(dlock_client *c, uint64_t seen);

/* Lua: the fence rule's decimal helpers, shared by every script that
 * hands out fences (lock.c, lock_fair.c, pattern_common.h).  dec(v)
 * returns v if it is a decimal fence string (no leading zero, at most 19
 * digits), else nil; v is a GET's answer, call or pcall: a string, false,
 * or an error table ({err = ...}), told apart without type(), which costs
 * redis-server hundreds of instructions a call (lock.c), since v.err is
 * nil for a string.  gt(a, b) compares two such strings as numbers. */
#define DLOCK__FENCE_LUA_DECIMALS                                       \
    "local function dec(v)\n"                                           \
    "  if v and not v.err and #v <= 19 and v:find('^[1-9]%d*$') then\n" \
    "    return v\n"                                                    \
    "  end\n"                                                           \
    "end\n"                                                             \
    "local function gt(a, b)\n"                                         \
    "  return #a > #b or (#a == #b and a > b)\n"                        \
    "end\n"

/* Lua: the fence rule's clock, an expression: the server's microseconds as
 * a decimal string, from TIME's answer, which the script holds in t. */
#define DLOCK__FENCE_LUA_NOW "t[1] .. string.rep('0', 6 - #t[2]) .. t[2]"

/* Lua: inc(s) returns the decimal string s plus one, digit by digit (exact
 * past 2^53, where Lua's doubles stop counting).  lock.c's acquire writes
 * the same steps in place instead, since it makes this closure on every
 * grant for a branch that runs only when the clock is behind. */
#define DLOCK__FENCE_LUA_INC                                      \
    "local function inc(s)\n"                                     \
    "  local i = #s\n"                                            \
    "  while i > 0 and s:sub(i, i) == '9' do i = i - 1 end\n"     \
    "  if i == 0 then return '1' .. string.rep('0', #s) end\n"    \
    "  return s:sub(1, i - 1) .. string.char(s:byte(i) + 1) ..\n" \
    "         string.rep('0', #s - i)\n"                          \
    "end\n"

#endif /* DLOCK_SRC_FENCE_H */
