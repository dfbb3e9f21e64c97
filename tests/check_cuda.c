/* The CUDA backend against the CPU backend, op by op, on a GPU.
 *
 * Every op of src/engine/backend.h on random data of odd shapes (1, 3, 7, 33; channel counts that
 * are not a multiple of 16), with beta 0 and 1 where the op has one, on both backends; results
 * compared with a tolerance per op: bit-identical for ReLU, dropout (the mask is the same
 * counter-based function on both), the shortcut and the bias gradient; 1e-6 relative for the
 * elementwise arithmetic and the softmax; 1e-4 for GEMM and convolution (fp32 sums in another
 * order: cuBLAS and cuDNN against oneDNN, TF32 off); 1e-5 for pooling, LRN and batch norm; the
 * codecs' bytes and decoded floats identical to the CPU codecs', TernGrad's sums, values and codes too;
 * a one-rank NCCL communicator; --precision bf16's and fp16's GEMMs and convolutions (test lowp) and
 * loss scaling's unscale (test unscale).
 *
 * Exit 77 (skipped), saying why, where the CUDA backend cannot run: not built, no driver, no GPU.
 * Check runs without fork here: a CUDA context does not survive one.
 */
#include <check.h>
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#include "util.h"

static dt_backend *cpu, *gpu;
static char msg[512];

/* the test's random tensors: stream 11 of seed */
static float *randv(size_t n, uint64_t seed, float lo, float hi) { return rand_floats(n, seed, 11, lo, hi); }

/* device copy of host memory */
static void *up(const void *h, size_t bytes)
{
    void *d = gpu->alloc(gpu, bytes ? bytes : 4);
    ck_assert_msg(d != NULL, "alloc: %s", dt_errmsg());
    ck_assert_int_eq(gpu->to_device(gpu, d, h, bytes), 0);
    return d;
}

static float *down(const float *d, size_t n)
{
    float *h = malloc(sizeof *h * (n ? n : 1));
    ck_assert_msg(gpu->to_host(gpu, h, d, n * sizeof *h) == 0, "%s", dt_errmsg());
    return h;
}

#define OK(call) ck_assert_msg((call) == 0, "%s: %s", #call, dt_errmsg())

/* compares GPU memory d with host ref; frees nothing */
static void expect(const float *d, const float *ref, size_t n, double tol, const char *what)
{
    float *h = down(d, n);
    if (tol == 0.0) {
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(memcmp(&h[i], &ref[i], 4) == 0, "%s[%zu]: %.9g on the GPU, %.9g on the CPU", what, i, h[i],
                          ref[i]);
    } else {
        ck_assert_msg(close_f32(h, ref, n, tol, tol, what, msg, sizeof msg), "%s", msg);
    }
    free(h);
}

START_TEST(gemm)
{
    const int shapes[][3] = {{1, 1, 1}, {3, 7, 33}, {33, 17, 5}, {64, 100, 129}, {7, 3, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                    int lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
                    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
                    float *a = randv(na, 1, -1, 1), *b = randv(nb, 2, -1, 1), *c = randv(nc, 3, -1, 1);
                    float *da = up(a, na * 4), *db = up(b, nb * 4), *dc = up(c, nc * 4);
                    OK(cpu->gemm(cpu, ta, tb, m, n, k, 0.5f, a, lda, b, ldb, (float)beta, c, ldc));
                    OK(gpu->gemm(gpu, ta, tb, m, n, k, 0.5f, da, lda, db, ldb, (float)beta, dc, ldc));
                    char what[64];
                    snprintf(what, sizeof what, "gemm %c%c %dx%dx%d beta %d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
                             beta);
                    expect(dc, c, nc, 1e-4, what);
                    gpu->free(gpu, da), gpu->free(gpu, db), gpu->free(gpu, dc);
                    free(a), free(b), free(c);
                }
}
END_TEST

START_TEST(elementwise)
{
    const int rows = 7, cols = 33;
    const size_t n = (size_t)rows * cols;
    cpu_flush_denormals(); /* as dtrain runs; the kernels flush too (-ftz=true) */
    float *x = randv(n, 4, -1, 1), *dy = randv(n, 5, -1, 1), *b = randv(cols, 6, -1, 1);
    float *dx_ = up(x, n * 4), *ddy = up(dy, n * 4), *dbias = up(b, cols * 4);
    float *y = malloc(n * 4), *dy_y = up(y, n * 4);
    /* ReLU */
    OK(cpu->relu_fwd(cpu, y, x, n));
    OK(gpu->relu_fwd(gpu, dy_y, dx_, n));
    expect(dy_y, y, n, 0, "relu");
    for (int beta = 0; beta < 2; beta++) {
        float *g = randv(n, 7, -1, 1), *dg = up(g, n * 4);
        OK(cpu->relu_bwd(cpu, g, dy, y, n, (float)beta));
        OK(gpu->relu_bwd(gpu, dg, ddy, dy_y, n, (float)beta));
        expect(dg, g, n, 0, "relu backward");
        gpu->free(gpu, dg), free(g);
    }
    /* dropout: the same mask, bit for bit */
    OK(cpu->dropout_fwd(cpu, y, x, rows, cols, 0.3f, 99, 12345));
    OK(gpu->dropout_fwd(gpu, dy_y, dx_, rows, cols, 0.3f, 99, 12345));
    expect(dy_y, y, n, 0, "dropout");
    for (int beta = 0; beta < 2; beta++) {
        float *g = randv(n, 8, -1, 1), *dg = up(g, n * 4);
        OK(cpu->dropout_bwd(cpu, g, dy, rows, cols, 0.3f, 99, 12345, (float)beta));
        OK(gpu->dropout_bwd(gpu, dg, ddy, rows, cols, 0.3f, 99, 12345, (float)beta));
        expect(dg, g, n, 0, "dropout backward");
        gpu->free(gpu, dg), free(g);
    }
    /* bias */
    float *yy = randv(n, 9, -1, 1), *dyy = up(yy, n * 4);
    OK(cpu->bias_add(cpu, yy, b, rows, cols));
    OK(gpu->bias_add(gpu, dyy, dbias, rows, cols));
    expect(dyy, yy, n, 1e-7, "bias add");
    for (int beta = 0; beta < 2; beta++) {
        float *g = randv(cols, 10, -1, 1), *dg = up(g, cols * 4);
        OK(cpu->bias_grad(cpu, g, dy, rows, cols, (float)beta));
        OK(gpu->bias_grad(gpu, dg, ddy, rows, cols, (float)beta));
        expect(dg, g, cols, 0, "bias gradient");
        gpu->free(gpu, dg), free(g);
    }
    /* scale, add */
    OK(cpu->scale(cpu, yy, 0.37f, n));
    OK(gpu->scale(gpu, dyy, 0.37f, n));
    expect(dyy, yy, n, 1e-7, "scale");
    const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int i = 0; i < 3; i++) {
        OK(cpu->add(cpu, yy, x, n, betas[i]));
        OK(gpu->add(gpu, dyy, dx_, n, betas[i]));
        expect(dyy, yy, n, 1e-6, "add");
    }
    for (int relu = 0; relu < 2; relu++) { /* the add layer's forward (add2): the CPU's bits */
        OK(cpu->add2(cpu, yy, x, dy, n, relu));
        OK(gpu->add2(gpu, dyy, dx_, ddy, n, relu));
        expect(dyy, yy, n, 0, relu ? "add2 with relu" : "add2");
    }
    { /* add2 of every pair of special values: a subnormal sum flushed to +-0 (FTZ/DAZ), signed zeros; with
       * the relu infinities and NaNs too (a NaN's own bits may differ between the two without it) */
        const float sp[] = {0.0f, -0.0f, 1e-39f, -1e-39f, 1.5e-38f, -1.4e-38f, FLT_MIN, -FLT_MIN, 1.0f, -1.0f,
                            INFINITY, -INFINITY, NAN};
        enum { K = sizeof sp / sizeof *sp };
        float u[K * K], w[K * K], r[K * K];
        for (int relu = 0; relu < 2; relu++) {
            int k = relu ? K : K - 3, m = 0; /* without the relu: the finite ones */
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++) u[m] = sp[i], w[m] = sp[j], m++;
            float *du = up(u, 4 * (size_t)m), *dw = up(w, 4 * (size_t)m), *dr = up(u, 4 * (size_t)m);
            OK(cpu->add2(cpu, r, u, w, (size_t)m, relu));
            OK(gpu->add2(gpu, dr, du, dw, (size_t)m, relu));
            expect(dr, r, (size_t)m, 0, relu ? "add2 with relu, special values" : "add2, special values");
            gpu->free(gpu, du), gpu->free(gpu, dw), gpu->free(gpu, dr);
        }
    }
    /* batch norm's running statistics: the CPU's bits */
    {
        size_t c = 517;
        float *rm = randv(c, 14, -1, 1), *rv = randv(c, 15, 0.1f, 2), *mean = randv(c, 16, -1, 1),
              *var = randv(c, 17, 0, 3);
        float *drm = up(rm, c * 4), *drv = up(rv, c * 4), *dmean = up(mean, c * 4), *dvar = up(var, c * 4);
        OK(cpu->bn_running(cpu, rm, rv, mean, var, c, 0.1f, 4096.0 / 4095.0));
        OK(gpu->bn_running(gpu, drm, drv, dmean, dvar, c, 0.1f, 4096.0 / 4095.0));
        expect(drm, rm, c, 0.0, "running mean");
        expect(drv, rv, c, 0.0, "running variance");
        gpu->free(gpu, drm), gpu->free(gpu, drv), gpu->free(gpu, dmean), gpu->free(gpu, dvar);
        free(rm), free(rv), free(mean), free(var);
    }
    /* SGD: plain, momentum, Nesterov */
    for (int v = 0; v < 3; v++) {
        size_t np = 1037;
        float *w = randv(np, 11, -1, 1), *g = randv(np, 12, -1, 1), *m = randv(np, 13, -1, 1);
        float *dw = up(w, np * 4), *dg = up(g, np * 4), *dm = up(m, np * 4);
        OK(cpu->sgd_step(cpu, w, g, v ? m : NULL, np, 0.1f, v ? 0.9f : 0.0f, 1e-4f, v == 2));
        OK(gpu->sgd_step(gpu, dw, dg, v ? dm : NULL, np, 0.1f, v ? 0.9f : 0.0f, 1e-4f, v == 2));
        expect(dw, w, np, 1e-6, "sgd weights");
        expect(dm, m, np, 1e-6, "sgd momentum");
        gpu->free(gpu, dw), gpu->free(gpu, dg), gpu->free(gpu, dm);
        free(w), free(g), free(m);
    }
    gpu->free(gpu, dx_), gpu->free(gpu, ddy), gpu->free(gpu, dbias), gpu->free(gpu, dy_y), gpu->free(gpu, dyy);
    free(x), free(dy), free(b), free(y), free(yy);
}
END_TEST

