/*
 * test_reviewd_unit.c: reviewd's pure functions, without servers.
 *
 * The router, the strict JSON and UTF-8 helpers, token verification, the
 * configuration parsers, the log's URL redaction and the media-type and
 * Idempotency-Key checks decide what the service answers to bad input, so
 * each of them is checked here directly with the inputs docs/api.md names, and
 * the black-box tests then only need to show the wiring.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jwt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/rv_auth.h"
#include "bg/rv_amqp.h"
#include "core/rv_config.h"
#include "http/rv_dispatch.h"
#include "tx/rv_idem.h"
#include "svc_json.h"
#include "svc_log.h"
#include "core/rv_router.h"
#include "handlers/rv_console.h"

#define SECRET "unit-secret-0123456789abcdefghij"
#define NOW ((int64_t)1800000000)

static void ids_are_canonical_positive_int64(void **state)
{
    int64_t v;

    (void)state;
    assert_int_equal(rv_router_parse_id("42", 2, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(rv_router_parse_id("9223372036854775807", 19, &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(rv_router_parse_id("9223372036854775808", 19, &v), -1);
    assert_int_equal(rv_router_parse_id("99999999999999999999", 20, &v), -1);
    assert_int_equal(rv_router_parse_id("0", 1, &v), -1);
    assert_int_equal(rv_router_parse_id("-1", 2, &v), -1);
    assert_int_equal(rv_router_parse_id("abc", 3, &v), -1);
    assert_int_equal(rv_router_parse_id("007", 3, &v), -1);
    assert_int_equal(rv_router_parse_id("+7", 2, &v), -1);
    assert_int_equal(rv_router_parse_id(" 7", 2, &v), -1);
    assert_int_equal(rv_router_parse_id("", 0, &v), -1);
}

static void paths_match_by_shape_before_the_id_is_checked(void **state)
{
    rv_match m;

    (void)state;
    rv_router_match("/v1/documents/abc", RV_METHOD_GET, &m);
    assert_int_equal(m.path, RV_PATH_DOCUMENT);
    assert_int_equal(m.op, RV_OP_DOCUMENT_GET);
    assert_true(m.has_id && !m.id_ok);

    rv_router_match("/v1/documents/12/submit", RV_METHOD_POST, &m);
    assert_int_equal(m.op, RV_OP_DOCUMENT_SUBMIT);
    assert_true(m.id_ok && m.id == 12);

    rv_router_match("/v1/reviews/5/reject", RV_METHOD_GET, &m);
    assert_int_equal(m.path, RV_PATH_REVIEW_REJECT);
    assert_int_equal(m.op, RV_OP_NONE);
    assert_string_equal(rv_router_allow(m.path), "POST");

    rv_router_match("/v1/documents/12/", RV_METHOD_GET, &m);
    assert_int_equal(m.path, RV_PATH_UNKNOWN);
    rv_router_match("/v1/documents//submit", RV_METHOD_POST, &m);
    assert_int_equal(m.path, RV_PATH_UNKNOWN);
    rv_router_match("/v1/documentsX", RV_METHOD_POST, &m);
    assert_int_equal(m.path, RV_PATH_UNKNOWN);
    rv_router_match("/v1/documents/1/submit/x", RV_METHOD_POST, &m);
    assert_int_equal(m.path, RV_PATH_UNKNOWN);

    rv_router_match("/v1/documents/1", RV_METHOD_OTHER, &m);
    assert_int_equal(m.op, RV_OP_NONE);
    assert_string_equal(rv_router_allow(m.path), "GET, HEAD, PUT");
    assert_int_equal(rv_router_method("get"), RV_METHOD_OTHER);
}

static void bodies_must_be_one_utf8_json_object_without_duplicates(
    void **state)
{
    char detail[256];
    json_t *o;

    (void)state;
    o = svc_json_parse_object("{\"a\":1}", 7, detail, sizeof(detail));
    assert_non_null(o);
    json_decref(o);
    assert_null(svc_json_parse_object("", 0, detail, sizeof(detail)));
    assert_null(svc_json_parse_object("[1]", 3, detail, sizeof(detail)));
    assert_null(svc_json_parse_object("\"x\"", 3, detail, sizeof(detail)));
    assert_null(svc_json_parse_object("{\"a\":1,\"a\":2}", 13, detail,
                                      sizeof(detail)));
    assert_null(
        svc_json_parse_object("{\"a\":\"\xff\"}", 9, detail, sizeof(detail)));
    assert_non_null(strstr(detail, "UTF-8"));
    assert_null(svc_json_parse_object("{\"a\":\"\\u0000\"}", 14, detail,
                                      sizeof(detail)));
    assert_null(svc_json_parse_object("{\"a\":\"\\ud800\"}", 14, detail,
                                      sizeof(detail)));
    assert_null(svc_json_parse_object("{} {}", 5, detail, sizeof(detail)));
    assert_null(
        svc_json_parse_object("{\"a\":1} x", 9, detail, sizeof(detail)));
    assert_null(svc_json_parse_object("{\"a\":123456789012345678901234}", 30,
                                      detail, sizeof(detail)));
}

static void utf8_rules_follow_rfc_3629(void **state)
{
    (void)state;
    assert_true(svc_utf8_valid("h\xc3\xa9llo", 6));
    assert_true(svc_utf8_valid("\xf0\x9f\x98\x80", 4));
    assert_false(svc_utf8_valid("\xc0\xaf", 2));         /* overlong */
    assert_false(svc_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(svc_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(svc_utf8_valid("\xe2\x82", 2));         /* truncated */
    assert_false(svc_utf8_valid("a\0b", 3));
    assert_int_equal(svc_utf8_chars("h\xc3\xa9\xf0\x9f\x98\x80"), 3);
}

static void fields_are_checked_for_type_and_length_in_characters(void **state)
{
    static const char *const allowed[] = {"title", NULL};
    char detail[160];
    const char *v;
    json_t *o = json_pack("{s:s,s:i}", "title", "\xc3\xa9\xc3\xa9\xc3\xa9",
                          "n", 1);

    (void)state;
    assert_int_equal(svc_json_string_field(o, "title", 1, 3, 0, &v, detail,
                                           sizeof(detail)),
                     1);
    assert_int_equal(svc_json_string_field(o, "title", 1, 2, 0, &v, detail,
                                           sizeof(detail)),
                     -1);
    assert_int_equal(svc_json_string_field(o, "n", 0, 9, 0, &v, detail,
                                           sizeof(detail)),
                     -1);
    assert_int_equal(svc_json_string_field(o, "absent", 0, 9, 0, &v, detail,
                                           sizeof(detail)),
                     0);
    assert_int_equal(svc_json_only_fields(o, allowed, detail, sizeof(detail)),
                     -1);
    assert_non_null(strstr(detail, "\"n\""));
    json_decref(o);
}

static void error_bodies_stay_valid_json_for_hostile_details(void **state)
{
    char *body = svc_json_error_body("INVALID_ARGUMENT", "bad \xff\xfe \"x\"");
    json_t *o;

    (void)state;
    assert_non_null(body);
    o = json_loads(body, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "code")),
                        "INVALID_ARGUMENT");
    json_decref(o);
    free(body);
}

