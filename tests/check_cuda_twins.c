/* The CUDA kernels' arithmetic on the host: every element function of cuda/elementwise.h, run over
 * whole tensors the way its kernel runs it, against the CPU backend's op on the same input.
 * Runs everywhere (no GPU, no CUDA toolkit needed); the kernels themselves are checked against
 * the CPU on a GPU by check_cuda.
 *
 * Tolerances: ReLU, dropout (mask and values), the bias gradient and the shortcut bit-identical;
 * softmax 1e-6 relative (expf of two libraries); SGD, batch norm, LRN and pooling 1e-5 relative
 * (oneDNN orders its sums its own way, or fuses multiply-adds). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/elementwise.h"
#include "comm/chunks.h"
#include "comm/codec.h"
#include "comm/codec_tern.h"
#include "comm/memory.h"
#include "comm/sparse.h"
#include "cpu.h"
#include "engine/backend.h"
#include "engine/backend_cpu.h"
#include "rng.h"
#include "testutil.h"

static dt_backend *cpu;
static char msg[512];

static void setup(void) { ck_assert_int_eq(backend_cpu_create(&cpu, 1), 0); }
static void teardown(void) { backend_destroy(cpu); }

/* the test's random tensors: stream 7 of seed */
static float *randv(size_t n, uint64_t seed, float lo, float hi) { return rand_floats(n, seed, 7, lo, hi); }

static float *dup(const float *x, size_t n)
{
    float *y = malloc(sizeof *y * (n ? n : 1));
    memcpy(y, x, sizeof *y * n);
    return y;
}

#define SAME(got, ref, n, what) ck_assert_msg(memcmp(got, ref, sizeof(float) * (n)) == 0, "%s differs", what)
#define CLOSE(got, ref, n, tol, what)                                                                                  \
    ck_assert_msg(close_f32(got, ref, n, tol, tol, what, msg, sizeof msg), "%s", msg)

START_TEST(relu_dropout)
{
    const int rows = 3, cols = 33;
    size_t n = (size_t)rows * cols;
    float *x = randv(n, 1, -1, 1), *dy = randv(n, 2, -1, 1);
    float *y = malloc(n * 4), *t = malloc(n * 4);
    for (int beta = 0; beta < 2; beta++) {
        float *dx = randv(n, 3, -1, 1), *dt = dup(dx, n);
        cpu->relu_fwd(cpu, y, x, n);
        for (size_t i = 0; i < n; i++) t[i] = ew_relu(x[i]);
        SAME(t, y, n, "relu");
        cpu->relu_bwd(cpu, dx, dy, y, n, (float)beta);
        for (size_t i = 0; i < n; i++) dt[i] = ew_relu_bwd(dt[i], dy[i], y[i], (float)beta);
        SAME(dt, dx, n, "relu backward");
        free(dx), free(dt);
    }
    const float ps[] = {0.0f, 0.3f, 0.5f, 0.99f};
    for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
        float p = ps[k];
        uint64_t key = 0x1234 + k;
        int64_t row0 = 5;
        uint32_t th = ew_dropout_thresh(p);
        float s = ew_dropout_scale(p);
        cpu->dropout_fwd(cpu, y, x, rows, cols, p, key, row0);
        for (size_t i = 0; i < n; i++) t[i] = ew_dropout(x[i], key, (uint64_t)(row0 * cols) + i, th, s);
        SAME(t, y, n, "dropout mask and values");
        for (int beta = 0; beta < 2; beta++) {
            float *dx = randv(n, 4, -1, 1), *dt = dup(dx, n);
            cpu->dropout_bwd(cpu, dx, dy, rows, cols, p, key, row0, (float)beta);
            for (size_t i = 0; i < n; i++)
                dt[i] = ew_put(dt[i], ew_dropout(dy[i], key, (uint64_t)(row0 * cols) + i, th, s), (float)beta);
            SAME(dt, dx, n, "dropout backward");
            free(dx), free(dt);
        }
    }
    free(x), free(dy), free(y), free(t);
}
END_TEST

START_TEST(optimizer_and_vectors)
{
    const size_t n = 1037;
    for (int variant = 0; variant < 3; variant++) {
        float *w = randv(n, 5, -1, 1), *g = randv(n, 6, -1, 1), *v = randv(n, 7, -1, 1);
        float *wt = dup(w, n), *vt = dup(v, n);
        float m = variant == 0 ? 0.0f : 0.9f;
        int nest = variant == 2;
        cpu->sgd_step(cpu, w, g, variant ? v : NULL, n, 0.1f, m, 5e-4f, nest);
        for (size_t i = 0; i < n; i++) ew_sgd(wt, g, variant ? vt : NULL, i, 0.1f, m, 5e-4f, nest);
        CLOSE(wt, w, n, 1e-6, "sgd weights");
        CLOSE(vt, v, n, 1e-6, "sgd momentum");
        free(w), free(g), free(v), free(wt), free(vt);
    }
    float *x = randv(n, 8, -1, 1), *y = randv(n, 9, -1, 1), *yt = dup(y, n);
    const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int b = 0; b < 3; b++) {
        cpu->add(cpu, y, x, n, betas[b]);
        for (size_t i = 0; i < n; i++) yt[i] = ew_add(yt[i], x[i], betas[b]);
        CLOSE(yt, y, n, 1e-7, "add");
    }
    /* the add layer's forward, with its relu and without: bit for bit */
    for (int relu = 0; relu < 2; relu++) {
        float *a = randv(n, 60 + relu, -1, 1), *s = malloc(n * sizeof(float)), *st = malloc(n * sizeof(float));
        cpu->add2(cpu, s, a, x, n, relu);
        for (size_t i = 0; i < n; i++) st[i] = ew_add2(a[i], x[i], relu);
        ck_assert_msg(memcmp(s, st, n * sizeof(float)) == 0, "add2 (relu %d): the twin differs from the CPU", relu);
        free(a), free(s), free(st);
    }
    { /* every pair of special values (check_cuda's): subnormal sums flushed, signed zeros; with the relu
       * infinities and NaN too */
        const float sp[] = {0.0f, -0.0f, 1e-39f, -1e-39f, 1.5e-38f, -1.4e-38f, FLT_MIN, -FLT_MIN, 1.0f, -1.0f,
                            INFINITY, -INFINITY, NAN};
        enum { K = sizeof sp / sizeof *sp };
        float u[K * K], w[K * K], r[K * K], rt[K * K];
        for (int relu = 0; relu < 2; relu++) {
            int k = relu ? K : K - 3, m = 0;
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++) u[m] = sp[i], w[m] = sp[j], m++;
            cpu->add2(cpu, r, u, w, (size_t)m, relu);
            for (int i = 0; i < m; i++) rt[i] = ew_add2(u[i], w[i], relu);
            for (int i = 0; i < m; i++)
                ck_assert_msg(memcmp(&r[i], &rt[i], 4) == 0,
                              "add2 (relu %d) of %g and %g: %g on the CPU, %g in the twin", relu, u[i], w[i], r[i],
                              rt[i]);
            if (!relu)
                ck_assert_msg(r[4 * k + 5] == 0.0f && !signbit(r[4 * k + 5]), "1.5e-38 + -1.4e-38 not flushed to +0");
        }
    }
    /* batch norm's running statistics: bit for bit (the unbiasing in double, nothing fused) */
    for (int k = 0; k < 3; k++) {
        float *rm = randv(n, 20 + k, -1, 1), *rv = randv(n, 30 + k, 0.1f, 2), *mean = randv(n, 40 + k, -1, 1),
              *var = randv(n, 50 + k, 0, 3), *rmt = dup(rm, n), *rvt = dup(rv, n);
        const float m = k == 0 ? 0.1f : k == 1 ? 0.01f : 1.0f;
        const double unbias = k == 2 ? 100.0 / 99.0 : 2048.0 / 2047.0; /* m 1: the product itself */
        float *rm0 = dup(rm, n), *rv0 = dup(rv, n);
        cpu->bn_running(cpu, rm, rv, mean, var, n, m, unbias);
        for (size_t i = 0; i < n; i++) ew_bn_running(rmt, rvt, mean, var, i, m, unbias);
        SAME(rmt, rm, n, "running mean");
        SAME(rvt, rv, n, "running variance");
        for (size_t i = 0; i < n; i++) { /* the contract's formula, each step rounded to float */
            volatile float a = (1.0f - m) * rm0[i], b = m * mean[i], c = (1.0f - m) * rv0[i],
                           d = m * (float)((double)var[i] * unbias);
            ck_assert_msg(rm[i] == a + b && rv[i] == c + d, "channel %zu: running statistics (%g, %g), not (%g, %g)", i,
                          rm[i], rv[i], a + b, c + d);
        }
        free(rm), free(rv), free(mean), free(var), free(rmt), free(rvt), free(rm0), free(rv0);
    }
    /* bias gradient: per column in row order, bit for bit */
    const int rows = 7, cols = 33;
    float *dy = randv((size_t)rows * cols, 10, -1, 1);
    for (int beta = 0; beta < 2; beta++) {
        float *db = randv(cols, 11, -1, 1), *dt = malloc(cols * 4);
        for (int c = 0; c < cols; c++) dt[c] = ew_bias_grad_col(dy, rows, cols, c, db[c], (float)beta);
        cpu->bias_grad(cpu, db, dy, rows, cols, (float)beta);
        SAME(dt, db, cols, "bias gradient");
        free(db), free(dt);
    }
    free(x), free(y), free(yt), free(dy);
}
END_TEST