START_TEST(softmax_xent)
{
    const int shapes[][2] = {{1, 10}, {7, 10}, {33, 1000}};
    for (size_t s = 0; s < 3; s++) {
        int rows = shapes[s][0], classes = shapes[s][1];
        size_t n = (size_t)rows * classes;
        float *z = randv(n, 14, -10, 10), *p = malloc(n * 4);
        int32_t *lab = malloc(sizeof *lab * rows);
        for (int r = 0; r < rows; r++) lab[r] = (r * 7 + 3) % classes;
        float *dz = up(z, n * 4), *dp = up(p, n * 4);
        int32_t *dl = up(lab, sizeof *lab * rows);
        double lc = 0.0, lg = 0.0;
        int64_t cc = 0, cg = 0;
        OK(cpu->softmax_xent_fwd(cpu, p, z, lab, rows, classes, &lc, &cc));
        OK(gpu->softmax_xent_fwd(gpu, dp, dz, dl, rows, classes, &lg, &cg));
        expect(dp, p, n, 1e-6, "softmax");
        ck_assert_msg(fabs(lg - lc) <= 1e-6 * fabs(lc) + 1e-9, "loss %.12g on the GPU, %.12g on the CPU", lg, lc);
        ck_assert_int_eq(cg, cc);
        for (int beta = 0; beta < 2; beta++) {
            float *g = randv(n, 15, -1, 1), *dg = up(g, n * 4);
            OK(cpu->softmax_xent_bwd(cpu, g, p, lab, rows, classes, 0.1f, (float)beta));
            OK(gpu->softmax_xent_bwd(gpu, dg, dp, dl, rows, classes, 0.1f, (float)beta));
            expect(dg, g, n, 1e-6, "softmax cross-entropy backward");
            gpu->free(gpu, dg), free(g);
        }
        gpu->free(gpu, dz), gpu->free(gpu, dp), gpu->free(gpu, dl);
        free(z), free(p), free(lab);
    }
}
END_TEST

START_TEST(convolution)
{
    /* c h w o kh kw sh sw pad groups bias */
    const int cases[][11] = {{3, 7, 7, 5, 3, 3, 1, 1, 1, 1, 1},    {1, 28, 28, 20, 5, 5, 1, 1, 0, 1, 1},
                             {16, 9, 9, 33, 3, 3, 2, 2, 1, 1, 0},  {4, 8, 8, 6, 3, 3, 1, 1, 1, 2, 1},
                             {3, 33, 33, 7, 11, 11, 4, 4, 2, 1, 1}, {7, 5, 5, 3, 1, 1, 1, 1, 0, 1, 1}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        const int *k = cases[t];
        dt_conv_cfg c = {.c = k[0], .h = k[1], .w = k[2], .o = k[3], .kh = k[4], .kw = k[5], .sh = k[6], .sw = k[7],
                         .pt = k[8], .pb = k[8], .pl = k[8], .pr = k[8], .groups = k[9], .bias = k[10]};
        c.oh = (c.h + 2 * c.pt - c.kh) / c.sh + 1;
        c.ow = (c.w + 2 * c.pl - c.kw) / c.sw + 1;
        void *pc = cpu->conv_plan(cpu, &c), *pg = gpu->conv_plan(gpu, &c);
        ck_assert_msg(pc && pg, "conv plan: %s", dt_errmsg());
        for (int rows = 1; rows <= 3; rows += 2) {
            size_t nx = (size_t)rows * c.c * c.h * c.w, ny = (size_t)rows * c.o * c.oh * c.ow;
            size_t nw = (size_t)c.o * (c.c / c.groups) * c.kh * c.kw;
            float *x = randv(nx, 16 + t, -1, 1), *w = randv(nw, 17, -0.5, 0.5), *b = randv(c.o, 18, -1, 1);
            float *y = malloc(ny * 4), *dy = randv(ny, 19, -1, 1);
            float *gx = up(x, nx * 4), *gw = up(w, nw * 4), *gb = up(b, c.o * 4), *gy = up(y, ny * 4),
                  *gdy = up(dy, ny * 4);
            OK(cpu->conv_fwd(cpu, pc, rows, x, w, c.bias ? b : NULL, y));
            OK(gpu->conv_fwd(gpu, pg, rows, gx, gw, c.bias ? gb : NULL, gy));
            expect(gy, y, ny, 1e-4, "convolution forward");
            for (int beta = 0; beta < 2; beta++) {
                float *dx = randv(nx, 20, -1, 1), *dw = malloc(nw * 4), *db = malloc(c.o * 4);
                float *gdx = up(dx, nx * 4), *gdw = up(dw, nw * 4), *gdb = up(db, c.o * 4);
                OK(cpu->conv_bwd(cpu, pc, rows, x, w, dy, dx, (float)beta, dw, c.bias ? db : NULL));
                OK(gpu->conv_bwd(gpu, pg, rows, gx, gw, gdy, gdx, (float)beta, gdw, c.bias ? gdb : NULL));
                expect(gdx, dx, nx, 1e-4, "convolution backward data");
                expect(gdw, dw, nw, 1e-4, "convolution backward filter");
                if (c.bias) expect(gdb, db, c.o, 1e-4, "convolution bias gradient");
                gpu->free(gpu, gdx), gpu->free(gpu, gdw), gpu->free(gpu, gdb);
                free(dx), free(dw), free(db);
            }
            gpu->free(gpu, gx), gpu->free(gpu, gw), gpu->free(gpu, gb), gpu->free(gpu, gy), gpu->free(gpu, gdy);
            free(x), free(w), free(b), free(y), free(dy);
        }
        cpu->plan_free(cpu, pc), gpu->plan_free(gpu, pg);
    }
}
END_TEST