/* Signs claims (a JSON object text) with alg and key. */
static char *sign(const char *claims, jwt_alg_t alg, const char *key)
{
    jwt_t *jwt = NULL;
    char *tok;

    assert_int_equal(jwt_new(&jwt), 0);
    assert_int_equal(jwt_add_grants_json(jwt, claims), 0);
    assert_int_equal(jwt_set_alg(jwt, alg, (const unsigned char *)key,
                                 key != NULL ? (int)strlen(key) : 0),
                     0);
    tok = jwt_encode_str(jwt);
    jwt_free(jwt);
    return tok;
}

/* The policy of these tests: no leeway, so exp and nbf are exact
 * boundaries, and lifetimes of years allowed (the claims below). */
static const rv_auth_policy exact = {(const unsigned char *)SECRET,
                                     sizeof(SECRET) - 1, 0,
                                     10 * 365 * 86400LL};

/* The service's defaults (rv_config.c). */
static const rv_auth_policy defaults = {(const unsigned char *)SECRET,
                                        sizeof(SECRET) - 1, 30, 86400};

static int verify_with(const rv_auth_policy *p, const char *tok,
                       rv_identity *who, char *detail)
{
    char header[8300];

    snprintf(header, sizeof(header), "Bearer %s", tok);
    return rv_auth_verify(header, p, NOW, who, detail, 160);
}

