/*
 * cli_usage.c: the help texts (cli_usage.h), as static tables.
 */
#include "cli_usage.h"

static const char overview[] =
    "usage: dlock <command> [options] KEY ...\n"
    "\n"
    "flock(1) across machines: locks held in Redis with a TTL, renewed\n"
    "while they are in use, with a fencing token for every grant.\n"
    "\n"
    "commands:\n"
    "  run      run a command while holding KEY; with --every, on one\n"
    "           node of many at each tick (cron across nodes)\n"
    "  leader   run a command while this node leads KEY\n"
    "  acquire  take KEY and print its token (nothing renews it)\n"
    "  release  give back KEY by its token\n"
    "  extend   renew KEY by its token\n"
    "  status   show whether KEY is held, its TTL and its last fence\n"
    "  doctor   check that a Redis server is safe for locks\n"
    "  help     show the help of a command: dlock help run\n"
    "\n"
    "Redis: --url URL, else $REDIS_URL, else redis://127.0.0.1:6379.\n"
    "\n"
    "exit status: 0 done (run: the command's own status), 64 usage error,\n"
    "69 Redis unavailable, 70 internal error, 75 lock busy, 76 lock lost,\n"
    "78 doctor found the server unsafe.\n"
    "\n"
    "dlock --version prints the version; man dlock has the details.\n";

static const char common[] =
    "\n"
    "connection options:\n"
    "  -u, --url URL            redis://[user:pass@]host[:port][/db],\n"
    "                           rediss://... (TLS), unix:///path[?db=N],\n"
    "                           redis+sentinel://h:p,h:p,.../MASTER[?db=N],\n"
    "                           redlock://h:p,h:p,h:p (run, acquire,\n"
    "                           extend, release, status, doctor)\n"
    "      --wait-replicas N    each grant and renewal acknowledged by N\n"
    "                           replicas (WAIT), or refused (exit 69)\n"
    "      --wait-replicas-timeout D  how long to wait for them (1s)\n"
    "      --tls-ca FILE        trust these CA certificates (rediss://)\n"
    "      --tls-cert FILE      client certificate\n"
    "      --tls-key FILE       client certificate's key\n"
    "      --tls-server-name N  name to verify and send as SNI\n"
    "  -h, --help               show this help\n"
    "\n"
    "Durations: 500ms, 30s, 5m, 1h, 1.5s; a bare number is seconds.\n";