START_TEST(softmax_xent)
{
    const int rows = 7, classes = 10;
    size_t n = (size_t)rows * classes;
    float *z = randv(n, 12, -8, 8), *p = malloc(n * 4), *pt = malloc(n * 4);
    int32_t labels[7] = {0, 9, 3, 3, 1, 5, 7};
    double loss = 0.0, loss_t = 0.0;
    int64_t correct = 0, correct_t = 0;
    cpu->softmax_xent_fwd(cpu, p, z, labels, rows, classes, &loss, &correct);
    for (int r = 0; r < rows; r++) {
        double l;
        int c;
        ew_softmax_xent_row(z + (size_t)r * classes, pt + (size_t)r * classes, classes, labels[r], &l, &c);
        loss_t += l, correct_t += c;
    }
    CLOSE(pt, p, n, 1e-6, "softmax");
    ck_assert_msg(fabs(loss - loss_t) <= 1e-6 * fabs(loss), "loss %.9g != %.9g", loss_t, loss);
    ck_assert_int_eq(correct, correct_t);
    for (int beta = 0; beta < 2; beta++) {
        float *dx = randv(n, 13, -1, 1), *dt = dup(dx, n);
        cpu->softmax_xent_bwd(cpu, dx, p, labels, rows, classes, 0.25f, (float)beta);
        for (size_t i = 0; i < n; i++)
            dt[i] = ew_softmax_xent_bwd(dt[i], p[i], (int)(i % classes) == labels[i / classes], 0.25f, (float)beta);
        CLOSE(dt, dx, n, 1e-7, "softmax cross-entropy backward");
        free(dx), free(dt);
    }
    free(z), free(p), free(pt);
}
END_TEST

/* batch norm as its kernels run it: per-channel double sums, then the element functions */
static void bn_twin_fwd(int rows, int C, int hw, float eps, int relu, const float *x, const float *scale,
                        const float *shift, float *mean, float *var, float *y)
{
    for (int c = 0; c < C; c++) {
        double k = x[(size_t)c * hw], s1 = 0.0, s2 = 0.0, dm, dv;
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < hw; i++) {
                double d = (double)x[((size_t)r * C + c) * hw + i] - k;
                s1 += d, s2 += d * d;
            }
        ew_bn_stats(s1, s2, k, (double)rows * hw, &mean[c], &var[c], &dm, &dv);
        float a = ew_bn_scale(dv, eps, scale[c]), m = (float)dm;
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)r * C + c) * hw + i;
                y[o] = ew_bn_norm(x[o], m, a, shift[c]);
                if (relu) y[o] = ew_relu(y[o]);
            }
    }
}

static void bn_twin_bwd(int rows, int C, int hw, float eps, const float *x, const float *scale, const float *mean,
                        const float *var, const float *dy, const float *y, float *dx, float beta, float *dscale,
                        float *dshift)
{
    for (int c = 0; c < C; c++) {
        double sdy = 0, sdx = 0, sx = 0;
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)r * C + c) * hw + i;
                double xm = (double)x[o] - mean[c], d = y ? ew_relu_mask(dy[o], y[o]) : dy[o];
                sdy += d, sdx += d * xm, sx += xm;
            }
        float u, k, a;
        ew_bn_bwd_coeffs(sdy, sdx, sx, (double)rows * hw, var[c], eps, scale[c], &dscale[c], &dshift[c], &u, &k, &a);
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)r * C + c) * hw + i;
                dx[o] = ew_bn_dx(dx[o], y ? ew_relu_mask(dy[o], y[o]) : dy[o], x[o], mean[c], u, k, a, beta);
            }
    }
}

