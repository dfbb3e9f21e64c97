/* File formats: the JSON reader, safetensors (round trip and every kind of damage), weight
 * files against a net (names, shapes, dtypes). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"
#include "json.h"
#include "safetensors.h"
#include "testutil.h"
#include "util.h"

START_TEST(json_reader)
{
    json *j;
    const char *ok = " {\"a\": [1, 2.5, -3e2], \"b\": {\"c\": \"x\\\"y\\n\\u0041\"}, \"t\": true, \"n\": null} ";
    ck_assert_msg(json_parse(ok, strlen(ok), "t", &j) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(json_get(j, "a")->n, 3);
    ck_assert_double_eq(json_get(j, "a")->items[2].num, -300.0);
    ck_assert_int_eq(json_int(&json_get(j, "a")->items[0]), 1);
    ck_assert_int_eq(json_int(&json_get(j, "a")->items[1]), -1);
    ck_assert_str_eq(json_get(json_get(j, "b"), "c")->str, "x\"y\nA");
    ck_assert_int_eq(json_get(j, "t")->type, JSON_BOOL);
    json_free(j);
    /* \u escapes as UTF-8 (they all read '?' before: two names of other letters were one), a pair of
     * surrogates as one code point, \udcNN as the byte json_write_string wrote it for */
    const char *esc = "[\"a\\u00e9\", \"a\\u00e8\", \"\\u20ac\", \"\\ud83d\\ude00\", \"caf\\udce9\", \"\\udc00x\"]";
    ck_assert_msg(json_parse(esc, strlen(esc), "t", &j) == 0, "%s", dt_errmsg());
    ck_assert_str_eq(j->items[0].str, "a\xc3\xa9");
    ck_assert_str_eq(j->items[1].str, "a\xc3\xa8");
    ck_assert_str_eq(j->items[2].str, "\xe2\x82\xac");
    ck_assert_str_eq(j->items[3].str, "\xf0\x9f\x98\x80");
    ck_assert_str_eq(j->items[4].str, "caf\xe9");
    ck_assert_str_eq(j->items[5].str, "\xef\xbf\xbdx");
    json_free(j);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    json_write_string(m, "caf\xe9 \xc3\xa9");
    fclose(m);
    ck_assert_msg(json_parse(text, len, "t", &j) == 0, "%s", dt_errmsg());
    ck_assert_str_eq(j->str, "caf\xe9 \xc3\xa9"); /* what dtrain writes, it reads back as it was */
    json_free(j);
    free(text);
    const char *bad[] = {"{", "{\"a\" 1}", "[1,]", "{\"a\":1} x", "\"abc", "[tru]", "{1:2}", "nan", "\"\\u12g4\"",
                         "\"\\u12\"", "\"\\u0000\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(json_parse(bad[i], strlen(bad[i]), "t", &j) != 0, "'%s' parsed", bad[i]);
        ck_assert_ptr_nonnull(strstr(dt_errmsg(), "t: invalid JSON at byte"));
    }
}
END_TEST

static char dir[512];
static void setup(void) { snprintf(dir, sizeof dir, "%s", tmpdir_create()); }
static void teardown(void) { tmpdir_remove(); }

START_TEST(safetensors_round_trip)
{
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {-1, 0.5f, 7};
    st_tensor t[2] = {{"layer.weight", 2, {2, 3}, a, NULL}, {"layer.bias", 1, {3}, b, NULL}};
    const char *mk[] = {"format"}, *mv[] = {"test"};
    char path[600];
    st_file *f;
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    ck_assert_msg(st_write(path, t, 2, mk, mv, 1) == 0, "%s", dt_errmsg());
    ck_assert_msg(st_read(path, &f) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(f->n, 2);
    ck_assert_str_eq(st_meta(f, "format"), "test");
    const st_entry *e = st_find(f, "layer.weight");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->dtype, "F32");
    ck_assert_int_eq(e->n_dims, 2);
    ck_assert_int_eq(e->shape[1], 3);
    ck_assert_int_eq(memcmp(f->data + e->begin, a, sizeof a), 0);
    e = st_find(f, "layer.bias");
    ck_assert_int_eq(memcmp(f->data + e->begin, b, sizeof b), 0);
    ck_assert_int_eq((int)((f->data - (uint8_t *)f->raw) % 8), 0); /* data section aligned */
    st_close(f);
}
END_TEST