START_TEST(pool_lrn_shortcut)
{
    const int pools[][5] = {{1, 3, 2, 0, 1}, {0, 3, 2, 0, 1}, {1, 2, 2, 0, 0}, {0, 3, 1, 1, 1}, {1, 3, 1, 1, 1}};
    const int rows = 3, C = 7, h = 8, w = 8;
    for (size_t t = 0; t < sizeof pools / sizeof *pools; t++) {
        dt_pool_cfg c = {.max = pools[t][0], .c = C, .h = h, .w = w, .kh = pools[t][1], .kw = pools[t][1],
                         .sh = pools[t][2], .sw = pools[t][2], .pt = pools[t][3], .pl = pools[t][3],
                         .pb = pools[t][4], .pr = pools[t][4]};
        c.oh = (h + c.pt + c.pb - c.kh) / c.sh + 1;
        c.ow = (w + c.pl + c.pr - c.kw) / c.sw + 1;
        size_t nx = (size_t)rows * C * h * w, ny = (size_t)rows * C * c.oh * c.ow;
        void *pc = cpu->pool_plan(cpu, &c), *pg = gpu->pool_plan(gpu, &c);
        float *x = randv(nx, 30 + t, -1, 1), *y = malloc(ny * 4), *dy = randv(ny, 40, -1, 1);
        float *gx = up(x, nx * 4), *gy = up(y, ny * 4), *gdy = up(dy, ny * 4);
        OK(cpu->pool_fwd(cpu, pc, rows, 1, x, y));
        OK(gpu->pool_fwd(gpu, pg, rows, 1, gx, gy));
        expect(gy, y, ny, 1e-6, c.max ? "max pooling" : "average pooling");
        for (int beta = 0; beta < 2; beta++) {
            float *dx = randv(nx, 41, -1, 1), *gdx = up(dx, nx * 4);
            OK(cpu->pool_bwd(cpu, pc, rows, dy, dx, (float)beta));
            OK(gpu->pool_bwd(gpu, pg, rows, gdy, gdx, (float)beta));
            expect(gdx, dx, nx, 1e-5, c.max ? "max pooling backward" : "average pooling backward");
            gpu->free(gpu, gdx), free(dx);
        }
        cpu->plan_free(cpu, pc), gpu->plan_free(gpu, pg);
        gpu->free(gpu, gx), gpu->free(gpu, gy), gpu->free(gpu, gdy);
        free(x), free(y), free(dy);
    }
    /* LRN across 5 channels (AlexNet's) */
    dt_lrn_cfg l = {.c = C, .h = 5, .w = 3, .size = 5, .alpha = 1e-2f, .beta = 0.75f, .k = 2.0f};
    size_t n = (size_t)rows * C * 15;
    void *lc = cpu->lrn_plan(cpu, &l), *lg = gpu->lrn_plan(gpu, &l);
    float *x = randv(n, 50, -3, 3), *y = malloc(n * 4), *dy = randv(n, 51, -1, 1);
    float *gx = up(x, n * 4), *gy = up(y, n * 4), *gdy = up(dy, n * 4);
    OK(cpu->lrn_fwd(cpu, lc, rows, 1, x, y));
    OK(gpu->lrn_fwd(gpu, lg, rows, 1, gx, gy));
    expect(gy, y, n, 1e-5, "LRN");
    for (int beta = 0; beta < 2; beta++) {
        float *dx = randv(n, 52, -1, 1), *gdx = up(dx, n * 4);
        OK(cpu->lrn_bwd(cpu, lc, rows, x, dy, dx, (float)beta));
        OK(gpu->lrn_bwd(gpu, lg, rows, gx, gdy, gdx, (float)beta));
        expect(gdx, dx, n, 1e-5, "LRN backward");
        gpu->free(gpu, gdx), free(dx);
    }
    cpu->plan_free(cpu, lc), gpu->plan_free(gpu, lg);
    gpu->free(gpu, gx), gpu->free(gpu, gy), gpu->free(gpu, gdy);
    free(x), free(y), free(dy);
    /* the option-A shortcut */
    dt_shortcut_cfg s = {.c = 3, .h = 7, .w = 7, .o = 7, .oh = 4, .ow = 4, .stride = 2, .front = 2};
    size_t ni = (size_t)rows * 3 * 49, no = (size_t)rows * 7 * 16;
    float *sx = randv(ni, 53, -1, 1), *sy = malloc(no * 4), *sdy = randv(no, 54, -1, 1);
    float *gsx = up(sx, ni * 4), *gsy = up(sy, no * 4), *gsdy = up(sdy, no * 4);
    OK(cpu->shortcut_fwd(cpu, &s, rows, sx, sy));
    OK(gpu->shortcut_fwd(gpu, &s, rows, gsx, gsy));
    expect(gsy, sy, no, 0, "shortcut");
    for (int beta = 0; beta < 2; beta++) {
        float *dx = randv(ni, 55, -1, 1), *gdx = up(dx, ni * 4);
        OK(cpu->shortcut_bwd(cpu, &s, rows, sdy, dx, (float)beta));
        OK(gpu->shortcut_bwd(gpu, &s, rows, gsdy, gdx, (float)beta));
        expect(gdx, dx, ni, 0, "shortcut backward");
        gpu->free(gpu, gdx), free(dx);
    }
    gpu->free(gpu, gsx), gpu->free(gpu, gsy), gpu->free(gpu, gsdy);
    free(sx), free(sy), free(sdy);
}
END_TEST