START_TEST(batch_norm)
{
    const int rows = 3, C = 7, h = 5, w = 3, hw = h * w;
    size_t n = (size_t)rows * C * hw;
    for (int relu = 0; relu < 2; relu++) { /* and fused with the relu after it, as the GPU runs it too */
        dt_bn_cfg cfg = {.c = C, .h = h, .w = w, .eps = 1e-5f, .layout = DT_LAYOUT_PLAIN, .relu = relu};
        void *plan = cpu->bn_plan(cpu, &cfg);
        ck_assert_ptr_nonnull(plan);
        /* x around 0 after normalising: the relu cuts about half */
        float *x = randv(n, 14, 2, 4), *sc = randv(C, 15, 0.5, 1.5), *sh = randv(C, 16, -1, 1),
              *dy = randv(n, 17, -1, 1);
        float m[7], v[7], mt[7], vt[7], *y = malloc(n * 4), *yt = malloc(n * 4);
        cpu->bn_fwd(cpu, plan, rows, 1, x, sc, sh, m, v, y);
        bn_twin_fwd(rows, C, hw, cfg.eps, relu, x, sc, sh, mt, vt, yt);
        CLOSE(mt, m, C, 1e-6, "batch mean");
        CLOSE(vt, v, C, 1e-6, "batch variance");
        CLOSE(yt, y, n, 1e-5, relu ? "batch norm and relu forward" : "batch norm forward");
        for (int beta = 0; beta < 2; beta++) {
            float *dx = randv(n, 18, -1, 1), *dt = dup(dx, n), ds[7], db[7], dst[7], dbt[7];
            cpu->bn_bwd(cpu, plan, rows, x, sc, m, v, dy, relu ? y : NULL, dx, (float)beta, ds, db);
            bn_twin_bwd(rows, C, hw, cfg.eps, x, sc, m, v, dy, relu ? y : NULL, dt, (float)beta, dst, dbt);
            CLOSE(dt, dx, n, 1e-5, "batch norm dx");
            CLOSE(dst, ds, C, 1e-5, "batch norm dscale");
            CLOSE(dbt, db, C, 1e-5, "batch norm dshift");
            free(dx), free(dt);
        }
        cpu->plan_free(cpu, plan);
        free(x), free(sc), free(sh), free(dy), free(y), free(yt);
    }
}
END_TEST

START_TEST(lrn)
{
    const int rows = 2, C = 7, h = 3, w = 5;
    size_t hw = (size_t)h * w, n = rows * C * hw;
    dt_lrn_cfg cfg = {.c = C, .h = h, .w = w, .size = 5, .alpha = 1e-2f, .beta = 0.75f, .k = 2.0f,
                      .layout = DT_LAYOUT_PLAIN};
    void *plan = cpu->lrn_plan(cpu, &cfg);
    ck_assert_ptr_nonnull(plan);
    float *x = randv(n, 19, -3, 3), *dy = randv(n, 20, -1, 1), *y = malloc(n * 4), *yt = malloc(n * 4);
    cpu->lrn_fwd(cpu, plan, rows, 1, x, y);
    for (int r = 0; r < rows; r++)
        for (size_t p = 0; p < hw; p++)
            for (int c = 0; c < C; c++) {
                size_t base = (size_t)r * C * hw + p;
                yt[base + c * hw] = ew_lrn_fwd(x + base, hw, C, c, cfg.size, cfg.alpha, cfg.beta, cfg.k);
            }
    CLOSE(yt, y, n, 1e-5, "LRN forward");
    for (int beta = 0; beta < 2; beta++) {
        float *dx = randv(n, 21, -1, 1), *dt = dup(dx, n);
        cpu->lrn_bwd(cpu, plan, rows, x, dy, dx, (float)beta);
        for (int r = 0; r < rows; r++)
            for (size_t p = 0; p < hw; p++)
                for (int c = 0; c < C; c++) {
                    size_t base = (size_t)r * C * hw + p, o = base + c * hw;
                    dt[o] =
                        ew_put(dt[o], ew_lrn_bwd(x + base, dy + base, hw, C, c, cfg.size, cfg.alpha, cfg.beta, cfg.k),
                               (float)beta);
                }
        CLOSE(dt, dx, n, 1e-5, "LRN backward");
        free(dx), free(dt);
    }
    cpu->plan_free(cpu, plan);
    free(x), free(dy), free(y), free(yt);
}
END_TEST

/* max and average, with Caffe's ceil mode (padding at the end only) and symmetric padding */
START_TEST(pooling)
{
    const struct {
        int max, k, s, pt, pb;
    } cases[] = {{1, 3, 2, 0, 1}, {0, 3, 2, 0, 1}, {1, 2, 2, 0, 0}, {0, 3, 1, 1, 1}, {1, 3, 1, 1, 1}, {0, 2, 2, 0, 0}};
    const int rows = 2, C = 3, h = 8, w = 8;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        dt_pool_cfg cfg = {.max = cases[t].max, .c = C, .h = h, .w = w, .kh = cases[t].k, .kw = cases[t].k,
                           .sh = cases[t].s, .sw = cases[t].s, .pt = cases[t].pt, .pb = cases[t].pb,
                           .pl = cases[t].pt, .pr = cases[t].pb, .layout = DT_LAYOUT_PLAIN};
        cfg.oh = (h + cfg.pt + cfg.pb - cfg.kh) / cfg.sh + 1;
        cfg.ow = (w + cfg.pl + cfg.pr - cfg.kw) / cfg.sw + 1;
        int oh = cfg.oh, ow = cfg.ow, planes = rows * C;
        size_t n = (size_t)planes * h * w, no = (size_t)planes * oh * ow;
        void *plan = cpu->pool_plan(cpu, &cfg);
        ck_assert_ptr_nonnull(plan);
        float *x = randv(n, 22 + t, -1, 1), *y = malloc(no * 4), *yt = malloc(no * 4), *dy = randv(no, 30 + t, -1, 1);
        int *arg = malloc(no * sizeof *arg);
        cpu->pool_fwd(cpu, plan, rows, 1, x, y);
        for (int p = 0; p < planes; p++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++)
                    yt[((size_t)p * oh + i) * ow + j] =
                        ew_pool_fwd(x + (size_t)p * h * w, h, w, i, j, cfg.kh, cfg.kw, cfg.sh, cfg.sw, cfg.pt, cfg.pl,
                                    cfg.max, &arg[((size_t)p * oh + i) * ow + j]);
        CLOSE(yt, y, no, 1e-6, cfg.max ? "max pooling" : "average pooling");
        for (int beta = 0; beta < 2; beta++) {
            float *dx = randv(n, 40, -1, 1), *dt = dup(dx, n);
            cpu->pool_bwd(cpu, plan, rows, dy, dx, (float)beta);
            for (int p = 0; p < planes; p++)
                for (int yy = 0; yy < h; yy++)
                    for (int xx = 0; xx < w; xx++) {
                        size_t o = ((size_t)p * h + yy) * w + xx;
                        float g = ew_pool_bwd(dy + (size_t)p * oh * ow, arg + (size_t)p * oh * ow, h, w, oh, ow, yy, xx,
                                              cfg.kh, cfg.kw, cfg.sh, cfg.sw, cfg.pt, cfg.pl, cfg.max);
                        dt[o] = ew_put(dt[o], g, (float)beta);
                    }
            CLOSE(dt, dx, n, 1e-5, cfg.max ? "max pooling backward" : "average pooling backward");
            free(dx), free(dt);
        }
        cpu->plan_free(cpu, plan);
        free(x), free(y), free(yt), free(dy), free(arg);
    }
    /* NaN in a max pool's window: first, it is the maximum; later, it never wins (3x3 windows take the
     * CPU's general loop, 2x2 with stride 2 its own) */
    for (int k = 2; k <= 3; k++) {
        dt_pool_cfg cfg = {.max = 1, .c = 1, .h = 3, .w = 6, .oh = 1, .ow = 2, .kh = k, .kw = k, .sh = k, .sw = k,
                           .layout = DT_LAYOUT_PLAIN};
        float x[18] = {NAN, 1, 2, 3, 4, -1, 0, 5, NAN, 1, 0, 0, 7, 7, 7, 7, 7, 7}, y[2], yt[2];
        int arg[2];
        void *plan = cpu->pool_plan(cpu, &cfg);
        ck_assert_ptr_nonnull(plan);
        cpu->pool_fwd(cpu, plan, 1, 1, x, y);
        for (int j = 0; j < 2; j++) yt[j] = ew_pool_fwd(x, 3, 6, 0, j, k, k, k, k, 0, 0, 1, &arg[j]);
        ck_assert_msg(isnan(y[0]) && isnan(yt[0]), "%dx%d: a window that starts with NaN: %g on the CPU, %g here", k, k,
                      y[0], yt[0]);
        ck_assert_msg(y[1] == yt[1] && y[1] == (k == 2 ? 3.0f : 7.0f), "%dx%d: a later NaN: %g on the CPU, %g here", k,
                      k, y[1], yt[1]);
        cpu->plan_free(cpu, plan);
    }
}
END_TEST