/* a file with the given header text and data bytes */
static const char *st_bytes(const char *header, size_t data_bytes, long claim)
{
    size_t h = strlen(header);
    uint8_t *buf = calloc(1, 8 + h + data_bytes);
    uint64_t len = claim >= 0 ? (uint64_t)claim : h;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(len >> (8 * i));
    memcpy(buf + 8, header, h);
    const char *p = write_bytes("x.safetensors", buf, 8 + h + data_bytes);
    free(buf);
    return p;
}

START_TEST(utf8_validation)
{
    const struct {
        const char *s;
        size_t bad;
    } c[] = {{"plain", 5}, {"caf\xc3\xa9", 5}, {"\xe2\x82\xac!", 4}, {"\xf0\x9f\x98\x80", 4}, {"caf\xe9", 3},
             {"\xc0\xaf", 0} /* overlong '/' */, {"a\xed\xa0\x80", 1} /* a surrogate */, {"\xf4\x90\x80\x80", 0},
             {"ab\xe2\x82", 2} /* cut short */, {"\x80", 0}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        ck_assert_msg(dt_utf8_invalid(c[i].s, strlen(c[i].s)) == c[i].bad, "case %zu: %zu, expected %zu", i,
                      dt_utf8_invalid(c[i].s, strlen(c[i].s)), c[i].bad);
}
END_TEST

START_TEST(safetensors_damage)
{
    st_file *f;
    const struct {
        const char *header;
        size_t data;
        long claim;
        const char *expect;
    } bad[] = {
        {"{}", 0, 1 << 20, "header length 1048576 does not fit a file of 10 bytes"},
        {"[1]", 0, -1, "the header does not start with '{'"},
        {"{\"a\":", 0, -1, "invalid JSON"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, -1,
         "tensor 'a' ends at byte 8 of the data, but the file has 4 data bytes (truncated?)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, -1,
         "tensor 'a': 8 data bytes for shape of 3 F32 elements (expected 12)"},
        {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, "tensor 'a': unknown dtype 'Q4'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, -1,
         "shape entries must be non-negative integers"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, -1,
         "data_offsets must be [begin, end]"},
        {"{\"a\":{\"dtype\":\"F32\"}}", 8, -1, "tensor 'a': expected {\"dtype\", \"shape\", \"data_offsets\"}"},
        {"{\"__metadata__\":{\"k\":1}}", 0, -1, "__metadata__ value of 'k' is not a string"},
        /* the tensors must tile the data: bytes appended, a gap, data before the first */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 24, -1,
         "16 bytes after the last tensor ('a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[8,12]}}",
         12, -1, "bytes 4-8 of the data, between tensors 'a' and 'b', belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, -1,
         "first 4 bytes belong to no tensor"},
        {"{}", 8, -1, "8 data bytes but no tensor"},
        /* found by a probe: a bad \u escape read as another name, a field twice (the first taken), a
         * shape whose byte count wraps to the 0 of its offsets */
        {"{\"f\\u000g\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, "invalid JSON"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1,
         "tensor 'a': names 'dtype' twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,0]}}", 0, -1,
         "tensor 'a': shape too large"},
        /* a name in Latin-1, not UTF-8: it would reach messages as raw bytes */
        {"{\"caf\xe9\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1,
         "the header is not UTF-8 text (byte 5 of it, 0xe9"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = st_bytes(bad[i].header, bad[i].data, bad[i].claim);
        ck_assert_msg(st_read(p, &f) != 0, "case %zu read", i);
        ck_assert_msg(strstr(dt_errmsg(), bad[i].expect), "case %zu: '%s' lacks '%s'", i, dt_errmsg(), bad[i].expect);
    }
    const char *p = write_bytes("short.safetensors", "abc", 3);
    ck_assert_int_ne(st_read(p, &f), 0);
    ck_assert_ptr_nonnull(strstr(dt_errmsg(), "3 bytes (expected a safetensors file"));
}
END_TEST

START_TEST(weights_checked_against_net)
{
    dt_net *net, *other;
    char path[600];
    ck_assert_int_eq(net_parse("input shape=4\ndense name=fc out=3\nsoftmax_xent\n", "a.net", "a", &net), 0);
    ck_assert_int_eq(net_parse("input shape=5\ndense name=fc out=3\nsoftmax_xent\n", "b.net", "b", &other), 0);
    float w[15], r[15];
    for (int i = 0; i < 15; i++) w[i] = (float)i * 0.25f;
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    ck_assert_msg(weights_save(net, w, NULL, path, "mnist", 0) == 0, "%s", dt_errmsg());
    ck_assert_msg(weights_read(net, path, r, NULL, NULL) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(memcmp(w, r, sizeof(float) * net->n_params), 0);
    ck_assert_int_ne(weights_read(other, path, r, NULL, NULL), 0);
    ck_assert_msg(strstr(dt_errmsg(), "tensor 'fc.weight' has shape [3, 4] (expected [3, 5] for net b)"), "%s",
                  dt_errmsg());

    dt_net *renamed;
    ck_assert_int_eq(net_parse("input shape=4\ndense name=out out=3\nsoftmax_xent\n", "c.net", "c", &renamed), 0);
    ck_assert_int_ne(weights_read(renamed, path, r, NULL, NULL), 0);
    ck_assert_msg(strstr(dt_errmsg(), "does not hold the tensors of net c: 2 missing (out.weight, out.bias), 2 not in "
                                      "the net (fc.weight, fc.bias)"),
                  "%s", dt_errmsg());

    dt_net *nobias;
    ck_assert_int_eq(net_parse("input shape=4\ndense name=fc out=3 bias=0\nsoftmax_xent\n", "d.net", "d", &nobias), 0);
    ck_assert_int_ne(weights_read(nobias, path, r, NULL, NULL), 0);
    ck_assert_msg(strstr(dt_errmsg(), "net d: 0 missing, 1 not in the net (fc.bias)"), "%s", dt_errmsg());

    /* an I32 tensor where real numbers are expected */
    const char *hdr = "{\"fc.weight\":{\"dtype\":\"I32\",\"shape\":[3,4],\"data_offsets\":[0,48]},"
                      "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[48,60]}}";
    const char *p = st_bytes(hdr, 60, -1);
    ck_assert_int_ne(weights_read(net, p, r, NULL, NULL), 0);
    ck_assert_msg(strstr(dt_errmsg(), "tensor 'fc.weight' is I32 (expected F32, F16, BF16 or F64)"), "%s", dt_errmsg());
    net_destroy(net);
    net_destroy(other);
    net_destroy(renamed);
    net_destroy(nobias);
}
END_TEST

START_TEST(atomic_write_leaves_no_temp_file)
{
    char path[600], cmd[700];
    snprintf(path, sizeof path, "%s/f.bin", dir);
    ck_assert_int_eq(dt_write_file_atomic(path, "hello", 5), 0);
    ck_assert_int_eq(dt_write_file_atomic(path, "bye", 3), 0);
    char *text;
    size_t n;
    ck_assert_int_eq(dt_read_file(path, &text, &n), 0);
    ck_assert_str_eq(text, "bye");
    free(text);
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_ne(dt_write_file_atomic("/nonexistent/dir/f", "x", 1), 0);
    ck_assert_ptr_nonnull(strstr(dt_errmsg(), "cannot create"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("formats");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, json_reader);
    tcase_add_test(tc, safetensors_round_trip);
    tcase_add_test(tc, utf8_validation);
    tcase_add_test(tc, safetensors_damage);
    tcase_add_test(tc, weights_checked_against_net);
    tcase_add_test(tc, atomic_write_leaves_no_temp_file);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