START_TEST(batch_norm)
{
    /* the last two but one are summed by several blocks per channel; the last has more channels
     * than a grid has blocks in y (65535), as a batch norm after a wide dense layer can */
    const int shapes[][4] = {{3, 7, 5, 3}, {1, 33, 1, 1}, {8, 16, 8, 8}, {16, 16, 32, 32}, {2, 3, 100, 100},
                             {2, 70001, 1, 1}};
    cpu_flush_denormals();
    for (size_t t = 0; t < 2 * sizeof shapes / sizeof *shapes; t++) { /* each shape without and with the relu */
        int rows = shapes[t / 2][0], relu = (int)(t % 2);
        dt_bn_cfg c = {.c = shapes[t / 2][1], .h = shapes[t / 2][2], .w = shapes[t / 2][3], .eps = 1e-5f, .relu = relu};
        int C = c.c;
        size_t n = (size_t)rows * C * c.h * c.w;
        void *pc = cpu->bn_plan(cpu, &c), *pg = gpu->bn_plan(gpu, &c);
        ck_assert_msg(pc && pg, "bn plan: %s", dt_errmsg());
        float *x = randv(n, 60, 1, 3), *sc = randv(C, 61, 0.5, 1.5), *sh = randv(C, 62, -1, 1);
        float *m = malloc(C * 4), *v = malloc(C * 4), *y = malloc(n * 4), *dy = randv(n, 63, -1, 1);
        float *gx = up(x, n * 4), *gsc = up(sc, C * 4), *gsh = up(sh, C * 4), *gm = up(m, C * 4), *gv = up(v, C * 4),
              *gy = up(y, n * 4), *gdy = up(dy, n * 4);
        for (int train = 1; train >= 0; train--) {
            OK(cpu->bn_fwd(cpu, pc, rows, train, x, sc, sh, m, v, y));
            OK(gpu->bn_fwd(gpu, pg, rows, train, gx, gsc, gsh, gm, gv, gy));
            expect(gy, y, n, 1e-5, train ? "batch norm (training)" : "batch norm (evaluation)");
            if (train) expect(gm, m, C, 1e-6, "batch mean"), expect(gv, v, C, 1e-5, "batch variance");
        }
        /* the relu's mask from the CPU's output on both sides: the GPU's may differ in sign within
         * the tolerance where the output is about 0, and take another dy there */
        float *gmask = up(y, n * 4);
        for (int beta = 0; beta < 2; beta++) {
            float *dx = randv(n, 64, -1, 1), *ds = malloc(C * 4), *db = malloc(C * 4);
            float *gdx = up(dx, n * 4), *gds = up(ds, C * 4), *gdb = up(db, C * 4);
            OK(cpu->bn_bwd(cpu, pc, rows, x, sc, m, v, dy, relu ? y : NULL, dx, (float)beta, ds, db));
            OK(gpu->bn_bwd(gpu, pg, rows, gx, gsc, gm, gv, gdy, relu ? gmask : NULL, gdx, (float)beta, gds, gdb));
            expect(gdx, dx, n, 1e-5, "batch norm dx");
            expect(gds, ds, C, 1e-5, "batch norm dscale");
            expect(gdb, db, C, 1e-5, "batch norm dshift");
            gpu->free(gpu, gdx), gpu->free(gpu, gds), gpu->free(gpu, gdb);
            free(dx), free(ds), free(db);
        }
        { /* the layer's other two calls: a first layer's (no dx) and a frozen one's (no dscale, dshift) */
            float *dx = randv(n, 65, -1, 1), *ds = randv(C, 66, -1, 1), *db = randv(C, 67, -1, 1);
            float *gdx = up(dx, n * 4), *gds = up(ds, C * 4), *gdb = up(db, C * 4);
            OK(cpu->bn_bwd(cpu, pc, rows, x, sc, m, v, dy, relu ? y : NULL, NULL, 0.0f, ds, db));
            OK(gpu->bn_bwd(gpu, pg, rows, gx, gsc, gm, gv, gdy, relu ? gmask : NULL, NULL, 0.0f, gds, gdb));
            expect(gds, ds, C, 1e-5, "batch norm dscale without dx");
            expect(gdb, db, C, 1e-5, "batch norm dshift without dx");
            OK(cpu->bn_bwd(cpu, pc, rows, x, sc, m, v, dy, relu ? y : NULL, dx, 0.0f, NULL, NULL));
            OK(gpu->bn_bwd(gpu, pg, rows, gx, gsc, gm, gv, gdy, relu ? gmask : NULL, gdx, 0.0f, NULL, NULL));
            expect(gdx, dx, n, 1e-5, "batch norm dx without dscale and dshift");
            gpu->free(gpu, gdx), gpu->free(gpu, gds), gpu->free(gpu, gdb);
            free(dx), free(ds), free(db);
        }
        cpu->plan_free(cpu, pc), gpu->plan_free(gpu, pg);
        float *ptrs[] = {gx, gsc, gsh, gm, gv, gy, gdy, gmask};
        for (int i = 0; i < 8; i++) gpu->free(gpu, ptrs[i]);
        free(x), free(sc), free(sh), free(m), free(v), free(y), free(dy);
    }
}
END_TEST

/* The codecs: the kernels' bytes equal the CPU codecs' for the same input (specials included),
 * and decoding the CPU's bytes gives the CPU's floats (any NaN for a NaN). */
START_TEST(codecs)
{
    const char *name;
    int kind, block;
    size_t n, at = 0;
    ck_assert_msg(gpu->wire_encode && gpu->wire_decode, "the CUDA backend has no codecs");
    cpu_flush_denormals(); /* as dtrain runs; the kernels flush too (-ftz=true) */
    for (int i = 0; codec_case(i, 1, &name, &kind, &block, &n); i++) {
        dt_codec codec;
        ck_assert_int_eq(codec_create(name, block, &codec), 0);
        int wire_block = block > 0 ? block : 0;
        size_t bytes = codec_bytes(&codec, n);
        float *x = codec_input(n, 80 + (uint64_t)i), *acc = randv(n, 90 + (uint64_t)i, -1, 1);
        uint8_t *ref = calloc(bytes, 1), *got = calloc(bytes, 1);
        float *dx = up(x, n * 4);
        uint8_t *denc = gpu->alloc(gpu, bytes);
        ck_assert_ptr_nonnull(denc);
        codec_encode(&codec, x, n, ref);
        OK(gpu->wire_encode(gpu, kind, wire_block, dx, n, denc));
        OK(gpu->to_host(gpu, got, denc, bytes));
        for (at = 0; at < bytes && ref[at] == got[at]; at++) continue;
        ck_assert_msg(at == bytes, "%s (block %d), %zu values: byte %zu of %zu: CPU %02x, GPU %02x", name, block, n, at,
                      bytes, at < bytes ? ref[at] : 0, at < bytes ? got[at] : 0);
        OK(gpu->to_device(gpu, denc, ref, bytes));
        for (int add = 0; add < 2; add++) {
            float *yr = malloc(n * 4), *dy = up(acc, n * 4);
            memcpy(yr, acc, n * 4);
            if (add) codec_decode_add(&codec, ref, n, yr);
            else codec_decode(&codec, ref, n, yr);
            OK(gpu->wire_decode(gpu, kind, wire_block, denc, n, dy, add));
            float *yg = down(dy, n);
            ck_assert_msg(same_floats(yr, yg, n, &at), "%s (block %d) %s, %zu values: value %zu: CPU %a, GPU %a", name,
                          block, add ? "decode-add" : "decode", n, at, (double)yr[at], (double)yg[at]);
            free(yr), free(yg);
            gpu->free(gpu, dy);
        }
        gpu->free(gpu, dx), gpu->free(gpu, denc);
        free(x), free(acc), free(ref), free(got);
    }
}
END_TEST

/* The sparse modes' ops: residual_add equal to memory_accumulate on the CPU (both ways), topk equal
 * to topk_select (pairs, ties included), pairs_apply equal to the CPU's updates; bit for bit. */
