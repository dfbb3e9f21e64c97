/* LRN on the CPU where oneDNN has no fast kernel: our own loops.
 *
 * oneDNN's LRN kernels are JIT code only for some layouts, ISAs and window sizes: on an AVX2 EPYC
 * its backward ran its reference code (lrn_ref:any in ONEDNN_VERBOSE) for NCHW and NHWC, 61% of
 * alexnet's training time, each backward pass 38 times as long as its forward; its forward did so
 * for NCHW with 12 channels and for NHWC with size 3. The backend takes these loops wherever oneDNN
 * would take its reference code (backend_cpu_dnnl.c); its JIT forward is faster than ours (2.5x in
 * NHWC on that EPYC). check_cnn tests these loops in every layout, whatever oneDNN chooses.
 *
 * With s_q = k + alpha/size sum_{p in win(q)} x_p^2 and win(q) the channels q - size/2 .. q + size/2
 * that exist,
 *     y_q  = x_q s_q^-beta
 *     dx_p = dy_p s_p^-beta - 2 alpha beta / size  x_p  sum_{q in win(p)} dy_q x_q s_q^(-beta-1)
 * (p in win(q) exactly when q in win(p): size is odd). One pixel's C channels at a time, each sum
 * over a window a vector add of shifted rows. NHWC holds a pixel's channels side by side; NCHW and
 * nChw16c pixels are gathered TILE at a time into such a tile and scattered back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu.h"
#include "../util.h"
#include "backend_cpu.h"

#define TILE 16 /* pixels per gathered tile */

typedef struct lrn_k {
    int c, half;
    float k, an, beta, c2; /* an = alpha / size, c2 = 2 alpha beta / size */
} lrn_k;

/* s^-beta: beta 0.75 (every net here) and 0.5 without powf, so that the loops vectorise */
DT_NO_MATH_ERRNO static inline float pow_neg(float s, float beta)
{
    if (beta == 0.75f) return 1.0f / sqrtf(s * sqrtf(s));
    if (beta == 0.5f) return 1.0f / sqrtf(s);
    return powf(s, -beta);
}

/* acc[c] = sum over the window of c of row[h + c'], row zero-padded by h on both sides */
DT_NO_MATH_ERRNO static inline void window_sum(const float *restrict row, float *restrict acc, int C, int h)
{
    for (int c = 0; c < C; c++) acc[c] = 0.0f;
    for (int j = 0; j <= 2 * h; j++)
        for (int c = 0; c < C; c++) acc[c] += row[c + j];
}

/* Scratch of one thread: two rows of C + 2 half floats whose first and last half floats are zero
 * (sq, t), two of C (d, acc). */
static size_t scratch_floats(const lrn_k *k) { return 4 * (size_t)k->c + 4 * (size_t)k->half; }

/* forward, one pixel whose C channels are x[0..C): y */
DT_NO_MATH_ERRNO DT_CLONES static void pixel_fwd(const lrn_k *k, const float *restrict x, float *restrict y,
                                                 float *restrict w)
{
    const int C = k->c, h = k->half;
    float *sq = w, *acc = w + 2 * (C + 2 * h) + C;
    for (int c = 0; c < C; c++) sq[h + c] = x[c] * x[c];
    window_sum(sq, acc, C, h);
    for (int c = 0; c < C; c++) y[c] = x[c] * pow_neg(k->k + k->an * acc[c], k->beta);
}

/* backward, one pixel: dx = the gradient + dx_beta dx */
DT_NO_MATH_ERRNO DT_CLONES static void pixel_bwd(const lrn_k *k, const float *restrict x, const float *restrict dy,
                                                 float *restrict dx, float dx_beta, float *restrict w)
{
    const int C = k->c, h = k->half, pad = C + 2 * h;
    float *sq = w, *t = w + pad, *d = w + 2 * pad, *acc = d + C;
    for (int c = 0; c < C; c++) sq[h + c] = x[c] * x[c];
    window_sum(sq, acc, C, h);
    for (int c = 0; c < C; c++) {
        float s = k->k + k->an * acc[c], p = pow_neg(s, k->beta);
        d[c] = p;
        t[h + c] = dy[c] * x[c] * (p / s);
    }
    window_sum(t, acc, C, h);
    for (int c = 0; c < C; c++) {
        float v = dy[c] * d[c] - k->c2 * x[c] * acc[c];
        dx[c] = dx_beta == 0.0f ? v : v + dx_beta * dx[c];
    }
}

