/* Batch normalisation on the CPU: our own loops, not oneDNN's.
 *
 * oneDNN sums the per-channel statistics and the scale and shift gradients in float over
 * N x H x W values: against a float64 reference its backward was 2-8e-5 off (relative), where
 * PyTorch's float32 is 4e-7 (issue 13). Here every per-channel sum is a double: in forward the sums
 * of x - k and (x - k)^2 in one pass (k a value of the channel, so the variance does not cancel),
 * in backward the sums of dy, dy (x - mean) and x - mean (the saved mean is float: its rounding
 * is corrected for). Only the per-element arithmetic is float; 1.7e-7 against float64 on
 * resnet20's layers, where oneDNN was 2e-5 to 2e-4 (tools/bench_bn).
 *
 * Rows are cut into at most NCHUNK chunks of consecutive rows, whatever the thread count; each
 * chunk's sums go to its own slot and the slots are added in order, so results do not depend on
 * --threads. Every layout of the backend: plain NCHW, where a channel's H x W values of one row
 * are contiguous, and nChw16c and NHWC, where 16 channels sit side by side and vectorise (from one
 * pixel to the next: 16 floats on in nChw16c, C in NHWC).
 *
 * With dt_bn_cfg's relu the forward writes max(y, 0) and the backward takes dy where that output
 * is > 0, inside the same loops: the relu's own passes (its forward's read and write, its
 * backward's two reads and a write) are gone, and every value is the one the two layers give
 * (tests/check_cnn: fused_*; tools/bench_bn times both).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu.h"
#include "../util.h"
#include "backend_cpu.h"

#define NCHUNK 32

typedef struct bn_geom {
    int c, hw, rows, blocked, nhwc; /* blocked: nChw16c or NHWC */
    int xb;                         /* x (and dx) in bf16 (dt_bn_cfg's in_bf16) */
    int yb;                         /* y in bf16 (dt_bn_cfg's out_bf16) */
    size_t step;                    /* blocked: floats from a pixel to the next (16 or C) */
    /* blocked: pixels a pass over 16 channels takes at a time before the next 16 channels' (all of
     * a row's in nChw16c, where they are contiguous; in NHWC a tile of about 8 KB, so the next
     * channels' pass finds its lines in cache instead of striding through memory once per 16
     * channels: twice as fast at 32 and 64 channels). Each channel's sums still add its pixels in
     * order, so the tile changes no bit. */
    int tile;
} bn_geom;

/* blocked: where channels 16 cb .. 16 cb + 15 of row r start */
static size_t blk(const bn_geom *g, int r, int cb)
{
    return g->nhwc ? (size_t)r * g->c * g->hw + (size_t)cb * 16 : ((size_t)r * g->c + (size_t)cb * 16) * g->hw;
}

/* blocked: the end of the tile of pixels that starts at i0 */
static int tile_end(const bn_geom *g, int i0) { return DT_MIN(i0 + g->tile, g->hw); }

/* chunk k of n rows cut into nk chunks */
static int chunk_lo(int rows, int nk, int k) { return (int)((long)rows * k / nk); }

/* x's value i, where p points into x as floats and h as bf16 (xb: x holds bf16); with xb a constant
 * of the inlined body, each loop reads one type and stays vectorised */
#define X_AT(p, h, i, xb) ((xb) ? cpu_float_of_bf16((h)[i]) : (p)[i])

/* Adds, over rows [r0, r1), the sums of x - k and of (x - k)^2 per channel into s1, s2: one pass.
 * k is a value of the channel (its first), so the variance S2/M - (S1/M)^2 of the shifted values
 * does not cancel (in double, with |mean - k| within the data's spread). ra: 3 C doubles of scratch. */