START_TEST(shortcut)
{
    dt_shortcut_cfg s = {.c = 3, .h = 7, .w = 7, .o = 7, .oh = 4, .ow = 4, .stride = 2, .front = 2,
                         .in_layout = DT_LAYOUT_PLAIN, .out_layout = DT_LAYOUT_PLAIN};
    const int rows = 2;
    size_t n = (size_t)rows * s.c * s.h * s.w, no = (size_t)rows * s.o * s.oh * s.ow;
    float *x = randv(n, 50, -1, 1), *y = malloc(no * 4), *yt = malloc(no * 4), *dy = randv(no, 51, -1, 1);
    cpu->shortcut_fwd(cpu, &s, rows, x, y);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < s.o; c++)
            for (int i = 0; i < s.oh; i++)
                for (int j = 0; j < s.ow; j++) {
                    long long at = ew_shortcut_src(r, c, i, j, s.c, s.h, s.w, s.front, s.stride);
                    yt[(((size_t)r * s.o + c) * s.oh + i) * s.ow + j] = at < 0 ? 0.0f : x[at];
                }
    SAME(yt, y, no, "shortcut");
    for (int beta = 0; beta < 2; beta++) {
        float *dx = randv(n, 52, -1, 1), *dt = dup(dx, n);
        cpu->shortcut_bwd(cpu, &s, rows, dy, dx, (float)beta);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < s.c; c++)
                for (int yy = 0; yy < s.h; yy++)
                    for (int xx = 0; xx < s.w; xx++) {
                        size_t o = (((size_t)r * s.c + c) * s.h + yy) * s.w + xx;
                        long long at = ew_shortcut_dst(r, c, yy, xx, s.o, s.oh, s.ow, s.front, s.stride);
                        dt[o] = ew_put(dt[o], at < 0 ? 0.0f : dy[at], (float)beta);
                    }
        SAME(dt, dx, n, "shortcut backward");
        free(dx), free(dt);
    }
    free(x), free(y), free(yt), free(dy);
}
END_TEST

/* ---- the gradient codecs: the kernels' bytes and floats against the CPU codecs' ------------------ */

/* what backend_cuda_codec.cu's kernels compute, value by value on the host */
static void twin_encode(int kind, size_t b, const float *x, size_t n, uint8_t *out)
{
    if (kind != DT_WIRE_Q8) {
        uint16_t *o = (uint16_t *)out;
        for (size_t i = 0; i < n; i++) o[i] = kind == DT_WIRE_T16 ? ew_t16(x[i]) : ew_fp16(x[i]);
        return;
    }
    for (size_t k = 0; k * b < n; k++) {
        size_t len = n - k * b < b ? n - k * b : b;
        uint32_t m = 0;
        for (size_t j = len; j-- > 0;) m = m > ew_q8_absbits(x[k * b + j]) ? m : ew_q8_absbits(x[k * b + j]);
        float sc = ew_q8_scale(m);
        uint8_t *blk = out + k * (4 + b);
        memcpy(blk, &sc, 4);
        for (size_t j = 0; j < len; j++) blk[4 + j] = (uint8_t)ew_q8(x[k * b + j], ew_q8_inv(sc));
    }
}

static void twin_decode(int kind, size_t b, const uint8_t *in, size_t n, float *x, int add)
{
    for (size_t i = 0; i < n; i++) {
        float v;
        if (kind == DT_WIRE_Q8) {
            size_t k = i / b;
            float sc;
            memcpy(&sc, in + k * (4 + b), 4);
            int8_t q = (int8_t)in[k * (4 + b) + 4 + i - k * b];
            x[i] = add ? ew_q8_dec_add(x[i], q, ew_q8_step(sc)) : ew_q8_dec(q, ew_q8_step(sc));
            continue;
        }
        uint16_t h = ((const uint16_t *)in)[i];
        v = kind == DT_WIRE_T16 ? ew_t16_dec(h) : ew_fp16_dec(h);
        x[i] = add ? EW_ADD(x[i], v) : v;
    }
}

START_TEST(codecs)
{
    const char *name;
    int kind, block;
    size_t n, at = 0;
    cpu_flush_denormals(); /* as dtrain runs (and the kernels, compiled -ftz=true) */
    for (int i = 0; codec_case(i, 0, &name, &kind, &block, &n); i++) {
        dt_codec codec;
        ck_assert_int_eq(codec_create(name, block, &codec), 0);
        size_t bytes = codec_bytes(&codec, n), b = block > 0 ? (size_t)block : n;
        float *x = codec_input(n, 60 + (uint64_t)i), *acc = randv(n, 70 + (uint64_t)i, -1, 1);
        uint8_t *ref = calloc(bytes, 1), *got = calloc(bytes, 1);
        codec_encode(&codec, x, n, ref);
        twin_encode(kind, b, x, n, got);
        for (at = 0; at < bytes && ref[at] == got[at]; at++) continue;
        ck_assert_msg(at == bytes, "%s (block %d), %zu values: byte %zu of %zu: CPU %02x, kernel %02x", name, block, n,
                      at, bytes, at < bytes ? ref[at] : 0, at < bytes ? got[at] : 0);
        for (int add = 0; add < 2; add++) {
            float *yr = dup(acc, n), *yt = dup(acc, n);
            if (add) codec_decode_add(&codec, ref, n, yr);
            else codec_decode(&codec, ref, n, yr);
            twin_decode(kind, b, ref, n, yt, add);
            ck_assert_msg(same_floats(yr, yt, n, &at), "%s (block %d) %s, %zu values: value %zu: CPU %a, kernel %a",
                          name, block, add ? "decode-add" : "decode", n, at, (double)yr[at], (double)yt[at]);
            free(yr), free(yt);
        }
        free(x), free(acc), free(ref), free(got);
    }
}
END_TEST

