/*
 * test_sentinel.c: the pure parts of Sentinel discovery (src/lib/
 * sentinel.c): whether a ROLE reply says master, and the parsing of a
 * +switch-master message.  Discovery itself runs against real sentinels
 * in tests/scale/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <hiredis/read.h>

#include "deploy/sentinel.h"
#include "testkit.h"

static redisReply *reply_of(const char *resp)
{
    redisReply *r = testkit_reply_of(resp);

    TK_EXPECT(r != NULL, "\"%s\" is one complete reply", resp);
    return r;
}

static void role_says_master_only_for_a_master(void **state)
{
    static const struct {
        const char *resp;
        int master;
    } cases[] = {
        {"*3\r\n$6\r\nmaster\r\n:3129659\r\n*0\r\n", 1},
        {"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:9000\r\n"
         "$9\r\nconnected\r\n:3167038\r\n",
         0},
        {"*2\r\n$8\r\nsentinel\r\n*1\r\n$6\r\nmaster\r\n", 0},
        {"-ERR unknown command\r\n", 0},
        {"*0\r\n", 0},
        {"$6\r\nmaster\r\n", 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        redisReply *r = reply_of(cases[i].resp);

        TK_EXPECT(dlock__role_is_master(r) == cases[i].master,
                  "case %zu is %sa master", i, cases[i].master ? "" : "not ");
        freeReplyObject(r);
    }
    TK_EXPECT(!dlock__role_is_master(NULL), "no reply is no master");
}

static int parse(const char *payload, char *host, int *port)
{
    return dlock__sentinel_parse_switch(payload, strlen(payload), "dlock",
                                        host, port);
}

static void switch_master_gives_the_new_address(void **state)
{
    char host[256];
    int port = 0;

    (void)state;
    TK_EXPECT(parse("dlock 127.0.0.1 18400 127.0.0.1 18402", host, &port)
                  && strcmp(host, "127.0.0.1") == 0 && port == 18402,
              "the new master is the fourth and fifth word");
    TK_EXPECT(!parse("other 127.0.0.1 1 127.0.0.1 2", host, &port),
              "another master's switch is ignored");
    TK_EXPECT(!parse("dlockx 127.0.0.1 1 127.0.0.1 2", host, &port),
              "the name must match whole");
    TK_EXPECT(!parse("dlock 127.0.0.1 1 127.0.0.1", host, &port),
              "four words are not a switch");
    TK_EXPECT(!parse("dlock 127.0.0.1 1 127.0.0.1 2 extra", host, &port),
              "six words are not a switch");
    TK_EXPECT(!parse("dlock a 1 b 70000", host, &port)
                  && !parse("dlock a 1 b 0", host, &port)
                  && !parse("dlock a 1 b 12x", host, &port),
              "a bad port");
    TK_EXPECT(!parse("", host, &port), "empty");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(role_says_master_only_for_a_master),
        cmocka_unit_test(switch_master_gives_the_new_address),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