static inline __attribute__((always_inline)) void stats_body(const bn_geom *g, const float *x, const double *k, int r0,
                                                             int r1, double *s1, double *s2, double *ra, const int xb)
{
    const uint16_t *xh = (const uint16_t *)(const void *)x;
    if (!g->blocked) {
        for (int r = r0; r < r1; r++)
            for (int c = 0; c < g->c; c++) {
                size_t o = ((size_t)r * g->c + c) * g->hw;
                const float *p = x + o;
                const uint16_t *ph = xh + o;
                double a = 0.0, b = 0.0, kc = k[c];
#pragma omp simd reduction(+ : a, b)
                for (int i = 0; i < g->hw; i++) {
                    double d = (double)X_AT(p, ph, i, xb) - kc;
                    a += d;
                    b += d * d;
                }
                s1[c] += a;
                s2[c] += b;
            }
        return;
    }
    for (int r = r0; r < r1; r++) {
        memset(ra, 0, sizeof(double) * 2 * (size_t)g->c);
        for (int i0 = 0; i0 < g->hw; i0 += g->tile)
            for (int cb = 0; cb < g->c / 16; cb++) {
                size_t o = blk(g, r, cb) + (size_t)i0 * g->step;
                const float *p = x + o;
                const uint16_t *ph = xh + o;
                double a[16], b[16], kc[16], *ta = ra + cb * 16, *tb = ta + g->c;
                memcpy(kc, k + cb * 16, sizeof kc);
                memcpy(a, ta, sizeof a), memcpy(b, tb, sizeof b);
                for (int i = i0, i1 = tile_end(g, i0); i < i1; i++, p += g->step, ph += g->step) {
#pragma omp simd
                    for (int j = 0; j < 16; j++) {
                        double d = (double)X_AT(p, ph, j, xb) - kc[j];
                        a[j] += d;
                        b[j] += d * d;
                    }
                }
                memcpy(ta, a, sizeof a), memcpy(tb, b, sizeof b);
            }
        for (int c = 0; c < g->c; c++) s1[c] += ra[c], s2[c] += ra[g->c + c];
    }
}

DT_CLONES static void stats_chunk(const bn_geom *g, const float *x, const double *k, int r0, int r1, double *s1,
                                  double *s2, double *ra)
{
    if (g->xb)
        stats_body(g, x, k, r0, r1, s1, s2, ra, 1);
    else
        stats_body(g, x, k, r0, r1, s1, s2, ra, 0);
}

/* dy where the fused relu's output y is > 0 (relu_bwd's expression), or dy itself without it. Both
 * values are loaded whatever relu says (without relu y points at dy), so that the loops stay
 * vectorised: a load under a condition kept gcc from it and tripled the time of the sums. */
static inline float dy_where(float dy, float y, const int relu)
{
    if (!relu) return dy;
    union {
        float f;
        uint32_t u;
    } v = {dy};
    v.u &= -(uint32_t)(y > 0.0f); /* +0.0f where y <= 0 (or NaN), as relu_bwd's select */
    return v.f;
}
/* v: y as floats, vh: as bf16 (yb: y holds bf16); without relu both point at dy */
#define DY_AT(d, v, vh, i, relu, yb) dy_where((d)[i], (yb) ? cpu_float_of_bf16((vh)[i]) : (v)[i], relu)

/* CALL(relu, xb, yb) with each flag a constant, for the flags' values: each variant its own loops */
#define VARIANTS(relu, xb, yb, CALL)                                                                                   \
    switch (((relu) ? 4 : 0) | ((xb) ? 2 : 0) | ((yb) ? 1 : 0)) {                                                      \
        case 0: CALL(0, 0, 0); break;                                                                                  \
        case 1: CALL(0, 0, 1); break;                                                                                  \
        case 2: CALL(0, 1, 0); break;                                                                                  \
        case 3: CALL(0, 1, 1); break;                                                                                  \
        case 4: CALL(1, 0, 0); break;                                                                                  \
        case 5: CALL(1, 0, 1); break;                                                                                  \
        case 6: CALL(1, 1, 0); break;                                                                                  \
        default: CALL(1, 1, 1); break;                                                                                 \
    }

/* Adds, over rows [r0, r1), the sums of dy, of dy (x - m) and of x - m per channel into s1, s2,
 * s3 (ra: 3 C doubles of scratch); relu: dy taken where y > 0. Inlined with relu a constant, so each
 * variant has its own loops. */
