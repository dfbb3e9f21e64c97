/* CNN layers: (1) every gradient formula of the double reference (ref_cnn.c) checked by central
 * finite differences; (2) the backend's fast fp32 kernels (oneDNN on the CPU) equal the reference
 * on random shapes, in plain and both blocked layouts, within TOL_FAST; (3) a residual net built by
 * the parser (conv, batchnorm, relu, add, shortcut, pooling, flatten, dense) equals the same net
 * composed from the reference, forward and backward. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/backend_cpu.h"
#include "engine/net.h"
#include "ref.h"
#include "rng.h"
#include "testutil.h"
#include "util.h"

#define FD_EPS 1e-6
#define FD_ATOL 1e-7
#define FD_RTOL 1e-6
/* fp32 kernels against the double reference: inputs U(-1,1), sums of at most a few hundred
 * products; every case here passes at 5e-6 (and fails at 2e-6): a 4x margin. */
#define TOL_FAST_ATOL 2e-5
#define TOL_FAST_RTOL 1e-4

static char msg[1024];

/* ---- (1) finite differences ------------------------------------------------------------------ */

typedef double (*loss_fn)(void *ctx);

/* numeric gradient of loss with respect to p[0..n) */
static void numgrad(loss_fn f, void *ctx, double *p, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_EPS;
        double lp = f(ctx);
        p[i] = keep - FD_EPS;
        double lm = f(ctx);
        p[i] = keep;
        g[i] = (lp - lm) / (2 * FD_EPS);
    }
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static double *rnd(size_t n, uint64_t seed)
{
    double *x = malloc(sizeof *x * (n ? n : 1));
    fill_uniform_d(x, n, -1, 1, seed);
    return x;
}

#define CHECK_FD(analytic, param, n, f, ctx, what)                                                                     \
    do {                                                                                                               \
        double *num_ = malloc(sizeof(double) * (n));                                                                   \
        numgrad(f, ctx, param, n, num_);                                                                               \
        ck_assert_msg(close_f64(analytic, num_, n, FD_ATOL, FD_RTOL, what, msg, sizeof msg), "%s", msg);               \
        free(num_);                                                                                                    \
    } while (0)

typedef struct {
    ref_conv g;
    double *x, *w, *b, *r, *y;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    ref_conv_fwd(&c->g, c->x, c->w, c->b, c->y);
    return dot(c->r, c->y, (size_t)c->g.rows * c->g.o * c->g.oh * c->g.ow);
}

/* stride 2 x 1, asymmetric padding (top 1, bottom 0, left 0, right 1), 2 groups, a 3 x 2 kernel */
START_TEST(fd_conv)
{
    conv_ctx c = {.g = {.rows = 2, .c = 4, .h = 7, .w = 6, .o = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 1, .pt = 1, .pl = 0,
                        .groups = 2}};
    c.g.oh = (7 + 1 + 0 - 3) / 2 + 1, c.g.ow = (6 + 0 + 1 - 2) / 1 + 1;
    size_t nx = 2 * 4 * 7 * 6, nw = 6 * 2 * 3 * 2, ny = (size_t)2 * 6 * c.g.oh * c.g.ow;
    c.x = rnd(nx, 1), c.w = rnd(nw, 2), c.b = rnd(6, 3), c.r = rnd(ny, 4), c.y = malloc(sizeof(double) * ny);
    double *dx = malloc(sizeof(double) * nx), *dw = malloc(sizeof(double) * nw), db[6];
    ref_conv_bwd(&c.g, c.x, c.w, c.r, dx, dw, db);
    CHECK_FD(dx, c.x, nx, conv_loss, &c, "conv dx");
    CHECK_FD(dw, c.w, nw, conv_loss, &c, "conv dW");
    CHECK_FD(db, c.b, 6, conv_loss, &c, "conv db");
    free(c.x), free(c.w), free(c.b), free(c.r), free(c.y), free(dx), free(dw);
}
END_TEST

typedef struct {
    ref_pool g;
    double *x, *r, *y;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *c = p;
    ref_pool_fwd(&c->g, c->x, c->y);
    return dot(c->r, c->y, (size_t)c->g.rows * c->g.c * c->g.oh * c->g.ow);
}

/* max with padding and ceil mode (a window hanging over the end), average in ceil mode and with
 * padding, and a global average */
START_TEST(fd_pool)
{
    ref_pool cases[] = {
        // clang-format off
        {.max = 1, .rows = 2, .c = 3, .h = 6, .w = 7, .oh = 4, .ow = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
         .pt = 1, .pl = 1},
        {.max = 0, .rows = 2, .c = 3, .h = 6, .w = 7, .oh = 3, .ow = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2},
        {.max = 0, .rows = 1, .c = 2, .h = 5, .w = 5, .oh = 3, .ow = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
         .pt = 1, .pl = 1},
        {.max = 0, .rows = 2, .c = 3, .h = 4, .w = 4, .oh = 1, .ow = 1, .kh = 4, .kw = 4, .sh = 1, .sw = 1},
        // clang-format on
    };
    for (size_t k = 0; k < DT_ARRAY_LEN(cases); k++) {
        pool_ctx c = {.g = cases[k]};
        size_t nx = (size_t)c.g.rows * c.g.c * c.g.h * c.g.w, ny = (size_t)c.g.rows * c.g.c * c.g.oh * c.g.ow;
        c.x = rnd(nx, 10 + k), c.r = rnd(ny, 20 + k), c.y = malloc(sizeof(double) * ny);
        double *dx = malloc(sizeof(double) * nx);
        ref_pool_bwd(&c.g, c.x, c.r, dx);
        CHECK_FD(dx, c.x, nx, pool_loss, &c, c.g.max ? "maxpool dx" : "avgpool dx");
        free(c.x), free(c.r), free(c.y), free(dx);
    }
}
END_TEST

typedef struct {
    int rows, c, hw;
    double *x, *gamma, *beta, *r, *y, *mean, *var;
} bn_ctx;

static double bn_loss(void *p)
{
    bn_ctx *c = p;
    ref_bn_fwd(c->x, c->gamma, c->beta, c->y, c->mean, c->var, c->rows, c->c, c->hw, 1e-5);
    return dot(c->r, c->y, (size_t)c->rows * c->c * c->hw);
}

START_TEST(fd_batchnorm)
{
    bn_ctx c = {.rows = 3, .c = 4, .hw = 5};
    size_t n = 3 * 4 * 5;
    c.x = rnd(n, 30), c.gamma = rnd(4, 31), c.beta = rnd(4, 32), c.r = rnd(n, 33), c.y = malloc(sizeof(double) * n);
    c.mean = malloc(sizeof(double) * 4), c.var = malloc(sizeof(double) * 4);
    double *dx = malloc(sizeof(double) * n), dg[4], dbeta[4];
    ref_bn_bwd(c.x, c.gamma, c.r, dx, dg, dbeta, c.rows, c.c, c.hw, 1e-5);
    CHECK_FD(dx, c.x, n, bn_loss, &c, "batchnorm dx");
    CHECK_FD(dg, c.gamma, 4, bn_loss, &c, "batchnorm dgamma");
    CHECK_FD(dbeta, c.beta, 4, bn_loss, &c, "batchnorm dbeta");
    free(c.x), free(c.gamma), free(c.beta), free(c.r), free(c.y), free(c.mean), free(c.var), free(dx);
}
END_TEST

typedef struct {
    int rows, c, hw, size;
    double alpha, beta, k;
    double *x, *r, *y;
} lrn_ctx;

static double lrn_loss(void *p)
{
    lrn_ctx *c = p;
    ref_lrn_fwd(c->x, c->y, c->rows, c->c, c->hw, c->size, c->alpha, c->beta, c->k);
    return dot(c->r, c->y, (size_t)c->rows * c->c * c->hw);
}

/* a large alpha so that the normalisation term matters at this scale */
START_TEST(fd_lrn)
{
    lrn_ctx c = {.rows = 2, .c = 7, .hw = 3, .size = 5, .alpha = 0.5, .beta = 0.75, .k = 1.0};
    size_t n = 2 * 7 * 3;
    c.x = rnd(n, 40), c.r = rnd(n, 41), c.y = malloc(sizeof(double) * n);
    double *dx = malloc(sizeof(double) * n);
    ref_lrn_bwd(c.x, c.r, dx, c.rows, c.c, c.hw, c.size, c.alpha, c.beta, c.k);
    CHECK_FD(dx, c.x, n, lrn_loss, &c, "lrn dx");
    free(c.x), free(c.r), free(c.y), free(dx);
}
END_TEST

typedef struct {
    double *a, *b, *r;
    size_t n;
} add_ctx;

static double add_loss(void *p)
{
    add_ctx *c = p;
    double s = 0.0;
    for (size_t i = 0; i < c->n; i++) s += c->r[i] * (c->a[i] + c->b[i]);
    return s;
}

/* add's backward (in the engine: every input gets dy) against the numeric gradient */
START_TEST(fd_add)
{
    add_ctx c = {.n = 12};
    c.a = rnd(12, 50), c.b = rnd(12, 51), c.r = rnd(12, 52);
    CHECK_FD(c.r, c.a, 12, add_loss, &c, "add d/da");
    CHECK_FD(c.r, c.b, 12, add_loss, &c, "add d/db");
    free(c.a), free(c.b), free(c.r);
}
END_TEST

/* ---- (2) fast kernels against the reference ----------------------------------------------------- */

static dt_backend *be;

