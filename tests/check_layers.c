/* Layers: (1) every gradient formula checked by central finite differences in double precision
 * on the reference implementation; (2) the engine's fp32 layers, built through the real parser
 * and arena, equal the double reference within TOL_F32; (3) properties the trainer relies on. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/net.h"
#include "ref.h"
#include "rng.h"
#include "testutil.h"
#include "util.h"

#define FD_EPS 1e-6
#define FD_ATOL 1e-7
#define FD_RTOL 1e-6

static char msg[512];

/* ---- (1) finite differences on the double reference ------------------------------------------ */

/* L = sum r*y for dense; numeric gradient of one parameter array */
static double dense_loss(const double *x, const double *w, const double *b, const double *r, int rows, int in, int out)
{
    double *y = malloc(sizeof *y * (size_t)rows * out), l = 0.0;
    ref_dense_fwd(x, w, b, y, rows, in, out);
    for (int i = 0; i < rows * out; i++) l += r[i] * y[i];
    free(y);
    return l;
}

START_TEST(fd_dense)
{
    enum { R = 3, I = 5, O = 4 };
    double x[R * I], w[O * I], b[O], r[R * O], dx[R * I], dw[O * I], db[O], num[R * I > O * I ? R * I : O * I];
    fill_uniform_d(x, R * I, -1, 1, 1);
    fill_uniform_d(w, O * I, -1, 1, 2);
    fill_uniform_d(b, O, -1, 1, 3);
    fill_uniform_d(r, R * O, -1, 1, 4);
    ref_dense_bwd(x, w, r, dx, dw, db, R, I, O);
    struct {
        double *p, *g;
        int n;
        const char *what;
    } arrays[] = {{x, dx, R * I, "dx"}, {w, dw, O * I, "dW"}, {b, db, O, "db"}};
    for (int a = 0; a < 3; a++) {
        for (int i = 0; i < arrays[a].n; i++) {
            double keep = arrays[a].p[i];
            arrays[a].p[i] = keep + FD_EPS;
            double lp = dense_loss(x, w, b, r, R, I, O);
            arrays[a].p[i] = keep - FD_EPS;
            double lm = dense_loss(x, w, b, r, R, I, O);
            arrays[a].p[i] = keep;
            num[i] = (lp - lm) / (2 * FD_EPS);
        }
        ck_assert_msg(
            close_f64(arrays[a].g, num, (size_t)arrays[a].n, FD_ATOL, FD_RTOL, arrays[a].what, msg, sizeof msg), "%s",
            msg);
    }
}
END_TEST

START_TEST(fd_relu)
{
    enum { N = 40 };
    double x[N], r[N], y[N], dx[N], num[N];
    fill_uniform_d(x, N, -1, 1, 5);
    fill_uniform_d(r, N, -1, 1, 6);
    for (int i = 0; i < N; i++)
        if (fabs(x[i]) < 0.05) x[i] = 0.5; /* stay away from the kink */
    ref_relu_bwd(x, r, dx, N);
    for (int i = 0; i < N; i++) {
        double keep = x[i], lp = 0, lm = 0;
        x[i] = keep + FD_EPS;
        ref_relu_fwd(x, y, N);
        for (int k = 0; k < N; k++) lp += r[k] * y[k];
        x[i] = keep - FD_EPS;
        ref_relu_fwd(x, y, N);
        for (int k = 0; k < N; k++) lm += r[k] * y[k];
        x[i] = keep;
        num[i] = (lp - lm) / (2 * FD_EPS);
    }
    ck_assert_msg(close_f64(dx, num, N, FD_ATOL, FD_RTOL, "relu dx", msg, sizeof msg), "%s", msg);
}
END_TEST

START_TEST(fd_dropout)
{
    enum { N = 40 };
    double x[N], r[N], y[N], dx[N], num[N], p = 0.3;
    uint8_t mask[N];
    fill_uniform_d(x, N, -1, 1, 7);
    fill_uniform_d(r, N, -1, 1, 8);
    for (int i = 0; i < N; i++) mask[i] = (uint8_t)(i % 3 != 0);
    ref_dropout_bwd(mask, p, r, dx, N);
    for (int i = 0; i < N; i++) {
        double keep = x[i], lp = 0, lm = 0;
        x[i] = keep + FD_EPS;
        ref_dropout_fwd(x, mask, p, y, N);
        for (int k = 0; k < N; k++) lp += r[k] * y[k];
        x[i] = keep - FD_EPS;
        ref_dropout_fwd(x, mask, p, y, N);
        for (int k = 0; k < N; k++) lm += r[k] * y[k];
        x[i] = keep;
        num[i] = (lp - lm) / (2 * FD_EPS);
    }
    ck_assert_msg(close_f64(dx, num, N, FD_ATOL, FD_RTOL, "dropout dx", msg, sizeof msg), "%s", msg);
}
END_TEST

