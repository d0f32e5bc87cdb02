/*
 * fuzz_replay.c: the main() of a fuzz target in the normal builds.
 *
 *   fuzz_<target>_replay PATH...
 *
 * Runs LLVMFuzzerTestOneInput once on every regular file named, and on
 * every regular file directly inside each folder named (sorted, so a
 * failure names the same file every time), then the target's fixed checks
 * (fuzz_target_selftest) if it has any.  This is how the seed corpus, and
 * every crash input added to it, stays a regression test in the gcc build
 * and the sanitizer build, where libFuzzer is not available.
 *
 * A target reports a bug by aborting, so a bad input ends this program
 * with SIGABRT after the line "replaying <file>" that names it.  Exit
 * status 0: every input passed; 1: a path could not be read or held no
 * input at all (an empty corpus checks nothing, so it is an error too).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_target.h"

/* The biggest input replayed; the targets skip larger ones anyway. */
#define REPLAY_MAX (1u << 20)

static int replay_file(const char *path)
{
    static uint8_t buf[REPLAY_MAX];
    FILE *f = fopen(path, "rb");
    size_t n;

    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    fprintf(stderr, "replaying %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the regular files in dir into *names (sorted); returns the count,
 * or -1. */
static long list_dir(const char *dir, char ***names)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    long count = 0, cap = 0;

    *names = NULL;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0
            || !S_ISREG(st.st_mode))
            continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 64;
            *names = realloc(*names, (size_t)cap * sizeof(char *));
            if (*names == NULL)
                abort();
        }
        (*names)[count] = strdup(path);
        if ((*names)[count++] == NULL)
            abort();
    }
    closedir(d);
    qsort(*names, (size_t)count, sizeof(char *), compare_names);
    return count;
}

/* Replays path (a file or a folder); returns the inputs run, or -1. */
static long replay_path(const char *path)
{
    struct stat st;
    char **names;
    long count;
    int failed = 0;

    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path) == 0 ? 1 : -1;
    count = list_dir(path, &names);
    if (count < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (long i = 0; i < count; i++) {
        if (replay_file(names[i]) != 0)
            failed = 1;
        free(names[i]);
    }
    free(names);
    return failed ? -1 : count;
}

int main(int argc, char **argv)
{
    long total = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE-OR-CORPUS-DIR...\n", argv[0]);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        long n = replay_path(argv[i]);

        if (n < 0)
            return 1;
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "replay: no inputs in the paths given\n");
        return 1;
    }
    if (fuzz_target_selftest != NULL)
        fuzz_target_selftest();
    printf("%s: %ld inputs replayed, no failure\n", argv[0], total);
    return 0;
}
