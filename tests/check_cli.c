/* The command line and config files: values land where they should, the command line wins
 * over the file, every kind of mistake gets a message naming the option and what was expected,
 * and the agreement text holds what changes the computation (not paths or output). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "testutil.h"
#include "util.h"

static int parse(dt_opts *o, const char *const *args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"dtrain";
    for (; *args; args++) argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    return cli_parse(argc, argv, o);
}

START_TEST(defaults_and_values)
{
    dt_opts o;
    const char *args[] = {"--net", "x.net", "--epochs", "3", "--lr=0.5", "--nesterov", "--batch", "64",
                          "--progress", "none", "--mode", "dsync", NULL};
    ck_assert_msg(parse(&o, args) == 0, "%s", dt_errmsg());
    ck_assert_str_eq(o.net, "x.net");
    ck_assert_int_eq(o.epochs, 3);
    ck_assert_double_eq(o.lr, 0.5);
    ck_assert_int_eq(o.nesterov, 1);
    ck_assert_int_eq(o.batch, 64);
    ck_assert_ptr_null(o.dataset); /* not given: the run picks the dataset that fits the net */
    ck_assert_double_eq(o.momentum, 0.9);
    ck_assert_int_eq(o.action, DT_ACT_TRAIN);
    cli_free(&o);
    const char *h[] = {"--list-modes", NULL};
    ck_assert_int_eq(parse(&o, h), 0);
    ck_assert_int_eq(o.action, DT_ACT_LIST_MODES);
    cli_free(&o);
}
END_TEST

static const struct {
    const char *args[6]; /* NULL-terminated */
    const char *expect;
} bad[] = {
    {{"--bogus"}, "unknown option '--bogus' (see dtrain --help)"},
    {{"-x"}, "unknown option '-x'"},
    {{"--iters", "3", "-np", "2"}, "unknown option '-np': mpirun's -np goes before dtrain (mpirun -np P dtrain"},
    {{"-lr", "0.1"}, "unknown option '-lr' (dtrain's options are --NAME"},
    {{"--lr"}, "--lr: missing value (expected X)"},
    {{"--log", "out", "--save", "out"}, "--log out and --save out are one file: the weights would replace the log"},
    {{"--save", "/tmp/w.st", "--checkpoint", "/tmp/./w.st"},
     "--save /tmp/w.st and --checkpoint /tmp/./w.st are one file"},
    {{"--save", "--nesterov"}, "--save: missing value (expected FILE; the next argument, --nesterov, is an option"},
    {{"--lr", "fast"}, "--lr: expected a number in [0, 100], found 'fast'"},
    {{"--lr", "-1"}, "--lr: expected a number in [0, 100], found -1"},
    {{"--epochs", "2.5"}, "--epochs: expected an integer in [0, 1000000], found '2.5'"},
    /* decimal numbers only, as given: strtod alone would read 16 here, and 0.1 with the blank */
    {{"--lr", "0x10"}, "--lr: expected a number in [0, 100], found '0x10'"},
    {{"--lr", " 0.1"}, "--lr: expected a number in [0, 100], found ' 0.1'"},
    {{"--lr", "nan"}, "--lr: expected a number in [0, 100], found 'nan'"},
    {{"--lr", "100.0000000000001"}, "--lr: expected a number in [0, 100], found 100.0000000000001"},
    {{"--lr", "1e-400"}, "--lr: expected a number in [0, 100], found 1e-400, too close to 0 for a double"},
    {{"--lr", "1e400"}, "--lr: expected a number in [0, 100], found 1e400, beyond what a double holds"},
    {{"--epochs", "1e3"}, "--epochs: expected an integer in [0, 1000000], found '1e3'"},
    {{"--epochs", "99999999999999999999"}, "--epochs: expected an integer in [0, 1000000], found 99999999999999999999"},
    {{"--checkpoint-every", "99999999999it"}, "with N from 1 to 1000000000 (e.g. 500it, 2ep), found '99999999999it'"},
    {{"--checkpoint-every", "0x5it"}, "found '0x5it'"},
    {{"--lo", "x"}, "option '--lo' is ambiguous: it starts --loss-scale, --log, --log-every, --load"},
    {{"--nest=maybe"}, "--nesterov: expected true or false, found 'maybe'"},
    {{"--nesterov", "false"}, "unexpected argument 'false' (a flag's value goes after '=': --nesterov=false)"},
    {{"--version=1"}, "--version takes no value, found '--version=1'"},
    {{"--augment", "flip,"}, "--augment: 'flip,' has an empty item"},
    {{"--augment", "flip,flip"}, "--augment: 'flip,flip' lists flip twice"},
    {{"--mode", "topk", "--density-warmup", "0.5,,0.1"}, "--density-warmup: '0.5,,0.1' has an empty item"},
    {{"--mode", "auto", "--auto-allow", "dsync,"}, "--auto-allow: expected MODE or MODE+CODEC, found ''"},
    {{"--mode", "auto", "--auto-allow", "dsync+"}, "--auto-allow: expected a codec after the '+' of 'dsync+'"},
    {{"--dataset", "synthetic", "--data-dir", "/tmp"}, "--data-dir applies to a dataset read from files"},
    {{"--dataset", "mnist", "--on-bad-image", "skip"}, "--on-bad-image applies to --dataset imagenet"},
    {{"--log-every", "5", "--progress", "none"}, "--log-every applies to --log's records and the progress lines"},
    {{"--nesterov", "--momentum", "0"}, "--nesterov needs --momentum above 0"},
    {{"--synthetic-once", "--dataset", "synthetic", "--prefetch", "4"}, "--prefetch and --synthetic-once exclude"},
    {{"--classes", "1"}, "--classes: expected 0 (as the net says) or 2 to 65535 classes, found 1"},
    {{"--compute-nice", "5"}, "--compute-nice applies to --mode dsync with --fusion-bytes N"},
    {{"--batch", "0"}, "--batch: expected an integer in [1, 16777216], found 0"},
    {{"--momentum", "1"}, "--momentum: expected a number in [0, 0.9999], found 1"},
    {{"--mode", "allreduce"}, "--mode: unknown mode 'allreduce' (expected one of dsync"},
    {{"--dataset", "svhn"}, "--dataset: unknown dataset 'svhn' (expected one of fashion-mnist, mnist"},
#if DT_CUDA_BUILT
    {{"--device", "tpu"}, "--device: expected one of cpu|cuda|auto, found 'tpu'"},
#else
    {{"--device", "tpu"}, "--device: expected one of cpu|auto, found 'tpu'"},
#endif
    {{"--progress", "sometimes"}, "--progress: expected one of auto|bar|lines|none, found 'sometimes'"},
    {{"--lr-schedule", "exp"}, "--lr-schedule: unknown schedule 'exp'"},
    {{"--net", ""}, "--net: expected NAME|FILE, found an empty value"},
    {{"extra"}, "unexpected argument 'extra'"},
    {{"--", "--lr", "0.1"}, "unexpected argument '--lr' after '--' (dtrain reads no options after it"},
    {{"--config", "/nonexistent.conf"}, "--config: /nonexistent.conf: cannot open"},
};