START_TEST(fd_softmax_xent)
{
    enum { R = 4, C = 6 };
    double z[R * C], prob[R * C], dz[R * C], num[R * C], scale = 1.0 / R;
    int32_t labels[R] = {0, 5, 2, 2};
    fill_uniform_d(z, R * C, -3, 3, 9);
    ref_softmax_xent_fwd(z, labels, prob, R, C);
    ref_softmax_xent_bwd(prob, labels, scale, dz, R, C);
    for (int i = 0; i < R * C; i++) {
        double keep = z[i];
        z[i] = keep + FD_EPS;
        double lp = scale * ref_softmax_xent_fwd(z, labels, prob, R, C);
        z[i] = keep - FD_EPS;
        double lm = scale * ref_softmax_xent_fwd(z, labels, prob, R, C);
        z[i] = keep;
        num[i] = (lp - lm) / (2 * FD_EPS);
    }
    ck_assert_msg(close_f64(dz, num, R * C, FD_ATOL, FD_RTOL, "softmax_xent dz", msg, sizeof msg), "%s", msg);
}
END_TEST

/* ---- (2) the fp32 engine against the double reference ---------------------------------------- */

enum { ROWS = 7, IN = 6, HID = 5, CLS = 4 };
static const char *NET_TEXT = "input shape=6\n"
                              "dense name=fc1 out=5\n"
                              "relu name=act\n"
                              "dropout name=drop p=0.3\n"
                              "dense name=fc2 out=4\n"
                              "softmax_xent name=loss\n";

typedef struct {
    double x[ROWS * IN], w1[HID * IN], b1[HID], w2[CLS * HID], b2[CLS];
    int32_t labels[ROWS];
} problem;

static void make_problem(problem *p)
{
    fill_uniform_d(p->x, ROWS * IN, -1, 1, 11);
    fill_uniform_d(p->w1, HID * IN, -0.8, 0.8, 12);
    fill_uniform_d(p->b1, HID, -0.3, 0.3, 13);
    fill_uniform_d(p->w2, CLS * HID, -0.8, 0.8, 14);
    fill_uniform_d(p->b2, CLS, -0.3, 0.3, 15);
    for (int r = 0; r < ROWS; r++) p->labels[r] = r % CLS;
}

static void set_param(dt_net *net, const char *name, const double *v)
{
    dt_param *t = net_find_tensor(net, name);
    ck_assert_msg(t != NULL, "no tensor %s", name);
    for (size_t i = 0; i < t->n; i++) t->w[i] = (float)v[i];
}