/* where channel c of pixel p of row r is, in NCHW or nChw16c (C a multiple of 16 there) */
static size_t at(const dt_lrn_cfg *g, int r, int c, int p)
{
    size_t hw = (size_t)g->h * g->w;
    if (g->layout == DT_LAYOUT_BLOCK16) return (((size_t)r * (g->c / 16) + c / 16) * hw + p) * 16 + c % 16;
    return ((size_t)r * g->c + c) * hw + p;
}

/* copies n pixels from p0 of row r between the tensor and a tile [n][C] */
static void gather(const dt_lrn_cfg *g, const float *src, int r, int p0, int n, float *tile)
{
    for (int c = 0; c < g->c; c++) {
        const float *s = src + at(g, r, c, p0);
        size_t step = g->layout == DT_LAYOUT_BLOCK16 ? 16 : 1;
        for (int l = 0; l < n; l++) tile[(size_t)l * g->c + c] = s[l * step];
    }
}

static void scatter(const dt_lrn_cfg *g, const float *tile, int r, int p0, int n, float *dst)
{
    for (int c = 0; c < g->c; c++) {
        float *d = dst + at(g, r, c, p0);
        size_t step = g->layout == DT_LAYOUT_BLOCK16 ? 16 : 1;
        for (int l = 0; l < n; l++) d[l * step] = tile[(size_t)l * g->c + c];
    }
}

/* Forward (dy NULL: x to y) or backward (x, dy to dx = y) over rows, threads over tiles of TILE
 * pixels of one row. */
static int lrn_run(const dt_lrn_cfg *g, int n_threads, int rows, const float *x, const float *dy, float *y,
                   float dx_beta)
{
    const int C = g->c, hw = g->h * g->w, direct = g->layout == DT_LAYOUT_NHWC;
    lrn_k k = {.c = C,
               .half = g->size / 2,
               .k = g->k,
               .an = g->alpha / (float)g->size,
               .beta = g->beta,
               .c2 = 2.0f * g->alpha * g->beta / (float)g->size};
    if (rows <= 0) return 0;
    const long per_row = (hw + TILE - 1) / TILE, items = (long)rows * per_row;
    const size_t scratch = scratch_floats(&k) + (direct ? 0 : 3 * (size_t)TILE * C);
    int nt = cpu_threads_for(n_threads, (size_t)rows * C * hw);
    if (nt > items) nt = (int)items;
    float *buf = calloc((size_t)nt * scratch, sizeof *buf);
    if (!buf) return dt_fail("out of memory for LRN's scratch (%zu floats)", (size_t)nt * scratch);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int t = 0; t < nt; t++) {
        float *w = buf + (size_t)t * scratch, *tx = w + scratch_floats(&k), *tdy = tx + TILE * C, *ty = tdy + TILE * C;
        for (long i = items * t / nt; i < items * (t + 1) / nt; i++) {
            int r = (int)(i / per_row), p0 = (int)(i % per_row) * TILE, n = hw - p0 < TILE ? hw - p0 : TILE;
            const float *px = tx, *pdy = tdy;
            float *py = ty;
            if (direct) {
                size_t o = ((size_t)r * hw + (size_t)p0) * C;
                px = x + o, pdy = dy ? dy + o : NULL, py = y + o;
            } else {
                gather(g, x, r, p0, n, tx);
                if (dy) gather(g, dy, r, p0, n, tdy);
                if (dy && dx_beta != 0.0f) gather(g, y, r, p0, n, ty);
            }
            for (int l = 0; l < n; l++) {
                size_t o = (size_t)l * C;
                if (dy)
                    pixel_bwd(&k, px + o, pdy + o, py + o, dx_beta, w);
                else
                    pixel_fwd(&k, px + o, py + o, w);
            }
            if (!direct) scatter(g, ty, r, p0, n, y);
        }
    }
    free(buf);
    return 0;
}

int cpu_lrn_forward(const dt_lrn_cfg *cfg, int n_threads, int rows, const float *x, float *y)
{
    return lrn_run(cfg, n_threads, rows, x, NULL, y, 0.0f);
}

int cpu_lrn_backward(const dt_lrn_cfg *cfg, int n_threads, int rows, const float *x, const float *dy, float *dx,
                     float dx_beta)
{
    return lrn_run(cfg, n_threads, rows, x, dy, dx, dx_beta);
}