static void be_setup(void) { ck_assert_int_eq(backend_cpu_create(&be, 2), 0); }
/* the CPU backend keeping activations in nChw16c, its choice on CPUs with AVX-512, on every CPU */
static void be_setup_blocked(void)
{
    dt_backend_opts o = {.n_threads = 2, .device = -1, .channels_last = -1};
    ck_assert_int_eq(backend_cpu_create_with(&be, &o), 0);
    ck_assert_int_eq(be->layout_for(be, 32, 4, 4), DT_LAYOUT_BLOCK16);
}
/* the CPU backend keeping activations channels last, as it does under bf16 on a CPU with AMX */
static void be_setup_nhwc(void)
{
    dt_backend_opts o = {.n_threads = 2, .device = -1, .channels_last = 1};
    ck_assert_int_eq(backend_cpu_create_with(&be, &o), 0);
    ck_assert_int_eq(be->layout_for(be, 32, 4, 4), DT_LAYOUT_NHWC);
}
static void be_teardown(void) { backend_destroy(be); }

/* a device activation in layout l from a plain double array */
static float *dev_act(const double *x, dt_layout l, int rows, int c, int h, int w)
{
    size_t n = (size_t)rows * c * h * w;
    float *plain = malloc(sizeof(float) * n), *d = be->alloc(be, sizeof(float) * be->act_size(be, l, rows, c, h, w));
    for (size_t i = 0; i < n; i++) plain[i] = (float)x[i];
    be->from_plain(be, l, plain, d, rows, c, h, w, 0.0f);
    free(plain);
    return d;
}

static float *dev_vec(const double *x, size_t n)
{
    float *d = be->alloc(be, sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) d[i] = (float)x[i];
    return d;
}

/* compares a device activation in layout l with a plain double reference */
static int same_act(const float *d, dt_layout l, const double *ref, int rows, int c, int h, int w, const char *what)
{
    size_t n = (size_t)rows * c * h * w;
    float *plain = malloc(sizeof(float) * n);
    be->to_plain(be, l, d, plain, rows, c, h, w);
    int ok = close_f32_f64(plain, ref, n, TOL_FAST_ATOL, TOL_FAST_RTOL, what, msg, sizeof msg);
    free(plain);
    return ok;
}

static int pick(dt_rng *r, int lo, int hi) { return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1)); }

static const char *lname(dt_layout l)
{
    return l == DT_LAYOUT_NHWC ? "NHWC" : l == DT_LAYOUT_BLOCK16 ? "nChw16c" : "plain";
}

/* layouts to try for c channels: plain always; with 16k channels both blocked layouts of the CPU
 * backend (nChw16c, its choice in fp32, and NHWC, its choice under bf16 with AMX) */
static int layouts(int c, dt_layout *out)
{
    out[0] = DT_LAYOUT_PLAIN;
    if (c % 16) return 1;
    out[1] = DT_LAYOUT_BLOCK16, out[2] = DT_LAYOUT_NHWC;
    return 3;
}

/* random convolutions: channels 3/8/16/32, groups, strides, asymmetric padding, 1-5 kernels;
 * dx written (beta 0) and accumulated (beta 1) */
START_TEST(fast_conv_matches_reference)
{
    dt_rng r;
    rng_seed(&r, 7, 1);
    const int chans[] = {3, 8, 16, 32};
    for (int t = 0; t < 24; t++) {
        ref_conv g;
        g.rows = pick(&r, 1, 3);
        g.groups = t % 4 == 3 ? 2 : 1;
        g.c = chans[pick(&r, g.groups == 2 ? 1 : 0, 3)];
        g.o = chans[pick(&r, 1, 3)];
        g.h = pick(&r, 5, 11), g.w = pick(&r, 5, 11);
        g.kh = pick(&r, 1, 5), g.kw = t % 5 == 0 ? pick(&r, 1, 5) : g.kh;
        g.sh = pick(&r, 1, 3), g.sw = t % 6 == 0 ? pick(&r, 1, 3) : g.sh;
        g.pt = pick(&r, 0, g.kh - 1), g.pl = pick(&r, 0, g.kw - 1);
        int pb = t % 3 == 0 ? pick(&r, 0, g.kh - 1) : g.pt, pr = t % 3 == 0 ? pick(&r, 0, g.kw - 1) : g.pl;
        g.oh = (g.h + g.pt + pb - g.kh) / g.sh + 1, g.ow = (g.w + g.pl + pr - g.kw) / g.sw + 1;
        int bias = t % 2;
        size_t nx = (size_t)g.rows * g.c * g.h * g.w, nw = (size_t)g.o * (g.c / g.groups) * g.kh * g.kw,
               ny = (size_t)g.rows * g.o * g.oh * g.ow;
        double *x = rnd(nx, 100 + t), *w = rnd(nw, 200 + t), *b = rnd(g.o, 300 + t), *dy = rnd(ny, 400 + t);
        double *y = malloc(sizeof(double) * ny), *dx = malloc(sizeof(double) * nx), *dx2 = malloc(sizeof(double) * nx),
               *dw = malloc(sizeof(double) * nw), *db = malloc(sizeof(double) * g.o), *x0 = rnd(nx, 500 + t);
        ref_conv_fwd(&g, x, w, bias ? b : NULL, y);
        ref_conv_bwd(&g, x, w, dy, dx, dw, db);
        for (size_t i = 0; i < nx; i++) dx2[i] = x0[i] + dx[i];
        dt_layout li[3], lo[3];
        int nli = layouts(g.c, li), nlo = layouts(g.o, lo);
        for (int a = 0; a < nli; a++)
            for (int c = 0; c < nlo; c++) {
                dt_conv_cfg cfg = {g.c,  g.h, g.w,  g.o, g.oh,     g.ow, g.kh,  g.kw,  g.sh, g.sw,
                                   g.pt, pb,  g.pl, pr,  g.groups, bias, li[a], lo[c], 0,    0};
                void *plan = be->conv_plan(be, &cfg);
                ck_assert_msg(plan != NULL, "%s", dt_errmsg());
                float *fx = dev_act(x, li[a], g.rows, g.c, g.h, g.w), *fw = dev_vec(w, nw), *fb = dev_vec(b, g.o);
                float *fdy = dev_act(dy, lo[c], g.rows, g.o, g.oh, g.ow),
                      *fdx = dev_act(x0, li[a], g.rows, g.c, g.h, g.w);
                float *fy = be->alloc(be, sizeof(float) * be->act_size(be, lo[c], g.rows, g.o, g.oh, g.ow));
                float *fdw = be->alloc(be, sizeof(float) * nw), *fdb = be->alloc(be, sizeof(float) * g.o);
                char what[160];
                snprintf(what, sizeof what,
                         "case %d (%dx%dx%d -> %dx%dx%d, k %dx%d, s %dx%d, pad %d,%d,%d,%d, g %d, %s->%s)", t, g.c, g.h,
                         g.w, g.o, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pt, pb, g.pl, pr, g.groups, lname(li[a]),
                         lname(lo[c]));
                ck_assert_msg(be->conv_fwd(be, plan, g.rows, fx, fw, bias ? fb : NULL, fy) == 0, "%s", dt_errmsg());
                ck_assert_msg(same_act(fy, lo[c], y, g.rows, g.o, g.oh, g.ow, "y"), "%s: %s", what, msg);
                /* accumulate into x0, then overwrite */
                ck_assert_int_eq(be->conv_bwd(be, plan, g.rows, fx, fw, fdy, fdx, 1.0f, fdw, bias ? fdb : NULL), 0);
                ck_assert_msg(same_act(fdx, li[a], dx2, g.rows, g.c, g.h, g.w, "dx (accumulated)"), "%s: %s", what,
                              msg);
                ck_assert_msg(close_f32_f64(fdw, dw, nw, TOL_FAST_ATOL, TOL_FAST_RTOL, "dW", msg, sizeof msg), "%s: %s",
                              what, msg);
                if (bias)
                    ck_assert_msg(close_f32_f64(fdb, db, g.o, TOL_FAST_ATOL, TOL_FAST_RTOL, "db", msg, sizeof msg),
                                  "%s: %s", what, msg);
                ck_assert_int_eq(be->conv_bwd(be, plan, g.rows, fx, fw, fdy, fdx, 0.0f, NULL, NULL), 0);
                ck_assert_msg(same_act(fdx, li[a], dx, g.rows, g.c, g.h, g.w, "dx"), "%s: %s", what, msg);
                be->plan_free(be, plan);
                be->free(be, fx), be->free(be, fw), be->free(be, fb), be->free(be, fdy), be->free(be, fdx);
                be->free(be, fy), be->free(be, fdw), be->free(be, fdb);
            }
        free(x), free(w), free(b), free(dy), free(y), free(dx), free(dx2), free(dw), free(db), free(x0);
    }
}
END_TEST