static dt_net *build(dt_backend **be)
{
    dt_net *net;
    ck_assert_int_eq(backend_cpu_create(be, 1), 0);
    ck_assert_msg(net_parse(NET_TEXT, "test.net", "test", &net) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(net_alloc(net, *be, ROWS), 0);
    return net;
}

/* the engine's dropout mask, by its definition in backend.h */
static uint8_t keep_elem(uint64_t layer_key, uint64_t idx, double p)
{
    return (uint8_t)((uint32_t)(rng_hash(layer_key, idx) >> 40) >= (uint32_t)((float)p * 16777216.0f));
}

START_TEST(engine_matches_reference)
{
    problem pb;
    dt_backend *be;
    dt_net *net = build(&be);
    float xf[ROWS * IN];
    const uint64_t key = 12345;
    const double p = 0.3;
    make_problem(&pb);
    set_param(net, "fc1.weight", pb.w1);
    set_param(net, "fc1.bias", pb.b1);
    set_param(net, "fc2.weight", pb.w2);
    set_param(net, "fc2.bias", pb.b2);
    for (int i = 0; i < ROWS * IN; i++) xf[i] = (float)pb.x[i];
    net_set_input(net, xf, ROWS);
    net_set_labels(net, pb.labels, ROWS);
    dt_pass pass = {.rows = ROWS, .train = 1, .labels = net->labels, .rng_key = key, .grad_scale = 1.0f / ROWS};
    ck_assert_int_eq(net_forward(net, &pass), 0);
    ck_assert_int_eq(net_backward(net, &pass, NULL, NULL), 0);

    /* the same computation in double */
    double h[ROWS * HID], a[ROWS * HID], d[ROWS * HID], z[ROWS * CLS], prob[ROWS * CLS], dz[ROWS * CLS];
    double dw2[CLS * HID], db2[CLS], dd[ROWS * HID], da[ROWS * HID], dh[ROWS * HID], dw1[HID * IN], db1[HID];
    uint8_t mask[ROWS * HID];
    uint64_t lkey = rng_hash(key, rng_stream_id("drop"));
    for (int i = 0; i < ROWS * HID; i++) mask[i] = keep_elem(lkey, (uint64_t)i, p);
    ref_dense_fwd(pb.x, pb.w1, pb.b1, h, ROWS, IN, HID);
    ref_relu_fwd(h, a, ROWS * HID);
    ref_dropout_fwd(a, mask, p, d, ROWS * HID);
    ref_dense_fwd(d, pb.w2, pb.b2, z, ROWS, HID, CLS);
    double loss = ref_softmax_xent_fwd(z, pb.labels, prob, ROWS, CLS);
    ref_softmax_xent_bwd(prob, pb.labels, 1.0 / ROWS, dz, ROWS, CLS);
    ref_dense_bwd(d, pb.w2, dz, dd, dw2, db2, ROWS, HID, CLS);
    ref_dropout_bwd(mask, p, dd, da, ROWS * HID);
    ref_relu_bwd(h, da, dh, ROWS * HID);
    ref_dense_bwd(pb.x, pb.w1, dh, NULL, dw1, db1, ROWS, IN, HID);

    ck_assert_msg(fabs(pass.loss_sum - loss) <= 1e-4 * fabs(loss) + 1e-5, "loss %g vs %g", pass.loss_sum, loss);
    ck_assert_msg(close_f32_f64(net->loss->y, prob, ROWS * CLS, TOL_F32_ATOL, TOL_F32_RTOL, "prob", msg, sizeof msg),
                  "%s", msg);
    ck_assert_msg(
        close_f32_f64(net->layers[3]->y, d, ROWS * HID, TOL_F32_ATOL, TOL_F32_RTOL, "dropout y", msg, sizeof msg), "%s",
        msg);
    ck_assert_msg(close_f32_f64(net_find_tensor(net, "fc2.weight")->g, dw2, CLS * HID, TOL_F32_ATOL, TOL_F32_RTOL,
                                "fc2.weight grad", msg, sizeof msg), "%s", msg);
    ck_assert_msg(close_f32_f64(net_find_tensor(net, "fc2.bias")->g, db2, CLS, TOL_F32_ATOL, TOL_F32_RTOL,
                                "fc2.bias grad", msg, sizeof msg),
                  "%s", msg);
    ck_assert_msg(close_f32_f64(net_find_tensor(net, "fc1.weight")->g, dw1, HID * IN, TOL_F32_ATOL, TOL_F32_RTOL,
                                "fc1.weight grad", msg, sizeof msg), "%s", msg);
    ck_assert_msg(close_f32_f64(net_find_tensor(net, "fc1.bias")->g, db1, HID, TOL_F32_ATOL, TOL_F32_RTOL,
                                "fc1.bias grad", msg, sizeof msg),
                  "%s", msg);
    net_destroy(net);
    backend_destroy(be);
}
END_TEST

START_TEST(first_layer_computes_no_input_gradient)
{
    dt_backend *be;
    dt_net *net = build(&be);
    ck_assert_int_eq(net->input->requires_grad, 0);
    ck_assert_ptr_null(net->input->dy);
    ck_assert_int_eq(net->layers[1]->requires_grad, 1);
    net_destroy(net);
    backend_destroy(be);
}
END_TEST

/* A split of the batch over ranks (row0) must draw exactly the masks of the unsplit batch. */
START_TEST(dropout_mask_independent_of_split)
{
    dt_backend *be;
    ck_assert_int_eq(backend_cpu_create(&be, 1), 0);
    enum { R = 9, C = 33 };
    float x[R * C], whole[R * C], parts[R * C];
    for (int i = 0; i < R * C; i++) x[i] = 1.0f + (float)i;
    be->dropout_fwd(be, whole, x, R, C, 0.5f, 99, 0);
    be->dropout_fwd(be, parts, x, 4, C, 0.5f, 99, 0);
    be->dropout_fwd(be, parts + 4 * C, x + 4 * C, 5, C, 0.5f, 99, 4);
    ck_assert_int_eq(memcmp(whole, parts, sizeof whole), 0);
    int kept = 0;
    for (int i = 0; i < R * C; i++) kept += whole[i] != 0.0f;
    ck_assert_msg(kept > R * C / 4 && kept < 3 * R * C / 4, "kept %d of %d at p=0.5", kept, R * C);
    backend_destroy(be);
}
END_TEST

START_TEST(dropout_identity_in_evaluation)
{
    problem pb;
    dt_backend *be;
    dt_net *net = build(&be);
    float xf[ROWS * IN];
    make_problem(&pb);
    for (int i = 0; i < ROWS * IN; i++) xf[i] = (float)pb.x[i];
    net_set_input(net, xf, ROWS);
    net_set_labels(net, pb.labels, ROWS);
    dt_pass pass = {.rows = ROWS, .train = 0, .labels = net->labels, .rng_key = 5, .grad_scale = 1.0f};
    ck_assert_int_eq(net_forward(net, &pass), 0);
    ck_assert_int_eq(memcmp(net->layers[2]->y, net->layers[3]->y, sizeof(float) * ROWS * HID), 0);
    net_destroy(net);
    backend_destroy(be);
}
END_TEST

/* A rank with no rows in the last short batch contributes zero gradients. */
START_TEST(zero_rows_give_zero_gradient)
{
    dt_backend *be;
    dt_net *net = build(&be);
    for (size_t i = 0; i < net->n_params; i++) net->g[i] = 1.0f;
    dt_pass pass = {.rows = 0, .train = 1, .labels = net->labels, .grad_scale = 1.0f};
    ck_assert_int_eq(net_forward(net, &pass), 0);
    ck_assert_int_eq(net_backward(net, &pass, NULL, NULL), 0);
    for (size_t i = 0; i < net->n_params; i++) ck_assert_float_eq(net->g[i], 0.0f);
    net_destroy(net);
    backend_destroy(be);
}
END_TEST

static void ready_cb(void *arg, size_t n)
{
    size_t *seen = arg;
    ck_assert_msg(n > seen[0], "ready prefix must grow: %zu after %zu", n, seen[0]);
    seen[0] = n;
    seen[1]++;
}

/* backward reports ever-longer final prefixes of the arena, ending with all of it */
START_TEST(backward_reports_ready_prefixes)
{
    dt_backend *be;
    dt_net *net = build(&be);
    size_t seen[2] = {0, 0};
    dt_pass pass = {.rows = 1, .train = 1, .labels = net->labels, .rng_key = 1, .grad_scale = 1.0f};
    ck_assert_int_eq(net_forward(net, &pass), 0);
    ck_assert_int_eq(net_backward(net, &pass, ready_cb, seen), 0);
    ck_assert_uint_eq(seen[0], net->n_params);
    ck_assert_uint_eq(seen[1], 2); /* fc2 then fc1 */
    net_destroy(net);
    backend_destroy(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layers");
    TCase *fd = tcase_create("finite differences (double reference)");
    TCase *eng = tcase_create("fp32 engine vs reference");
    tcase_add_test(fd, fd_dense);
    tcase_add_test(fd, fd_relu);
    tcase_add_test(fd, fd_dropout);
    tcase_add_test(fd, fd_softmax_xent);
    tcase_add_test(eng, engine_matches_reference);
    tcase_add_test(eng, first_layer_computes_no_input_gradient);
    tcase_add_test(eng, dropout_mask_independent_of_split);
    tcase_add_test(eng, dropout_identity_in_evaluation);
    tcase_add_test(eng, zero_rows_give_zero_gradient);
    tcase_add_test(eng, backward_reports_ready_prefixes);
    suite_add_tcase(s, fd);
    suite_add_tcase(s, eng);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
