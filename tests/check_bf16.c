/* --precision bf16 on the CPU backend: its GEMMs and convolutions equal the double reference
 * applied to inputs rounded to bfloat16 (to nearest even, rounded here by our own function, not
 * the backend's), within fp32 summation tolerances; and they differ from the reference on the
 * unrounded inputs, so a backend that ignored bf16 would fail. Skips (77) on a CPU without bf16
 * instructions, where the backend refuses bf16 (tests/precision.sh checks that message). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/backend_cpu.h"
#include "ref.h"
#include "rng.h"
#include "testutil.h"
#include "util.h"

/* products of bf16 values are exact in fp32; what is left is fp32 summation over at most a few
 * thousand terms of U(-1,1) */
#define TOL_ATOL 2e-5
#define TOL_RTOL 1e-4

static dt_backend *be;
static char msg[1024];

static void setup(void)
{
    dt_backend_opts o = {.n_threads = 2, .device = -1, .precision = DT_PRECISION_BF16};
    ck_assert_msg(backend_cpu_create_with(&be, &o) == 0, "%s", dt_errmsg());
}
static void teardown(void) { backend_destroy(be); }

/* to nearest even, as IEEE; inputs here are finite and normal */
static double bf16(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t lsb = (u >> 16) & 1;
    u = (u + 0x7fffu + lsb) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static double *rounded(const double *x, size_t n)
{
    double *r = malloc(sizeof *r * (n ? n : 1));
    for (size_t i = 0; i < n; i++) r[i] = bf16(x[i]);
    return r;
}

static double *rnd(size_t n, uint64_t seed)
{
    double *x = malloc(sizeof *x * (n ? n : 1));
    fill_uniform_d(x, n, -1, 1, seed);
    return x;
}

static float *dev(const double *x, size_t n)
{
    float *d = be->alloc(be, sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) d[i] = (float)x[i];
    return d;
}

/* 1 when some element of got is farther from ref than the tolerance: the result is not fp32's */
static int differs(const float *got, const double *ref, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(got[i] - ref[i]) > TOL_ATOL + TOL_RTOL * fabs(ref[i])) return 1;
    return 0;
}

/* C = alpha op(A) op(B) + beta C, every transposition, odd sizes, padded leading dimensions */
START_TEST(gemm_rounds_operands)
{
    const int shapes[][3] = {{1, 1, 1}, {3, 7, 33}, {33, 17, 100}, {64, 10, 784}, {7, 130, 3}, {100, 300, 256}};
    for (size_t s = 0; s < DT_ARRAY_LEN(shapes); s++)
        for (int t = 0; t < 8; t++) {
            int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = t & 1, tb = (t >> 1) & 1;
            float alpha = t & 4 ? 0.5f : 1.0f, beta = t & 4 ? 1.0f : 0.0f;
            int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
            int lda = ac + (int)(s % 3), ldb = bc + 1, ldc = n + 2;
            double *a = rnd((size_t)ar * lda, 10 + s * 8 + t), *b = rnd((size_t)br * ldb, 20 + s * 8 + t),
                   *c0 = rnd((size_t)m * ldc, 30 + s * 8 + t);
            double *ra = rounded(a, (size_t)ar * lda), *rb = rounded(b, (size_t)br * ldb);
            double *want = malloc(sizeof(double) * m * ldc), *plain = malloc(sizeof(double) * m * ldc);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < ldc; j++) {
                    double sr = 0, sp = 0;
                    for (int l = 0; l < k && j < n; l++) {
                        size_t ia = ta ? (size_t)l * lda + i : (size_t)i * lda + l,
                               ib = tb ? (size_t)j * ldb + l : (size_t)l * ldb + j;
                        sr += ra[ia] * rb[ib], sp += a[ia] * b[ib];
                    }
                    double keep = (float)c0[(size_t)i * ldc + j];
                    want[(size_t)i * ldc + j] = j < n ? alpha * sr + beta * keep : keep;
                    plain[(size_t)i * ldc + j] = j < n ? alpha * sp + beta * keep : keep;
                }
            float *da = dev(a, (size_t)ar * lda), *db = dev(b, (size_t)br * ldb), *dc = dev(c0, (size_t)m * ldc);
            ck_assert_msg(be->gemm(be, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc) == 0, "%s",
                          dt_errmsg());
            char what[96];
            snprintf(what, sizeof what, "%c%c m=%d n=%d k=%d alpha %g beta %g", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n,
                     k, alpha, beta);
            ck_assert_msg(close_f32_f64(dc, want, (size_t)m * ldc, TOL_ATOL, TOL_RTOL, what, msg, sizeof msg), "%s",
                          msg);
            if (k >= 33) ck_assert_msg(differs(dc, plain, (size_t)m * ldc), "%s: equals fp32's GEMM", what);
            be->free(be, da), be->free(be, db), be->free(be, dc);
            free(a), free(b), free(c0), free(ra), free(rb), free(want), free(plain);
        }
}
END_TEST