/* random max and average pools, with padding and ceil mode, geometry from the layers' own rule */
START_TEST(fast_pool_matches_reference)
{
    dt_rng r;
    rng_seed(&r, 8, 1);
    const int chans[] = {3, 16, 20, 32}; /* 3 and 20: NCHW, in our loops (backend_cpu_pool.c) */
    for (int t = 0; t < 40; t++) {
        ref_pool g = {.max = t % 2, .rows = pick(&r, 1, 3), .c = chans[pick(&r, 0, 3)], .h = pick(&r, 4, 12),
                      .w = pick(&r, 4, 12)};
        g.kh = g.kw = pick(&r, 1, 4);
        g.sh = g.sw = pick(&r, 1, 3);
        if (t >= 24) { /* the 2x2 max pool with stride 2, NCHW: our loops' own path for it; odd sides and ceil too */
            g.max = 1, g.kh = g.kw = g.sh = g.sw = 2, g.c = t % 2 ? 20 : 3;
            g.w = t % 8 < 4 ? g.w | 1 : g.w & ~1, g.h = t % 8 >= 4 ? g.h | 1 : g.h & ~1;
        }
        if (t >= 32) { /* overlapping max windows over ties in 16 and 32 channels: NHWC's loops (ours too), blocked */
            g.max = 1, g.c = t % 2 ? 16 : 32, g.kh = g.kw = 2 + t % 2, g.sh = g.sw = 1 + (t / 2) % 2;
            g.h = DT_MAX(g.h, 5), g.w = DT_MAX(g.w, 5);
        }
        int pad = pick(&r, 0, (g.kh - 1) / 2), ceil_mode = t % 4 >= 2, ph, pw;
        ck_assert_int_eq(window_geometry(g.h, g.kh, g.sh, pad, ceil_mode, &g.oh, &g.pt, &ph), 0);
        ck_assert_int_eq(window_geometry(g.w, g.kw, g.sw, pad, ceil_mode, &g.ow, &g.pl, &pw), 0);
        size_t nx = (size_t)g.rows * g.c * g.h * g.w, ny = (size_t)g.rows * g.c * g.oh * g.ow;
        double *x = rnd(nx, 600 + t), *dy = rnd(ny, 700 + t), *y = malloc(sizeof(double) * ny),
               *dx = malloc(sizeof(double) * nx);
        if (t % 3 == 0 || t >= 32) /* ties, as after a ReLU: a max pool's gradient goes to the first largest value */
            for (size_t i = 0; i < nx; i++) x[i] = x[i] < 0.0 ? 0.0 : floor(x[i] * 2.0);
        ref_pool_fwd(&g, x, y);
        ref_pool_bwd(&g, x, dy, dx);
        dt_layout l[3];
        int nl = layouts(g.c, l);
        for (int a = 0; a < nl; a++) {
            dt_pool_cfg cfg = {g.max, g.c, g.h, g.w, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pt, ph, g.pl, pw, l[a]};
            void *plan = be->pool_plan(be, &cfg);
            char what[160];
            snprintf(what, sizeof what, "case %d (%s %dx%dx%d -> %dx%d, k %d, s %d, pad %d%s, %s)", t,
                     g.max ? "max" : "avg", g.c, g.h, g.w, g.oh, g.ow, g.kh, g.sh, pad, ceil_mode ? ", ceil" : "",
                     lname(l[a]));
            ck_assert_msg(plan != NULL, "%s: %s", what, dt_errmsg());
            float *fx = dev_act(x, l[a], g.rows, g.c, g.h, g.w), *fdy = dev_act(dy, l[a], g.rows, g.c, g.oh, g.ow);
            float *fy = be->alloc(be, sizeof(float) * be->act_size(be, l[a], g.rows, g.c, g.oh, g.ow));
            float *fdx = be->alloc(be, sizeof(float) * be->act_size(be, l[a], g.rows, g.c, g.h, g.w));
            ck_assert_msg(be->pool_fwd(be, plan, g.rows, 1, fx, fy) == 0, "%s: %s", what, dt_errmsg());
            ck_assert_msg(same_act(fy, l[a], y, g.rows, g.c, g.oh, g.ow, "y"), "%s: %s", what, msg);
            ck_assert_msg(be->pool_bwd(be, plan, g.rows, fdy, fdx, 0.0f) == 0, "%s: %s", what, dt_errmsg());
            ck_assert_msg(same_act(fdx, l[a], dx, g.rows, g.c, g.h, g.w, "dx"), "%s: %s", what, msg);
            /* dx_beta 1 adds to what dx holds: twice dx */
            ck_assert_msg(be->pool_bwd(be, plan, g.rows, fdy, fdx, 1.0f) == 0, "%s: %s", what, dt_errmsg());
            for (size_t i = 0; i < nx; i++) dx[i] *= 2.0;
            ck_assert_msg(same_act(fdx, l[a], dx, g.rows, g.c, g.h, g.w, "dx"), "%s, dx_beta 1: %s", what, msg);
            for (size_t i = 0; i < nx; i++) dx[i] *= 0.5;
            if (l[a] == DT_LAYOUT_NHWC && g.max) { /* our loops, which the backend takes without AVX-512
                                                    * (AVX2 where the CPU has it), and those CPUs without
                                                    * AVX2 run: the same */
                size_t no = (size_t)g.rows * g.c * g.oh * g.ow;
                int32_t *arg = malloc(sizeof *arg * no);
                for (int portable = 0; portable < 2; portable++) {
                    const char *how = portable ? "portable" : "our loops";
                    memset(fy, 0, sizeof(float) * no);
                    int (*fwd)(const dt_pool_cfg *, int, int, const float *, float *, int32_t *) =
                        portable ? cpu_pool_forward_portable : cpu_pool_forward;
                    ck_assert_int_eq(fwd(&cfg, 2, g.rows, fx, fy, arg), 0);
                    ck_assert_msg(same_act(fy, l[a], y, g.rows, g.c, g.oh, g.ow, "y"), "%s, %s: %s", what, how, msg);
                    ck_assert_int_eq(cpu_pool_backward(&cfg, 2, g.rows, arg, fdy, fdx, 0.0f), 0);
                    ck_assert_msg(same_act(fdx, l[a], dx, g.rows, g.c, g.h, g.w, "dx"), "%s, %s: %s", what, how, msg);
                }
                free(arg);
            }
            /* evaluation's forward keeps no argmax and leaves training's alone */
            ck_assert_msg(be->pool_fwd(be, plan, g.rows, 0, fx, fy) == 0, "%s: %s", what, dt_errmsg());
            ck_assert_msg(same_act(fy, l[a], y, g.rows, g.c, g.oh, g.ow, "y"), "%s, evaluation: %s", what, msg);
            be->plan_free(be, plan);
            be->free(be, fx), be->free(be, fdy), be->free(be, fy), be->free(be, fdx);
        }
        free(x), free(dy), free(y), free(dx);
    }
}
END_TEST

/* The 2x2 max pool with stride 2 in AVX-512 registers (where the CPU has them) against its loop
 * (DTRAIN_POOL_AVX512=0), bit for bit: the values and where each maximum was, on rows of 1 to 53
 * outputs (under a mask, one register, several), odd sides, ties, NaN (first in a window and later),
 * -0 and +0. The reference check above covers the loop. */
START_TEST(pool_2x2_avx512_equals_loop)
{
    dt_rng r;
    rng_seed(&r, 9, 1);
    const float specials[] = {NAN, -0.0f, 0.0f, 1.0f, 1.0f, -1.0f, INFINITY, -INFINITY};
    for (int t = 0; t < 48; t++) {
        int ow = 1 + t % 37 + (t >= 37 ? 16 : 0), oh = 1 + t % 5, rows = 1 + t % 3;
        dt_pool_cfg g = {.max = 1, .c = 2, .h = 2 * oh + t % 2, .w = 2 * ow + (t / 2) % 2, .oh = oh, .ow = ow,
                         .kh = 2, .kw = 2, .sh = 2, .sw = 2, .layout = DT_LAYOUT_PLAIN};
        size_t nx = (size_t)rows * g.c * g.h * g.w, ny = (size_t)rows * g.c * oh * ow;
        float *x = malloc(nx * sizeof *x), *y[2];
        int32_t *arg[2];
        for (size_t i = 0; i < nx; i++) {
            uint32_t u = (uint32_t)rng_next(&r);
            x[i] = u % 4 == 0 ? specials[(u >> 8) % 8] : (float)((int)(u >> 8) % 7) - 3.0f; /* many ties */
        }
        for (int v = 0; v < 2; v++) {
            setenv("DTRAIN_POOL_AVX512", v ? "1" : "0", 1);
            y[v] = malloc(ny * sizeof(float)), arg[v] = malloc(ny * sizeof(int32_t));
            ck_assert_int_eq(cpu_pool_forward(&g, 2, rows, x, y[v], arg[v]), 0);
        }
        unsetenv("DTRAIN_POOL_AVX512");
        ck_assert_msg(memcmp(y[0], y[1], ny * sizeof(float)) == 0, "case %d (%dx%d -> %dx%d): y differs", t, g.h, g.w,
                      oh, ow);
        ck_assert_msg(memcmp(arg[0], arg[1], ny * sizeof(int32_t)) == 0,
                      "case %d (%dx%d -> %dx%d): where the maxima were differs", t, g.h, g.w, oh, ow);
        free(x);
        for (int v = 0; v < 2; v++) free(y[v]), free(arg[v]);
    }
}
END_TEST