static int verify(const char *tok, rv_identity *who, char *detail)
{
    return verify_with(&exact, tok, who, detail);
}

/* Claims for alice with the given time claims (e.g. "\"exp\":1"). */
static int verify_times(const rv_auth_policy *p, const char *times)
{
    char claims[256];
    rv_identity who;
    char detail[160];
    char *tok;
    int rc;

    snprintf(claims, sizeof(claims),
             "{\"sub\":\"alice\",\"role\":\"author\",%s}", times);
    tok = sign(claims, JWT_ALG_HS256, SECRET);
    rc = verify_with(p, tok, &who, detail);
    free(tok);
    return rc;
}

static void clocks_may_disagree_by_the_leeway_and_lifetimes_are_bounded(
    void **state)
{
    char times[128];

    (void)state;
    /* An issuer whose clock is 1 s ahead: nbf one second from now. */
    snprintf(times, sizeof(times), "\"exp\":%lld,\"nbf\":%lld",
             (long long)NOW + 3600, (long long)NOW + 1);
    assert_int_equal(verify_times(&defaults, times), 0);
    assert_int_equal(verify_times(&exact, times), -1);
    snprintf(times, sizeof(times), "\"exp\":%lld,\"nbf\":%lld",
             (long long)NOW + 3600, (long long)NOW + 31);
    assert_int_equal(verify_times(&defaults, times), -1);
    /* Expired 10 s ago by our clock: within the leeway; 30 s: not. */
    snprintf(times, sizeof(times), "\"exp\":%lld", (long long)NOW - 10);
    assert_int_equal(verify_times(&defaults, times), 0);
    snprintf(times, sizeof(times), "\"exp\":%lld", (long long)NOW - 30);
    assert_int_equal(verify_times(&defaults, times), -1);
    /* A day ahead (and the leeway) is the longest accepted lifetime. */
    snprintf(times, sizeof(times), "\"exp\":%lld",
             (long long)NOW + 86400 + 30);
    assert_int_equal(verify_times(&defaults, times), 0);
    snprintf(times, sizeof(times), "\"exp\":%lld",
             (long long)NOW + 86400 + 31);
    assert_int_equal(verify_times(&defaults, times), -1);
    assert_int_equal(verify_times(&defaults, "\"exp\":1e300"), -1);
    assert_int_equal(verify_times(&defaults, "\"exp\":9.2e18"), -1);
    assert_int_equal(verify_times(&defaults, "\"exp\":-1e300"), -1);
}

static void tokens_need_hs256_a_future_exp_a_sub_and_a_known_role(void **state)
{
    rv_identity who;
    char detail[160];
    char *tok;

    (void)state;
    tok = sign("{\"sub\":\"alice\",\"role\":\"author\",\"exp\":1800000100}",
               JWT_ALG_HS256, SECRET);
    assert_int_equal(verify(tok, &who, detail), 0);
    assert_string_equal(who.sub, "alice");
    assert_int_equal(who.role, RV_ROLE_AUTHOR);
    free(tok);

    static const char *const bad_claims[] = {
        "{\"sub\":\"alice\",\"role\":\"author\",\"exp\":1800000000}",
        "{\"sub\":\"alice\",\"role\":\"author\"}",
        "{\"sub\":\"alice\",\"role\":\"author\",\"exp\":\"1900000000\"}",
        "{\"role\":\"author\",\"exp\":1900000000}",
        "{\"sub\":\"\",\"role\":\"author\",\"exp\":1900000000}",
        "{\"sub\":7,\"role\":\"author\",\"exp\":1900000000}",
        "{\"sub\":\"alice\",\"role\":\"owner\",\"exp\":1900000000}",
        "{\"sub\":\"alice\",\"exp\":1900000000}",
        "{\"sub\":\"alice\",\"role\":\"author\",\"exp\":1900000000,"
        "\"nbf\":1900000000}",
        NULL};
    for (int i = 0; bad_claims[i] != NULL; i++) {
        tok = sign(bad_claims[i], JWT_ALG_HS256, SECRET);
        assert_int_equal(verify(tok, &who, detail), -1);
        free(tok);
    }

    tok = sign("{\"sub\":\"a\",\"role\":\"admin\",\"exp\":1900000000}",
               JWT_ALG_HS512, SECRET);
    assert_int_equal(verify(tok, &who, detail), -1);
    free(tok);
    tok = sign("{\"sub\":\"a\",\"role\":\"admin\",\"exp\":1900000000}",
               JWT_ALG_HS256, "another-secret-0123456789abcdefgh");
    assert_int_equal(verify(tok, &who, detail), -1);
    free(tok);
    tok = sign("{\"sub\":\"a\",\"role\":\"admin\",\"exp\":1900000000}",
               JWT_ALG_NONE, NULL);
    assert_int_equal(verify(tok, &who, detail), -1);
    free(tok);
}