/* convolutions forward and backward in every layout, groups, strides, bias; dx written and added.
 * A layer of fewer than 16 input channels with a plain output (lenet's first) multiplies in fp32
 * (backend_cpu_dnnl.c: oneDNN's fp32 direct kernels are faster there than its bf16 ones): it
 * equals the reference on the unrounded inputs instead, and so does the weights' gradient of a
 * strided 3x3 layer of 16 to 32 input channels at 64 rows or more on a CPU without AMX (oneDNN's
 * fp32 kernel is faster there: backend_cpu_dnnl.c, weights_in_fp32). */
START_TEST(conv_rounds_operands)
{
    static const char *lname[] = {"plain", "nChw16c", "NHWC"};
    const struct {
        int rows, c, h, w, o, k, s, p, groups, bias;
    } cases[] = {{2, 3, 9, 9, 16, 3, 1, 1, 1, 1},   {3, 16, 8, 8, 32, 3, 2, 1, 1, 0},
                 {1, 32, 7, 7, 32, 1, 1, 0, 1, 1},  {2, 8, 11, 11, 6, 5, 1, 2, 2, 1},
                 {4, 1, 28, 28, 20, 5, 1, 0, 1, 1}, {2, 20, 12, 12, 50, 5, 1, 0, 1, 0},
                 {64, 16, 8, 8, 32, 3, 2, 1, 1, 1}, {63, 16, 8, 8, 32, 3, 2, 1, 1, 0}};
    for (size_t t = 0; t < DT_ARRAY_LEN(cases); t++) {
        ref_conv g = {.rows = cases[t].rows, .c = cases[t].c, .h = cases[t].h, .w = cases[t].w, .o = cases[t].o,
                      .kh = cases[t].k, .kw = cases[t].k, .sh = cases[t].s, .sw = cases[t].s, .pt = cases[t].p,
                      .pl = cases[t].p, .groups = cases[t].groups};
        g.oh = (g.h + 2 * g.pt - g.kh) / g.sh + 1, g.ow = (g.w + 2 * g.pl - g.kw) / g.sw + 1;
        int bias = cases[t].bias;
        size_t nx = (size_t)g.rows * g.c * g.h * g.w, nw = (size_t)g.o * (g.c / g.groups) * g.kh * g.kw,
               ny = (size_t)g.rows * g.o * g.oh * g.ow;
        double *x = rnd(nx, 100 + t), *w = rnd(nw, 200 + t), *b = rnd(g.o, 300 + t), *dy = rnd(ny, 400 + t);
        double *rx = rounded(x, nx), *rw = rounded(w, nw), *rdy = rounded(dy, ny);
        double *y = malloc(sizeof(double) * ny), *yp = malloc(sizeof(double) * ny), *dx = malloc(sizeof(double) * nx),
               *dx2 = malloc(sizeof(double) * nx), *dw = malloc(sizeof(double) * nw),
               *db = malloc(sizeof(double) * g.o), *x0 = rnd(nx, 500 + t), *dxp = malloc(sizeof(double) * nx),
               *dx2p = malloc(sizeof(double) * nx), *dwp = malloc(sizeof(double) * nw),
               *dbp = malloc(sizeof(double) * g.o);
        ref_conv_fwd(&g, rx, rw, bias ? b : NULL, y);
        ref_conv_fwd(&g, x, w, bias ? b : NULL, yp);
        ref_conv_bwd(&g, rx, rw, rdy, dx, dw, db);
        ref_conv_bwd(&g, x, w, dy, dxp, dwp, dbp);
        for (size_t i = 0; i < nx; i++) dx2[i] = (float)x0[i] + dx[i], dx2p[i] = (float)x0[i] + dxp[i];
        for (int li = 0; li < 3; li++)
            for (int lo = 0; lo < 3; lo++) {
                dt_layout lin = (dt_layout)li, lout = (dt_layout)lo; /* plain, nChw16c, NHWC */
                if ((li && g.c % 16) || (lo && g.o % 16)) continue;
                int f32 = g.c < 16 && lout == DT_LAYOUT_PLAIN;
                int w32 = f32 || (!cpu_has_amx() && g.sh > 1 && g.kh > 1 && g.c >= 16 && g.c <= 32 && g.rows >= 64);
                const double *wy = f32 ? yp : y, *wdx = f32 ? dxp : dx, *wdx2 = f32 ? dx2p : dx2,
                             *wdw = w32 ? dwp : dw, *wdb = w32 ? dbp : db;
                dt_conv_cfg cfg = {g.c,  g.h,  g.w,  g.o,  g.oh,     g.ow, g.kh, g.kw, g.sh, g.sw,
                                   g.pt, g.pt, g.pl, g.pl, g.groups, bias, lin,  lout, 0,    0};
                void *plan = be->conv_plan(be, &cfg);
                ck_assert_msg(plan != NULL, "%s", dt_errmsg());
                size_t sx = be->act_size(be, lin, g.rows, g.c, g.h, g.w),
                       sy = be->act_size(be, lout, g.rows, g.o, g.oh, g.ow);
                float *tmp = malloc(sizeof(float) * (nx > ny ? nx : ny));
                float *fx = be->alloc(be, sizeof(float) * sx), *fdx = be->alloc(be, sizeof(float) * sx),
                      *fy = be->alloc(be, sizeof(float) * sy), *fdy = be->alloc(be, sizeof(float) * sy);
                float *fw = dev(w, nw), *fb = dev(b, g.o), *fdw = dev(w, nw), *fdb = dev(b, g.o);
                for (size_t i = 0; i < nx; i++) tmp[i] = (float)x[i];
                be->from_plain(be, lin, tmp, fx, g.rows, g.c, g.h, g.w, 0.0f);
                for (size_t i = 0; i < nx; i++) tmp[i] = (float)x0[i];
                be->from_plain(be, lin, tmp, fdx, g.rows, g.c, g.h, g.w, 0.0f);
                for (size_t i = 0; i < ny; i++) tmp[i] = (float)dy[i];
                be->from_plain(be, lout, tmp, fdy, g.rows, g.o, g.oh, g.ow, 0.0f);
                char what[128];
                snprintf(what, sizeof what, "case %zu (%dx%dx%d -> %dx%dx%d, k %d, s %d, g %d, %s->%s%s)", t, g.c, g.h,
                         g.w, g.o, g.oh, g.ow, g.kh, g.sh, g.groups, lname[lin], lname[lout],
                         f32 ? ", in fp32" : w32 ? ", dW in fp32" : "");
                ck_assert_msg(be->conv_fwd(be, plan, g.rows, fx, fw, bias ? fb : NULL, fy) == 0, "%s", dt_errmsg());
                be->to_plain(be, lout, fy, tmp, g.rows, g.o, g.oh, g.ow);
                ck_assert_msg(close_f32_f64(tmp, wy, ny, TOL_ATOL, TOL_RTOL, "y", msg, sizeof msg), "%s: %s",
                              what, msg);
                if (!f32) ck_assert_msg(differs(tmp, yp, ny), "%s: y equals fp32's", what);
                ck_assert_msg(be->conv_bwd(be, plan, g.rows, fx, fw, fdy, fdx, 1.0f, fdw, bias ? fdb : NULL) == 0, "%s",
                              dt_errmsg());
                be->to_plain(be, lin, fdx, tmp, g.rows, g.c, g.h, g.w);
                ck_assert_msg(close_f32_f64(tmp, wdx2, nx, TOL_ATOL, TOL_RTOL, "dx (added)", msg, sizeof msg), "%s: %s",
                              what, msg);
                ck_assert_msg(close_f32_f64(fdw, wdw, nw, TOL_ATOL, TOL_RTOL, "dW", msg, sizeof msg), "%s: %s",
                              what, msg);
                ck_assert_msg(differs(fdw, w32 ? dw : dwp, nw), "%s: dW equals %s's", what, w32 ? "bf16" : "fp32");
                if (bias)
                    ck_assert_msg(close_f32_f64(fdb, wdb, g.o, TOL_ATOL, TOL_RTOL, "db", msg, sizeof msg), "%s: %s",
                                  what, msg);
                /* the backward after a forward of another x: its own x's rounding, not the forward's */
                float *fx2 = be->alloc(be, sizeof(float) * sx);
                for (size_t i = 0; i < nx; i++) tmp[i] = (float)x0[i];
                be->from_plain(be, lin, tmp, fx2, g.rows, g.c, g.h, g.w, 0.0f);
                ck_assert_int_eq(be->conv_fwd(be, plan, g.rows, fx2, fw, bias ? fb : NULL, fy), 0);
                ck_assert_int_eq(be->conv_bwd(be, plan, g.rows, fx, fw, fdy, NULL, 0.0f, fdw, bias ? fdb : NULL), 0);
                ck_assert_msg(close_f32_f64(fdw, wdw, nw, TOL_ATOL, TOL_RTOL, "dW after another x's forward", msg,
                                            sizeof msg),
                              "%s: %s", what, msg);
                be->free(be, fx2);
                ck_assert_int_eq(be->conv_bwd(be, plan, g.rows, fx, fw, fdy, fdx, 0.0f, NULL, NULL), 0);
                be->to_plain(be, lin, fdx, tmp, g.rows, g.c, g.h, g.w);
                ck_assert_msg(close_f32_f64(tmp, wdx, nx, TOL_ATOL, TOL_RTOL, "dx", msg, sizeof msg), "%s: %s",
                              what, msg);
                be->plan_free(be, plan);
                be->free(be, fx), be->free(be, fdx), be->free(be, fy), be->free(be, fdy);
                be->free(be, fw), be->free(be, fb), be->free(be, fdw), be->free(be, fdb);
                free(tmp);
            }
        free(x), free(w), free(b), free(dy), free(rx), free(rw), free(rdy), free(y), free(yp), free(dx), free(dx2);
        free(dw), free(db), free(x0), free(dxp), free(dx2p), free(dwp), free(dbp);
    }
}
END_TEST

