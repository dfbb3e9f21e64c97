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
    /* a UTF-8 byte-order mark, as some editors write, is not part of the first line */
    ck_assert_msg(net_parse("\xef\xbb\xbfinput shape=4\ndense out=2\nsoftmax_xent\n", "t.net", "t", &net) == 0, "%s",
                  dt_errmsg());
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
    {"input shape=4\nconvolution out=3\nsoftmax_xent\n",
     "t.net:2: unknown layer type 'convolution' (expected one of input, dense"},
    {"input shape=4\ndense\nsoftmax_xent\n", "t.net:2: dense: missing required key 'out'"},
    {"input shape=4\ndense out=0\nsoftmax_xent\n",
     "t.net:2: dense: out: expected an integer in [1, 16777216], found 0"},
    {"input shape=4\ndense out=abc\nsoftmax_xent\n", "t.net:2: dense: out: expected an integer"},
    {"input shape=4\ndense out=3 colour=red\nsoftmax_xent\n",
     "t.net:2: dense: unknown key 'colour' (expected one of: out bias init name in frozen)"},
    {"input shape=4\ndense out=3 out=4\nsoftmax_xent\n", "t.net:2: key 'out' given twice"},
    {"input shape=4\ndense out 3\nsoftmax_xent\n", "t.net:2: expected key=value, found 'out'"},
    {"input shape=4\ndense out=\nsoftmax_xent\n", "t.net:2: expected key=value, found 'out='"},
    {"input shape=4\ndense name=x out=3\ndense name=x out=2\nsoftmax_xent\n",
     "t.net:3: layer name 'x' already used on line 2"},
    {"input shape=4\ndense name=a/b out=3\nsoftmax_xent\n", "t.net:2: name 'a/b': expected letters, digits"},
    {"input shape=4\ndense name=.fc out=3\nsoftmax_xent\n",
     "t.net:2: name '.fc': expected letters, digits, '_', '-' or '.', not starting with '.'"},
    {"input shape=4\ndense out=3 in=nothere\nsoftmax_xent\n",
     "t.net:2: in=nothere: no layer named 'nothere' before this line"},
    {"input shape=4 in=x\ndense out=3\nsoftmax_xent\n", "t.net:1: input takes no inputs (expected no in=, found in=x)"},
    {"input shape=4\ndense out=3 init=gauss\nsoftmax_xent\n", "t.net:2: dense: unknown init 'gauss'"},
    {"input shape=4\ndense out=3 init=normal\nsoftmax_xent\n", "t.net:2: dense: init=normal: expected normal:VALUE"},
    {"input shape=4\ndense out=3 init=const:1e39\nsoftmax_xent\n",
     "t.net:2: dense: init: const:VALUE: expected a number in [-1e+06, 1e+06], found 1e39"},
    {"input shape=4\ndropout p=1.5\ndense out=2\nsoftmax_xent\n",
     "t.net:2: dropout: p: expected a number in [0, 0.99], found 1.5"},
    {"input\ndense out=3\nsoftmax_xent\n", "t.net:1: input: missing required key 'shape'"},
    {"input shape=1x2x3x4\ndense out=3\nsoftmax_xent\n", "t.net:1: input: shape=1x2x3x4 has more than 3 dims"},
    {"input shape=0x2\ndense out=3\nsoftmax_xent\n",
     "t.net:1: input: shape: expected an integer in [1, 1048576], found 0"},
    {"relu\ninput shape=4\n", "t.net:1: relu needs an input"},
    {"input shape=4\ninput shape=4\ndense out=2\nsoftmax_xent\n",
     "t.net:2: a second input layer (only one is supported)"},
    {"input shape=4\ndense out=3\nsoftmax_xent\ndense out=2\n", "t.net:4: input 'softmax_xent1' is a loss layer"},
    {"input shape=4\ndense out=1\nsoftmax_xent\n", "t.net:3: softmax_xent: expected at least 2 classes, found 1"},
    {"input shape=1x2x2\nsoftmax_xent\n", "t.net:2: softmax_xent: expected a vector of class scores"},
    {"input shape=4\ndense name=a out=3\ndense name=b out=3 in=input1\nsoftmax_xent\n",
     "t.net:2: the output of 'a' is not used by any later layer"},
    {"input shape=4 dense out=3\n", "t.net:1: expected key=value, found 'dense'"},
    /* CNN layers */
    {"input shape=3x8x8\nconv out=4 k=9\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2: conv: a 9x9 kernel does not fit the 3x8x8 input"},
    {"input shape=3x8x8\nconv out=4 k=3 groups=2\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2: conv: groups=2 must divide the input channels (3)"},
    {"input shape=3x8x8\nconv out=4 k=3 pad=1,2\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2: conv: pad=1,2: expected P, same, or T,B,L,R"},
    {"input shape=3x8x8\nconv out=4 k=3 pad=100000\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2: conv: pad=100000: 100000 is more padding than 65536"},
    {"input shape=12\nconv out=4 k=3\ndense out=2\nsoftmax_xent\n", "t.net:2: conv: expected an input of C x H x W"},
    {"input shape=3x8x8\nconv out=4\nflatten\ndense out=2\nsoftmax_xent\n", "t.net:2: conv: missing required key 'k'"},
    {"input shape=3x8x8\nrelu frozen=1\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2: frozen=1 on a relu, which has no parameters"},
    {"input shape=3x8x8\nconv out=4 k=3 frozen=yes\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2: frozen: expected 0 or 1, found 'yes'"},
    {"input shape=3x8x8\nconv name=a out=4 k=3\nconv name=b in=input1 out=4 k=5\nadd in=a,b\nflatten\ndense out=2\n"
     "softmax_xent\n",
     "t.net:4: add: inputs 'a' (4x6x6) and 'b' (4x4x4) differ in shape (expected the same)"},
    {"input shape=3x8x8\nshortcut out=4\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2: shortcut: out=4 must be at least the 3 input channels, by an even number"},
    {"input shape=3x8x8\nlrn size=4\nflatten\ndense out=2\nsoftmax_xent\n", "t.net:2: lrn: size=4 must be odd"},
    /* blocks */
    {"block b out\nconv out=$out k=3\n", "t.net:1: block b has no 'end'"},
    {"end\n", "t.net:1: 'end' without a block"},
    {"block b out\nconv out=$out k=1\nend\ninput shape=3x4x4\nb name=x out=2 out=3\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:5: key 'out' given twice"},
    {"block relu x\nend\n", "t.net:1: block name 'relu' is already taken"},
    {"block b out\nconv out=$width k=1\nend\ninput shape=3x4x4\nb name=x out=2\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:2 (in block b, used at t.net:5): $width is not a parameter of the block"},
    {"block b out\nconv out=$out k=1\nend\ninput shape=3x4x4\nb name=x\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:5: block b needs out=..."},
    {"block b out\nconv out=$out k=1\nend\ninput shape=3x4x4\nb name=x out=2 k=3\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:5: block b has no parameter 'k' (expected: name out)"},
    {"block b out\nconv name=$name out=$out k=1\nconv name=$name.2 out=$out k=9\nend\ninput shape=3x4x4\n"
     "b name=x out=2\nflatten\ndense out=2\nsoftmax_xent\n",
     "t.net:3 (in block b, used at t.net:6): conv: a 9x9 kernel does not fit"},
    {"block a\nb name=$name\nend\nblock b\na name=$name\nend\ninput shape=4\na name=x\nsoftmax_xent\n",
     "t.net:1: block a uses itself (a -> b -> a)"},
};