static inline __attribute__((always_inline)) void grad_sums_body(const bn_geom *g, const float *x, const float *dy,
                                                                 const float *y, const double *m, int r0, int r1,
                                                                 double *s1, double *s2, double *s3, double *ra,
                                                                 const int relu, const int xb, const int yb)
{
    const uint16_t *xh = (const uint16_t *)(const void *)x;
    if (!g->blocked) {
        for (int r = r0; r < r1; r++)
            for (int c = 0; c < g->c; c++) {
                size_t o = ((size_t)r * g->c + c) * g->hw;
                const float *p = x + o, *d = dy + o, *v = relu ? y + o : d; /* without relu: never read */
                const uint16_t *ph = xh + o, *vh = relu ? (const uint16_t *)(const void *)y + o : (const uint16_t *)d;
                double a = 0.0, b = 0.0, e = 0.0, mc = m[c];
#pragma omp simd reduction(+ : a, b, e)
                for (int i = 0; i < g->hw; i++) {
                    double xm = (double)X_AT(p, ph, i, xb) - mc, di = (double)DY_AT(d, v, vh, i, relu, yb);
                    a += di;
                    b += di * xm;
                    e += xm;
                }
                s1[c] += a;
                s2[c] += b;
                s3[c] += e;
            }
        return;
    }
    for (int r = r0; r < r1; r++) {
        memset(ra, 0, sizeof(double) * 3 * (size_t)g->c);
        for (int i0 = 0; i0 < g->hw; i0 += g->tile)
            for (int cb = 0; cb < g->c / 16; cb++) {
                size_t o = blk(g, r, cb) + (size_t)i0 * g->step;
                const float *p = x + o, *d = dy + o, *v = relu ? y + o : d; /* without relu: never read */
                const uint16_t *ph = xh + o, *vh = relu ? (const uint16_t *)(const void *)y + o : (const uint16_t *)d;
                double a[16], b[16], e[16], mc[16], *ta = ra + cb * 16, *tb = ta + g->c, *te = tb + g->c;
                memcpy(mc, m + cb * 16, sizeof mc);
                memcpy(a, ta, sizeof a), memcpy(b, tb, sizeof b), memcpy(e, te, sizeof e);
                for (int i = i0, i1 = tile_end(g, i0); i < i1;
                     i++, p += g->step, ph += g->step, d += g->step, v += g->step, vh += g->step) {
#pragma omp simd
                    for (int k = 0; k < 16; k++) {
                        double xm = (double)X_AT(p, ph, k, xb) - mc[k], dk = (double)DY_AT(d, v, vh, k, relu, yb);
                        a[k] += dk;
                        b[k] += dk * xm;
                        e[k] += xm;
                    }
                }
                memcpy(ta, a, sizeof a), memcpy(tb, b, sizeof b), memcpy(te, e, sizeof e);
            }
        for (int c = 0; c < g->c; c++) s1[c] += ra[c], s2[c] += ra[g->c + c], s3[c] += ra[2 * g->c + c];
    }
}

DT_CLONES static void grad_sums_chunk(const bn_geom *g, const float *x, const float *dy, const float *y,
                                      const double *m, int r0, int r1, double *s1, double *s2, double *s3, double *ra)
{
#define GS(relu, xb, yb) grad_sums_body(g, x, dy, y, m, r0, r1, s1, s2, s3, ra, relu, xb, yb)
    VARIANTS(y != NULL, g->xb, g->yb, GS)
#undef GS
}

/* y = (x - m) * a + b per channel, over rows [r0, r1); relu: then max(y, 0) as relu_fwd; yb: y
 * written rounded to bf16 (as cpu_round_bf16, which the convolution after it did on fp32 y) */
#define RELU_IF(v, relu) ((relu) ? ((v) > 0.0f ? (v) : 0.0f) : (v))
/* output element i: q[i] = val, or (bf, a constant of the body) qh[i] = val rounded to bf16 */
#define PUT(bf, i, val)                                                                                                \
    do {                                                                                                               \
        if (bf)                                                                                                        \
            qh[i] = cpu_bf16_of(val);                                                                                  \
        else                                                                                                           \
            q[i] = (val);                                                                                              \
    } while (0)