static void authorization_headers_must_be_bearer_tokens(void **state)
{
    rv_identity who;
    char detail[160];
    const rv_auth_policy *k = &exact;

    (void)state;
    assert_int_equal(rv_auth_verify(NULL, k, NOW, &who, detail,
                                    sizeof(detail)),
                     -1);
    assert_non_null(strstr(detail, "missing"));
    assert_int_equal(rv_auth_verify("Basic YWxpY2U6eA==", k, NOW, &who, detail,
                                    sizeof(detail)),
                     -1);
    assert_int_equal(rv_auth_verify("Bearer ", k, NOW, &who, detail,
                                    sizeof(detail)),
                     -1);
    assert_int_equal(rv_auth_verify("Bearer a.b.c d", k, NOW, &who, detail,
                                    sizeof(detail)),
                     -1);
    assert_int_equal(rv_auth_verify("Bearer a.b.c", k, NOW, &who, detail,
                                    sizeof(detail)),
                     -1);
}

static void issued_tokens_verify(void **state)
{
    rv_identity who;
    char detail[160], header[1024];
    char *tok = rv_auth_issue((const unsigned char *)SECRET, strlen(SECRET),
                              "bob", "reviewer", NOW, 60);

    (void)state;
    assert_non_null(tok);
    snprintf(header, sizeof(header), "Bearer %s", tok);
    assert_int_equal(rv_auth_verify(header, &exact, NOW, &who, detail,
                                    sizeof(detail)),
                     0);
    assert_int_equal(who.role, RV_ROLE_REVIEWER);
    assert_int_equal(rv_auth_verify(header, &exact, NOW + 61, &who, detail,
                                    sizeof(detail)),
                     -1);
    free(tok);
}

static void listen_addresses_parse_host_and_port(void **state)
{
    char host[64];
    uint16_t port;

    (void)state;
    assert_int_equal(rv_config_parse_listen("127.0.0.1:8080", host,
                                            sizeof(host), &port),
                     0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 8080);
    assert_int_equal(rv_config_parse_listen("[::1]:0", host, sizeof(host),
                                            &port),
                     0);
    assert_string_equal(host, "::1");
    assert_int_equal(rv_config_parse_listen("localhost", host, sizeof(host),
                                            &port),
                     -1);
    assert_int_equal(rv_config_parse_listen(":80", host, sizeof(host), &port),
                     -1);
    assert_int_equal(rv_config_parse_listen("h:65536", host, sizeof(host),
                                            &port),
                     -1);
    assert_int_equal(rv_config_parse_listen("h:8x", host, sizeof(host), &port),
                     -1);
    assert_int_equal(rv_config_parse_listen("::1:80", host, sizeof(host),
                                            &port),
                     -1);
}

static void console_files_match_by_shape_and_exist_when_built_in(void **state)
{
    static const char *const not_console[] = {"/app",      "/App.js",
                                              "/a/b.js",   "/.js",
                                              "/x.js/",    "/x.json",
                                              "/x.js.map", "/x%2Ejs",
                                              NULL};
    rv_match m;
    int i;

    (void)state;
    rv_router_match("/", RV_METHOD_GET, &m);
    assert_int_equal(m.op, RV_OP_CONSOLE);
    rv_router_match("/app.js", RV_METHOD_HEAD, &m);
    assert_int_equal(m.op, RV_OP_CONSOLE);
    rv_router_match("/style.css", RV_METHOD_POST, &m);
    assert_int_equal(m.path, RV_PATH_CONSOLE);
    assert_int_equal(m.op, RV_OP_NONE);
    assert_string_equal(rv_router_allow(m.path), "GET, HEAD");
    for (i = 0; not_console[i] != NULL; i++) {
        rv_router_match(not_console[i], RV_METHOD_GET, &m);
        assert_int_equal(m.path, RV_PATH_UNKNOWN);
    }
    assert_non_null(rv_console_find("/"));
    assert_string_equal(rv_console_find("/")->path, "/index.html");
    assert_string_equal(rv_console_find("/app.js")->content_type,
                        "text/javascript; charset=utf-8");
    assert_int_equal(rv_console_find("/app.js")->data[0] != '\0', 1);
    assert_null(rv_console_find("/missing.js"));
}

