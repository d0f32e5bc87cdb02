/*
 * chaos.h: the lock-safety checker's shared parts (tests/chaos/).
 *
 * The checker asks one question of libdlock and the dlock CLI: when things
 * go wrong (a holder paused past its TTL, holders killed, Redis crashed with
 * and without persistence, Redis frozen, a starved watchdog), is the
 * resource the lock protects still safe, and how much of the time is the
 * lock usable?  Its processes:
 *
 *   chaos_check   the orchestrator and the nemesis: per fault kind (a
 *                 "phase") it starts a private redis-server and K clients,
 *                 injects that kind of fault on a schedule drawn from the
 *                 seed, stops everything by pid, then reads the logs and
 *                 prints one row of the summary table (chaos_analyze.c);
 *   chaos_client  one client: in "api" mode a loop over the C API
 *                 (acquire with wait, read the register, work, write the
 *                 value + 1, release); in "cli" mode the same loop through
 *                 `dlock run KEY -- chaos_step`;
 *   chaos_step    the critical section run by `dlock run`, with the fence
 *                 from $DLOCK_FENCE.
 *
 * What they share, all in the phase's folder:
 *
 *   events.log    one line per client or nemesis event, "<t_us> <what>
 *                 <id> ...", appended with one write(2) each (O_APPEND), so
 *                 that lines from many processes never mix and a SIGKILL
 *                 cannot leave half a line;
 *   register.log  the register (chaos_register.c): an append-only log whose
 *                 last line is the current state, guarded by flock(2);
 *   board         a small shared map (mmap) where each client says whether
 *                 it holds the lock now, so the nemesis can pick a holder;
 *   unfenced.log  a resource that checks nothing: while a `dlock run` step
 *                 holds the lock, a grandchild of dlock (the step's
 *                 "toucher") appends "<t_us> <id> <fence> <step pid> cli"
 *                 every CHAOS_TOUCH_US until it is killed; a C API holder
 *                 appends "... <pid> api" when its work starts and ends.
 *                 Its order is the resource's order: a line of an older
 *                 `dlock run` hold after the first line of a newer hold
 *                 is an overlap the resource saw, which only dlock's
 *                 process-group kill at the lock's deadline prevents.
 *
 * Every timestamp is CLOCK_MONOTONIC in microseconds, which all processes
 * on one machine share, so events of different processes can be ordered.
 */
#ifndef DLOCK_CHAOS_H
#define DLOCK_CHAOS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Most clients in one phase (board slots). */
#define CHAOS_CLIENTS_MAX 32
/* Longest line of either log. */
#define CHAOS_LINE_MAX 256

/* ---- time and randomness ------------------------------------------------- */

/* Microseconds on CLOCK_MONOTONIC. */
int64_t chaos_now_us(void);

/* Sleeps until the absolute monotonic time t_us.  Only for pacing: the
 * workload's "work" and the nemesis's schedule, never to wait for a
 * condition. */
void chaos_sleep_until(int64_t t_us);

/* Sleeps for us microseconds (pacing only, as above). */
void chaos_sleep_us(int64_t us);

/* A small deterministic generator (xorshift64*), so that a seed gives the
 * same schedule every time. */
typedef struct chaos_rng {
    uint64_t s;
} chaos_rng;

void chaos_rng_seed(chaos_rng *r, uint64_t seed);
uint64_t chaos_rng_next(chaos_rng *r);
/* Uniform in [lo, hi] (lo <= hi). */
int64_t chaos_rng_range(chaos_rng *r, int64_t lo, int64_t hi);

/* ---- the event log ------------------------------------------------------- */

/* Opens (creating) dir/file for appending; returns the fd or -1 (message
 * on stderr). */
int chaos_log_open(const char *dir, const char *file);

/* chaos_log_open(dir, "events.log"). */
int chaos_events_open(const char *dir);

/* How often a toucher touches the unfenced resource. */
#define CHAOS_TOUCH_US 2000

/* Appends "<now_us> <formatted>\n" with one write(2) and returns the time
 * stamped.  Events of the same process keep their order; a failed write is
 * reported on stderr (the analysis then sees a missing event). */