/* A convolution whose only consumer is a batch norm keeps y and dy in bf16 (conv_bf16_out; net.c
 * marks the edge): against the same ops on fp32 buffers, bit for bit. The convolution writes y as
 * its fp32 output rounded; batch norm on those bf16 values gives what it gives on their fp32
 * widening (y, the statistics, the scale and shift gradients), and its dx is that fp32 dx rounded;
 * the convolution's backward on that bf16 dy gives the dx and dW it gives on its widening. Where the
 * backend keeps fp32 (a plain side, or the weights' gradient in fp32), conv_bf16_out says no. */
static float widened(const float *buf16, size_t i) { return cpu_float_of_bf16(((const uint16_t *)buf16)[i]); }

START_TEST(conv_bn_edge_in_bf16)
{
    static const char *lname[] = {"plain", "nChw16c", "NHWC"};
    const struct {
        int rows, c, h, w, o, k, s, p, bias;
    } cases[] = {{3, 16, 9, 9, 16, 3, 1, 1, 0}, {2, 32, 6, 7, 48, 1, 1, 0, 1}, {5, 64, 8, 8, 64, 3, 2, 1, 0}};
    for (size_t t = 0; t < DT_ARRAY_LEN(cases); t++)
        for (int li = 1; li < 3; li++) {
            dt_layout lay = (dt_layout)li;
            int rows = cases[t].rows, C = cases[t].c, O = cases[t].o, k = cases[t].k, st = cases[t].s, pd = cases[t].p,
                H = cases[t].h, W = cases[t].w, OH = (H + 2 * pd - k) / st + 1, OW = (W + 2 * pd - k) / st + 1,
                bias = cases[t].bias;
            dt_conv_cfg c32 = {C, H, W, O, OH, OW, k, k, st, st, pd, pd, pd, pd, 1, bias, lay, lay, 0, 0}, c16 = c32;
            ck_assert_msg(be->conv_bf16_out && be->conv_bf16_out(be, &c32), "case %zu %s: conv_bf16_out said no", t,
                          lname[li]);
            c16.out_bf16 = 1;
            dt_bn_cfg b32 = {O, OH, OW, 1e-5f, lay, 0, 0, 0}, b16 = b32;
            b16.in_bf16 = 1;
            void *pc32 = be->conv_plan(be, &c32), *pc16 = be->conv_plan(be, &c16), *pb32 = be->bn_plan(be, &b32),
                 *pb16 = be->bn_plan(be, &b16);
            ck_assert_msg(pc32 && pc16 && pb32 && pb16, "%s", dt_errmsg());
            size_t nx = (size_t)rows * C * H * W, ny = (size_t)rows * O * OH * OW, nw = (size_t)O * C * k * k;
            double *dx0 = rnd(nx, 10 + t), *dw0 = rnd(nw, 20 + t), *db0 = rnd((size_t)O, 30 + t),
                   *dg = rnd((size_t)O, 40 + t), *dbt = rnd((size_t)O, 50 + t), *ddy = rnd(ny, 60 + t);
            float *x = dev(dx0, nx), *w = dev(dw0, nw), *b = dev(db0, (size_t)O), *gam = dev(dg, (size_t)O),
                  *bet = dev(dbt, (size_t)O), *dz = dev(ddy, ny);
            float *y32 = be->alloc(be, 4 * ny), *y16 = be->alloc(be, 4 * ny), *yw = be->alloc(be, 4 * ny),
                  *z32 = be->alloc(be, 4 * ny), *z16 = be->alloc(be, 4 * ny), *m32 = be->alloc(be, 4 * (size_t)O),
                  *v32 = be->alloc(be, 4 * (size_t)O), *m16 = be->alloc(be, 4 * (size_t)O),
                  *v16 = be->alloc(be, 4 * (size_t)O), *d32 = be->alloc(be, 4 * ny), *d16 = be->alloc(be, 4 * ny),
                  *dw = be->alloc(be, 4 * (size_t)O * 4), *g32 = dw, *s32 = dw + O, *g16 = dw + 2 * O,
                  *s16 = dw + 3 * O, *dyw = be->alloc(be, 4 * ny), *ex32 = be->alloc(be, 4 * nx),
                  *ex16 = be->alloc(be, 4 * nx), *ew32 = be->alloc(be, 4 * nw), *ew16 = be->alloc(be, 4 * nw),
                  *eb32 = be->alloc(be, 4 * (size_t)O), *eb16 = be->alloc(be, 4 * (size_t)O);
            char what[96];
            snprintf(what, sizeof what, "case %zu (%d -> %d, k %d, s %d, %s)", t, C, O, k, st, lname[li]);
            ck_assert_int_eq(be->conv_fwd(be, pc32, rows, x, w, bias ? b : NULL, y32), 0);
            ck_assert_int_eq(be->conv_fwd(be, pc16, rows, x, w, bias ? b : NULL, y16), 0);
            for (size_t i = 0; i < ny; i++) {
                ck_assert_msg(((uint16_t *)y16)[i] == cpu_bf16_of(y32[i]), "%s: y[%zu] %.9g, not %.9g rounded", what, i,
                              (double)widened(y16, i), (double)y32[i]);
                yw[i] = widened(y16, i);
            }
            ck_assert_int_eq(be->bn_fwd(be, pb32, rows, 1, yw, gam, bet, m32, v32, z32), 0);
            ck_assert_int_eq(be->bn_fwd(be, pb16, rows, 1, y16, gam, bet, m16, v16, z16), 0);
            ck_assert_msg(!memcmp(z32, z16, 4 * ny) && !memcmp(m32, m16, 4 * (size_t)O) &&
                              !memcmp(v32, v16, 4 * (size_t)O),
                          "%s: batch norm on bf16 x differs from batch norm on its widening", what);
            ck_assert_int_eq(be->bn_bwd(be, pb32, rows, yw, gam, m32, v32, dz, NULL, d32, 0.0f, g32, s32), 0);
            ck_assert_int_eq(be->bn_bwd(be, pb16, rows, y16, gam, m16, v16, dz, NULL, d16, 0.0f, g16, s16), 0);
            ck_assert_msg(!memcmp(g32, g16, 4 * (size_t)O) && !memcmp(s32, s16, 4 * (size_t)O),
                          "%s: batch norm's scale and shift gradients differ on bf16 x", what);
            for (size_t i = 0; i < ny; i++) {
                ck_assert_msg(((uint16_t *)d16)[i] == cpu_bf16_of(d32[i]), "%s: dx[%zu] %.9g, not %.9g rounded", what,
                              i, (double)widened(d16, i), (double)d32[i]);
                dyw[i] = widened(d16, i);
            }
            ck_assert_msg(be->bn_bwd(be, pb16, rows, y16, gam, m16, v16, dz, NULL, d16, 1.0f, g16, s16) != 0,
                          "%s: a bf16 dx was added to", what);
            ck_assert_int_eq(be->conv_bwd(be, pc32, rows, x, w, dyw, ex32, 0.0f, ew32, bias ? eb32 : NULL), 0);
            ck_assert_int_eq(be->conv_bwd(be, pc16, rows, x, w, d16, ex16, 0.0f, ew16, bias ? eb16 : NULL), 0);
            ck_assert_msg(!memcmp(ex32, ex16, 4 * nx) && !memcmp(ew32, ew16, 4 * nw) &&
                              (!bias || !memcmp(eb32, eb16, 4 * (size_t)O)),
                          "%s: the convolution's backward on bf16 dy differs from it on its widening", what);
            float *all[] = {x,   w,   b,   gam, bet, dz,  y32,  y16,  yw,   z32,  z16,  m32, v32,
                            m16, v16, d32, d16, dw,  dyw, ex32, ex16, ew32, ew16, eb32, eb16};
            for (size_t i = 0; i < DT_ARRAY_LEN(all); i++) be->free(be, all[i]);
            be->plan_free(be, pc32), be->plan_free(be, pc16), be->plan_free(be, pb32), be->plan_free(be, pb16);
            free(dx0), free(dw0), free(db0), free(dg), free(dbt), free(ddy);
        }
    /* where it keeps fp32: a plain side; the weights' gradient of a strided 16 -> 32 layer in fp32 */
    dt_conv_cfg plain = {16, 8, 8, 16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, DT_LAYOUT_PLAIN, DT_LAYOUT_BLOCK16, 0, 0},
                strided = {16, 8, 8, 32, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, DT_LAYOUT_BLOCK16, DT_LAYOUT_BLOCK16,
                           0,  0},
                blocked = {16, 8, 8, 16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, DT_LAYOUT_BLOCK16, DT_LAYOUT_BLOCK16,
                           0,  0};
    ck_assert(!be->conv_bf16_out(be, &plain));
    ck_assert(cpu_has_amx() || !be->conv_bf16_out(be, &strided));
    dt_backend *f32;
    dt_backend_opts o = {.n_threads = 1, .device = -1, .precision = DT_PRECISION_FP32};
    ck_assert_int_eq(backend_cpu_create_with(&f32, &o), 0);
    ck_assert_msg(be->conv_bf16_out(be, &blocked) && (!f32->conv_bf16_out || !f32->conv_bf16_out(f32, &blocked)),
                  "bf16 edges under fp32");
    backend_destroy(f32);
}
END_TEST