START_TEST(sparse)
{
    const size_t n = 100003;
    const size_t ks[] = {1, 7, 1000, 50000, n};
    ck_assert_msg(gpu->residual_add && gpu->topk && gpu->pairs_apply, "the CUDA backend has no sparse ops");
    cpu_flush_denormals();
    float *g = randv(n, 100, -1, 1), *w = randv(n, 101, -1, 1), *t = tied_floats(n, 102);
    float *dg = up(g, n * 4), *dw = up(w, n * 4);
    for (int mc = 0; mc < 2; mc++) {
        dt_memory *mem;
        dt_hostbuf gh, wh;
        ck_assert_int_eq(memory_create(&mem, n, mc, 0.9f, 1e-4f), 0);
        ck_assert_int_eq(hostbuf_view(&gh, cpu, g, n), 0);
        ck_assert_int_eq(hostbuf_view(&wh, cpu, w, n), 0);
        float *zero = calloc(n, 4), *dr = up(zero, n * 4), *du = up(zero, n * 4);
        for (int round = 0; round < 3; round++) {
            ck_assert_int_eq(memory_accumulate(mem, &gh, &wh), 0);
            OK(gpu->residual_add(gpu, dr, mc ? du : NULL, dg, dw, n, 0.9f, 1e-4f));
        }
        expect(dr, mem->r, n, 0.0, mc ? "residual (momentum correction)" : "residual");
        if (mc) expect(du, mem->u, n, 0.0, "velocity");
        hostbuf_free(&gh), hostbuf_free(&wh);
        memory_destroy(mem);
        gpu->free(gpu, dr), gpu->free(gpu, du);
        free(zero);
    }
    dt_topk *sel;
    ck_assert_int_eq(topk_create(&sel, n, n), 0);
    dt_pair *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    void *dp = gpu->alloc(gpu, n * sizeof *ref);
    float *dt = up(t, n * 4);
    for (int which = 0; which < 2; which++)
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            size_t k = ks[ki];
            ck_assert_int_eq(topk_select(sel, which ? t : g, n, k, ref), 0);
            OK(gpu->topk(gpu, which ? dt : dg, n, k, dp));
            OK(gpu->to_host(gpu, got, dp, k * sizeof *got));
            size_t j = 0;
            while (j < k && got[j].i == ref[j].i && memcmp(&got[j].v, &ref[j].v, 4) == 0) j++;
            ck_assert_msg(j == k, "top-%zu of %s values: pair %zu is (%u, %g) on the GPU, (%u, %g) on the CPU", k,
                          which ? "tied" : "random", j, got[j].i, got[j].v, ref[j].i, ref[j].v);
        }
    /* pairs_apply: the last selection's pairs set, subtracted (x - 0.05 v), zeroed and added (x + 0.05 v) */
    size_t k = 1000;
    ck_assert_int_eq(topk_select(sel, g, n, k, ref), 0);
    OK(gpu->to_device(gpu, dp, ref, k * sizeof *ref));
    float *x = malloc(n * 4), *dx = up(w, n * 4);
    memcpy(x, w, n * 4);
    static const char *what[] = {"pairs set", "pairs zeroed", "pairs subtracted", "pairs added"};
    for (int how = DT_PAIRS_SET; how <= DT_PAIRS_ADD; how++) {
        for (size_t j = 0; j < k; j++)
            x[ref[j].i] = how == DT_PAIRS_SET    ? ref[j].v
                          : how == DT_PAIRS_ZERO ? 0.0f
                          : how == DT_PAIRS_SUB  ? x[ref[j].i] - 0.05f * ref[j].v
                                                 : x[ref[j].i] + 0.05f * ref[j].v;
        OK(gpu->pairs_apply(gpu, dx, dp, k, how, 0.05f));
        expect(dx, x, n, 0.0, what[how]);
    }
    topk_destroy(sel);
    gpu->free(gpu, dp), gpu->free(gpu, dt), gpu->free(gpu, dx), gpu->free(gpu, dg), gpu->free(gpu, dw);
    free(ref), free(got), free(x), free(g), free(w), free(t);
}
END_TEST

/* --topk-select sampled on the GPU: the sample (memory_select's way: topk_sample, the threshold on the
 * host, topk_above) gives topk_select_sampled's pairs bit for bit, where the threshold lets k or more
 * through and where it lets fewer (a memory on the GPU against one on the host) */
START_TEST(topk_sampled)
{
    const size_t n = 1000003, ks[] = {500, 1003, 20000};
    ck_assert_msg(gpu->topk_sample && gpu->topk_above, "no sampled top-k ops");
    float *g = randv(n, 150, -1, 1);
    for (size_t i = 0; i < n; i += 97) g[i] *= 50.0f; /* a tail */
    dt_topk *sel;
    ck_assert_int_eq(topk_create(&sel, n, 20000), 0);
    dt_memory *host, *dev;
    ck_assert_int_eq(memory_create(&host, n, 0, 0.0f, 0.0f), 0);
    ck_assert_int_eq(memory_create_on(&dev, gpu, n, 0, 0.0f, 0.0f, 20000), 0);
    ck_assert_int_eq(memory_sampled(host), 0);
    ck_assert_int_eq(memory_sampled(dev), 0);
    memcpy(host->r, g, n * 4);
    OK(gpu->to_device(gpu, dev->rh.dev, g, n * 4));
    dt_pair *ref = malloc(20000 * sizeof *ref), *got = malloc(20000 * sizeof *got);
    float *sample = malloc(DT_TOPK_MAX_SAMPLE * 4);
    int short_of = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        size_t k = ks[ki], m = topk_sample_size(n, k);
        ck_assert(m > 0);
        for (size_t s = 0; s < m; s++) sample[s] = fabsf(g[topk_sample_index(s, n)]);
        short_of += topk_count_above(g, n, topk_sample_threshold(sample, m, n, k)) < k;
        ck_assert_int_eq(memory_select(host, sel, 0, n, k, ref), 0);
        ck_assert_int_eq(memory_select(dev, sel, 0, n, k, got), 0);
        size_t j = 0;
        while (j < k && got[j].i == ref[j].i && memcmp(&got[j].v, &ref[j].v, 4) == 0) j++;
        ck_assert_msg(j == k, "sampled top-%zu: pair %zu is (%u, %g) on the GPU, (%u, %g) on the CPU", k, j, got[j].i,
                      got[j].v, ref[j].i, ref[j].v);
    }
    printf("sampled top-k: %d of 3 selections had fewer than k at the threshold\n", short_of);
    memory_destroy(host), memory_destroy(dev), topk_destroy(sel);
    free(g), free(ref), free(got), free(sample);
}
END_TEST

/* gTop-k's device ops: pairs_merge equal to sparse_merge_topk (pairs, ties included) where the union
 * keeps k and where it is smaller than the k asked for, pairs_zero_common equal to the host's
 * put-back; bit for bit. */
START_TEST(merge)
{
    const size_t n = 100003;
    const size_t ks[] = {1, 7, 1000, 50000};
    ck_assert_msg(gpu->pairs_merge && gpu->pairs_zero_common, "the CUDA backend has no gTop-k merge");
    cpu_flush_denormals();
    float *x = randv(n, 110, -1, 1), *y = randv(n, 111, -1, 1), *t = tied_floats(n, 112), *u = tied_floats(n, 113);
    dt_topk *sel;
    ck_assert_int_eq(topk_create(&sel, n, n), 0);
    size_t kmax = 50000;
    dt_pair *a = malloc(kmax * sizeof *a), *b = malloc(kmax * sizeof *b), *ref = malloc(2 * kmax * sizeof *ref);
    dt_pair *tmp = malloc(2 * kmax * sizeof *tmp), *got = malloc(2 * kmax * sizeof *got);
    void *da = gpu->alloc(gpu, kmax * sizeof *a), *db = gpu->alloc(gpu, kmax * sizeof *b);
    void *dout = gpu->alloc(gpu, 2 * kmax * sizeof *ref);
    for (int which = 0; which < 2; which++)
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
            for (int wide = 0; wide < 2; wide++) {
                size_t k = ks[ki], kout = wide ? 2 * k : k, nref, ngot = 0;
                ck_assert_int_eq(topk_select(sel, which ? t : x, n, k, a), 0);
                ck_assert_int_eq(topk_select(sel, which ? u : y, n, k, b), 0);
                nref = sparse_merge_topk(a, k, b, k, kout, ref, tmp);
                OK(gpu->to_device(gpu, da, a, k * sizeof *a));
                OK(gpu->to_device(gpu, db, b, k * sizeof *b));
                OK(gpu->pairs_merge(gpu, da, k, db, k, kout, dout, &ngot));
                ck_assert_msg(ngot == nref, "merge of 2 x %zu %s pairs to %zu: %zu on the GPU, %zu on the CPU", k,
                              which ? "tied" : "random", kout, ngot, nref);
                OK(gpu->to_host(gpu, got, dout, nref * sizeof *got));
                size_t j = 0;
                while (j < nref && got[j].i == ref[j].i && memcmp(&got[j].v, &ref[j].v, 4) == 0) j++;
                ck_assert_msg(j == nref, "merge of 2 x %zu %s pairs to %zu: pair %zu is (%u, %g) on the GPU, (%u, %g) "
                              "on the CPU", k, which ? "tied" : "random", kout, j, got[j].i, got[j].v, ref[j].i,
                              ref[j].v);
                /* the put-back: x zeroed where a's indices are in the merge's result */
                float *h = malloc(n * 4), *dh = up(x, n * 4);
                memcpy(h, x, n * 4);
                for (size_t p = 0, q = 0; p < k && q < nref;)
                    if (a[p].i < ref[q].i) p++;
                    else if (ref[q].i < a[p].i) q++;
                    else h[a[p++].i] = 0.0f, q++;
                OK(gpu->pairs_zero_common(gpu, dh, da, k, dout, nref));
                expect(dh, h, n, 0.0, "put-back");
                gpu->free(gpu, dh);
                free(h);
            }
    topk_destroy(sel);
    gpu->free(gpu, da), gpu->free(gpu, db), gpu->free(gpu, dout);
    free(a), free(b), free(ref), free(tmp), free(got), free(x), free(y), free(t), free(u);
}
END_TEST