/* ---- the sparse modes' residuals, top-k and sparse updates against comm/memory.c and sparse.c ---- */

/* what backend_cuda_sparse.cu's top-k gives: by key (ew_topk_key) descending, equal keys in index order
 * (its stable radix sort), the first k, then sorted by index */
static int by_key_then_index(const void *a, const void *b)
{
    const dt_pair *x = a, *y = b;
    uint32_t kx = ew_topk_key(x->v), ky = ew_topk_key(y->v);
    if (kx != ky) return kx > ky ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int by_index(const void *a, const void *b)
{
    const dt_pair *x = a, *y = b;
    return x->i < y->i ? -1 : x->i > y->i;
}

START_TEST(sparse)
{
    const size_t n = 10007;
    const size_t ks[] = {1, 7, 100, 5000, n};
    cpu_flush_denormals();
    float *g = randv(n, 100, -1, 1), *w = randv(n, 101, -1, 1), *t = tied_floats(n, 102);
    /* residual_add, both ways, three rounds against memory_accumulate on the CPU */
    for (int mc = 0; mc < 2; mc++) {
        dt_memory *mem;
        dt_hostbuf gh, wh;
        ck_assert_int_eq(memory_create(&mem, n, mc, 0.9f, 1e-4f), 0);
        ck_assert_int_eq(hostbuf_view(&gh, cpu, g, n), 0);
        ck_assert_int_eq(hostbuf_view(&wh, cpu, w, n), 0);
        float *r = calloc(n, 4), *u = calloc(n, 4);
        for (int round = 0; round < 3; round++) {
            ck_assert_int_eq(memory_accumulate(mem, &gh, &wh), 0);
            for (size_t i = 0; i < n; i++) {
                if (!mc) {
                    r[i] = EW_ADD(r[i], g[i]);
                    continue;
                }
                u[i] = ew_velocity(u[i], g[i], w[i], 0.9f, 1e-4f);
                r[i] = EW_ADD(r[i], u[i]);
            }
        }
        SAME(r, mem->r, n, mc ? "residual (momentum correction)" : "residual");
        if (mc) SAME(u, mem->u, n, "velocity");
        /* the sparse update w -= lr v at the pairs, against memory_update's */
        dt_pair p[3] = {{2, 0.3f}, {17, -1.7f}, {9000, 2.5e-3f}};
        float *w2 = dup(w, n), *wt = dup(w, n);
        dt_hostbuf w2h;
        ck_assert_int_eq(hostbuf_view(&w2h, cpu, w2, n), 0);
        if (mc) {
            ck_assert_int_eq(memory_update(mem, NULL, &w2h, p, 3, NULL, 0.05f), 0);
            for (int j = 0; j < 3; j++) wt[p[j].i] = ew_pair(wt[p[j].i], p[j].v, DT_PAIRS_SUB, 0.05f);
            SAME(wt, w2, n, "sparse update");
        }
        ck_assert_int_eq(memory_used(mem, p, 3), 0);
        for (int j = 0; j < 3; j++) ck_assert(mem->r[p[j].i] == ew_pair(1.0f, 5.0f, DT_PAIRS_ZERO, 0.0f));
        hostbuf_free(&gh), hostbuf_free(&wh), hostbuf_free(&w2h);
        memory_destroy(mem);
        free(r), free(u), free(w2), free(wt);
    }
    /* top-k: the kernel's order (stable by key, then by index) gives topk_select's pairs, ties included */
    dt_topk *sel;
    ck_assert_int_eq(topk_create(&sel, n, n), 0);
    dt_pair *all = malloc(n * sizeof *all), *ref = malloc(n * sizeof *ref);
    for (int which = 0; which < 2; which++) {
        const float *x = which ? t : g;
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            size_t k = ks[ki];
            for (size_t i = 0; i < n; i++) all[i] = (dt_pair){(uint32_t)i, x[i]};
            qsort(all, n, sizeof *all, by_key_then_index); /* stable: the index decides ties */
            qsort(all, k, sizeof *all, by_index);
            ck_assert_int_eq(topk_select(sel, x, n, k, ref), 0);
            ck_assert_msg(memcmp(all, ref, k * sizeof *ref) == 0, "top-%zu of %s values differs from topk_select", k,
                          which ? "tied" : "random");
        }
    }
    topk_destroy(sel);
    free(all), free(ref), free(g), free(w), free(t);
}
END_TEST

/* Top-k over the device's transport: every rank's pairs added in rank order into a zero vector
 * (pairs_apply's DT_PAIRS_ADD, ew_pair) equal the host's fold (sparse_merge_topk in rank order)
 * scattered, bit for bit; and w + (-lr v) (memory_update_dense with correction: scale by -lr, then
 * add) equals ew_pair's w - lr v, where v is zero too */
START_TEST(pairs_fold)
{
    const size_t n = 2000, k = 500;
    const int p = 5;
    dt_pair *all = malloc(sizeof *all * k * p), *agg = malloc(sizeof *agg * k * p);
    dt_pair *out = malloc(sizeof *out * k * p), *tmp = malloc(sizeof *tmp * k * (p + 1));
    float *dense = calloc(n, 4), *ref = calloc(n, 4), *w = randv(n, 7, -1, 1), *v = randv(n * p, 8, -3, 3);
    uint32_t *idx = malloc(n * sizeof *idx);
    for (int r = 0; r < p; r++) { /* k distinct indices of n, sorted: heavy overlap between ranks */
        for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
        for (size_t i = 0; i < k; i++) {
            size_t j = i + (size_t)(rng_hash(r, i) % (n - i));
            uint32_t x = idx[i];
            idx[i] = idx[j], idx[j] = x;
        }
        for (size_t i = 0; i < k; i++) all[r * k + i] = (dt_pair){idx[i], v[r * n + i] * (i % 7 ? 1.0f : 1e-4f)};
        qsort(all + r * k, k, sizeof *all, by_index);
    }
    size_t n_agg = k;
    memcpy(agg, all, k * sizeof *agg);
    for (int r = 1; r < p; r++) {
        n_agg = sparse_merge_topk(agg, n_agg, all + (size_t)r * k, k, (size_t)-1, out, tmp);
        memcpy(agg, out, n_agg * sizeof *agg);
    }
    for (size_t j = 0; j < n_agg; j++) ref[agg[j].i] = agg[j].v;
    for (int r = 0; r < p; r++)
        for (size_t j = 0; j < k; j++) {
            const dt_pair *q = &all[r * k + j];
            dense[q->i] = ew_pair(dense[q->i], q->v, DT_PAIRS_ADD, 1.0f);
        }
    SAME(ref, dense, n, "the rank-order sum of the pairs");
    const float lr = 0.05f;
    float *wt = dup(w, n), *wd = dup(w, n);
    for (size_t j = 0; j < n_agg; j++) wt[agg[j].i] = ew_pair(wt[agg[j].i], agg[j].v, DT_PAIRS_SUB, lr);
    for (size_t i = 0; i < n; i++) wd[i] = EW_ADD(wd[i], EW_MUL(-lr, dense[i]));
    SAME(wt, wd, n, "the dense update w + (-lr v)");
    free(all), free(agg), free(out), free(tmp), free(dense), free(ref), free(w), free(v), free(idx), free(wt), free(wd);
}
END_TEST

