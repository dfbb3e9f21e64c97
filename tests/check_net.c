/* Net files: valid files parse with the right shapes, names and arena layout; malformed ones
 * fail with file:line and what was expected. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "engine/net.h"
#include "testutil.h"
#include "util.h"

START_TEST(mlp_builtin_shapes_and_count)
{
    dt_net *net;
    ck_assert_msg(net_load("mlp", &net) == 0, "%s", dt_errmsg());
    ck_assert_uint_eq(net->n_params, 648010); /* PAPERS.md §5 */
    ck_assert_int_eq(net->n_layers, 7);
    ck_assert_int_eq(net_n_classes(net), 10);
    ck_assert_str_eq(net->layers[1]->name, "fc1");
    ck_assert_str_eq(net->layers[2]->name, "relu1"); /* default names: type + count */
    ck_assert_str_eq(net->layers[4]->name, "relu2");
    dt_param *w = net_find_tensor(net, "fc1.weight");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->n_dims, 2);
    ck_assert_int_eq(w->dims[0], 500); /* PyTorch Linear layout [out, in] */
    ck_assert_int_eq(w->dims[1], 784);
    net_destroy(net);
}
END_TEST

/* The arena holds tensors in the order backward fills them: the last layer first, contiguous. */
START_TEST(arena_in_backward_order)
{
    dt_net *net;
    const char *order[] = {"fc3.weight", "fc3.bias", "fc2.weight", "fc2.bias", "fc1.weight", "fc1.bias"};
    size_t off = 0;
    ck_assert_int_eq(net_load("mlp", &net), 0);
    ck_assert_int_eq(net->n_tensors, 6);
    for (int i = 0; i < 6; i++) {
        ck_assert_str_eq(net->tensors[i]->name, order[i]);
        ck_assert_uint_eq(net->tensors[i]->offset, off);
        off += net->tensors[i]->n;
    }
    ck_assert_uint_eq(off, net->n_params);
    net_destroy(net);
}
END_TEST

START_TEST(named_inputs_comments_blank_lines)
{
    dt_net *net;
    const char *text = "# a comment\n\n"
                       "input name=data shape=3x4x4   # trailing comment\n"
                       "dense name=a out=7 bias=0 init=he\n"
                       "relu name=r in=a\n"
                       "dropout p=0.1\n"
                       "dense name=b out=3 in=dropout1 init=normal:0.01\n"
                       "softmax_xent\n";
    ck_assert_msg(net_parse(text, "t.net", "t", &net) == 0, "%s", dt_errmsg());
    ck_assert_uint_eq(net->n_params, 48 * 7 + 7 * 3 + 3);
    ck_assert_ptr_eq(net->layers[3]->in[0], net->layers[2]);
    ck_assert_int_eq(net_find_tensor(net, "a.bias") == NULL, 1);
    net_destroy(net);
}
END_TEST