static inline __attribute__((always_inline)) void normalize_body(const bn_geom *g, const float *x, const float *m,
                                                                 const float *a, const float *b, int r0, int r1,
                                                                 float *y, const int relu, const int xb, const int yb)
{
    const uint16_t *xh = (const uint16_t *)(const void *)x;
    uint16_t *yh = (uint16_t *)(void *)y;
    for (int r = r0; r < r1; r++) {
        if (!g->blocked) {
            for (int c = 0; c < g->c; c++) {
                size_t o = ((size_t)r * g->c + c) * g->hw;
                const float *restrict p = x + o;
                const uint16_t *restrict ph = xh + o;
                uint16_t *restrict qh = yh + o;
                float *restrict q = y + o, mc = m[c], ac = a[c], bc = b[c];
#pragma omp simd
                for (int i = 0; i < g->hw; i++) {
                    float v = (X_AT(p, ph, i, xb) - mc) * ac + bc;
                    PUT(yb, i, RELU_IF(v, relu));
                }
            }
            continue;
        }
        for (int i0 = 0; i0 < g->hw; i0 += g->tile)
            for (int cb = 0; cb < g->c / 16; cb++) {
                size_t o = blk(g, r, cb) + (size_t)i0 * g->step;
                const float *restrict p = x + o, *mc = m + cb * 16, *ac = a + cb * 16, *bc = b + cb * 16;
                const uint16_t *restrict ph = xh + o;
                uint16_t *restrict qh = yh + o;
                float *restrict q = y + o;
                for (int i = i0, i1 = tile_end(g, i0); i < i1;
                     i++, p += g->step, ph += g->step, q += g->step, qh += g->step) {
#pragma omp simd
                    for (int k = 0; k < 16; k++) {
                        float v = (X_AT(p, ph, k, xb) - mc[k]) * ac[k] + bc[k];
                        PUT(yb, k, RELU_IF(v, relu));
                    }
                }
            }
    }
}

DT_CLONES static void normalize_rows(const bn_geom *g, const float *x, const float *m, const float *a, const float *b,
                                     int r0, int r1, float *y, int relu)
{
#define NB(relu, xb, yb) normalize_body(g, x, m, a, b, r0, r1, y, relu, xb, yb)
    VARIANTS(relu, g->xb, g->yb, NB)
#undef NB
}

/* dx = beta dx + (dy - u - (x - m) k) a per channel, over rows [r0, r1); relu: dy taken where y > 0;
 * xb: x read as bf16 and dx written as bf16 (rounded to nearest even, as cpu_round_bf16), beta 0 */
#define DX_OF(i, j) ((DY_AT(d, v, vh, i, relu, yb) - uc[j] - (X_AT(p, ph, i, xb) - mc[j]) * kc[j]) * ac[j])
#define DX_ADD(i, val) (q[i] = beta * q[i] + (val)) /* not with xb */

static inline __attribute__((always_inline)) void dx_body(const bn_geom *g, const float *x, const float *dy,
                                                          const float *y, const float *m, const float *u,
                                                          const float *k, const float *a, float beta, int r0, int r1,
                                                          float *dx, const int relu, const int xb, const int yb)
{
    const uint16_t *xh = (const uint16_t *)(const void *)x;
    uint16_t *dxh = (uint16_t *)(void *)dx;
    for (int r = r0; r < r1; r++) {
        if (!g->blocked) {
            for (int c = 0; c < g->c; c++) {
                size_t o = ((size_t)r * g->c + c) * g->hw;
                const float *restrict p = x + o, *restrict d = dy + o, *restrict v = relu ? y + o : d;
                const uint16_t *restrict ph = xh + o, *restrict vh = relu ? (const uint16_t *)(const void *)y + o
                                                                          : (const uint16_t *)d;
                float *restrict q = dx + o;
                uint16_t *restrict qh = dxh + o;
                const float *uc = u + c, *mc = m + c, *kc = k + c, *ac = a + c;
                if (xb || beta == 0.0f) {
#pragma omp simd
                    for (int i = 0; i < g->hw; i++) PUT(xb, i, DX_OF(i, 0));
                } else {
#pragma omp simd
                    for (int i = 0; i < g->hw; i++) DX_ADD(i, DX_OF(i, 0));
                }
            }
            continue;
        }
        for (int i0 = 0; i0 < g->hw; i0 += g->tile)
            for (int cb = 0; cb < g->c / 16; cb++) {
                size_t o = blk(g, r, cb) + (size_t)i0 * g->step;
                const float *restrict p = x + o, *restrict d = dy + o, *restrict v = relu ? y + o : d;
                const uint16_t *restrict ph = xh + o, *restrict vh = relu ? (const uint16_t *)(const void *)y + o
                                                                          : (const uint16_t *)d;
                const float *mc = m + cb * 16, *uc = u + cb * 16, *kc = k + cb * 16, *ac = a + cb * 16;
                float *restrict q = dx + o;
                uint16_t *restrict qh = dxh + o;
                for (int i = i0, i1 = tile_end(g, i0); i < i1; i++, p += g->step, ph += g->step, d += g->step,
                         v += g->step, vh += g->step, q += g->step, qh += g->step) {
                    if (xb || beta == 0.0f) {
#pragma omp simd
                        for (int j = 0; j < 16; j++) PUT(xb, j, DX_OF(j, j));
                    } else {
#pragma omp simd
                        for (int j = 0; j < 16; j++) DX_ADD(j, DX_OF(j, j));
                    }
                }
            }
    }
}