/* A batch norm (with its relu fused) whose only consumer is a convolution writes y in bf16
 * (dt_bn_cfg's out_bf16) and the convolution takes it so (in_bf16): the same bits as on fp32 y,
 * which the convolution rounded itself: y is that rounding, the convolution's y, dx and dW are its
 * own on fp32 y, and batch norm's backward (its relu's mask from the bf16 y) is its own on fp32 y;
 * with batch norm's input in bf16 too (a convolution's before it) and without. */
START_TEST(bn_conv_edge_in_bf16)
{
    static const char *lname[] = {"plain", "nChw16c", "NHWC"};
    const struct {
        int rows, c, h, w, o, k;
    } cases[] = {{3, 16, 9, 9, 16, 3}, {2, 32, 6, 7, 48, 1}, {4, 64, 5, 5, 32, 3}};
    for (size_t t = 0; t < DT_ARRAY_LEN(cases); t++)
        for (int li = 1; li < 3; li++)
            for (int xin = 0; xin < 2; xin++) {
                dt_layout lay = (dt_layout)li;
                int rows = cases[t].rows, C = cases[t].c, O = cases[t].o, k = cases[t].k, H = cases[t].h,
                    W = cases[t].w, pd = k / 2;
                dt_bn_cfg b32 = {C, H, W, 1e-5f, lay, 1, xin, 0}, b16 = b32;
                b16.out_bf16 = 1;
                dt_conv_cfg c32 = {C, H, W, O, H, W, k, k, 1, 1, pd, pd, pd, pd, 1, 1, lay, lay, 0, 0}, c16 = c32;
                ck_assert_msg(be->conv_bf16_in && be->conv_bf16_in(be, &c32), "case %zu: conv_bf16_in said no", t);
                c16.in_bf16 = 1;
                void *pb32 = be->bn_plan(be, &b32), *pb16 = be->bn_plan(be, &b16), *pc32 = be->conv_plan(be, &c32),
                     *pc16 = be->conv_plan(be, &c16);
                ck_assert_msg(pb32 && pb16 && pc32 && pc16, "%s", dt_errmsg());
                size_t nx = (size_t)rows * C * H * W, ny = (size_t)rows * O * H * W, nw = (size_t)O * C * k * k;
                double *dx0 = rnd(nx, 70 + t), *dw0 = rnd(nw, 80 + t), *db0 = rnd((size_t)O, 90 + t),
                       *dg = rnd((size_t)C, 100 + t), *dbt = rnd((size_t)C, 110 + t), *ddy = rnd(ny, 120 + t),
                       *rx = rounded(dx0, nx);
                float *x = dev(rx, nx), *w = dev(dw0, nw), *b = dev(db0, (size_t)O), *gam = dev(dg, (size_t)C),
                      *bet = dev(dbt, (size_t)C), *dy = dev(ddy, ny);
                for (size_t i = 0; xin && i < nx; i++) ((uint16_t *)x)[i] = cpu_bf16_of(x[i]); /* in place, as bf16 */
                float *z32 = be->alloc(be, 4 * nx), *z16 = be->alloc(be, 4 * nx), *m32 = be->alloc(be, 4 * (size_t)C),
                      *v32 = be->alloc(be, 4 * (size_t)C), *m16 = be->alloc(be, 4 * (size_t)C),
                      *v16 = be->alloc(be, 4 * (size_t)C), *y32 = be->alloc(be, 4 * ny), *y16 = be->alloc(be, 4 * ny),
                      *e32 = be->alloc(be, 4 * nx), *e16 = be->alloc(be, 4 * nx), *w32 = be->alloc(be, 4 * nw),
                      *w16 = be->alloc(be, 4 * nw), *bb32 = be->alloc(be, 4 * (size_t)O),
                      *bb16 = be->alloc(be, 4 * (size_t)O), *d32 = be->alloc(be, 4 * nx), *d16 = be->alloc(be, 4 * nx),
                      *s = be->alloc(be, 16 * (size_t)C);
                char what[112];
                snprintf(what, sizeof what, "case %zu (%d -> %d, k %d, %s, batch norm's x in %s)", t, C, O, k,
                         lname[li], xin ? "bf16" : "fp32");
                ck_assert_int_eq(be->bn_fwd(be, pb32, rows, 1, x, gam, bet, m32, v32, z32), 0);
                ck_assert_int_eq(be->bn_fwd(be, pb16, rows, 1, x, gam, bet, m16, v16, z16), 0);
                for (size_t i = 0; i < nx; i++)
                    ck_assert_msg(((uint16_t *)z16)[i] == cpu_bf16_of(z32[i]), "%s: y[%zu] %.9g, not %.9g rounded",
                                  what, i, (double)widened(z16, i), (double)z32[i]);
                ck_assert_msg(!memcmp(m32, m16, 4 * (size_t)C) && !memcmp(v32, v16, 4 * (size_t)C),
                              "%s: the statistics differ", what);
                ck_assert_int_eq(be->conv_fwd(be, pc32, rows, z32, w, b, y32), 0);
                ck_assert_int_eq(be->conv_fwd(be, pc16, rows, z16, w, b, y16), 0);
                ck_assert_msg(!memcmp(y32, y16, 4 * ny), "%s: the convolution of the bf16 x differs", what);
                ck_assert_int_eq(be->conv_bwd(be, pc32, rows, z32, w, dy, e32, 0.0f, w32, bb32), 0);
                ck_assert_int_eq(be->conv_bwd(be, pc16, rows, z16, w, dy, e16, 0.0f, w16, bb16), 0);
                ck_assert_msg(!memcmp(e32, e16, 4 * nx) && !memcmp(w32, w16, 4 * nw) &&
                                  !memcmp(bb32, bb16, 4 * (size_t)O),
                              "%s: the convolution's backward on the bf16 x differs", what);
                ck_assert_int_eq(be->bn_bwd(be, pb32, rows, x, gam, m32, v32, e32, z32, d32, 0.0f, s, s + C), 0);
                ck_assert_int_eq(
                    be->bn_bwd(be, pb16, rows, x, gam, m16, v16, e32, z16, d16, 0.0f, s + 2 * C, s + 3 * C), 0);
                ck_assert_msg(!memcmp(d32, d16, (xin ? 2 : 4) * nx) && !memcmp(s, s + 2 * C, 8 * (size_t)C),
                              "%s: batch norm's backward with the relu's mask from the bf16 y differs", what);
                float *all[] = {x,   w,   b,   gam, bet, dy,  z32,  z16,  m32, v32, m16, v16,
                                y32, y16, e32, e16, w32, w16, bb32, bb16, d32, d16, s};
                for (size_t i = 0; i < DT_ARRAY_LEN(all); i++) be->free(be, all[i]);
                be->plan_free(be, pb32), be->plan_free(be, pb16), be->plan_free(be, pc32), be->plan_free(be, pc16);
                free(dx0), free(dw0), free(db0), free(dg), free(dbt), free(ddy), free(rx);
            }
}
END_TEST