/* TernGrad's kernels (backend_cuda_tern.cu) as the host runs their arithmetic: the sums lane by lane
 * and block by block, the ternary values from the coins, the codes, the decoding; against
 * codec_tern.c's tern_stats, tern_ternarize and tern_pack bit for bit */
static void twin_tern_stats(const float *x, size_t n, double *sum, double *sq, float *mx)
{
    *sum = 0.0, *sq = 0.0;
    uint32_t m = 0;
    for (size_t lo = 0; lo < n; lo += 4096) {
        size_t hi = lo + 4096 < n ? lo + 4096 : n;
        float ls[16], lq[16];
        for (int j = 0; j < 16; j++) ew_tern_lane(x, lo, hi, j, &ls[j], &lq[j]);
        *sum += ew_tern_lanes_sum(ls);
        *sq += ew_tern_lanes_sum(lq);
    }
    for (size_t i = 0; i < n; i++) m = ew_tern_absbits(x[i]) > m ? ew_tern_absbits(x[i]) : m;
    memcpy(mx, &m, sizeof m);
}

START_TEST(terngrad)
{
    static const size_t ns[] = {1, 3, 15, 16, 17, 4095, 4096, 4097, 100003};
    cpu_flush_denormals();
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
        size_t n = ns[c];
        float *x = randv(n, 300 + c, -1e-2f, 3e-2f); /* a mean, so an order of additions shows */
        if (n > 5) x[5] = 0.0f, x[n / 2] = -x[n / 2];
        double s1, q1, s2, q2;
        float m1, m2;
        tern_stats(x, n, &s1, &q1, &m1);
        twin_tern_stats(x, n, &s2, &q2, &m2);
        ck_assert_msg(memcmp(&s1, &s2, 8) == 0 && memcmp(&q1, &q2, 8) == 0 && memcmp(&m1, &m2, 4) == 0,
                      "n = %zu: sums %.17g, %.17g, max %.9g on the CPU; %.17g, %.17g, %.9g in the kernel's order", n,
                      s1, q1, m1, s2, q2, m2);
        float sc = tern_scaler_of(s1, q1, m1, n, 2.5f), shared = sc * 1.25f, scale = 65536.0f / shared;
        int8_t *t = malloc(n), *tt = malloc(n);
        uint8_t *codes = malloc((n + 3) / 4), *tcodes = calloc((n + 3) / 4, 1);
        uint64_t key = rng_hash(77, c);
        tern_ternarize(x, n, sc, shared, key, t);
        int nonzero = 0;
        for (size_t i = 0; i < n; i++) tt[i] = ew_tern(x[i], sc, scale, ew_tern_coin(key, i)), nonzero += t[i] != 0;
        size_t i = 0;
        while (i < n && t[i] == tt[i]) i++;
        ck_assert_msg(i == n, "n = %zu: value %zu is %d on the CPU, %d in the kernel", n, i, i < n ? t[i] : 0,
                      i < n ? tt[i] : 0);
        ck_assert_msg(n < 100 || nonzero > 0, "n = %zu: all zero", n);
        if (n > 20) { /* a NaN among them: passed over by the largest |x| (a diverged run stops on its loss) */
            float keep = x[n - 3];
            x[n - 3] = NAN;
            tern_stats(x, n, &s1, &q1, &m1);
            twin_tern_stats(x, n, &s2, &q2, &m2);
            x[n - 3] = keep;
            ck_assert_msg(memcmp(&m1, &m2, 4) == 0 && isfinite(m1), "n = %zu, a NaN: max %.9g on the CPU, %.9g in the kernel",
                          n, m1, m2);
        }
        tern_pack(t, n, codes);
        for (i = 0; i < n; i++) tcodes[i / 4] = (uint8_t)(tcodes[i / 4] | ew_tern_code(tt[i]) << (2 * (i % 4)));
        ck_assert_msg(memcmp(codes, tcodes, (n + 3) / 4) == 0, "n = %zu: the codes differ", n);
        for (i = 0; i < n; i++) {
            float want = shared * (float)t[i], got = EW_MUL(shared, (float)t[i]);
            ck_assert(memcmp(&want, &got, 4) == 0);
        }
        /* the sum of 3 ranks' codes (--transport nccl's allgather): as tern_unpack_add adds them */
        size_t cb = (n + 3) / 4;
        uint8_t *all = malloc(3 * cb);
        int8_t *acc = calloc(n, 1);
        for (int r = 0; r < 3; r++) {
            for (i = 0; i < n; i++) tt[i] = (int8_t)((int)(rng_hash(500 + (uint64_t)r, i) % 3) - 1);
            tern_pack(tt, n, all + (size_t)r * cb);
            tern_unpack_add(all + (size_t)r * cb, n, acc);
        }
        for (i = 0; i < n; i++)
            ck_assert_msg(ew_tern_sum(all, cb, 3, i) == acc[i], "n = %zu: sum %zu is %d in the kernel, %d on the CPU",
                          n, i, ew_tern_sum(all, cb, 3, i), acc[i]);
        free(all), free(acc);
        free(x), free(t), free(tt), free(codes), free(tcodes);
    }
}
END_TEST

/* --topk-select sampled: the GPU's sample takes sparse.c's values (the same indices), and its flags the
 * same values as reaching a threshold (zeros, ties and negative values included) */
START_TEST(topk_sample_twins)
{
    static const size_t ns[] = {65537, 1000003, 11689512, 4294967291u};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        for (size_t s = 0; s < 200000; s += c == 0 ? 1 : 13)
            ck_assert_msg(ew_topk_sample_index(s, ns[c]) == topk_sample_index(s, ns[c]), "n %zu: sample %zu", ns[c], s);
    const float thr = 0.5f, xs[] = {0.5f, -0.5f, 0.49999997f, -0.50000006f, 0.0f, -0.0f, INFINITY, NAN};
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
        ck_assert_int_eq(ew_topk_above(xs[i], thr), topk_count_above(&xs[i], 1, thr) == 1);
}
END_TEST