static void dev_login_listens_on_loopback_only(void **state)
{
    (void)state;
    assert_true(rv_config_host_is_loopback("127.0.0.1"));
    assert_true(rv_config_host_is_loopback("127.8.9.10"));
    assert_true(rv_config_host_is_loopback("::1"));
    assert_true(rv_config_host_is_loopback("localhost"));
    assert_false(rv_config_host_is_loopback("0.0.0.0"));
    assert_false(rv_config_host_is_loopback("::"));
    assert_false(rv_config_host_is_loopback("10.0.0.1"));
    assert_false(rv_config_host_is_loopback("128.0.0.1"));
    assert_false(rv_config_host_is_loopback("example.com"));
    assert_false(rv_config_host_is_loopback("127.0.0.1.example.com"));
}

static void amqp_urls_are_checked_for_form(void **state)
{
    (void)state;
    assert_int_equal(rv_config_check_amqp_url("amqp://u:p@h:5672/%2f"), 0);
    assert_int_equal(rv_config_check_amqp_url("amqp://h"), 0);
    assert_int_equal(rv_config_check_amqp_url("amqps://[::1]:5671/v"), 0);
    assert_int_equal(rv_config_check_amqp_url("http://h"), -1);
    assert_int_equal(rv_config_check_amqp_url("amqp://h:port/"), -1);
    assert_int_equal(rv_config_check_amqp_url("amqp://h:99999/"), -1);
    assert_int_equal(rv_config_check_amqp_url("amqp://h /"), -1);
}

static void relay_queue_bindings_match_like_rabbitmq_topics(void **state)
{
    (void)state;
    assert_true(rv_amqp_topic_match("document.approved", "document.approved"));
    assert_false(
        rv_amqp_topic_match("document.approved", "document.rejected"));
    assert_true(rv_amqp_topic_match("document.*", "document.approved"));
    assert_false(rv_amqp_topic_match("document.*", "document"));
    assert_false(rv_amqp_topic_match("*", "document.approved"));
    assert_true(rv_amqp_topic_match("#", "document.approved"));
    assert_true(rv_amqp_topic_match("document.#", "document"));
    assert_true(rv_amqp_topic_match("#.approved", "document.approved"));
    assert_false(rv_amqp_topic_match("#.approved", "document.rejected"));
    assert_int_equal(rv_amqp_queues_check("kh.indexer:document.approved"), 0);
    assert_int_equal(rv_amqp_queues_check("a:#,b:document.*"), 0);
    assert_int_equal(rv_amqp_queues_check(""), 0);
    assert_int_equal(rv_amqp_queues_check("kh.indexer"), -1);
    assert_int_equal(rv_amqp_queues_check(":document.approved"), -1);
    assert_int_equal(rv_amqp_queues_check("q:"), -1);
}

static void logged_urls_never_show_passwords(void **state)
{
    char out[256];

    (void)state;
    svc_log_redact_url("postgresql://dlock:s3cret@127.0.0.1:5432/db", out,
                       sizeof(out));
    assert_string_equal(out, "postgresql://dlock:***@127.0.0.1:5432/db");
    svc_log_redact_url("redis://:p@h:1/0", out, sizeof(out));
    assert_string_equal(out, "redis://:***@h:1/0");
    svc_log_redact_url("host=h password=s3cret dbname=d", out, sizeof(out));
    assert_string_equal(out, "host=h password=*** dbname=d");
    svc_log_redact_url("postgresql://h/db?password=s3cret&x=1", out,
                       sizeof(out));
    assert_null(strstr(out, "s3cret"));
    svc_log_redact_url("redis://h:6379/0", out, sizeof(out));
    assert_string_equal(out, "redis://h:6379/0");
}

/* libpq's messages about a connection string, with its password taken
 * out wherever they show it. */