DT_CLONES static void dx_rows(const bn_geom *g, const float *x, const float *dy, const float *y, const float *m,
                              const float *u, const float *k, const float *a, float beta, int r0, int r1, float *dx)
{
#define DB(relu, xb, yb) dx_body(g, x, dy, y, m, u, k, a, xb ? 0.0f : beta, r0, r1, dx, relu, xb, yb)
    VARIANTS(y != NULL, g->xb, g->yb, DB)
#undef DB
}

static bn_geom geom_of(const dt_bn_cfg *c, int rows)
{
    int nhwc = c->layout == DT_LAYOUT_NHWC, hw = c->h * c->w, tile = nhwc ? DT_MAX(2048 / c->c, 4) : hw;
    return (bn_geom){c->c,
                     hw,
                     rows,
                     c->layout == DT_LAYOUT_BLOCK16 || nhwc,
                     nhwc,
                     c->in_bf16 != 0,
                     c->out_bf16 != 0,
                     nhwc ? (size_t)c->c : 16,
                     DT_MAX(tile, 1)};
}

/* the chunked per-channel sums s1, s2, s3, each summed over the chunks in order into t1, t2, t3 */
typedef enum { SUM_STATS, SUM_GRAD } sum_kind;

static int chunked_sums(const bn_geom *g, int n_threads, sum_kind kind, const float *x, const float *dy,
                        const float *y, const double *m, double *t1, double *t2, double *t3)
{
    int nk = g->rows < NCHUNK ? g->rows : NCHUNK;
    size_t per = 3 * (size_t)g->c;
    double *part = calloc((size_t)nk * per * 2, sizeof *part); /* each chunk's sums, then its scratch */
    if (!part) return dt_fail("out of memory");
    int nt = cpu_threads_for(n_threads, (size_t)g->rows * g->c * g->hw);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int k = 0; k < nk; k++) {
        double *s1 = part + (size_t)k * per, *s2 = s1 + g->c, *s3 = s2 + g->c, *ra = part + (size_t)(nk + k) * per;
        int r0 = chunk_lo(g->rows, nk, k), r1 = chunk_lo(g->rows, nk, k + 1);
        if (kind == SUM_GRAD) grad_sums_chunk(g, x, dy, y, m, r0, r1, s1, s2, s3, ra);
        else stats_chunk(g, x, m, r0, r1, s1, s2, ra);
    }
    for (int c = 0; c < g->c; c++) {
        double a = 0.0, b = 0.0, e = 0.0;
        for (int k = 0; k < nk; k++) {
            const double *s = part + (size_t)k * per + c;
            a += s[0], b += s[g->c], e += s[2 * g->c];
        }
        if (t1) t1[c] = a;
        if (t2) t2[c] = b;
        if (t3) t3[c] = e;
    }
    free(part);
    return 0;
}

/* row ranges of the elementwise passes, one per thread */
#define PAR_ROWS(rows, work, n_threads, body)                                                                         \
    do {                                                                                                               \
        int nt_ = cpu_threads_for((n_threads), (work));                                                                \
        _Pragma("omp parallel for schedule(static) num_threads(nt_)") for (int t_ = 0; t_ < nt_; t_++) {               \
            int r0 = chunk_lo(rows, nt_, t_), r1 = chunk_lo(rows, nt_, t_ + 1);                                        \
            body;                                                                                                      \
        }                                                                                                              \
    } while (0)

/* the per-channel arrays of one call: nd doubles and nf floats each of C */
typedef struct bn_tmp {
    double *d;
    float *f;
} bn_tmp;

static int tmp_get(bn_tmp *t, int c, int nd, int nf)
{
    t->d = malloc(sizeof(double) * (size_t)nd * (size_t)c);
    t->f = malloc(sizeof(float) * (size_t)nf * (size_t)c);
    if (t->d && t->f) return 0;
    free(t->d), free(t->f);
    return dt_fail("out of memory");
}

static int tmp_put(bn_tmp *t, int rc)
{
    free(t->d), free(t->f);
    return rc;
}