static const char *const texts[CLI_CMD_COUNT] = {
    [CLI_CMD_RUN] =
        "usage: dlock run [options] KEY [--] COMMAND [ARGS...]\n"
        "       dlock run --every D [options] KEY [--] COMMAND [ARGS...]\n"
        "\n"
        "Acquires KEY, runs COMMAND with DLOCK_KEY, DLOCK_TOKEN, DLOCK_FENCE\n"
        "and DLOCK_DEGRADED in its environment, renews the lock every ttl/3\n"
        "while it runs, and releases it when COMMAND ends.  If the lock is\n"
        "lost, COMMAND gets SIGTERM, and SIGKILL after the grace period.\n"
        "SIGINT, SIGTERM and SIGHUP sent to dlock are passed on to COMMAND.\n"
        "\n"
        "options:\n"
        "  -t, --ttl D              lock TTL (default 30s)\n"
        "  -w, --wait D             wait up to D for a busy lock (default 0:\n"
        "                           do not wait); 'forever' or -1: no limit\n"
        "      --grace D            SIGTERM to SIGKILL once lost (default "
        "5s)\n"
        "      --fair               wait in line: waiters get KEY in the\n"
        "                           order they came, handed over by Redis\n"
        "                           at release (every party on KEY must\n"
        "                           use --fair)\n"
        "      --fail-open          run COMMAND without the lock (fence 0)\n"
        "                           when Redis is unavailable\n"
        "  -E, --conflict-exit-code N  exit N, not 75, when the lock is busy\n"
        "  -q, --quiet              no message when busy or failing open\n"
        "                           (--every: none for each run)\n"
        "      --every D            run forever, campaigning for KEY with\n"
        "                           other nodes; at each tick of D (on the\n"
        "                           Redis clock) one node runs COMMAND with\n"
        "                           DLOCK_TICK and DLOCK_TERM; --ttl is the\n"
        "                           leader's lease; a run that outlasts its\n"
        "                           tick skips the ticks it overlaps\n"
        "\n"
        "exit status: COMMAND's (128+N if signal N killed it), 75 busy,\n"
        "76 lock lost while COMMAND ran, 69 Redis unavailable, 64 usage,\n"
        "70 internal error, 126/127 COMMAND not executable / not found.\n"
        "With --every: 0 when stopped by SIGINT/SIGTERM/SIGHUP.\n",
    [CLI_CMD_ACQUIRE] =
        "usage: dlock acquire [options] KEY\n"
        "\n"
        "Takes KEY and prints 'token=<hex> fence=<n> ttl_ms=<n>'.  Nothing\n"
        "renews the lock: extend it before the TTL ends, and release it\n"
        "with the token.\n"
        "\n"
        "options:\n"
        "  -t, --ttl D              lock TTL (default 30s)\n"
        "  -w, --wait D             wait up to D for a busy lock (default "
        "0);\n"
        "                           'forever' or -1: no limit\n"
        "\n"
        "exit status: 0 acquired, 75 busy, 69 Redis unavailable, 64 usage.\n",
    [CLI_CMD_RELEASE] =
        "usage: dlock release [options] KEY [TOKEN]\n"
        "\n"
        "Releases KEY if TOKEN still holds it; otherwise deletes nothing.\n"
        "TOKEN '-' (or --token -) reads it from stdin; without TOKEN it\n"
        "comes from $DLOCK_TOKEN, so it need not show in ps.\n"
        "\n"
        "options:\n"
        "      --token T            TOKEN as an option ('-': stdin)\n"
        "\n"
        "exit status: 0 released, 76 not held by TOKEN any more,\n"
        "69 Redis unavailable, 64 usage.\n",
    [CLI_CMD_EXTEND] =
        "usage: dlock extend [options] KEY [TOKEN]\n"
        "\n"
        "Sets the TTL of KEY to --ttl from now, if TOKEN still holds it.\n"
        "TOKEN '-' (or --token -) reads it from stdin; without TOKEN it\n"
        "comes from $DLOCK_TOKEN, so it need not show in ps.\n"
        "\n"
        "options:\n"
        "  -t, --ttl D              the new TTL (default 30s)\n"
        "      --token T            TOKEN as an option ('-': stdin)\n"
        "\n"
        "exit status: 0 extended, 76 not held by TOKEN any more,\n"
        "69 Redis unavailable, 64 usage.\n",
    [CLI_CMD_STATUS] =
        "usage: dlock status [options] KEY\n"
        "\n"
        "Prints whether KEY is held, its remaining TTL in ms (-1: none)\n"
        "and the last fence granted, as 'name: value' lines.  With\n"
        "--leader, KEY is a role of `dlock leader` or `run --every`: who\n"
        "leads it, the leader's term, its lease's TTL and the last term.\n"
        "\n"
        "options:\n"
        "      --leader             KEY names a leader role, not a lock\n"
        "      --json               print one JSON object instead\n"
        "\n"
        "exit status: 0 (held or not), 69 Redis unavailable, 64 usage.\n",
    [CLI_CMD_DOCTOR] =
        "usage: dlock doctor [options] [URL]\n"
        "\n"
        "Checks the server at URL (or --url, $REDIS_URL) for what locks\n"
        "need, one line each: its version (5.0.0 or later), eviction\n"
        "(maxmemory-policy noeviction), persistence (appendonly yes),\n"
        "replication (a primary, replicas in sync) and its clock (within\n"
        "1 s of ours), saying which are unsafe and why.\n"
        "\n"
        "options:\n"
        "      --json               print one JSON object instead\n"
        "\n"
        "exit status: 0 all safe, 78 something unsafe or unknown,\n"
        "69 Redis unavailable, 64 usage.\n",
    [CLI_CMD_LEADER] =
        "usage: dlock leader [options] KEY [--] COMMAND [ARGS...]\n"
        "\n"
        "Campaigns for KEY with the other nodes running the same line and\n"
        "runs COMMAND while this node leads, with DLOCK_KEY, DLOCK_TERM and\n"
        "DLOCK_FENCE (the term) in its environment.  If the leadership is\n"
        "lost (the lease could not be renewed in time), COMMAND gets\n"
        "SIGTERM, SIGKILL after the grace period, and dlock campaigns again;\n"
        "another node takes over within one TTL.  SIGINT, SIGTERM or SIGHUP\n"
        "stop COMMAND and resign, so another node takes over at once.\n"
        "\n"
        "options:\n"
        "  -t, --ttl D              the leader's lease (default 30s),\n"
        "                           renewed every D/3\n"
        "      --grace D            SIGTERM to SIGKILL (default 5s)\n"
        "  -q, --quiet              no message when COMMAND starts or ends\n"
        "\n"
        "exit status: COMMAND's when it ends by itself (dlock resigns), 0\n"
        "when stopped by a signal, 69 Redis unavailable at the start,\n"
        "64 usage, 70 internal error, 126/127 COMMAND not runnable.\n",
};

void cli_usage_print_overview(FILE *out)
{
    fputs(overview, out);
}

void cli_usage_print(FILE *out, enum cli_command command)
{
    fputs(texts[command], out);
    fputs(common, out);
}