/* TernGrad's ops against codec_tern.c: the sums of several ranges at once, the ternary values, their
 * codes and the decoding, bit for bit */
START_TEST(terngrad)
{
    const size_t n = 300007, off[] = {0, 5, 4096, 100000}, len[] = {5, 4091, 95904, 200007};
    const int count = 4;
    ck_assert_msg(gpu->tern_stats && gpu->tern_encode && gpu->tern_pack && gpu->tern_decode && gpu->tern_sum,
                  "no TernGrad ops");
    cpu_flush_denormals();
    float *x = randv(n, 400, -1e-2f, 3e-2f), *dx = up(x, n * 4);
    double sum[4], sq[4];
    float mx[4];
    OK(gpu->tern_stats(gpu, dx, off, len, count, sum, sq, mx));
    int8_t *t = malloc(n), *got = malloc(n), *dt8 = gpu->alloc(gpu, n);
    uint8_t *codes = malloc((n + 3) / 4), *gcodes = malloc((n + 3) / 4), *dcodes = gpu->alloc(gpu, (n + 3) / 4);
    for (int k = 0; k < count; k++) {
        double s1, q1;
        float m1;
        tern_stats(x + off[k], len[k], &s1, &q1, &m1);
        ck_assert_msg(memcmp(&s1, &sum[k], 8) == 0 && memcmp(&q1, &sq[k], 8) == 0 && memcmp(&m1, &mx[k], 4) == 0,
                      "range %d: sums %.17g, %.17g, max %.9g on the GPU; %.17g, %.17g, %.9g on the CPU", k, sum[k],
                      sq[k], mx[k], s1, q1, m1);
        float sc = tern_scaler_of(s1, q1, m1, len[k], 2.5f);
        tern_ternarize(x + off[k], len[k], sc, sc * 1.5f, 99 + (uint64_t)k, t + off[k]);
        OK(gpu->tern_encode(gpu, dx + off[k], len[k], sc, sc * 1.5f, 99 + (uint64_t)k, dt8 + off[k]));
    }
    OK(gpu->to_host(gpu, got, dt8, n));
    ck_assert_msg(memcmp(t, got, n) == 0, "the ternary values differ");
    tern_pack(t, n, codes);
    OK(gpu->tern_pack(gpu, dt8, n, dcodes));
    OK(gpu->to_host(gpu, gcodes, dcodes, (n + 3) / 4));
    ck_assert_msg(memcmp(codes, gcodes, (n + 3) / 4) == 0, "the codes differ");
    float *ref = malloc(n * 4);
    for (size_t i = 0; i < n; i++) ref[i] = 0.0123f * (float)t[i];
    OK(gpu->tern_decode(gpu, dt8, n, 0.0123f, dx));
    expect(dx, ref, n, 0.0, "TernGrad's decoding");
    OK(gpu->tern_encode(gpu, dx, n, 1.0f, 0.0f, 5, dt8)); /* scaler 0: all zero */
    OK(gpu->to_host(gpu, got, dt8, n));
    for (size_t i = 0; i < n; i++) ck_assert_int_eq(got[i], 0);
    /* the sum of 3 ranks' codes (--transport nccl's allgather): the CPU's tern_unpack_add */
    size_t cb = (n + 3) / 4;
    uint8_t *all = malloc(3 * cb), *dall;
    int8_t *acc = calloc(n, 1);
    for (int r = 0; r < 3; r++) {
        for (size_t i = 0; i < n; i++) t[i] = (int8_t)((int)(rng_hash(600 + (uint64_t)r, i) % 3) - 1);
        tern_pack(t, n, all + (size_t)r * cb);
        tern_unpack_add(all + (size_t)r * cb, n, acc);
    }
    dall = up(all, 3 * cb);
    OK(gpu->tern_sum(gpu, dall, 3, cb, n, dt8));
    OK(gpu->to_host(gpu, got, dt8, n));
    ck_assert_msg(memcmp(acc, got, n) == 0, "the sums of codes differ");
    gpu->free(gpu, dall), free(all), free(acc);
    gpu->free(gpu, dx), gpu->free(gpu, dt8), gpu->free(gpu, dcodes);
    free(x), free(t), free(got), free(codes), free(gcodes), free(ref);
}
END_TEST

/* csc's kernels against chunks.c bit for bit: the correction and packing over two ranges (as backward
 * finishes them, with --fusion-bytes), with weight decay, a loss scale and its NaN limit; the fold with
 * and without momentum correction (the norms in the 32-lane order, a short last chunk) */
START_TEST(csc)
{
    const size_t n = 300007, chunk = 4096, nc = (n + chunk - 1) / chunk, split = 50000;
    ck_assert_msg(gpu->csc_pack && gpu->csc_fold, "no csc ops");
    cpu_flush_denormals();
    int32_t *slot = malloc(nc * sizeof *slot), j = 0;
    for (size_t c = 0; c < nc; c++) slot[c] = c % 3 == 0 || c == nc - 1 ? j++ : -1;
    int32_t *dslot = up(slot, nc * sizeof *slot);
    for (int mc = 0; mc < 2; mc++) {
        const float wd = mc ? 1e-4f : 0.0f, scale = 1024.0f, limit = 400.0f, m = 0.9f, lr = 0.05f;
        float *g = randv(n, 700 + mc, -0.3f, 0.31f), *h = randv(n, 710 + mc, -0.2f, 0.2f);
        float *w = randv(n, 720 + mc, -1.0f, 1.0f), *hu = randv(n, 730 + mc, -0.1f, 0.1f);
        float *pk = calloc(n, 4), *nr = malloc(nc * 4), *dpk = up(pk, n * 4), *dnr = gpu->alloc(gpu, nc * 4);
        float *dg = up(g, n * 4), *dh = up(h, n * 4), *dw = up(w, n * 4), *dhu = up(hu, n * 4);
        for (size_t c = 0; c < nc; c++) {
            size_t a = c * chunk, len = DT_MIN(chunk, n - a);
            chunks_correct(g + a, h + a, w + a, wd, len);
            if (slot[c] >= 0) chunks_pack(pk + (size_t)slot[c] * chunk, g + a, len, scale, limit);
        }
        OK(gpu->csc_pack(gpu, dg, dh, dw, wd, 0, split, chunk, dslot, scale, limit, dpk));
        OK(gpu->csc_pack(gpu, dg, dh, dw, wd, split, n, chunk, dslot, scale, limit, dpk));
        expect(dg, g, n, 0.0, "the corrected gradient");
        float *got = down(dpk, n);
        ck_assert_msg(memcmp(got, pk, n * 4) == 0, "the packed values differ"); /* NaNs where above the limit */
        free(got);
        float *sum = randv(n, 740 + mc, -0.5f, 0.5f);
        for (size_t c = 0; c < nc; c++) {
            size_t a = c * chunk, len = DT_MIN(chunk, n - a);
            const float *s = slot[c] >= 0 ? sum + (size_t)slot[c] * chunk : NULL;
            nr[c] = chunks_fold(g + a, h + a, mc ? hu + a : NULL, mc ? w + a : NULL, s, len, 3, m, lr);
        }
        OK(gpu->to_device(gpu, dpk, sum, n * 4));
        OK(gpu->csc_fold(gpu, dg, dh, mc ? dhu : NULL, dw, dpk, dslot, n, chunk, 3, m, lr, dnr));
        expect(dnr, nr, nc, 0.0, "the chunks' norms");
        expect(dg, g, n, 0.0, "the folded gradient");
        expect(dh, h, n, 0.0, "the residual");
        expect(dw, w, n, 0.0, "the weights");
        expect(dhu, hu, n, 0.0, "the historical update");
        for (float **d = (float *[]){dg, dh, dw, dhu, dpk, dnr}, **e = d + 6; d < e; d++) gpu->free(gpu, *d);
        free(g), free(h), free(w), free(hu), free(pk), free(nr), free(sum);
    }
    gpu->free(gpu, dslot), free(slot);
}
END_TEST

