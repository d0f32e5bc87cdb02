/*
 * rvt_mongo.h: a private MongoDB-wire server for the tests of
 * CONTENT_STORE=mongo (reviewd's, and kh-indexer's reading of the same
 * records).
 *
 * No mongod is packaged in Debian, so the server is CongoDB from npm
 * (tools/mongo-test-server/server.mjs, installed by its install.sh on
 * first use), run with node on a free loopback port, its output in a
 * scratch folder var/test/<name>-<pid>/mongo.log.  It keeps its data in
 * memory only, so a restart comes back empty, which the outage tests
 * rely on.  The process is signalled only by the pid this kit forked,
 * and dies with the test (PR_SET_PDEATHSIG).  Every wait is bounded.
 *
 * Threads: the main thread of a test program.
 */
#ifndef RVT_MONGO_H
#define RVT_MONGO_H

#include <sys/types.h>

typedef struct rvt_mongo {
    pid_t pid;     /* 0: not running */
    int port;      /* kept across restarts */
    char dir[512]; /* the scratch folder */
    char log[600];
    char url[256]; /* mongodb://127.0.0.1:<port>/<db>?... */
} rvt_mongo;

/*
 * Installs the npm packages if needed, makes the scratch folder for name,
 * picks a port and starts the server; url names database db with a
 * 1 s server selection, so an outage fails a call quickly.  Returns 0 or
 * -1 (the reason on stderr).
 */
int rvt_mongo_open(rvt_mongo *m, const char *name, const char *db);
/* Starts the server again on the same port; waits up to 15 s for it to
 * listen.  Returns 0 or -1 (its log on stderr). */
int rvt_mongo_start(rvt_mongo *m);
/* SIGTERM, then SIGKILL after 5 s; waits for the process.  Returns 0 if it
 * went on SIGTERM. */
int rvt_mongo_stop(rvt_mongo *m);
/* Stops the server and removes the scratch folder when remove_dir. */
void rvt_mongo_close(rvt_mongo *m, int remove_dir);

#endif /* RVT_MONGO_H */