int64_t chaos_event(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the register -------------------------------------------------------- */

/* How the register checks fences.  FULL is the real one; the others exist
 * to show that the checker catches what they let through. */
typedef enum chaos_fencing {
    /* Every read and write carries the fence; an access with a fence below
     * the highest fence the register has seen is refused, and a write needs
     * a fence above the last accepted write's. */
    CHAOS_FENCE_FULL = 0,
    /* Only writes are checked: fence above the last accepted write's.  Not
     * enough for read-modify-write: a stale holder's read goes through and
     * its write can land before the new holder's. */
    CHAOS_FENCE_WRITES = 1,
    /* No check at all: the register trusts the lock alone. */
    CHAOS_FENCE_OFF = 2
} chaos_fencing;

/* The register's state, as the last line of register.log has it. */
typedef struct chaos_register_state {
    uint64_t seq;        /* accesses so far (accepted or refused) */
    uint64_t value;      /* the register's value */
    uint64_t floor;      /* highest fence seen in an accepted access */
    uint64_t last_write; /* fence of the last accepted write */
    uint64_t writes;     /* accepted writes */
} chaos_register_state;

typedef struct chaos_register chaos_register;

/* Creates register.log in dir with value 0 (chaos_check, once a phase). */
int chaos_register_create(const char *dir);

/* Opens the register of dir for a client; NULL on failure (message on
 * stderr). */
chaos_register *chaos_register_open(const char *dir, chaos_fencing fencing);
void chaos_register_close(chaos_register *reg);

/*
 * Reads the value for client id holding fence.  Returns 1 (accepted, *value
 * set), 0 (refused: a newer fence has been seen) or -1 (I/O error).  Each
 * access, refused or not, is one line of register.log, written under the
 * register's flock together with the new state.
 */
int chaos_register_read(chaos_register *reg, int id, uint64_t fence,
                        uint64_t *value);

/* Writes value for client id holding fence; 1 accepted, 0 refused, -1. */
int chaos_register_write(chaos_register *reg, int id, uint64_t fence,
                         uint64_t value);

/* Reads the current state of dir's register (no lock needed: the last line
 * is complete once written).  Returns 0 or -1. */
int chaos_register_state_read(const char *dir, chaos_register_state *st);

/* ---- the board ----------------------------------------------------------- */

typedef struct chaos_slot {
    int32_t pgid;     /* the client's process group (0: no client) */
    int32_t holding;  /* 1 between acquire and release */
    int64_t since_us; /* when holding became 1 */
} chaos_slot;

/* Maps dir/board (creating it with create != 0).  NULL on failure. */
chaos_slot *chaos_board_map(const char *dir, int create);
void chaos_board_unmap(chaos_slot *board);
/* Marks slot id as holding (1) or not (0), atomically. */
void chaos_board_hold(chaos_slot *board, int id, int holding);

/* ---- the critical section ------------------------------------------------ */

/*
 * The work a holder does with fence: read the register, work work_us
 * (pacing), write the value + 1.  Logs nothing itself (the register logs
 * its accesses); returns 1 when the write was accepted, 0 when the read or
 * the write was refused, -1 on an I/O error.
 */
int chaos_critical_section(chaos_register *reg, int id, uint64_t fence,
                           int64_t work_us);

/* ---- arguments ----------------------------------------------------------- */

/* Parses a decimal int64 in [min, max]; exits with a usage message naming
 * what when it is not one. */
int64_t chaos_arg_int(const char *s, int64_t min, int64_t max,
                      const char *what);

/* Parses "full", "writes" or "off"; exits on anything else. */
chaos_fencing chaos_arg_fencing(const char *s);

/* The options every chaos program takes. */
typedef struct chaos_run_args {
    int64_t seconds; /* --seconds N, 1..86400; 35 */
    uint64_t seed;   /* --seed S, 0..INT64_MAX; from the clock and pid */
    int keep;        /* --keep: leave the run's folder behind */
} chaos_run_args;

/* Sets the defaults above. */
void chaos_run_args_init(chaos_run_args *r);

/* Takes argv[*i] when it is --keep, or --seconds or --seed with its value
 * argv[*i + 1] (exiting with a usage message on a bad one), and moves *i
 * onto the last argument it used.  Returns 1 when it took the option, 0
 * when the option is the program's own. */
int chaos_arg_run(int argc, char **argv, int *i, chaos_run_args *r);

/* Parses list, "all" or names separated by commas, against the count
 * entries of names (a program's table of phases): writes the index of
 * each name given into out, in order, and returns how many.  Exits with a
 * usage message, naming what and the known names, on an unknown name or
 * more than max of them. */
size_t chaos_arg_names(const char *list, const char *const *names,
                       size_t count, size_t *out, size_t max,
                       const char *what);

/* ---- the orchestrators' command line (chaos_phases.c) --------------------- */

/* A program's table of phases: count structs of size bytes, each with the
 * phase's name (const char *) as its first member, and the synopsis its
 * usage message starts with (the phase names follow it). */
typedef struct chaos_phase_table {
    const void *entries;
    size_t count, size;
    const char *synopsis;
} chaos_phase_table;

#define CHAOS_PHASES_MAX 32

/* Prints the usage message, the synopsis and then the phase names, and
 * exits 2. */
void chaos_phases_usage(const chaos_phase_table *t);

/* Takes one of a program's own options, o with its value v (never NULL),
 * into ctx; returns 1, or 0 when o is not one of them or v is bad. */
typedef int (*chaos_own_option)(const char *o, const char *v, void *ctx);

/* Parses argv: the options of chaos_arg_run into run, --phases into idx
 * (indices into t, in run order, room for t->count) and every other
 * option, which takes a value, through own; exits with the usage message
 * on an unknown option or a missing value.  idx holds nidx default
 * phases on entry; returns how many it holds on return. */
size_t chaos_phases_args(int argc, char **argv, const chaos_phase_table *t,
                         chaos_run_args *run, size_t *idx, size_t nidx,
                         chaos_own_option own, void *ctx);

/* Prints a run's last line: "<program>: every phase within bounds" or
 * "BOUNDS FAILED", with the seed to rerun it. */
void chaos_print_verdict(const char *program, int all_ok, uint64_t seed);

#endif /* DLOCK_CHAOS_H */