/* NCCL, one rank on one GPU: a communicator from an id, an allreduce (the sum of one rank: the values),
 * a ring step to itself on a second queue (the bytes arrive), the wait, and the GPU's identity */
START_TEST(nccl_one_rank)
{
    char why[256] = "", id_text[128] = "";
    OK(gpu->device_id(gpu, id_text, sizeof id_text));
    ck_assert_msg(strncmp(id_text, "GPU-", 4) == 0 && strlen(id_text) == 40, "device id '%s'", id_text);
#if DT_NCCL_BUILT
    ck_assert_msg(gpu->net_available && gpu->net_available(gpu, why, sizeof why), "NCCL: %s", why);
    ck_assert_msg(strncmp(why, "NCCL 2.", 7) == 0, "NCCL's version: '%s'", why);
    unsigned char id[DT_NET_ID_BYTES];
    void *net = NULL;
    dt_backend *q = NULL;
    OK(gpu->net_id(gpu, id));
    OK(gpu->net_create(gpu, id, 1, 0, &net));
    const size_t n = 1000003;
    float *x = randv(n, 200, -1, 1), *dx = up(x, n * 4);
    OK(gpu->net_allreduce(gpu, net, dx, n));
    OK(gpu->net_wait(gpu, net, 60.0));
    expect(dx, x, n, 0.0, "one rank's allreduce");
    float *dy = gpu->alloc(gpu, n * 4);
    OK(backend_queue(gpu, &q));
    OK(q->net_sendrecv(q, net, dx, n * 4, 0, dy, n * 4, 0));
    OK(q->net_wait(q, net, 60.0));
    expect(dy, x, n, 0.0, "a ring step to itself");
    /* TernGrad's: an allgather of one rank (its bytes), an int8 allreduce (the values) */
    int8_t *i8 = malloc(n), *got = malloc(n), *d8 = gpu->alloc(gpu, n), *d8b = gpu->alloc(gpu, n);
    for (size_t i = 0; i < n; i++) i8[i] = (int8_t)((int)(rng_hash(201, i) % 255) - 127);
    OK(gpu->to_device(gpu, d8, i8, n));
    OK(gpu->net_allgather(gpu, net, d8, n, d8b));
    OK(gpu->net_allreduce_i8(gpu, net, d8, n));
    OK(gpu->net_wait(gpu, net, 60.0));
    OK(gpu->to_host(gpu, got, d8b, n));
    ck_assert_msg(memcmp(got, i8, n) == 0, "one rank's allgather");
    OK(gpu->to_host(gpu, got, d8, n));
    ck_assert_msg(memcmp(got, i8, n) == 0, "one rank's int8 allreduce");
    gpu->free(gpu, d8), gpu->free(gpu, d8b), free(i8), free(got);
    backend_queue_free(gpu, q);
    gpu->net_free(gpu, net);
    gpu->free(gpu, dx), gpu->free(gpu, dy);
    free(x);
#else
    (void)why;
    ck_assert_msg(gpu->net_available == NULL, "built without NCCL, yet the backend offers it");
#endif
}
END_TEST

START_TEST(memory)
{
    size_t fr = 0, tot = 0;
    OK(gpu->memory(gpu, &fr, &tot));
    ck_assert(fr > 0 && tot >= fr);
    /* more than the GPU has: NULL and a message that says how much was asked and is free */
    void *p = gpu->alloc(gpu, tot * 2);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(dt_errmsg(), "out of GPU memory") && strstr(dt_errmsg(), "MB free"), "%s", dt_errmsg());
    dt_err_clear();
    ck_assert(backend_peak_memory(gpu) > 0);
}
END_TEST

/* ---- --precision bf16 and fp16 ------------------------------------------------------------------
 * GEMMs and convolutions of a bf16 (fp16) backend against the CPU's fp32 ones on the same operands
 * rounded to bf16 (IEEE half) first (cpu_round_bf16; the F16C instruction; the products are exact in
 * fp32 either way): a GEMM within fp32's 1e-4; a convolution's result is rounded to 16 bits once more
 * (cuDNN's bf16 and half configurations), so each value within 2^-8 (2^-10) of its own size (twice the
 * rounding's bound) plus 1e-4 for the order of the sums. Loss scaling's unscale as the CPU's. */
static dt_backend *g16, *gbf16, *gfp16;
static int fp16; /* the test in progress is fp16's */

__attribute__((target("f16c"))) static float *rounded(const float *x, size_t n)
{
    uint16_t *h = malloc(2 * n + 2);
    float *r = malloc(4 * n + 4);
    if (fp16) {
        for (size_t i = 0; i < n; i++) r[i] = _cvtsh_ss(_cvtss_sh(x[i], 0));
        free(h);
        return r;
    }
    cpu_round_bf16(1, h, x, 1, n, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&r[i], &u, 4);
    }
    free(h);
    return r;
}

static void *up16(const float *h, size_t n)
{
    void *d = g16->alloc(g16, n ? 4 * n : 4);
    ck_assert_msg(d != NULL, "alloc: %s", dt_errmsg());
    ck_assert_int_eq(g16->to_device(g16, d, h, 4 * n), 0);
    return d;
}

/* d (g16's memory) = base + part within the bf16 result's tolerance; base NULL: 0 */
static void expect16(const float *d, const float *base, const float *part, size_t n, double rtol, const char *what)
{
    float *h = malloc(4 * n + 4);
    ck_assert_msg(g16->to_host(g16, h, d, 4 * n) == 0, "%s", dt_errmsg());
    for (size_t i = 0; i < n; i++) {
        double want = (base ? (double)base[i] : 0.0) + (double)part[i];
        ck_assert_msg(fabs((double)h[i] - want) <= 1e-4 + rtol * fabs((double)part[i]),
                      "%s[%zu]: %.9g on the GPU in %s, %.9g expected", what, i, h[i], fp16 ? "fp16" : "bf16", want);
    }
    free(h);
}