static const struct {
    const char *text;
    const char *expect; /* substring of the message */
} bad[] = {
    {"", "t.net: no layers"},
    {"input shape=4\ndense out=3\n", "t.net:2: the last layer must be a loss"},
    {"dense out=3\nsoftmax_xent\n", "t.net:1: dense needs an input"},
    {"input shape=4\nconvolution out=3\nsoftmax_xent\n", "t.net:2: unknown layer type 'convolution' (expected one of input, dense"},
    {"input shape=4\ndense\nsoftmax_xent\n", "t.net:2: dense: missing required key 'out'"},
    {"input shape=4\ndense out=0\nsoftmax_xent\n", "t.net:2: dense: out: expected an integer in [1, 16777216], found 0"},
    {"input shape=4\ndense out=abc\nsoftmax_xent\n", "t.net:2: dense: out: expected an integer"},
    {"input shape=4\ndense out=3 colour=red\nsoftmax_xent\n", "t.net:2: dense: unknown key 'colour' (expected one of: out bias init name in)"},
    {"input shape=4\ndense out=3 out=4\nsoftmax_xent\n", "t.net:2: key 'out' given twice"},
    {"input shape=4\ndense out 3\nsoftmax_xent\n", "t.net:2: expected key=value, found 'out'"},
    {"input shape=4\ndense out=\nsoftmax_xent\n", "t.net:2: expected key=value, found 'out='"},
    {"input shape=4\ndense name=x out=3\ndense name=x out=2\nsoftmax_xent\n", "t.net:3: layer name 'x' already used on line 2"},
    {"input shape=4\ndense name=a.b out=3\nsoftmax_xent\n", "t.net:2: name 'a.b': expected letters, digits"},
    {"input shape=4\ndense out=3 in=nothere\nsoftmax_xent\n", "t.net:2: in=nothere: no layer named 'nothere' before this line"},
    {"input shape=4\ndense out=3 init=gauss\nsoftmax_xent\n", "t.net:2: dense: unknown init 'gauss'"},
    {"input shape=4\ndense out=3 init=normal\nsoftmax_xent\n", "t.net:2: dense: init=normal: expected normal:VALUE"},
    {"input shape=4\ndropout p=1.5\ndense out=2\nsoftmax_xent\n", "t.net:2: dropout: p: expected a number in [0, 0.99], found 1.5"},
    {"input\ndense out=3\nsoftmax_xent\n", "t.net:1: input: missing required key 'shape'"},
    {"input shape=1x2x3x4\ndense out=3\nsoftmax_xent\n", "t.net:1: input: shape=1x2x3x4 has more than 3 dims"},
    {"input shape=0x2\ndense out=3\nsoftmax_xent\n", "t.net:1: input: shape: expected an integer in [1, 1048576], found 0"},
    {"relu\ninput shape=4\n", "t.net:1: relu needs an input"},
    {"input shape=4\ninput shape=4\ndense out=2\nsoftmax_xent\n", "t.net:2: a second input layer (only one is supported)"},
    {"input shape=4\ndense out=3\nsoftmax_xent\ndense out=2\n", "t.net:4: input 'softmax_xent1' is a loss layer"},
    {"input shape=4\ndense out=1\nsoftmax_xent\n", "t.net:3: softmax_xent: expected at least 2 classes, found 1"},
    {"input shape=1x2x2\nsoftmax_xent\n", "t.net:2: softmax_xent: expected a vector of class scores"},
    {"input shape=4\ndense name=a out=3\ndense name=b out=3 in=input1\nsoftmax_xent\n",
     "t.net:2: the output of 'a' is not used by any later layer"},
    {"input shape=4 dense out=3\n", "t.net:1: expected key=value, found 'dense'"},
};

START_TEST(malformed_files_name_the_line)
{
    dt_net *net = NULL;
    int rc = net_parse(bad[_i].text, "t.net", "t", &net);
    ck_assert_msg(rc != 0, "case %d parsed but should fail: %s", _i, bad[_i].text);
    ck_assert_ptr_null(net);
    ck_assert_msg(strstr(dt_errmsg(), bad[_i].expect) != NULL, "case %d: message\n  '%s'\nlacks\n  '%s'", _i, dt_errmsg(),
                  bad[_i].expect);
}
END_TEST

START_TEST(long_line_rejected)
{
    char *text = malloc(6000);
    dt_net *net;
    strcpy(text, "input shape=4 ");
    memset(text + 14, 'x', 5000);
    strcpy(text + 5014, "\n");
    ck_assert_int_ne(net_parse(text, "t.net", "t", &net), 0);
    ck_assert_ptr_nonnull(strstr(dt_errmsg(), "t.net:1: line longer than"));
    free(text);
}
END_TEST

START_TEST(files_and_unknown_names)
{
    dt_net *net;
    ck_assert_ptr_nonnull(tmpdir_create());
    const char *p = write_text("tiny.net", "input shape=4\ndense name=out out=2\nsoftmax_xent\n");
    ck_assert_msg(net_load(p, &net) == 0, "%s", dt_errmsg());
    ck_assert_str_eq(net->name, "tiny");
    ck_assert_str_eq(net->origin, p);
    net_destroy(net);
    ck_assert_int_ne(net_load("/nonexistent/x.net", &net), 0);
    ck_assert_ptr_nonnull(strstr(dt_errmsg(), "/nonexistent/x.net: cannot open"));
    ck_assert_int_ne(net_load("resnet1000", &net), 0);
    ck_assert_ptr_nonnull(strstr(dt_errmsg(), "unknown net 'resnet1000' (expected one of mlp"));
    p = write_text("bad.net", "input shape=4\n\n\ndense out=-2\nsoftmax_xent\n");
    ck_assert_int_ne(net_load(p, &net), 0);
    ck_assert_msg(strstr(dt_errmsg(), "bad.net:4: dense: out") != NULL, "%s", dt_errmsg());
    tmpdir_remove();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("net");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, mlp_builtin_shapes_and_count);
    tcase_add_test(tc, arena_in_backward_order);
    tcase_add_test(tc, named_inputs_comments_blank_lines);
    tcase_add_loop_test(tc, malformed_files_name_the_line, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, long_line_rejected);
    tcase_add_test(tc, files_and_unknown_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