/* csc's kernels (backend_cuda_chunks.cu) as the host runs their arithmetic: the masked correction and
 * packing value by value, the fold lane by lane with the lanes' sums added as the warp's shuffles add
 * them; against chunks.c chunk by chunk, bit for bit (arenas and chunks of odd sizes, a short last
 * chunk, with and without weight decay, loss scale and its limit, momentum correction) */
START_TEST(csc_chunks)
{
    static const size_t shapes[][2] = {{1, 64}, {31, 64}, {100, 33}, {1000, 64}, {4099, 1000}, {70000, 32768}};
    cpu_flush_denormals();
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
        for (int variant = 0; variant < 4; variant++) {
            size_t n = shapes[sh][0], chunk = shapes[sh][1], nc = (n + chunk - 1) / chunk;
            const int mc = variant & 1, p = 3;
            const float wd = mc ? 1e-4f : 0.0f, scale = variant & 2 ? 1024.0f : 1.0f;
            const float limit = variant & 2 ? 300.0f : INFINITY, m = 0.9f, lr = 0.05f;
            uint64_t seed = 900 + sh * 8 + (uint64_t)variant;
            float *g = randv(n, seed, -0.3f, 0.31f), *h = randv(n, seed + 100, -0.2f, 0.2f);
            float *w = randv(n, seed + 200, -1.0f, 1.0f), *hu = randv(n, seed + 300, -0.1f, 0.1f);
            float *sum = randv(n, seed + 400, -0.5f, 0.5f); /* the allreduced packed values */
            int32_t *slot = malloc(nc * sizeof *slot), j = 0;
            for (size_t c = 0; c < nc; c++) slot[c] = rng_hash(seed, c) % 2 || nc == 1 ? j++ : -1;
            float *g2 = dup(g, n), *h2 = dup(h, n), *w2 = dup(w, n), *hu2 = dup(hu, n);
            float *pk = calloc(n, sizeof *pk), *pk2 = calloc(n, sizeof *pk2);
            float *nr = malloc(nc * 4), *nr2 = malloc(nc * 4);
            /* before the allreduce */
            for (size_t c = 0; c < nc; c++) {
                size_t a = c * chunk, len = DT_MIN(chunk, n - a);
                chunks_correct(g + a, h + a, w + a, wd, len);
                if (slot[c] >= 0) chunks_pack(pk + (size_t)slot[c] * chunk, g + a, len, scale, limit);
            }
            int nan = 0;
            for (size_t i = 0; i < n; i++) {
                size_t c = i / chunk;
                g2[i] = ew_csc_correct(g2[i], h2[i], w2[i], wd);
                if (slot[c] >= 0) pk2[(size_t)slot[c] * chunk + i - c * chunk] = ew_csc_pack(g2[i], scale, limit);
            }
            for (size_t i = 0; i < n; i++) nan += isnan(pk[i]);
            snprintf(msg, sizeof msg, "n %zu, chunks of %zu, variant %d", n, chunk, variant);
            ck_assert_msg(!memcmp(g, g2, n * 4) && !memcmp(pk, pk2, n * 4), "%s: the correction or packing differs",
                          msg);
            ck_assert_msg(!(variant & 2) || n < 1000 || nan > 0, "%s: no value above the limit", msg);
            /* after it */
            for (size_t c = 0; c < nc; c++) {
                size_t a = c * chunk, len = DT_MIN(chunk, n - a);
                const float *s = slot[c] >= 0 ? sum + (size_t)slot[c] * chunk : NULL;
                nr[c] = chunks_fold(g + a, h + a, mc ? hu + a : NULL, mc ? w + a : NULL, s, len, p, m, lr);
                float lanes[32];
                for (int l = 0; l < 32; l++)
                    lanes[l] = ew_csc_lane(g2 + a, h2 + a, mc ? hu2 + a : NULL, mc ? w2 + a : NULL, s, len, l, m, lr);
                nr2[c] = ew_csc_norm(ew_csc_lanes_sum(lanes), s != NULL, p);
            }
            ck_assert_msg(!memcmp(nr, nr2, nc * 4), "%s: the norms differ (chunk 0: %.9g, %.9g)", msg, nr[0], nr2[0]);
            ck_assert_msg(!memcmp(g, g2, n * 4) && !memcmp(h, h2, n * 4), "%s: the fold's g or h differs", msg);
            ck_assert_msg(!memcmp(w, w2, n * 4) && !memcmp(hu, hu2, n * 4), "%s: the fold's w or hu differs", msg);
            free(g), free(h), free(w), free(hu), free(sum), free(slot), free(g2), free(h2), free(w2), free(hu2);
            free(pk), free(pk2), free(nr), free(nr2);
        }
}
END_TEST

/* --precision bf16: the GPU's rounding of GEMM and convolution operands (ew_bf16) is the CPU's
 * (cpu_round_bf16) for every kind of float, and it rounds to nearest even */
START_TEST(bf16_rounding)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x3f800000u, 0x3f808000u /* tie, to even: down */, 0x3f818000u /* tie: up */,
        0x3f808001u, 0x3f807fffu, 0x7f7fffffu /* the largest float: to infinity */, 0x7f800000u, 0xff800000u,
        0x7f800001u /* signalling NaN: quietened */, 0xffc00000u, 0x7fffffffu, 0x00008000u /* subnormal tie */,
        0x00018000u, 0x00000001u, 0x807fffffu};
    static const uint16_t want[] = {0x0000u, 0x8000u, 0x3f80u, 0x3f80u, 0x3f82u, 0x3f81u, 0x3f80u, 0x7f80u, 0x7f80u,
                                    0xff80u, 0x7fc0u, 0xffc0u, 0x7fffu, 0x0000u, 0x0002u, 0x0000u, 0x8080u};
    size_t ns = sizeof special / sizeof *special, n = ns + 100000;
    float *x = malloc(n * sizeof *x);
    uint16_t *cpu16 = malloc(n * sizeof *cpu16);
    for (size_t i = 0; i < ns; i++) memcpy(&x[i], &special[i], 4);
    for (size_t i = ns; i < n; i++) { /* every exponent, and mantissas whose low half is often a tie */
        uint32_t u = (uint32_t)rng_hash(11, i);
        if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;
        memcpy(&x[i], &u, 4);
    }
    cpu_round_bf16(1, cpu16, x, 1, n, n);
    for (size_t i = 0; i < n; i++) {
        uint16_t g = ew_bf16(x[i]);
        ck_assert_msg(g == cpu16[i], "value %zu (bits %08x): %04x on the GPU, %04x on the CPU", i, ew_bits(x[i]), g,
                      cpu16[i]);
        if (i < ns) ck_assert_msg(g == want[i], "bits %08x: %04x, expected %04x", special[i], g, want[i]);
    }
    /* rows apart (a GEMM's operand with its leading dimension), as the CPU reads them */
    cpu_round_bf16(1, cpu16, x, 7, 9, 13);
    for (size_t r = 0; r < 7; r++)
        for (size_t c = 0; c < 9; c++) ck_assert(cpu16[r * 9 + c] == ew_bf16(x[r * 13 + c]));
    /* widening is exact; beta 0 overwrites, 1 adds */
    float y = ew_bf16_put(5.0f, 0x3f82u, 0.0f), y1 = ew_bf16_put(5.0f, 0x3f82u, 1.0f);
    ck_assert(y == 1.015625f && y1 == 6.015625f);
    free(x), free(cpu16);
}
END_TEST