START_TEST(fast_batchnorm_matches_reference)
{
    const int shapes[][4] = {{4, 3, 5, 5}, {2, 16, 4, 3}, {3, 32, 2, 2}, {8, 16, 1, 1}};
    for (size_t t = 0; t < DT_ARRAY_LEN(shapes); t++) {
        int rows = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3];
        size_t n = (size_t)rows * c * h * w;
        double *x = rnd(n, 800 + t), *gm = rnd(c, 810 + t), *bt = rnd(c, 820 + t), *dy = rnd(n, 830 + t);
        double *y = malloc(sizeof(double) * n), *dx = malloc(sizeof(double) * n), *mean = malloc(sizeof(double) * c),
               *var = malloc(sizeof(double) * c), *dg = malloc(sizeof(double) * c), *dbt = malloc(sizeof(double) * c);
        for (size_t i = 0; i < n; i++) x[i] = 2.0 * x[i] + 0.5; /* a mean and variance away from 0 and 1 */
        ref_bn_fwd(x, gm, bt, y, mean, var, rows, c, h * w, 1e-5);
        ref_bn_bwd(x, gm, dy, dx, dg, dbt, rows, c, h * w, 1e-5);
        dt_layout l[3];
        int nl = layouts(c, l);
        for (int a = 0; a < nl; a++) {
            dt_bn_cfg cfg = {c, h, w, 1e-5f, l[a], 0, 0, 0};
            void *plan = be->bn_plan(be, &cfg);
            float *fx = dev_act(x, l[a], rows, c, h, w), *fdy = dev_act(dy, l[a], rows, c, h, w);
            float *fy = be->alloc(be, sizeof(float) * n), *fdx = be->alloc(be, sizeof(float) * n);
            float *fg = dev_vec(gm, c), *fb = dev_vec(bt, c), *fm = be->alloc(be, 4 * c), *fv = be->alloc(be, 4 * c);
            float *fdg = be->alloc(be, 4 * c), *fdb = be->alloc(be, 4 * c);
            ck_assert_msg(plan && be->bn_fwd(be, plan, rows, 1, fx, fg, fb, fm, fv, fy) == 0, "%s", dt_errmsg());
            ck_assert_msg(same_act(fy, l[a], y, rows, c, h, w, "y"), "shape %zu %s: %s", t, lname(l[a]), msg);
            ck_assert_msg(close_f32_f64(fm, mean, c, TOL_FAST_ATOL, TOL_FAST_RTOL, "mean", msg, sizeof msg), "%s", msg);
            ck_assert_msg(close_f32_f64(fv, var, c, TOL_FAST_ATOL, TOL_FAST_RTOL, "var", msg, sizeof msg), "%s", msg);
            ck_assert_msg(be->bn_bwd(be, plan, rows, fx, fg, fm, fv, fdy, NULL, fdx, 0.0f, fdg, fdb) == 0, "%s",
                          dt_errmsg());
            ck_assert_msg(same_act(fdx, l[a], dx, rows, c, h, w, "dx"), "shape %zu: %s", t, msg);
            ck_assert_msg(close_f32_f64(fdg, dg, c, TOL_FAST_ATOL, TOL_FAST_RTOL, "dgamma", msg, sizeof msg), "%s",
                          msg);
            ck_assert_msg(close_f32_f64(fdb, dbt, c, TOL_FAST_ATOL, TOL_FAST_RTOL, "dbeta", msg, sizeof msg), "%s",
                          msg);
            /* evaluation: the given statistics; a frozen layer: no parameter gradients wanted */
            ck_assert_int_eq(be->bn_fwd(be, plan, rows, 0, fx, fg, fb, fm, fv, fy), 0);
            ck_assert_msg(same_act(fy, l[a], y, rows, c, h, w, "y (given statistics)"), "%s", msg);
            ck_assert_int_eq(be->bn_bwd(be, plan, rows, fx, fg, fm, fv, fdy, NULL, fdx, 0.0f, NULL, NULL), 0);
            ck_assert_msg(same_act(fdx, l[a], dx, rows, c, h, w, "dx (frozen)"), "%s", msg);
            be->plan_free(be, plan);
            be->free(be, fx), be->free(be, fdy), be->free(be, fy), be->free(be, fdx), be->free(be, fg);
            be->free(be, fb), be->free(be, fm), be->free(be, fv), be->free(be, fdg), be->free(be, fdb);
        }
        free(x), free(gm), free(bt), free(dy), free(y), free(dx), free(mean), free(var), free(dg), free(dbt);
    }
}
END_TEST

/* batch norm with its relu fused (dt_bn_cfg relu) gives the bits of batch norm, then relu: forward
 * in training and evaluation, backward with dx written and added to, in every layout */
START_TEST(fused_bn_relu_equals_bn_then_relu)
{
    const int shapes[][4] = {{4, 3, 5, 5}, {3, 16, 4, 3}, {5, 32, 3, 3}, {1, 16, 1, 1}};
    for (size_t t = 0; t < DT_ARRAY_LEN(shapes); t++) {
        int rows = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3];
        size_t n = (size_t)rows * c * h * w;
        double *x = rnd(n, 900 + t), *gm = rnd(c, 910 + t), *bt = rnd(c, 920 + t), *dy = rnd(n, 930 + t);
        for (size_t i = 0; i < n; i += 7) x[i] = x[(i + 3) % n]; /* repeats, some at the mean's side */
        dt_layout l[3];
        int nl = layouts(c, l);
        for (int a = 0; a < nl; a++) {
            size_t na = be->act_size(be, l[a], rows, c, h, w), bytes = sizeof(float) * na;
            dt_bn_cfg cu = {c, h, w, 1e-5f, l[a], 0, 0, 0}, cf = cu;
            cf.relu = 1;
            void *pu = be->bn_plan(be, &cu), *pf = be->bn_plan(be, &cf);
            ck_assert_msg(pu && pf, "%s", dt_errmsg());
            float *fx = dev_act(x, l[a], rows, c, h, w), *fdy = dev_act(dy, l[a], rows, c, h, w);
            float *fg = dev_vec(gm, c), *fb = dev_vec(bt, c);
            float *bn = be->alloc(be, bytes), *yu = be->alloc(be, bytes), *yf = be->alloc(be, bytes);
            float *dr = be->alloc(be, bytes), *dxu = be->alloc(be, bytes), *dxf = be->alloc(be, bytes);
            float *mu = be->alloc(be, 4 * c), *vu = be->alloc(be, 4 * c), *mf = be->alloc(be, 4 * c);
            float *vf = be->alloc(be, 4 * c), *gu = be->alloc(be, 4 * c), *bu = be->alloc(be, 4 * c);
            float *gf = be->alloc(be, 4 * c), *bf = be->alloc(be, 4 * c);
            for (int train = 1; train >= 0; train--) {
                ck_assert_int_eq(be->bn_fwd(be, pu, rows, train, fx, fg, fb, mu, vu, bn), 0);
                ck_assert_int_eq(be->relu_fwd(be, yu, bn, na), 0);
                ck_assert_int_eq(be->bn_fwd(be, pf, rows, train, fx, fg, fb, mu, vu, yf), 0);
                ck_assert_msg(memcmp(yu, yf, bytes) == 0, "shape %zu %s train %d: the forward differs", t,
                              lname(l[a]), train);
            }
            ck_assert_int_eq(be->bn_fwd(be, pf, rows, 1, fx, fg, fb, mf, vf, yf), 0);
            size_t zeros = 0;
            for (size_t i = 0; i < na; i++) zeros += yf[i] == 0.0f;
            ck_assert_msg(zeros > na / 4, "shape %zu: %zu of %zu outputs cut by the relu", t, zeros, na);
            for (int beta = 0; beta <= 1; beta++) {
                for (size_t i = 0; i < na; i++) dxu[i] = dxf[i] = (float)(i % 5) - 2.0f;
                ck_assert_int_eq(be->relu_bwd(be, dr, fdy, yf, na, 0.0f), 0);
                ck_assert_int_eq(be->bn_bwd(be, pu, rows, fx, fg, mf, vf, dr, NULL, dxu, (float)beta, gu, bu), 0);
                ck_assert_int_eq(be->bn_bwd(be, pf, rows, fx, fg, mf, vf, fdy, yf, dxf, (float)beta, gf, bf), 0);
                ck_assert_msg(memcmp(dxu, dxf, bytes) == 0 && memcmp(gu, gf, 4 * c) == 0 && memcmp(bu, bf, 4 * c) == 0,
                              "shape %zu %s beta %d: the backward differs", t, lname(l[a]), beta);
            }
            be->plan_free(be, pu), be->plan_free(be, pf);
            float *all[] = {fx, fdy, fg, fb, bn, yu, yf, dr, dxu, dxf, mu, vu, mf, vf, gu, bu, gf, bf};
            for (size_t i = 0; i < DT_ARRAY_LEN(all); i++) be->free(be, all[i]);
        }
        free(x), free(gm), free(bt), free(dy);
    }
}
END_TEST

/* add2 (the add layer's forward, fused with its relu or not) gives the bits of a copy, an add and a
 * relu_fwd, on lengths that split among threads unevenly, with sums of exactly 0 (+0 and -0) */
START_TEST(add2_equals_copy_add_relu)
{
    const size_t lens[] = {1, 15, 17, 1000, 100003};
    for (size_t t = 0; t < DT_ARRAY_LEN(lens); t++) {
        size_t n = lens[t], bytes = sizeof(float) * n;
        double *u = rnd(n, 960 + t), *v = rnd(n, 970 + t);
        for (size_t i = 0; i < n; i += 5) v[i] = -u[i];
        for (size_t i = 3; i < n; i += 11) u[i] = v[i] = -0.0;
        float *fu = dev_vec(u, n), *fv = dev_vec(v, n), *ys = be->alloc(be, bytes), *yr = be->alloc(be, bytes);
        float *y2 = be->alloc(be, bytes);
        for (int relu = 0; relu <= 1; relu++) {
            ck_assert_int_eq(be->copy(be, ys, fu, bytes), 0);
            ck_assert_int_eq(be->add(be, ys, fv, n, 1.0f), 0);
            ck_assert_int_eq(be->relu_fwd(be, yr, ys, n), 0);
            memset(y2, 0x7f, bytes);
            ck_assert_int_eq(be->add2(be, y2, fu, fv, n, relu), 0);
            ck_assert_msg(memcmp(y2, relu ? yr : ys, bytes) == 0, "n %zu relu %d: add2 differs", n, relu);
        }
        size_t zeros = 0;
        for (size_t i = 0; i < n; i++) zeros += yr[i] == 0.0f;
        ck_assert_msg(n < 15 || zeros > n / 4, "n %zu: %zu of the sums cut by the relu", n, zeros);
        float *all[] = {fu, fv, ys, yr, y2};
        for (size_t i = 0; i < DT_ARRAY_LEN(all); i++) be->free(be, all[i]);
        free(u), free(v);
    }
}
END_TEST