START_TEST(lowp)
{
    fp16 = _i == 1;
    g16 = fp16 ? gfp16 : gbf16;
    const double conv_tol = fp16 ? 1.0 / 1024 : 1.0 / 256;
    if (!g16) return; /* this GPU refused it (bf16 before compute capability 8.0): said at the start */
    const int shapes[][3] = {{1, 1, 1}, {3, 7, 33}, {33, 17, 5}, {64, 100, 129}};
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int m = shapes[t][0], n = shapes[t][1], k = shapes[t][2];
                    int lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
                    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
                    float *a = randv(na, 31, -1, 1), *b = randv(nb, 32, -1, 1), *c0 = randv(nc, 33, -1, 1);
                    float *ra = rounded(a, na), *rb = rounded(b, nb), *c = malloc(4 * nc), *zero = calloc(nc, 4);
                    float *da = up16(a, na), *db = up16(b, nb), *dc = up16(c0, nc);
                    memcpy(c, c0, 4 * nc);
                    OK(cpu->gemm(cpu, ta, tb, m, n, k, 0.5f, ra, lda, rb, ldb, (float)beta, c, ldc));
                    OK(g16->gemm(g16, ta, tb, m, n, k, 0.5f, da, lda, db, ldb, (float)beta, dc, ldc));
                    char what[64];
                    snprintf(what, sizeof what, "gemm %c%c %dx%dx%d beta %d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
                             beta);
                    expect16(dc, zero, c, nc, 1e-4, what);
                    g16->free(g16, da), g16->free(g16, db), g16->free(g16, dc);
                    free(a), free(b), free(c0), free(ra), free(rb), free(c), free(zero);
                }
    /* c h w o kh kw stride pad groups bias */
    const int cases[][10] = {
        {3, 7, 7, 5, 3, 3, 1, 1, 1, 1}, {16, 9, 9, 33, 3, 3, 2, 1, 1, 0}, {4, 8, 8, 6, 3, 3, 1, 1, 2, 1}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        const int *k = cases[t];
        dt_conv_cfg c = {.c = k[0], .h = k[1], .w = k[2], .o = k[3], .kh = k[4], .kw = k[5], .sh = k[6], .sw = k[6],
                         .pt = k[7], .pb = k[7], .pl = k[7], .pr = k[7], .groups = k[8], .bias = k[9]};
        c.oh = (c.h + 2 * c.pt - c.kh) / c.sh + 1;
        c.ow = (c.w + 2 * c.pl - c.kw) / c.sw + 1;
        void *pc = cpu->conv_plan(cpu, &c), *pg = g16->conv_plan(g16, &c);
        ck_assert_msg(pc && pg, "conv plan: %s", dt_errmsg());
        int rows = 3;
        size_t nx = (size_t)rows * c.c * c.h * c.w, ny = (size_t)rows * c.o * c.oh * c.ow;
        size_t nw = (size_t)c.o * (c.c / c.groups) * c.kh * c.kw;
        float *x = randv(nx, 34 + t, -1, 1), *w = randv(nw, 35, -0.5, 0.5), *b = randv(c.o, 36, -1, 1);
        float *dy = randv(ny, 37, -1, 1), *y = malloc(4 * ny), *y_nb = malloc(4 * ny);
        float *rx = rounded(x, nx), *rw = rounded(w, nw), *rdy = rounded(dy, ny);
        float *gx = up16(x, nx), *gw = up16(w, nw), *gb = up16(b, c.o), *gy = up16(y, ny), *gdy = up16(dy, ny);
        OK(cpu->conv_fwd(cpu, pc, rows, rx, rw, NULL, y_nb)); /* the bias is added to the widened result */
        OK(cpu->conv_fwd(cpu, pc, rows, rx, rw, c.bias ? b : NULL, y));
        float *bias_part = malloc(4 * ny);
        for (size_t i = 0; i < ny; i++) bias_part[i] = y[i] - y_nb[i];
        OK(g16->conv_fwd(g16, pg, rows, gx, gw, c.bias ? gb : NULL, gy));
        expect16(gy, bias_part, y_nb, ny, conv_tol, "convolution forward");
        for (int beta = 0; beta < 2; beta++) {
            float *dx0 = randv(nx, 38, -1, 1), *dx = calloc(nx, 4), *dw = malloc(4 * nw), *db = malloc(4 * c.o);
            float *gdx = up16(dx0, nx), *gdw = up16(dw, nw), *gdb = up16(db, c.o);
            OK(cpu->conv_bwd(cpu, pc, rows, rx, rw, rdy, dx, 0.0f, dw, NULL));
            OK(g16->conv_bwd(g16, pg, rows, gx, gw, gdy, gdx, (float)beta, gdw, c.bias ? gdb : NULL));
            expect16(gdx, beta ? dx0 : NULL, dx, nx, conv_tol, "convolution backward data");
            expect16(gdw, NULL, dw, nw, conv_tol, "convolution backward filter");
            if (c.bias) { /* from the fp32 dy, as on the CPU */
                float *ref = malloc(4 * c.o), *fx = malloc(4 * nx), *fw = malloc(4 * nw);
                OK(cpu->conv_bwd(cpu, pc, rows, x, w, dy, fx, 0.0f, fw, ref));
                expect16(gdb, NULL, ref, c.o, 1e-5, "convolution bias gradient");
                free(ref), free(fx), free(fw);
            }
            g16->free(g16, gdx), g16->free(g16, gdw), g16->free(g16, gdb);
            free(dx0), free(dx), free(dw), free(db);
        }
        g16->free(g16, gx), g16->free(g16, gw), g16->free(g16, gb), g16->free(g16, gy), g16->free(g16, gdy);
        free(x), free(w), free(b), free(dy), free(y), free(y_nb), free(rx), free(rw), free(rdy), free(bias_part);
        cpu->plan_free(cpu, pc), g16->plan_free(g16, pg);
    }
}
END_TEST

/* loss scaling's unscale on the GPU: the CPU's values and flag, with and without a value that is not finite */
START_TEST(unscale)
{
    size_t n = 300007;
    float *x = randv(n, 39, -3e4f, 3e4f), *h = malloc(4 * n);
    for (int bad = 0; bad < 3; bad++) {
        if (bad) x[(size_t)bad * 100000 + 3] = bad == 1 ? INFINITY : 3e38f;
        int32_t flag = 0, gflag = -1, zero = 0;
        float *d = up(x, 4 * n);
        int32_t *df = gpu->alloc(gpu, 4);
        OK(gpu->to_device(gpu, df, &zero, 4));
        OK(gpu->grad_unscale(gpu, d, n, 2.0f, df));
        OK(cpu->grad_unscale(cpu, x, n, 2.0f, &flag));
        OK(gpu->to_host(gpu, h, d, 4 * n));
        OK(gpu->to_host(gpu, &gflag, df, 4));
        ck_assert_msg(gflag == flag && flag == (bad > 0), "flag %d on the GPU, %d on the CPU", gflag, flag);
        ck_assert(memcmp(h, x, 4 * n) == 0);
        for (size_t i = 0; i < n; i++) x[i] *= 0.5f;
        gpu->free(gpu, d), gpu->free(gpu, df);
    }
    free(x), free(h);
}
END_TEST

int main(void)
{
    char why[512] = "";
    const dt_backend_desc *d = backend_find("cuda");
    if (!d) {
        printf("SKIP: the CUDA backend cannot be loaded: %s\n", dt_errmsg());
        return 77;
    }
    if (!d->available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    dt_backend_opts o = {.n_threads = 1, .device = -1};
    if (backend_cpu_create(&cpu, 2) != 0 || backend_create("cuda", &o, &gpu) != 0) {
        printf("cannot create the backends: %s\n", dt_errmsg());
        return 1;
    }
    printf("GPU: %s\n", d->describe());
    dt_backend_opts o16 = o;
    o16.precision = DT_PRECISION_BF16;
    if (backend_create("cuda", &o16, &gbf16) != 0) { /* a GPU older than compute capability 8.0 refuses */
        printf("no bf16 tests: %s\n", dt_errmsg());
        gbf16 = NULL;
    }
    o16.precision = DT_PRECISION_FP16;
    if (backend_create("cuda", &o16, &gfp16) != 0) {
        printf("cannot create the fp16 backend: %s\n", dt_errmsg());
        return 1;
    }
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("ops against the CPU");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gemm);
    tcase_add_test(tc, elementwise);
    tcase_add_test(tc, softmax_xent);
    tcase_add_test(tc, convolution);
    tcase_add_test(tc, pool_lrn_shortcut);
    tcase_add_test(tc, batch_norm);
    tcase_add_test(tc, codecs);
    tcase_add_test(tc, sparse);
    tcase_add_test(tc, merge);
    tcase_add_test(tc, topk_sampled);
    tcase_add_test(tc, terngrad);
    tcase_add_test(tc, csc);
    tcase_add_test(tc, nccl_one_rank);
    tcase_add_test(tc, memory);
    tcase_add_loop_test(tc, lowp, 0, 2); /* bf16, fp16 */
    tcase_add_test(tc, unscale);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (gbf16) backend_destroy(gbf16);
    backend_destroy(gfp16);
    backend_destroy(gpu);
    backend_destroy(cpu);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
