/*
 * dlock_test_kit.c: dlock-test-kit, the fault kit's small jobs for shell
 * tests (tests/support/faultkit.sh), so they need no Python or socat:
 *
 *   dlock-test-kit clock-set FILE MS   sets the wall-clock shim's offset
 *                                      (absolute, ms; made if missing)
 *   dlock-test-kit free-port           prints a free loopback TCP port
 *
 * Both are the testkit functions the C tests call, behind a command line.
 */
#include "testkit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "clock-set") == 0) {
        char *end;
        long long ms = strtoll(argv[3], &end, 10);

        if (*end != '\0') {
            fprintf(stderr, "dlock-test-kit: not a number of ms: %s\n",
                    argv[3]);
            return 64;
        }
        return testkit_wallclock_set(argv[2], ms) == 0 ? 0 : 1;
    }
    if (argc == 2 && strcmp(argv[1], "free-port") == 0) {
        int port = testkit_free_port();

        if (port < 0)
            return 1;
        printf("%d\n", port);
        return 0;
    }
    fprintf(stderr, "usage: dlock-test-kit clock-set FILE MS\n"
                    "       dlock-test-kit free-port\n");
    return 64;
}