/* max |got - ref| / max |ref| over a tensor (a device activation in layout l, or a vector when
 * l < 0): the norm-wise relative error, which elements near 0 cannot inflate */
static double relerr(const float *d, int l, const double *ref, int rows, int c, int h, int w)
{
    size_t n = (size_t)rows * c * h * w;
    float *plain = malloc(sizeof(float) * n);
    double e = 0.0, m = 0.0;
    if (l >= 0) be->to_plain(be, (dt_layout)l, d, plain, rows, c, h, w);
    else memcpy(plain, d, sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)plain[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    free(plain);
    return m > 0 ? e / m : e;
}

/* Batch norm on resnet20's layers (batch 128: 16x32x32, 32x16x16, 64x8x8), both layouts, against
 * the float64 reference: every output within 1e-6 (norm-wise relative), the precision of
 * PyTorch's float32 (4e-7). oneDNN's float sums were 2-8e-5 off in backward. */
#define TOL_BN 1e-6
START_TEST(batchnorm_precise_on_resnet20_layers)
{
    const int shapes[][4] = {{128, 16, 32, 32}, {128, 32, 16, 16}, {128, 64, 8, 8}};
    for (size_t t = 0; t < DT_ARRAY_LEN(shapes); t++) {
        int rows = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3];
        size_t n = (size_t)rows * c * h * w;
        double *x = rnd(n, 900 + t), *gm = rnd(c, 910 + t), *bt = rnd(c, 920 + t), *dy = rnd(n, 930 + t);
        double *y = malloc(sizeof(double) * n), *dx = malloc(sizeof(double) * n), *mean = malloc(sizeof(double) * c),
               *var = malloc(sizeof(double) * c), *dg = malloc(sizeof(double) * c), *dbt = malloc(sizeof(double) * c);
        /* a convolution's output: a mean away from 0, values the fp32 kernels see exactly */
        for (size_t i = 0; i < n; i++) x[i] = (float)(1.5 * x[i] + 0.8), dy[i] = (float)(1e-3 * dy[i] + 2e-4);
        for (int i = 0; i < c; i++) gm[i] = (float)(1.0 + 0.5 * gm[i]), bt[i] = (float)bt[i];
        ref_bn_fwd(x, gm, bt, y, mean, var, rows, c, h * w, 1e-5);
        ref_bn_bwd(x, gm, dy, dx, dg, dbt, rows, c, h * w, 1e-5);
        dt_layout l[3];
        int nl = layouts(c, l);
        for (int a = 0; a < nl; a++) {
            dt_bn_cfg cfg = {c, h, w, 1e-5f, l[a], 0, 0, 0};
            void *plan = be->bn_plan(be, &cfg);
            float *fx = dev_act(x, l[a], rows, c, h, w), *fdy = dev_act(dy, l[a], rows, c, h, w);
            float *fy = be->alloc(be, sizeof(float) * n), *fdx = be->alloc(be, sizeof(float) * n);
            float *fg = dev_vec(gm, c), *fb = dev_vec(bt, c), *fm = be->alloc(be, 4 * c), *fv = be->alloc(be, 4 * c);
            float *fdg = be->alloc(be, 4 * c), *fdb = be->alloc(be, 4 * c);
            ck_assert_msg(plan && be->bn_fwd(be, plan, rows, 1, fx, fg, fb, fm, fv, fy) == 0, "%s", dt_errmsg());
            ck_assert_msg(be->bn_bwd(be, plan, rows, fx, fg, fm, fv, fdy, NULL, fdx, 0.0f, fdg, fdb) == 0, "%s",
                          dt_errmsg());
            double e[] = {relerr(fy, l[a], y, rows, c, h, w), relerr(fm, -1, mean, 1, c, 1, 1),
                          relerr(fv, -1, var, 1, c, 1, 1),     relerr(fdx, l[a], dx, rows, c, h, w),
                          relerr(fdg, -1, dg, 1, c, 1, 1),     relerr(fdb, -1, dbt, 1, c, 1, 1)};
            const char *names[] = {"y", "mean", "var", "dx", "dweight", "dbias"};
            for (int k = 0; k < 6; k++)
                ck_assert_msg(e[k] <= TOL_BN, "%dx%dx%dx%d %s: %s relative error %.2g > %g", rows, c, h, w,
                              lname(l[a]), names[k], e[k], TOL_BN);
            printf("batchnorm %dx%dx%dx%d %-7s relative error: y %.1e mean %.1e var %.1e dx %.1e dweight %.1e "
                   "dbias %.1e\n", rows, c, h, w, lname(l[a]), e[0], e[1], e[2], e[3], e[4], e[5]);
            be->plan_free(be, plan);
            be->free(be, fx), be->free(be, fdy), be->free(be, fy), be->free(be, fdx), be->free(be, fg);
            be->free(be, fb), be->free(be, fm), be->free(be, fv), be->free(be, fdg), be->free(be, fdb);
        }
        free(x), free(gm), free(bt), free(dy), free(y), free(dx), free(mean), free(var), free(dg), free(dbt);
    }
}
END_TEST

START_TEST(fast_lrn_matches_reference)
{
    /* rows, channels, height, width, size, beta in hundredths. 24 x 5 x 7: planes of 35 pixels,
     * gathered in tiles of 16, 16 and 3 (backend_cpu_lrn.c); beta 0.75 and 0.5 have their own
     * arithmetic there, others take powf; sizes 1, 3, 5, 7 */
    const int shapes[][6] = {{2, 7, 3, 3, 5, 75},  {2, 16, 4, 4, 5, 75}, {1, 32, 3, 2, 5, 75},
                             {2, 24, 5, 7, 5, 75}, {2, 32, 5, 7, 3, 50}, {1, 16, 3, 3, 7, 60},
                             {1, 5, 2, 3, 1, 75}};
    for (size_t t = 0; t < DT_ARRAY_LEN(shapes); t++) {
        int rows = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3], size = shapes[t][4];
        double beta = shapes[t][5] / 100.0;
        size_t n = (size_t)rows * c * h * w;
        double *x = rnd(n, 900 + t), *dy = rnd(n, 910 + t), *y = malloc(sizeof(double) * n),
               *dx = malloc(sizeof(double) * n);
        for (size_t i = 0; i < n; i++) x[i] *= 3.0;
        ref_lrn_fwd(x, y, rows, c, h * w, size, 0.5, beta, 2.0);
        ref_lrn_bwd(x, dy, dx, rows, c, h * w, size, 0.5, beta, 2.0);
        dt_layout l[3];
        int nl = layouts(c, l);
        for (int a = 0; a < nl; a++) {
            dt_lrn_cfg cfg = {c, h, w, size, 0.5f, (float)beta, 2.0f, l[a]};
            void *plan = be->lrn_plan(be, &cfg);
            float *fx = dev_act(x, l[a], rows, c, h, w), *fdy = dev_act(dy, l[a], rows, c, h, w);
            float *fy = be->alloc(be, sizeof(float) * n), *fdx = be->alloc(be, sizeof(float) * n);
            ck_assert_msg(plan && be->lrn_fwd(be, plan, rows, 1, fx, fy) == 0, "%s", dt_errmsg());
            ck_assert_msg(same_act(fy, l[a], y, rows, c, h, w, "y"), "shape %zu %s: %s", t, lname(l[a]), msg);
            ck_assert_msg(be->lrn_bwd(be, plan, rows, fx, fdy, fdx, 0.0f) == 0, "%s", dt_errmsg());
            ck_assert_msg(same_act(fdx, l[a], dx, rows, c, h, w, "dx"), "shape %zu %s: %s", t, lname(l[a]),
                          msg);
            /* dx_beta 1 adds to what dx holds: twice dx */
            ck_assert_msg(be->lrn_bwd(be, plan, rows, fx, fdy, fdx, 1.0f) == 0, "%s", dt_errmsg());
            for (size_t i = 0; i < n; i++) dx[i] *= 2.0;
            ck_assert_msg(same_act(fdx, l[a], dx, rows, c, h, w, "dx"), "shape %zu %s, dx_beta 1: %s", t,
                          lname(l[a]), msg);
            for (size_t i = 0; i < n; i++) dx[i] *= 0.5;
            /* dtrain's own loops, which the backend takes where oneDNN has only its reference code */
            ck_assert_msg(cpu_lrn_forward(&cfg, 2, rows, fx, fy) == 0, "%s", dt_errmsg());
            ck_assert_msg(same_act(fy, l[a], y, rows, c, h, w, "y"), "shape %zu %s, our loops: %s", t, lname(l[a]),
                          msg);
            ck_assert_msg(cpu_lrn_backward(&cfg, 2, rows, fx, fdy, fdx, 0.0f) == 0, "%s", dt_errmsg());
            ck_assert_msg(same_act(fdx, l[a], dx, rows, c, h, w, "dx"), "shape %zu %s, our loops: %s", t,
                          lname(l[a]), msg);
            ck_assert_msg(cpu_lrn_backward(&cfg, 2, rows, fx, fdy, fdx, 1.0f) == 0, "%s", dt_errmsg());
            for (size_t i = 0; i < n; i++) dx[i] *= 2.0;
            ck_assert_msg(same_act(fdx, l[a], dx, rows, c, h, w, "dx"), "shape %zu %s, our loops, dx_beta 1: %s", t,
                          lname(l[a]), msg);
            for (size_t i = 0; i < n; i++) dx[i] *= 0.5;
            be->plan_free(be, plan);
            be->free(be, fx), be->free(be, fdy), be->free(be, fy), be->free(be, fdx);
        }
        free(x), free(dy), free(y), free(dx);
    }
}
END_TEST

