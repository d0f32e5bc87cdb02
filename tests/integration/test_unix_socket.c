/*
 * test_unix_socket.c: unix:// URLs, on the shared stack's socket.
 *
 * A local Redis is often reached through its socket; the client must
 * connect, lock and describe its endpoint as the socket path, and a
 * ?db=N on a socket URL must select that database.
 */
#include "itkit.h"

#include <string.h>

static void unix_socket_url_connects_and_locks(void **state)
{
    const char *tcp_url = itkit_shared_url();
    const char *url = testkit_redis_unix_url();
    const char *path = url + strlen("unix://");
    char key[TESTKIT_KEY_MAX];
    dlock_client *c;
    dlock_lock *l;

    (void)state;
    TK_EXPECT(testkit_redis_ping(url),
              "the shared Redis answers on its "
              "socket %s",
              url);
    c = itkit_client(url, NULL);
    TK_EXPECT(strstr(dlock_client_endpoint(c), path) != NULL
                  && strncmp(dlock_client_endpoint(c), "unix:", 5) == 0,
              "the endpoint is described as unix:%s, got %s", path,
              dlock_client_endpoint(c));
    l = itkit_acquire(c, testkit_key(key, "unix_socket"), NULL);
    TK_EXPECT(testkit_redis_int(tcp_url, "EXISTS %s", key) == 1,
              "the lock "
              "taken over the socket is seen over TCP in the same server");
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release over the socket");
    testkit_forget_lock(tcp_url, key);
    dlock_client_free(c);
}

static void unix_socket_url_selects_its_db(void **state)
{
    const char *tcp_url = itkit_shared_url();
    const char *url = testkit_redis_unix_url();
    char db_url[800], key[TESTKIT_KEY_MAX];
    dlock_client *c;
    dlock_lock *l;

    (void)state;
    TK_EXPECT(strchr(url, '?') == NULL,
              "the stack's socket URL has no "
              "query: %s",
              url);
    snprintf(db_url, sizeof(db_url), "%s?db=3", url);
    c = itkit_client(db_url, NULL);
    l = itkit_acquire(c, testkit_key(key, "unix_db"), NULL);
    TK_EXPECT(testkit_redis_int(db_url, "EXISTS %s", key) == 1, "the key is "
                                                                "in db 3");
    TK_EXPECT(testkit_redis_int(tcp_url, "EXISTS %s", key) == 0,
              "and not in "
              "the db of %s",
              tcp_url);
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release in db 3");
    testkit_forget_lock(db_url, key);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unix_socket_url_connects_and_locks),
        cmocka_unit_test(unix_socket_url_selects_its_db),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