static void messages_about_a_url_never_show_its_password(void **state)
{
    static const struct {
        const char *url;
        const char *message;
        const char *want;
    } cases[] = {
        {"postgresql://al:S3cretPW@[::1/db",
         "end of string reached when looking for matching \"]\" in IPv6 "
         "host address in URI: \"postgresql://al:S3cretPW@[::1/db\"",
         "end of string reached when looking for matching \"]\" in IPv6 "
         "host address in URI: \"postgresql://al:***@[::1/db\""},
        /* A '/' in the password: libpq reads "S3" as the port. */
        {"postgresql://al:S3/cretPW@db.internal/x",
         "invalid integer value \"S3\" for connection option \"port\"",
         "invalid integer value \"***\" for connection option \"port\""},
        {"host=h password S3cretPW",
         "DATABASE_URL: malformed (host=h password S3cretPW): missing \"=\" "
         "after \"password\" in connection info string",
         "DATABASE_URL: malformed (host=h password ***): missing \"=\" "
         "after \"password\" in connection info string"},
        {"host=h password = 'S3 cret' dbname=d", "x 'S3 cret' y", "x '***' y"},
        {"postgresql://h/db?sslmode=x&password=S3%2Fc", "\"S3/c\" S3%2Fc",
         "\"***\" ***"},
        {"postgresql://al@h/db", "could not translate host name \"h\"",
         "could not translate host name \"h\""},
    };
    char out[512];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        svc_log_redact_secrets(cases[i].url, cases[i].message, out,
                               sizeof(out));
        assert_string_equal(out, cases[i].want);
    }
}

static void json_media_type_allows_parameters_but_only_utf8(void **state)
{
    (void)state;
    assert_true(rv_dispatch_is_json("application/json"));
    assert_true(rv_dispatch_is_json("Application/JSON"));
    assert_true(rv_dispatch_is_json("application/json; charset=utf-8"));
    assert_true(rv_dispatch_is_json("application/json;charset=\"UTF-8\""));
    assert_false(rv_dispatch_is_json("application/json; charset=latin1"));
    assert_false(rv_dispatch_is_json("application/jsonx"));
    assert_false(rv_dispatch_is_json("text/plain"));
    assert_false(rv_dispatch_is_json(NULL));
}

static void idempotency_keys_are_1_to_255_visible_ascii(void **state)
{
    char key[300];

    (void)state;
    assert_true(rv_idem_key_valid("a"));
    assert_true(rv_idem_key_valid("order-42_!~"));
    assert_false(rv_idem_key_valid(""));
    assert_false(rv_idem_key_valid("with space"));
    assert_false(rv_idem_key_valid("caf\xc3\xa9"));
    memset(key, 'k', 255);
    key[255] = '\0';
    assert_true(rv_idem_key_valid(key));
    key[255] = 'k';
    key[256] = '\0';
    assert_false(rv_idem_key_valid(key));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_are_canonical_positive_int64),
        cmocka_unit_test(paths_match_by_shape_before_the_id_is_checked),
        cmocka_unit_test(
            bodies_must_be_one_utf8_json_object_without_duplicates),
        cmocka_unit_test(utf8_rules_follow_rfc_3629),
        cmocka_unit_test(fields_are_checked_for_type_and_length_in_characters),
        cmocka_unit_test(error_bodies_stay_valid_json_for_hostile_details),
        cmocka_unit_test(
            tokens_need_hs256_a_future_exp_a_sub_and_a_known_role),
        cmocka_unit_test(authorization_headers_must_be_bearer_tokens),
        cmocka_unit_test(
            clocks_may_disagree_by_the_leeway_and_lifetimes_are_bounded),
        cmocka_unit_test(issued_tokens_verify),
        cmocka_unit_test(listen_addresses_parse_host_and_port),
        cmocka_unit_test(amqp_urls_are_checked_for_form),
        cmocka_unit_test(console_files_match_by_shape_and_exist_when_built_in),
        cmocka_unit_test(dev_login_listens_on_loopback_only),
        cmocka_unit_test(relay_queue_bindings_match_like_rabbitmq_topics),
        cmocka_unit_test(logged_urls_never_show_passwords),
        cmocka_unit_test(messages_about_a_url_never_show_its_password),
        cmocka_unit_test(json_media_type_allows_parameters_but_only_utf8),
        cmocka_unit_test(idempotency_keys_are_1_to_255_visible_ascii),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