/* ---- (3) a residual net through the parser against the composed reference ----------------------- */

static const char *RES_NET = "input shape=3x6x6\n"
                             "conv name=c1 out=16 k=3 pad=1 bias=0\n"
                             "batchnorm name=bn1\n"
                             "relu name=r1\n"
                             "conv name=c2 out=16 k=3 pad=1\n"
                             "batchnorm name=bn2\n"
                             "add name=sum in=bn2,r1\n"
                             "relu name=r2\n"
                             "shortcut name=sc out=32 stride=2\n"
                             "maxpool name=mp k=2 stride=1\n"
                             "flatten name=fl\n"
                             "dense name=fc out=5\n"
                             "softmax_xent\n";

static void set_tensor(dt_net *net, const char *name, const double *v)
{
    dt_param *p = net_find_tensor(net, name);
    ck_assert_msg(p != NULL, "no tensor %s", name);
    for (size_t i = 0; i < p->n; i++) p->w[i] = (float)v[i];
}

/* y[n][o][i][j] = x[n][o - front][2i][2j] where that channel exists */
static void ref_shortcut(const double *x, double *y, int rows, int c, int h, int o, int front, int back_prop)
{
    int oh = (h + 1) / 2;
    for (int n = 0; n < rows; n++)
        for (int k = 0; k < o; k++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < oh; j++) {
                    int ck = k - front;
                    size_t yo = (((size_t)n * o + k) * oh + i) * oh + j;
                    if (ck < 0 || ck >= c) {
                        if (!back_prop) y[yo] = 0.0;
                        continue;
                    }
                    size_t xo = (((size_t)n * c + ck) * h + 2 * i) * h + 2 * j;
                    if (back_prop) ((double *)x)[xo] += y[yo];
                    else y[yo] = x[xo];
                }
}

/* the shortcut's rows and large copies run on the backend's threads (above CPU_PAR_MIN values):
 * they equal the reference in every layout, and a copy between overlapping buffers is memmove's */
START_TEST(shortcut_and_copy_on_threads)
{
    enum { R = 64, C = 16, H = 16, O = 32, OH = 8, FRONT = 8 };
    size_t nx = (size_t)R * C * H * H, ny = (size_t)R * O * OH * OH;
    double *x = rnd(nx, 901), *dy = rnd(ny, 902), *y = calloc(ny, sizeof(double)), *dx = calloc(nx, sizeof(double));
    ref_shortcut(x, y, R, C, H, O, FRONT, 0);
    ref_shortcut(dx, dy, R, C, H, O, FRONT, 1);
    dt_layout l[3];
    int nl = layouts(C, l);
    for (int a = 0; a < nl; a++) {
        dt_shortcut_cfg s = {.c = C, .h = H, .w = H, .o = O, .oh = OH, .ow = OH, .stride = 2, .front = FRONT,
                             .in_layout = l[a], .out_layout = l[a]};
        float *xd = dev_act(x, l[a], R, C, H, H), *dyd = dev_act(dy, l[a], R, O, OH, OH);
        float *yd = be->alloc(be, sizeof(float) * be->act_size(be, l[a], R, O, OH, OH));
        float *dxd = be->alloc(be, sizeof(float) * be->act_size(be, l[a], R, C, H, H));
        ck_assert_int_eq(be->shortcut_fwd(be, &s, R, xd, yd), 0);
        ck_assert_msg(same_act(yd, l[a], y, R, O, OH, OH, lname(l[a])), "shortcut forward: %s", msg);
        ck_assert_int_eq(be->shortcut_bwd(be, &s, R, dyd, dxd, 0.0f), 0);
        ck_assert_msg(same_act(dxd, l[a], dx, R, C, H, H, lname(l[a])), "shortcut backward: %s", msg);
        double *dx2 = malloc(sizeof(double) * nx);
        for (size_t i = 0; i < nx; i++) dx2[i] = 2.0 * dx[i];
        ck_assert_int_eq(be->shortcut_bwd(be, &s, R, dyd, dxd, 1.0f), 0); /* adds */
        ck_assert_msg(same_act(dxd, l[a], dx2, R, C, H, H, lname(l[a])), "shortcut backward, adding: %s", msg);
        free(dx2);
        be->free(be, xd), be->free(be, dyd), be->free(be, yd), be->free(be, dxd);
    }
    size_t n = 1u << 20;
    float *src = be->alloc(be, n * sizeof(float)), *dst = be->alloc(be, n * sizeof(float));
    float *want = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) src[i] = (float)x[i % nx] + (float)i;
    ck_assert_int_eq(be->copy(be, dst, src, n * sizeof(float)), 0);
    ck_assert_msg(memcmp(dst, src, n * sizeof(float)) == 0, "a copy of %zu floats differs", n);
    memcpy(want, src, n * sizeof(float));
    memmove(want, want + 3, (n - 3) * sizeof(float));
    ck_assert_int_eq(be->copy(be, src, src + 3, (n - 3) * sizeof(float)), 0); /* overlapping */
    ck_assert_msg(memcmp(want, src, n * sizeof(float)) == 0, "an overlapping copy is not memmove's");
    be->free(be, src), be->free(be, dst), free(want);
    free(x), free(dy), free(y), free(dx);
}
END_TEST

/* the CPU backend, counting what crosses between host and device: a training pass must not (a GPU
 * records it as a CUDA graph, in which a copy to the host and its synchronize cannot be) */
static dt_backend *inner;
static int crossings;
static int count_to_host(dt_backend *b, void *dst, const void *src, size_t bytes)
{
    (void)b;
    crossings++;
    return inner->to_host(inner, dst, src, bytes);
}
static int count_to_device(dt_backend *b, void *dst, const void *src, size_t bytes)
{
    (void)b;
    crossings++;
    return inner->to_device(inner, dst, src, bytes);
}
static int count_sync(dt_backend *b)
{
    (void)b;
    crossings++;
    return inner->sync(inner);
}
static dt_backend counting_of(dt_backend *b)
{
    dt_backend c = *b;
    inner = b, c.to_host = count_to_host, c.to_device = count_to_device, c.sync = count_sync;
    return c;
}