START_TEST(malformed_files_name_the_line)
{
    dt_net *net = NULL;
    int rc = net_parse(bad[_i].text, "t.net", "t", &net);
    ck_assert_msg(rc != 0, "case %d parsed but should fail: %s", _i, bad[_i].text);
    ck_assert_ptr_null(net);
    ck_assert_msg(strstr(dt_errmsg(), bad[_i].expect) != NULL, "case %d: message\n  '%s'\nlacks\n  '%s'", _i,
                  dt_errmsg(), bad[_i].expect);
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

/* every built-in net against PAPERS.md §5: parameters as frameworks count them (trained and
 * frozen weights, no running statistics), and how many of them train */
START_TEST(builtin_nets_match_the_papers)
{
    const struct {
        const char *name;
        size_t weights, trained;
        int classes;
    } nets[] = {
        {"mlp", 648010, 648010, 10},
        {"lenet", 1256080, 1256080, 10},
        {"cifar-quick", 145578, 145578, 10},            /* 151,428 - 90 * 65: C = 10 */
        {"cifar-quick-convex", 151428, 64 * 100 + 100, 100}, /* C = 100, only the last fc trains */
        {"resnet20", 269722, 269722, 10},
        {"vgg16", 14728266, 14728266, 10},
        {"alexnet", 60965224, 60965224, 1000},
        /* alexnet without conv biases, with batch norm: 60,965,224 - 1,376 + 2 * 1,376 */
        {"alexnet-bn", 60966600, 60966600, 1000},
        {"resnet18", 11689512, 11689512, 1000},
        {"resnet50", 25557032, 25557032, 1000},
        /* torchvision's googlenet(aux_logits=False): 6,624,904 (its state_dict holds 344 tensors) */
        {"googlenet", 6624904, 6624904, 1000},
        /* torchvision's alexnet and vgg16 */
        {"alexnet-torchvision", 61100840, 61100840, 1000},
        {"vgg16-torchvision", 138357544, 138357544, 1000},
    };
    ck_assert_int_eq(net_builtin_count(), (int)DT_ARRAY_LEN(nets));
    for (size_t i = 0; i < DT_ARRAY_LEN(nets); i++) {
        dt_net *net;
        ck_assert_msg(net_load(nets[i].name, &net) == 0, "%s", dt_errmsg());
        ck_assert_msg(net_n_weights(net) == nets[i].weights, "%s: %zu parameters, expected %zu", nets[i].name,
                      net_n_weights(net), nets[i].weights);
        ck_assert_msg(net->n_params == nets[i].trained, "%s: %zu trained, expected %zu", nets[i].name, net->n_params,
                      nets[i].trained);
        ck_assert_int_eq(net_n_classes(net), nets[i].classes);
        net_destroy(net);
    }
}
END_TEST

static const dt_layer *layer_named(const dt_net *net, const char *name)
{
    for (int i = 0; i < net->n_layers; i++)
        if (!strcmp(net->layers[i]->name, name)) return net->layers[i];
    ck_abort_msg("no layer %s", name);
    return NULL;
}

static void expect_shape(const dt_net *net, const char *layer, int c, int h, int w)
{
    const dt_shape *s = &layer_named(net, layer)->out;
    ck_assert_msg(s->n_dims == 3 && s->d[0] == c && s->d[1] == h && s->d[2] == w, "%s: %dx%dx%d, expected %dx%dx%d",
                  layer, s->d[0], s->d[1], s->d[2], c, h, w);
}

/* SAME padding, ceil-mode pooling, strided blocks and torchvision's tensor names */
START_TEST(cnn_shapes_and_names)
{
    dt_net *net;
    ck_assert_int_eq(net_load("lenet", &net), 0);
    expect_shape(net, "conv1", 20, 28, 28);
    expect_shape(net, "maxpool2", 50, 7, 7);
    net_destroy(net);
    ck_assert_int_eq(net_load("cifar-quick", &net), 0);
    expect_shape(net, "maxpool1", 32, 16, 16); /* ceil((32 - 3) / 2) + 1 */
    expect_shape(net, "avgpool2", 64, 4, 4);
    net_destroy(net);
    ck_assert_int_eq(net_load("alexnet", &net), 0);
    expect_shape(net, "conv1", 96, 55, 55);
    expect_shape(net, "maxpool3", 256, 6, 6);
    ck_assert_int_eq(net_find_tensor(net, "conv2.weight")->dims[1], 48); /* groups = 2 */
    net_destroy(net);
    ck_assert_int_eq(net_load("resnet20", &net), 0);
    expect_shape(net, "layer2.0.shortcut", 32, 16, 16);
    expect_shape(net, "layer3.2", 64, 8, 8);
    ck_assert_ptr_nonnull(net_find_tensor(net, "layer3.2.bn2.running_var"));
    net_destroy(net);
    ck_assert_int_eq(net_load("resnet50", &net), 0);
    expect_shape(net, "stem", 64, 56, 56);
    expect_shape(net, "layer4.2", 2048, 7, 7);
    const char *names[] = {"conv1.weight",
                           "bn1.running_mean",
                           "layer1.0.downsample.0.weight",
                           "layer1.0.downsample.1.bias",
                           "layer3.5.conv3.weight",
                           "layer4.2.bn3.running_var",
                           "fc.weight",
                           "fc.bias"};
    for (size_t i = 0; i < DT_ARRAY_LEN(names); i++)
        ck_assert_msg(net_find_tensor(net, names[i]) != NULL, "no tensor %s", names[i]);
    const dt_param *w = net_find_tensor(net, "layer2.0.conv2.weight");
    ck_assert(w->n_dims == 4 && w->dims[0] == 128 && w->dims[1] == 128 && w->dims[2] == 3 && w->dims[3] == 3);
    net_destroy(net);
}
END_TEST

/* a block used twice, nested blocks, $name in names and in= */
START_TEST(blocks_expand)
{
    dt_net *net;
    const char *text = "block cbr out\n"
                       "conv name=$name out=$out k=3 pad=1\n"
                       "batchnorm name=$name.bn\n"
                       "relu name=$name.relu\n"
                       "end\n"
                       "block pair in out   # a block that uses a block\n"
                       "cbr name=$name.a out=$out\n"
                       "cbr name=$name.b out=$out\n"
                       "add name=$name in=$name.b.relu,$in\n"
                       "end\n"
                       "input shape=8x6x6\n"
                       "cbr name=stem out=8\n"
                       "pair name=p1 in=stem.relu out=8\n"
                       "pair name=p2 in=p1 out=8\n"
                       "avgpool global=1\n"
                       "flatten\n"
                       "dense name=fc out=3\n"
                       "softmax_xent\n";
    ck_assert_msg(net_parse(text, "b.net", "b", &net) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(net->n_layers, 1 + 3 + 2 * 7 + 4);
    ck_assert_ptr_nonnull(net_find_tensor(net, "p2.b.weight"));
    ck_assert_ptr_nonnull(net_find_tensor(net, "p1.a.bn.running_mean"));
    ck_assert_ptr_eq(layer_named(net, "p2")->in[1], layer_named(net, "p1"));
    ck_assert_uint_eq(net->n_params, 5 * (8 * 8 * 9 + 8 + 16) + 8 * 3 + 3);
    net_destroy(net);
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
    tcase_add_test(tc, builtin_nets_match_the_papers);
    tcase_add_test(tc, cnn_shapes_and_names);
    tcase_add_test(tc, blocks_expand);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