START_TEST(bad_arguments)
{
    dt_opts o;
    ck_assert_msg(parse(&o, bad[_i].args) != 0, "case %d parsed", _i);
    ck_assert_msg(strstr(dt_errmsg(), bad[_i].expect), "case %d: '%s' lacks '%s'", _i, dt_errmsg(), bad[_i].expect);
    cli_free(&o);
}
END_TEST

START_TEST(config_file_then_command_line)
{
    dt_opts o;
    tmpdir_create();
    const char *p = write_text("a.conf", "# experiment\n"
                                         "net = runs/a#2/x.net #  a '#' in a value is kept\n\n"
                                         "lr = 0.3   # comment\n"
                                         "nesterov = true\n"
                                         "epochs=7\n");
    const char *args[] = {"--config", p, "--lr", "0.1", NULL};
    ck_assert_msg(parse(&o, args) == 0, "%s", dt_errmsg());
    ck_assert_str_eq(o.net, "runs/a#2/x.net");
    ck_assert_double_eq(o.lr, 0.1); /* the command line wins */
    ck_assert_int_eq(o.epochs, 7);
    ck_assert_int_eq(o.nesterov, 1);
    cli_free(&o);
    /* a flag the file sets, turned off on the command line (and on again: the last one wins) */
    const char *off[] = {"--config", p, "--nesterov=false", NULL}, *on[] = {"--config", p, "--nest=no", "--nest", NULL};
    ck_assert_msg(parse(&o, off) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(o.nesterov, 0);
    cli_free(&o);
    ck_assert_msg(parse(&o, on) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(o.nesterov, 1);
    cli_free(&o);
    /* a UTF-8 byte-order mark, as some editors write, is not part of the first key */
    const char *bom = write_text("bom.conf", "\xef\xbb\xbflr = 0.25\n");
    const char *abom[] = {"--config", bom, NULL};
    ck_assert_msg(parse(&o, abom) == 0, "%s", dt_errmsg());
    ck_assert_double_eq(o.lr, 0.25);
    cli_free(&o);

    const struct {
        const char *text, *expect;
    } badconf[] = {
        {"lr 0.1\n", "b.conf:1: expected 'key = value', found 'lr 0.1'"},
        {"\n\nspeed = 3\n", "b.conf:3: speed: unknown option 'speed'"},
        {"epochs = many\n", "b.conf:1: epochs: expected an integer in [0, 1000000], found 'many'"},
        {"nesterov = maybe\n", "b.conf:1: nesterov: expected true or false, found 'maybe'"},
        {"--lr = 1\n", "b.conf:1: write '--lr' without the dashes"},
        {"config = other.conf\n", "b.conf:1: config: 'config' is an option of the command line only"},
        {"help = true\n", "b.conf:1: help: 'help' is an option of the command line only"},
    };
    for (size_t i = 0; i < sizeof badconf / sizeof badconf[0]; i++) {
        const char *q = write_text("b.conf", badconf[i].text);
        const char *a2[] = {"--config", q, NULL};
        ck_assert_msg(parse(&o, a2) != 0, "conf case %zu parsed", i);
        ck_assert_msg(strstr(dt_errmsg(), badconf[i].expect), "conf case %zu: '%s' lacks '%s'", i, dt_errmsg(),
                      badconf[i].expect);
        cli_free(&o);
    }
    tmpdir_remove();
}
END_TEST

START_TEST(agreement_text)
{
    dt_opts a, b;
    const char *x[] = {"--lr", "0.1", "--log", "/tmp/a.jsonl", "--threads", "2", NULL};
    const char *y[] = {"--lr", "0.1", "--log", "/tmp/b.jsonl", "--data-dir", "/elsewhere", NULL};
    const char *z[] = {"--lr", "0.2", NULL};
    ck_assert_int_eq(parse(&a, x), 0);
    ck_assert_int_eq(parse(&b, y), 0);
    char *ta = cli_canonical(&a), *tb = cli_canonical(&b);
    ck_assert_str_eq(ta, tb); /* paths, threads and output may differ between ranks */
    ck_assert_ptr_nonnull(strstr(ta, "lr = 0.1\n"));
    ck_assert_ptr_nonnull(strstr(ta, "mode = dsync\n"));
    ck_assert_ptr_null(strstr(ta, "log"));
    cli_free(&b);
    ck_assert_int_eq(parse(&b, z), 0);
    char *tz = cli_canonical(&b);
    ck_assert_str_ne(ta, tz);
    free(ta);
    free(tb);
    free(tz);
    cli_free(&a);
    cli_free(&b);
}
END_TEST

/* A message shows what a terminal would act on or cannot show as \xNN (a file name's Latin-1 byte,
 * an escape sequence), valid UTF-8 as it is; a JSON string keeps such a byte as Python's
 * surrogateescape does, so the log stays valid UTF-8 and json.loads gives the name back. */
START_TEST(unprintable_names)
{
    ck_assert_uint_eq(dt_utf8_len("a"), 1);
    ck_assert_uint_eq(dt_utf8_len("\xc3\xa9"), 2);         /* é */
    ck_assert_uint_eq(dt_utf8_len("\xe2\x82\xac"), 3);     /* € */
    ck_assert_uint_eq(dt_utf8_len("\xf0\x9f\x98\x80"), 4); /* an emoji */
    ck_assert_uint_eq(dt_utf8_len("\xe9t\xe9"), 0);        /* Latin-1 */
    ck_assert_uint_eq(dt_utf8_len("\xc0\xaf"), 0);         /* overlong */
    ck_assert_uint_eq(dt_utf8_len("\xed\xa0\x80"), 0);     /* a surrogate */
    ck_assert_uint_eq(dt_utf8_len("\xe2\x82"), 0);         /* cut at the terminator */
    ck_assert_uint_eq(dt_utf8_len(""), 0);
    dt_fail("--data-dir %s: no such directory", "/d/caf\xe9\x1b[31m\xc3\xa9\ttab");
    ck_assert_str_eq(dt_errmsg(), "--data-dir /d/caf\\xe9\\x1b[31m\xc3\xa9\ttab: no such directory");
    dt_fail_prefix("--net \x7f");
    ck_assert_str_eq(dt_errmsg(), "--net \\x7f: --data-dir /d/caf\\xe9\\x1b[31m\xc3\xa9\ttab: no such directory");
    char buf[128] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    ck_assert_ptr_nonnull(f);
    json_write_string(f, "caf\xe9 \xc3\xa9\x01\"\\\n");
    fclose(f);
    ck_assert_str_eq(buf, "\"caf\\udce9 \xc3\xa9\\u0001\\\"\\\\\\n\"");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, defaults_and_values);
    tcase_add_loop_test(tc, bad_arguments, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, config_file_then_command_line);
    tcase_add_test(tc, agreement_text);
    tcase_add_test(tc, unprintable_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