START_TEST(residual_net_matches_reference)
{
    enum { R = 3, C = 3, H = 6, F = 16, O = 32, HS = 3, HP = 2, NC = 5 };
    dt_net *net;
    dt_backend counting = counting_of(be);
    ck_assert_msg(net_parse(RES_NET, "res.net", "res", &net) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(net_alloc(net, &counting, R), 0);
    /* gradient buffers are shared (the test below shows the sharing computes the right thing):
     * at most the input of c2 (r1, read by the add too), the add's input and one more are live */
    int n_dy = 0;
    for (int i = 0; i < net->n_layers; i++) n_dy += net->layers[i]->dy != NULL;
    ck_assert_int_eq(n_dy, 11);
    ck_assert_int_le(net->n_dy_bufs, 3);
    ck_assert_int_eq(net_init_params(net, 5), 0); /* running statistics start at (0, 1) */
    double *x = rnd(R * C * H * H, 1000), *w1 = rnd(F * C * 9, 1001), *w2 = rnd(F * F * 9, 1002), *b2 = rnd(F, 1003);
    double *g1 = rnd(F, 1004), *be1 = rnd(F, 1005), *g2 = rnd(F, 1006), *be2 = rnd(F, 1007);
    double *wf = rnd(NC * O * HP * HP, 1008), *bf = rnd(NC, 1009);
    int32_t labels[R] = {1, 4, 0};
    set_tensor(net, "c1.weight", w1), set_tensor(net, "c2.weight", w2), set_tensor(net, "c2.bias", b2);
    set_tensor(net, "bn1.weight", g1), set_tensor(net, "bn1.bias", be1), set_tensor(net, "bn2.weight", g2);
    set_tensor(net, "bn2.bias", be2), set_tensor(net, "fc.weight", wf), set_tensor(net, "fc.bias", bf);
    float xf[R * C * H * H];
    for (int i = 0; i < R * C * H * H; i++) xf[i] = (float)x[i];
    net_set_input(net, xf, R);
    net_set_labels(net, labels, R);
    dt_pass pass = {.rows = R, .train = 1, .labels = net->labels, .rng_key = 1, .grad_scale = 1.0f / R};
    crossings = 0;
    ck_assert_msg(net_forward(net, &pass) == 0, "%s", dt_errmsg());
    ck_assert_msg(net_backward(net, &pass, NULL, NULL) == 0, "%s", dt_errmsg());
    ck_assert_msg(crossings == 0, "a training pass copied between host and device %d times (batch norm, conv, "
                  "shortcut, pooling, dense, loss: none may, or --gpu-graph cannot record it)", crossings);

    /* the same in double */
    const size_t na = (size_t)R * F * H * H, ns = (size_t)R * O * HS * HS, np = (size_t)R * O * HP * HP;
    double *a1 = malloc(8 * na), *n1 = malloc(8 * na), *r1 = malloc(8 * na), *a2 = malloc(8 * na), *n2 = malloc(8 * na);
    double *s = malloc(8 * na), *r2 = malloc(8 * na), *sc = malloc(8 * ns), *mp = malloc(8 * np), z[R * NC],
           prob[R * NC];
    double m1[F], v1[F], m2[F], v2[F];
    ref_conv g1c = {R, C, H, H, F, H, H, 3, 3, 1, 1, 1, 1, 1}, g2c = {R, F, H, H, F, H, H, 3, 3, 1, 1, 1, 1, 1};
    ref_pool gp = {
        .max = 1, .rows = R, .c = O, .h = HS, .w = HS, .oh = HP, .ow = HP, .kh = 2, .kw = 2, .sh = 1, .sw = 1};
    ref_conv_fwd(&g1c, x, w1, NULL, a1);
    ref_bn_fwd(a1, g1, be1, n1, m1, v1, R, F, H * H, 1e-5);
    ref_relu_fwd(n1, r1, na);
    ref_conv_fwd(&g2c, r1, w2, b2, a2);
    ref_bn_fwd(a2, g2, be2, n2, m2, v2, R, F, H * H, 1e-5);
    for (size_t i = 0; i < na; i++) s[i] = n2[i] + r1[i];
    ref_relu_fwd(s, r2, na);
    ref_shortcut(r2, sc, R, F, H, O, (O - F) / 2, 0);
    ref_pool_fwd(&gp, sc, mp);
    ref_dense_fwd(mp, wf, bf, z, R, O * HP * HP, NC);
    double loss = ref_softmax_xent_fwd(z, labels, prob, R, NC);
    double dz[R * NC], *dmp = malloc(8 * np), *dsc = malloc(8 * ns), *dr2 = calloc(na, 8), *ds = malloc(8 * na);
    double *dn2 = malloc(8 * na), *da2 = malloc(8 * na), *dr1 = malloc(8 * na), *dn1 = malloc(8 * na),
           *da1 = malloc(8 * na);
    double dwf[NC * O * HP * HP], dbf[NC], dg2[F], dbe2[F], dg1[F], dbe1[F], *dw2 = malloc(8 * F * F * 9), db2[F],
           *dw1 = malloc(8 * F * C * 9);
    ref_softmax_xent_bwd(prob, labels, 1.0 / R, dz, R, NC);
    ref_dense_bwd(mp, wf, dz, dmp, dwf, dbf, R, O * HP * HP, NC);
    ref_pool_bwd(&gp, sc, dmp, dsc);
    ref_shortcut(dr2, dsc, R, F, H, O, (O - F) / 2, 1);
    ref_relu_bwd(s, dr2, ds, na);
    ref_bn_bwd(a2, g2, ds, dn2, dg2, dbe2, R, F, H * H, 1e-5);
    ref_conv_bwd(&g2c, r1, w2, dn2, da2, dw2, db2);
    for (size_t i = 0; i < na; i++) da2[i] += ds[i]; /* r1 feeds conv c2 and the sum */
    ref_relu_bwd(n1, da2, dr1, na);
    ref_bn_bwd(a1, g1, dr1, dn1, dg1, dbe1, R, F, H * H, 1e-5);
    ref_conv_bwd(&g1c, x, w1, dn1, NULL, dw1, NULL);
    (void)da1;

    ck_assert_msg(fabs(pass.loss_sum - loss) <= 1e-4 * fabs(loss), "loss %g vs %g", pass.loss_sum, loss);
    struct {
        const char *name;
        const double *ref;
    } grads[] = {{"fc.weight", dwf}, {"fc.bias", dbf}, {"bn2.weight", dg2}, {"bn2.bias", dbe2}, {"c2.weight", dw2},
                 {"c2.bias", db2},   {"bn1.weight", dg1}, {"bn1.bias", dbe1}, {"c1.weight", dw1}};
    for (size_t i = 0; i < DT_ARRAY_LEN(grads); i++) {
        dt_param *p = net_find_tensor(net, grads[i].name);
        ck_assert_msg(close_f32_f64(p->g, grads[i].ref, p->n, 1e-4, 1e-3, grads[i].name, msg, sizeof msg), "%s", msg);
    }
    /* running statistics after one step from (0, 1) with momentum 0.1, variance unbiased */
    double rm[F], rv[F], cnt = (double)R * H * H;
    for (int k = 0; k < F; k++) rm[k] = 0.1 * m1[k], rv[k] = 0.9 + 0.1 * v1[k] * cnt / (cnt - 1);
    ck_assert_msg(close_f32_f64(net_find_tensor(net, "bn1.running_mean")->w, rm, F, 1e-5, 1e-4, "running_mean", msg,
                                sizeof msg), "%s", msg);
    ck_assert_msg(close_f32_f64(net_find_tensor(net, "bn1.running_var")->w, rv, F, 1e-5, 1e-4, "running_var", msg,
                                sizeof msg), "%s", msg);
    net_destroy(net);
    free(x), free(w1), free(w2), free(b2), free(g1), free(be1), free(g2), free(be2), free(wf), free(bf);
    free(a1), free(n1), free(r1), free(a2), free(n2), free(s), free(r2), free(sc), free(mp), free(dmp), free(dsc);
    free(dr2), free(ds), free(dn2), free(da2), free(dr1), free(dn1), free(da1), free(dw2), free(dw1);
}
END_TEST

/* concat: three convolutions from one input, concatenated (16 + 32 channels in nChw16c: one copy
 * per sample; in NHWC and then + 8 plain channels: through plain scratch), equal one convolution
 * of all 56 channels, forward (the loss) and backward (every weight gradient, the convolutions'
 * as slices of the one's): concat moves values and its gradient is the slices of dy. */
START_TEST(concat_equals_one_wide_conv)
{
    enum { R = 3, C = 3, H = 6, A = 16, B = 32, K = 8, W = A + B + K, NC = 5 };
    const char *cat = "input name=x shape=3x6x6\n"
                      "conv name=a in=x out=16 k=3 pad=1\n"
                      "conv name=b in=x out=32 k=3 pad=1\n"
                      "conv name=c in=x out=8 k=3 pad=1\n"
                      "concat name=ab in=a,b\n"
                      "concat name=abc in=ab,c\n"
                      "relu\nflatten\ndense name=fc out=5\nsoftmax_xent\n";
    const char *wide = "input name=x shape=3x6x6\nconv name=w out=56 k=3 pad=1\nrelu\nflatten\ndense name=fc out=5\n"
                       "softmax_xent\n";
    dt_net *n1, *n2;
    ck_assert_msg(net_parse(cat, "cat.net", "cat", &n1) == 0, "%s", dt_errmsg());
    ck_assert_msg(net_parse(wide, "wide.net", "wide", &n2) == 0, "%s", dt_errmsg());
    dt_backend counting = counting_of(be); /* concat's training pass crosses no more than the residual net's */
    ck_assert_int_eq(net_alloc(n1, &counting, R), 0);
    ck_assert_int_eq(net_alloc(n2, be, R), 0);
    ck_assert_int_eq(net_n_classes(n1), NC);
    ck_assert_int_eq((int)n1->n_params, (int)n2->n_params);
    /* the paths under test: ab in the inputs' blocked layout, abc (56 channels) plain */
    int seen = 0;
    for (int i = 0; i < n1->n_layers; i++) {
        const dt_layer *l = n1->layers[i];
        if (!strcmp(l->name, "ab")) {
            seen++;
            ck_assert_int_ne(l->layout, DT_LAYOUT_PLAIN);
        }
        if (!strcmp(l->name, "abc")) {
            seen++;
            ck_assert_int_eq(l->layout, DT_LAYOUT_PLAIN);
            ck_assert_int_eq(l->out.d[0], W);
        }
    }
    ck_assert_int_eq(seen, 2);
    double *w = rnd(W * C * 9, 2000), *b = rnd(W, 2001), *wf = rnd(NC * W * H * H, 2002), *bf = rnd(NC, 2003);
    double *x = rnd(R * C * H * H, 2004);
    set_tensor(n2, "w.weight", w), set_tensor(n2, "w.bias", b);
    set_tensor(n1, "a.weight", w), set_tensor(n1, "a.bias", b);
    set_tensor(n1, "b.weight", w + A * C * 9), set_tensor(n1, "b.bias", b + A);
    set_tensor(n1, "c.weight", w + (A + B) * C * 9), set_tensor(n1, "c.bias", b + A + B);
    set_tensor(n1, "fc.weight", wf), set_tensor(n1, "fc.bias", bf), set_tensor(n2, "fc.weight", wf);
    set_tensor(n2, "fc.bias", bf);
    float xf[R * C * H * H];
    int32_t labels[R] = {1, 4, 0};
    for (int i = 0; i < R * C * H * H; i++) xf[i] = (float)x[i];
    double loss[2];
    dt_net *nets[2] = {n1, n2};
    for (int k = 0; k < 2; k++) {
        dt_pass pass = {.rows = R, .train = 1, .labels = nets[k]->labels, .rng_key = 1, .grad_scale = 1.0f / R};
        net_set_input(nets[k], xf, R);
        net_set_labels(nets[k], labels, R);
        crossings = 0;
        ck_assert_msg(net_forward(nets[k], &pass) == 0, "%s", dt_errmsg());
        ck_assert_msg(net_backward(nets[k], &pass, NULL, NULL) == 0, "%s", dt_errmsg());
        ck_assert_msg(k == 1 || crossings == 0, "concat's training pass copied between host and device %d times",
                      crossings);
        loss[k] = pass.loss_sum;
    }
    ck_assert_msg(fabs(loss[0] - loss[1]) <= 1e-5 * fabs(loss[1]), "loss %.9g vs %.9g", loss[0], loss[1]);
    const dt_param *gw = net_find_tensor(n2, "w.weight"), *gb = net_find_tensor(n2, "w.bias");
    struct {
        const char *name;
        const float *ref;
        size_t n;
    } grads[] = {{"fc.weight", net_find_tensor(n2, "fc.weight")->g, (size_t)NC * W * H * H},
                 {"fc.bias", net_find_tensor(n2, "fc.bias")->g, NC},
                 {"a.weight", gw->g, (size_t)A * C * 9},
                 {"a.bias", gb->g, A},
                 {"b.weight", gw->g + A * C * 9, (size_t)B * C * 9},
                 {"b.bias", gb->g + A, B},
                 {"c.weight", gw->g + (A + B) * C * 9, (size_t)K * C * 9},
                 {"c.bias", gb->g + A + B, K}};
    for (size_t i = 0; i < DT_ARRAY_LEN(grads); i++) {
        const dt_param *p = net_find_tensor(n1, grads[i].name);
        double *ref = malloc(sizeof(double) * grads[i].n);
        for (size_t j = 0; j < grads[i].n; j++) ref[j] = grads[i].ref[j];
        ck_assert_int_eq((int)p->n, (int)grads[i].n);
        ck_assert_msg(close_f32_f64(p->g, ref, p->n, 1e-6, 1e-5, grads[i].name, msg, sizeof msg), "%s", msg);
        free(ref);
    }
    net_destroy(n1);
    net_destroy(n2);
    free(w), free(b), free(wf), free(bf), free(x);
}
END_TEST

/* resnet20 fuses each batch norm with the relu that alone consumes it (10 of its 19) and each add
 * with the relu after it (9), and a training pass then gives the bits of DTRAIN_FUSE=0's: loss,
 * gradients, running statistics */
START_TEST(fused_net_equals_unfused)
{
    const int R = 3;
    dt_net *nets[2];
    for (int k = 0; k < 2; k++) {
        if (k) setenv("DTRAIN_FUSE", "0", 1);
        ck_assert_int_eq(net_load("resnet20", &nets[k]), 0);
        ck_assert_msg(net_alloc(nets[k], be, R) == 0, "%s", dt_errmsg());
        unsetenv("DTRAIN_FUSE");
        ck_assert_int_eq(net_init_params(nets[k], 9), 0);
        int fused = 0, fusing = 0, adds = 0;
        for (int i = 0; i < nets[k]->n_layers; i++) {
            const dt_layer *l = nets[k]->layers[i];
            fused += l->fused, fusing += l->fuse_relu, adds += l->fuse_relu && strcmp(l->ops->type, "add") == 0;
            if (l->fused) {
                ck_assert_ptr_eq(l->y, l->in[0]->y);
                ck_assert_ptr_eq(l->dy, l->in[0]->dy);
            }
        }
        ck_assert_int_eq(fused, k ? 0 : 19);
        ck_assert_int_eq(adds, k ? 0 : 9);
        ck_assert_int_eq(fusing, fused);
    }
    size_t nx = (size_t)R * 3 * 32 * 32;
    float *x = malloc(sizeof(float) * nx);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 7919) % 255) / 127.0f - 1.0f;
    int32_t y[3] = {1, 7, 4};
    dt_pass pass[2];
    for (int k = 0; k < 2; k++) {
        net_set_input(nets[k], x, R);
        net_set_labels(nets[k], y, R);
        pass[k] = (dt_pass){.rows = R, .train = 1, .labels = nets[k]->labels, .rng_key = 1, .grad_scale = 1.0f / R};
        ck_assert_msg(net_forward(nets[k], &pass[k]) == 0 && net_backward(nets[k], &pass[k], NULL, NULL) == 0, "%s",
                      dt_errmsg());
    }
    ck_assert_msg(pass[0].loss_sum == pass[1].loss_sum, "loss %.17g fused, %.17g not", pass[0].loss_sum,
                  pass[1].loss_sum);
    ck_assert_uint_eq(nets[0]->n_params, nets[1]->n_params);
    ck_assert_msg(memcmp(nets[0]->g, nets[1]->g, sizeof(float) * nets[0]->n_params) == 0, "the gradients differ");
    ck_assert_msg(memcmp(nets[0]->state, nets[1]->state, sizeof(float) * nets[0]->n_state) == 0,
                  "the running statistics differ");
    free(x);
    net_destroy(nets[0]), net_destroy(nets[1]);
}
END_TEST