int cpu_bn_forward(const dt_bn_cfg *cfg, int n_threads, int rows, int train, const float *x, const float *scale,
                   const float *shift, float *mean, float *var, float *y)
{
    bn_geom g = geom_of(cfg, rows);
    int C = cfg->c;
    bn_tmp t;
    if (tmp_get(&t, C, 3, 3) != 0) return -1;
    double *dm = t.d, *dv = t.d + C;
    float *fm = t.f, *fa = t.f + C, *fb = t.f + 2 * C;
    if (train) {
        double n = (double)rows * g.hw, *k = t.d + 2 * C; /* each channel's first value */
        for (int c = 0; c < C; c++) {
            size_t at = g.blocked ? blk(&g, 0, c / 16) + c % 16 : (size_t)c * g.hw;
            k[c] = g.xb ? cpu_float_of_bf16(((const uint16_t *)(const void *)x)[at]) : x[at];
        }
        if (chunked_sums(&g, n_threads, SUM_STATS, x, NULL, NULL, k, dm, dv, NULL) != 0) return tmp_put(&t, -1);
        for (int c = 0; c < C; c++) {
            double d = dm[c] / n, v = dv[c] / n - d * d;
            dm[c] = k[c] + d;
            dv[c] = v > 0.0 ? v : 0.0;
            mean[c] = (float)dm[c];
            var[c] = (float)dv[c];
        }
    } else {
        for (int c = 0; c < C; c++) dm[c] = mean[c], dv[c] = var[c];
    }
    for (int c = 0; c < C; c++) {
        double inv = 1.0 / sqrt(dv[c] + (double)cfg->eps);
        fm[c] = (float)dm[c];
        fa[c] = (float)(inv * scale[c]);
        fb[c] = shift[c];
    }
    PAR_ROWS(rows, (size_t)rows * C * g.hw, n_threads, normalize_rows(&g, x, fm, fa, fb, r0, r1, y, cfg->relu));
    return tmp_put(&t, 0);
}

int cpu_bn_backward(const dt_bn_cfg *cfg, int n_threads, int rows, const float *x, const float *scale,
                    const float *mean, const float *var, const float *dy, const float *y, float *dx, float dx_beta,
                    float *dscale, float *dshift)
{
    if (!cfg->relu) y = NULL;
    if (cfg->in_bf16 && dx && dx_beta != 0.0f)
        return dt_fail("internal: batch norm's dx in bf16 is written, not added to (its input has one consumer)");
    bn_geom g = geom_of(cfg, rows);
    int C = cfg->c;
    double n = (double)rows * g.hw;
    bn_tmp t;
    if (tmp_get(&t, C, 4, 4) != 0) return -1;
    double *dm = t.d, *sdy = t.d + C, *sdx = t.d + 2 * C, *sx = t.d + 3 * C;
    float *fm = t.f, *fu = t.f + C, *fk = t.f + 2 * C, *fa = t.f + 3 * C;
    for (int c = 0; c < C; c++) dm[c] = mean[c];
    if (chunked_sums(&g, n_threads, SUM_GRAD, x, dy, y, dm, sdy, sdx, sx) != 0) return tmp_put(&t, -1);
    for (int c = 0; c < C; c++) {
        /* the saved mean is rounded to float; the batch's own is that plus the mean of x - it:
         * sum dy (x - mean) = sum dy (x - saved) - (mean - saved) sum dy */
        double dmean = sx[c] / n, sdxm = sdx[c] - dmean * sdy[c];
        double inv = 1.0 / sqrt((double)var[c] + (double)cfg->eps), k = sdxm / n * inv * inv;
        if (dshift) dshift[c] = (float)sdy[c];
        if (dscale) dscale[c] = (float)(sdxm * inv);
        /* dx = scale inv (dy - mean(dy) - (x - mean) inv^2 mean(dy (x - mean))), with
         * x - mean = (x - saved) - dmean */
        fm[c] = mean[c];
        fu[c] = (float)(sdy[c] / n - dmean * k);
        fk[c] = (float)k;
        fa[c] = (float)(inv * scale[c]);
    }
    if (dx)
        PAR_ROWS(rows, (size_t)rows * C * g.hw, n_threads, dx_rows(&g, x, dy, y, fm, fu, fk, fa, dx_beta, r0, r1, dx));
    return tmp_put(&t, 0);
}