/* bf16 bits of f to nearest even, rounded here (a NaN: 0x7fc0, standing for any NaN) */
static uint16_t bits16(float f)
{
    if (isnan(f)) return 0x7fc0;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static int same16(uint16_t got, uint16_t want)
{
    return want == 0x7fc0 ? (got & 0x7f80) == 0x7f80 && (got & 0x7f) != 0 : got == want;
}

/* random values with specials among them: NaN, infinities, signed zeros, the largest floats, bf16
 * ties (1 + 2^-8 rounds to 1, 1 + 3 * 2^-8 up) and a tiny normal */
static float *stream_values(size_t n, uint64_t seed)
{
    static const float special[] = {NAN,    INFINITY,    -INFINITY,   -0.0f,        0.0f,  3e38f,
                                    -3e38f, 1.00390625f, 1.01171875f, -1.00390625f, 1e-37f};
    double *d = rnd(n, seed);
    float *x = be->alloc(be, sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(4 * d[i]);
    for (size_t i = 0; i < n; i += 97) x[i] = special[(i / 97 + seed) % DT_ARRAY_LEN(special)];
    free(d);
    return x;
}

/* The residual stream in bf16: add2_bf16 for every combination of flags equals the sum of the
 * operands' floats (add2's sum and select) rounded to nearest even, bf16 for bf16; without bf16
 * flags add2's bits; relu_bwd_bf16 is relu_bwd on y widened; a shortcut of a bf16 x gives what it
 * gives of x widened. One thread's range and both threads' (above CPU_PAR_MIN). The fp32 backend
 * has no stream in bf16. */
START_TEST(residual_stream_in_bf16)
{
    ck_assert_msg(be->add2_bf16 && be->relu_bwd_bf16, "the bf16 backend has no add2_bf16 or relu_bwd_bf16");
    const size_t sizes[] = {37, 40003};
    for (size_t t = 0; t < DT_ARRAY_LEN(sizes); t++) {
        size_t n = sizes[t];
        float *a = stream_values(n, 3 + t), *b = stream_values(n, 7 + t), *ab = be->alloc(be, 4 * n),
              *bb = be->alloc(be, 4 * n), *y = be->alloc(be, 4 * n), *y2 = be->alloc(be, 4 * n);
        uint16_t *ah = (uint16_t *)(void *)ab, *bh = (uint16_t *)(void *)bb, *yh = (uint16_t *)(void *)y;
        /* pairs: -0 + -0 (relu's +0), an overflow, inf - inf (NaN), a tie's sum */
        const float pa[] = {-0.0f, 3e38f, INFINITY, 1.0f, -2.0f}, pb[] = {-0.0f, 3e38f, -INFINITY, 0.00390625f, 1.0f};
        for (size_t k = 0; k < DT_ARRAY_LEN(pa); k++) a[5 + k] = pa[k], b[5 + k] = pb[k];
        for (size_t i = 0; i < n; i++) ah[i] = bits16(a[i]), bh[i] = bits16(b[i]);
        for (size_t i = 0; i < n; i++) ah[i] = isnan(a[i]) ? 0x7fc1 : ah[i], bh[i] = isnan(b[i]) ? 0xffc1 : bh[i];
        for (int f = 0; f < 16; f++) {
            int relu = f & DT_ADD2_RELU, ub = f & DT_ADD2_A_BF16, vb = f & DT_ADD2_B_BF16, yb = f & DT_ADD2_Y_BF16;
            ck_assert_int_eq(be->add2_bf16(be, y, ub ? ab : a, vb ? bb : b, n, f), 0);
            for (size_t i = 0; i < n; i++) {
                float u = ub ? cpu_float_of_bf16(ah[i]) : a[i], v = vb ? cpu_float_of_bf16(bh[i]) : b[i], sum = u + v;
                if (relu) sum = sum > 0.0f ? sum : 0.0f;
                if (yb)
                    ck_assert_msg(same16(yh[i], bits16(sum)),
                                  "n %zu, flags %d: y[%zu] = %#06x, not %#06x (%.9g + %.9g)", n, f, i, yh[i],
                                  bits16(sum), (double)u, (double)v);
                else
                    ck_assert_msg(isnan(sum) ? isnan(y[i]) : !memcmp(&y[i], &sum, 4),
                                  "n %zu, flags %d: y[%zu] = %.9g, not %.9g", n, f, i, (double)y[i], (double)sum);
            }
            if (f > 1) continue;
            ck_assert_int_eq(be->add2(be, y2, a, b, n, relu), 0);
            ck_assert_msg(!memcmp(y, y2, 4 * n), "n %zu, flags %d: not add2's bits", n, f);
        }
        /* relu_bwd on y in bf16 (ab's) against relu_bwd on its floats, both betas */
        for (size_t i = 0; i < n; i++) y[i] = cpu_float_of_bf16(ah[i]);
        for (int beta = 0; beta < 2; beta++) {
            memcpy(y2, b, 4 * n);
            memcpy(bb, b, 4 * n);
            ck_assert_int_eq(be->relu_bwd_bf16(be, bb, a, ab, n, (float)beta), 0);
            ck_assert_int_eq(be->relu_bwd(be, y2, a, y, n, (float)beta), 0);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(isnan(y2[i]) ? isnan(bb[i]) : !memcmp(&bb[i], &y2[i], 4),
                              "n %zu, beta %d: relu_bwd_bf16's dx[%zu] = %.9g, relu_bwd's %.9g", n, beta, i,
                              (double)bb[i], (double)y2[i]);
        }
        float *all[] = {a, b, ab, bb, y, y2};
        for (size_t i = 0; i < DT_ARRAY_LEN(all); i++) be->free(be, all[i]);
    }
    for (int li = 0; li < 3; li++) {
        dt_layout lay = (dt_layout)li;
        int rows = 3, C = 16, H = 7, W = 9, O = 32, OH = 4, OW = 5;
        dt_shortcut_cfg c32 = {C, H, W, O, OH, OW, 2, (O - C) / 2, lay, lay, 0}, c16 = c32;
        c16.in_bf16 = 1;
        size_t nx = be->act_size(be, lay, rows, C, H, W), ny = be->act_size(be, lay, rows, O, OH, OW);
        float *x = stream_values(nx, 11), *x16 = be->alloc(be, 4 * nx), *y32 = be->alloc(be, 4 * ny),
              *y16 = be->alloc(be, 4 * ny);
        for (size_t i = 0; i < nx; i++) ((uint16_t *)(void *)x16)[i] = bits16(x[i]);
        for (size_t i = 0; i < nx; i++) x[i] = widened(x16, i);
        ck_assert_int_eq(be->shortcut_fwd(be, &c32, rows, x, y32), 0);
        ck_assert_int_eq(be->shortcut_fwd(be, &c16, rows, x16, y16), 0);
        ck_assert_msg(!memcmp(y32, y16, 4 * ny), "layout %d: the shortcut of the bf16 x differs", li);
        be->free(be, x), be->free(be, x16), be->free(be, y32), be->free(be, y16);
    }
    dt_backend *b32;
    dt_backend_opts o = {.n_threads = 1, .device = -1, .precision = DT_PRECISION_FP32};
    ck_assert_msg(backend_cpu_create_with(&b32, &o) == 0, "%s", dt_errmsg());
    ck_assert_msg(!b32->add2_bf16 && !b32->relu_bwd_bf16, "the fp32 backend stores the residual stream in bf16");
    backend_destroy(b32);
}
END_TEST

int main(void)
{
    dt_backend *probe;
    dt_backend_opts o = {.n_threads = 1, .device = -1, .precision = DT_PRECISION_BF16};
    if (backend_cpu_create_with(&probe, &o) != 0) {
        printf("SKIP: %s\n", dt_errmsg());
        return 77;
    }
    backend_destroy(probe);
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("bf16 GEMM and convolution against the reference on rounded inputs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gemm_rounds_operands);
    tcase_add_test(tc, conv_rounds_operands);
    tcase_add_test(tc, conv_bn_edge_in_bf16);
    tcase_add_test(tc, bn_conv_edge_in_bf16);
    tcase_add_test(tc, residual_stream_in_bf16);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