/* a deep net holds a handful of gradient buffers, not one per layer */
START_TEST(gradient_buffers_shared)
{
    const char *names[] = {"resnet20", "resnet50", "alexnet"};
    for (size_t i = 0; i < DT_ARRAY_LEN(names); i++) {
        dt_net *net;
        ck_assert_int_eq(net_load(names[i], &net), 0);
        ck_assert_int_eq(net_alloc(net, be, 1), 0);
        int n_dy = 0;
        for (int k = 0; k < net->n_layers; k++) n_dy += net->layers[k]->dy != NULL;
        ck_assert_msg(n_dy >= 20 && net->n_dy_bufs <= 3, "%s: %d gradients in %d buffers", names[i], n_dy,
                      net->n_dy_bufs);
        net_destroy(net);
    }
}
END_TEST

/* a frozen layer gets no gradient and no arena space, and still passes gradients through */
START_TEST(frozen_layers_pass_gradients_only)
{
    dt_net *net;
    const char *text = "input shape=3x6x6\n"
                       "conv name=c1 out=8 k=3\n"
                       "conv name=c2 out=8 k=3 frozen=1\n"
                       "batchnorm name=bn frozen=1\n"
                       "flatten\n"
                       "dense name=fc out=4\n"
                       "softmax_xent\n";
    ck_assert_msg(net_parse(text, "f.net", "f", &net) == 0, "%s", dt_errmsg());
    ck_assert_uint_eq(net->n_params, (size_t)(8 * 3 * 9 + 8) + (4 * 8 * 2 * 2 + 4));
    ck_assert_uint_eq(net_n_weights(net), net->n_params + 8 * 8 * 9 + 8 + 8 + 8);
    ck_assert_uint_eq(net->n_state, (size_t)8 * 8 * 9 + 8 + 4 * 8);
    ck_assert_ptr_null(net_find_tensor(net, "c2.weight")->g);
    ck_assert_int_eq(net_alloc(net, be, 2), 0);
    ck_assert_int_eq(net_init_params(net, 3), 0);
    float x[2 * 3 * 36];
    for (int i = 0; i < 2 * 3 * 36; i++) x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    int32_t y[2] = {1, 3};
    net_set_input(net, x, 2);
    net_set_labels(net, y, 2);
    dt_pass pass = {.rows = 2, .train = 1, .labels = net->labels, .grad_scale = 0.5f};
    float keep[8 * 8 * 9];
    memcpy(keep, net_find_tensor(net, "c2.weight")->w, sizeof keep);
    ck_assert_int_eq(net_forward(net, &pass), 0);
    ck_assert_int_eq(net_backward(net, &pass, NULL, NULL), 0);
    double norm = 0.0;
    const dt_param *g1 = net_find_tensor(net, "c1.weight");
    for (size_t i = 0; i < g1->n; i++) norm += fabs(g1->g[i]);
    ck_assert_msg(norm > 0.0, "no gradient reached c1 through the frozen layers");
    ck_assert_int_eq(memcmp(keep, net_find_tensor(net, "c2.weight")->w, sizeof keep), 0);
    net_destroy(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cnn");
    TCase *fd = tcase_create("finite differences (double reference)");
    TCase *fast = tcase_create("fast kernels vs reference");
    TCase *net = tcase_create("nets");
    TCase *nhwc = tcase_create("nets, channels last");
    tcase_add_test(fd, fd_conv);
    tcase_add_test(fd, fd_pool);
    tcase_add_test(fd, fd_batchnorm);
    tcase_add_test(fd, fd_lrn);
    tcase_add_test(fd, fd_add);
    tcase_add_checked_fixture(fast, be_setup, be_teardown);
    tcase_set_timeout(fast, 120);
    tcase_add_test(fast, fast_conv_matches_reference);
    tcase_add_test(fast, fast_pool_matches_reference);
    tcase_add_test(fast, pool_2x2_avx512_equals_loop);
    tcase_add_test(fast, fast_batchnorm_matches_reference);
    tcase_add_test(fast, fused_bn_relu_equals_bn_then_relu);
    tcase_add_test(fast, add2_equals_copy_add_relu);
    tcase_add_test(fast, batchnorm_precise_on_resnet20_layers);
    tcase_add_test(fast, fast_lrn_matches_reference);
    tcase_add_test(fast, shortcut_and_copy_on_threads);
    tcase_add_checked_fixture(net, be_setup_blocked, be_teardown);
    tcase_add_test(net, residual_net_matches_reference);
    tcase_add_test(net, concat_equals_one_wide_conv);
    tcase_add_test(net, frozen_layers_pass_gradients_only);
    tcase_add_test(net, gradient_buffers_shared);
    tcase_add_test(net, fused_net_equals_unfused);
    tcase_add_checked_fixture(nhwc, be_setup_nhwc, be_teardown);
    tcase_add_test(nhwc, residual_net_matches_reference);
    tcase_add_test(nhwc, concat_equals_one_wide_conv);
    tcase_add_test(nhwc, fused_net_equals_unfused);
    suite_add_tcase(s, fd);
    suite_add_tcase(s, fast);
    suite_add_tcase(s, net);
    suite_add_tcase(s, nhwc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