/* IEEE half by this CPU's F16C conversion (round to nearest even, beyond 65504 infinite): the
 * reference for ew_half, which the GPU's fp16 GEMMs and convolutions round their operands with */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t f16c_half(float f) { return (uint16_t)_cvtss_sh(f, 0); }
static int have_f16c(void) { return __builtin_cpu_supports("f16c"); }
#else
static uint16_t f16c_half(float f) { return (uint16_t)(f != f); }
static int have_f16c(void) { return 0; }
#endif

/* --precision fp16: ew_half against the CPU's conversion instruction for every kind of float (NaNs
 * stay NaNs: their payloads are not kept), the limits of its range, and widening */
START_TEST(half_rounding)
{
    static const uint32_t special[] = {0x477fe000u /* 65504 */, 0x477fefffu /* just below 65520 */,
                                       0x477ff000u /* 65520: a tie, to infinity */, 0x4e6e6b28u /* 1e9 */,
                                       0xff800000u, 0x33000000u /* 2^-25: a tie, to 0 */, 0x33c00000u /* 3 2^-25 */,
                                       0x3f801000u /* 1 + 2^-11: a tie, to 1 */, 0x7fc00000u};
    static const uint16_t want[] = {0x7bffu, 0x7bffu, 0x7c00u, 0x7c00u, 0xfc00u, 0x0000u, 0x0002u, 0x3c00u, 0x7e00u};
    size_t ns = sizeof special / sizeof *special;
    for (size_t i = 0; i < ns; i++) {
        float f;
        memcpy(&f, &special[i], 4);
        ck_assert_msg(ew_half(f) == want[i], "bits %08x: %04x, expected %04x", special[i], ew_half(f), want[i]);
    }
    float y = ew_lowp_put(1, 5.0f, 0x3c00u, 0.0f), y1 = ew_lowp_put(1, 5.0f, 0x3c00u, 1.0f), inf = ew_fp16_dec(0x7c00u);
    ck_assert(y == 1.0f && y1 == 6.0f && isinf(inf) && ew_lowp(0, 1.0f) == 0x3f80u && ew_lowp(1, 1.0f) == 0x3c00u);
    if (!have_f16c()) return; /* no reference instruction on this CPU */
    for (size_t i = 0; i < 200000; i++) { /* every exponent; often near half's range and its subnormals */
        uint32_t u = (uint32_t)rng_hash(12, i);
        if (i % 3 == 0) u = (u & 0x807fffffu) | ((uint32_t)(101 + (u >> 23) % 42) << 23);
        float f;
        memcpy(&f, &u, 4);
        uint16_t g = ew_half(f), h = f16c_half(f);
        if (isnan(f)) ck_assert_msg((g & 0x7c00u) == 0x7c00u && (g & 0x3ffu), "NaN %08x: %04x", u, g);
        else ck_assert_msg(g == h, "bits %08x: %04x from ew_half, %04x from the CPU", u, g, h);
    }
}
END_TEST

/* loss scaling: the GPU's unscaling (ew_unscale) gives the CPU backend's values and flag */
START_TEST(unscale)
{
    size_t n = 70001;
    float *x = randv(n, 13, -3e4f, 3e4f), *y = dup(x, n);
    int32_t flag = 0, gflag = 0;
    ck_assert_int_eq(cpu->grad_unscale(cpu, x, n, 1.0f / 65536, &flag), 0);
    for (size_t i = 0; i < n; i++) gflag |= ew_unscale(&y[i], 1.0f / 65536);
    ck_assert(flag == 0 && gflag == 0 && memcmp(x, y, n * sizeof *x) == 0);
    /* an infinity, a NaN, and a finite value the scale makes overflow: each sets the flag */
    const float bad[] = {INFINITY, NAN, 3e38f};
    for (int b = 0; b < 3; b++) {
        memcpy(y, x, n * sizeof *x);
        y[(size_t)b * 30000 + 5] = x[(size_t)b * 30000 + 5] = bad[b];
        flag = gflag = 0;
        ck_assert_int_eq(cpu->grad_unscale(cpu, x, n, 2.0f, &flag), 0);
        for (size_t i = 0; i < n; i++) gflag |= ew_unscale(&y[i], 2.0f);
        ck_assert_msg(flag == 1 && gflag == 1, "bad value %d: flags %d (CPU) and %d", b, flag, gflag);
        for (size_t i = 0; i < n; i++) ck_assert(memcmp(&x[i], &y[i], 4) == 0 || (isnan(x[i]) && isnan(y[i])));
        x[(size_t)b * 30000 + 5] = y[(size_t)b * 30000 + 5] = 1.0f;
        for (size_t i = 0; i < n; i++) x[i] *= 0.5f; /* back to the values before */
    }
    /* scaling by 0 zeroes even what a skipped step left (a rank without samples zeroes its gradient so) */
    x[7] = NAN, x[40000] = INFINITY;
    ck_assert_int_eq(cpu->scale(cpu, x, 0.0f, n), 0);
    for (size_t i = 0; i < n; i++) ck_assert_msg(x[i] == 0.0f && !signbit(x[i]), "x[%zu] = %g after scale 0", i, x[i]);
    free(x), free(y);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_twins");
    TCase *tc = tcase_create("element functions against the CPU backend");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, relu_dropout);
    tcase_add_test(tc, optimizer_and_vectors);
    tcase_add_test(tc, softmax_xent);
    tcase_add_test(tc, batch_norm);
    tcase_add_test(tc, lrn);
    tcase_add_test(tc, pooling);
    tcase_add_test(tc, shortcut);
    tcase_add_test(tc, codecs);
    tcase_add_test(tc, sparse);
    tcase_add_test(tc, pairs_fold);
    tcase_add_test(tc, terngrad);
    tcase_add_test(tc, csc_chunks);
    tcase_add_test(tc, topk_sample_twins);
    tcase_add_test(tc, bf16_rounding);
    tcase_add_test(tc, half_rounding);
    tcase_add_test(tc, unscale);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
