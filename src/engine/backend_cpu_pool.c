/* Pooling in our own loops, not oneDNN's: NCHW activations, and max pooling of NHWC ones.
 *
 * oneDNN's JIT pooling takes blocked and NHWC activations only; for NCHW (channel counts that are
 * not a multiple of 16: lenet's 20 and 50) it runs its generic simple_nchw code: 42% of lenet's
 * training time on an AVX2 EPYC (ONEDNN_VERBOSE), 64 ns per output of a 2x2 max pool. Its NHWC
 * max pooling is JIT code but slow on such CPUs: cifar-quick's first pool (100x32x32x32, 3x3
 * stride 2, ceil) took 15 ms forward and 15 ms backward there, a sixth of the iteration. Its
 * AVX-512 kernel is faster than these loops (0.7-1.3 ms forward, 1.0-1.3 ms backward against
 * 1.9-2.3 ms and 1.8-2.2 ms, the same pool, 2 threads of an AVX-512 EPYC): with AVX-512 the backend
 * takes oneDNN's (backend_cpu.c, nhwc_max_ours).
 *
 * NCHW: one H x W plane at a time, threads over planes; the 2x2 max pool with stride 2 (lenet's)
 * forward in AVX-512 registers where the CPU has them. NHWC (max only; C a multiple of 16): one
 * output pixel at a time, its channels 8 at a time in AVX2 registers where the CPU has AVX2, threads
 * over output rows forward and over images and 16-channel blocks backward. Max: each output is its
 * window's first largest value in row-major order (as oneDNN and PyTorch take it; a NaN first in
 * the window stays, a later one loses), and training remembers where it was (the input pixel
 * u * W + v of its plane), so backward adds the output's gradient there, in the outputs' order.
 * Average: over the window's values inside the input (padding excluded), backward spreads the
 * gradient evenly over them. An output whose window lies wholly in the padding is 0 and passes no
 * gradient.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DT_POOL_AVX2 1
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu.h"
#include "../util.h"
#include "backend_cpu.h"

/* the rows [h0, h1) and columns [w0, w1) of output (i, j)'s window inside the input */
static inline void window(const dt_pool_cfg *g, int i, int j, int *h0, int *h1, int *w0, int *w1)
{
    *h0 = i * g->sh - g->pt, *w0 = j * g->sw - g->pl;
    *h1 = *h0 + g->kh, *w1 = *w0 + g->kw;
    if (*h0 < 0) *h0 = 0;
    if (*w0 < 0) *w0 = 0;
    if (*h1 > g->h) *h1 = g->h;
    if (*w1 > g->w) *w1 = g->w;
}

/* output (i, j) of one plane, any window */
static inline void one_fwd(const dt_pool_cfg *g, const float *restrict x, float *restrict y, int32_t *restrict arg,
                           int i, int j)
{
    int h0, h1, w0, w1, at = -1;
    window(g, i, j, &h0, &h1, &w0, &w1);
    float s = 0.0f;
    if (h0 < h1 && w0 < w1 && g->max) s = x[h0 * g->w + w0], at = h0 * g->w + w0;
    for (int u = h0; u < h1; u++)
        for (int v = w0; v < w1; v++) {
            float e = x[u * g->w + v];
            int gt = e > s;
            if (!g->max) s += e;
            else s = gt ? e : s, at = gt ? u * g->w + v : at;
        }
    int n = (h1 - h0) * (w1 - w0);
    if (!g->max) s = n > 0 ? s / (float)n : 0.0f; /* n 0: a window wholly in the padding */
    y[i * g->ow + j] = s;
    if (arg) arg[i * g->ow + j] = at;
}

/* one plane: x [h][w] to y [oh][ow]; arg: where each max came from (NULL: not kept). The columns
 * whose windows lie inside the input's width go together, a vector of outputs at a time. */
DT_CLONES static void plane_fwd(const dt_pool_cfg *g, const float *restrict x, float *restrict y,
                                int32_t *restrict arg)
{
    /* j in [jlo, jhi): j sw - pl >= 0 and j sw - pl + kw <= w */
    int jlo = (g->pl + g->sw - 1) / g->sw, jhi = g->w - g->kw + g->pl < 0 ? 0 : (g->w - g->kw + g->pl) / g->sw + 1;
    if (jhi > g->ow) jhi = g->ow;
    if (jlo > jhi) jlo = jhi;
    int32_t a[jhi > 0 ? jhi : 1]; /* the interior columns' argmax (also when arg is NULL) */
    for (int i = 0; i < g->oh; i++) {
        int h0, h1, w0, w1;
        window(g, i, 0, &h0, &h1, &w0, &w1);
        for (int j = 0; j < jlo; j++) one_fwd(g, x, y, arg, i, j);
        for (int j = jhi; j < g->ow; j++) one_fwd(g, x, y, arg, i, j);
        if (jlo == jhi) continue;
        float *yr = y + (size_t)i * g->ow;
        int32_t *ar = arg ? arg + (size_t)i * g->ow : NULL;
        if (h0 >= h1) { /* a row of windows wholly in the padding */
            for (int j = jlo; j < jhi; j++) yr[j] = 0.0f, a[j] = -1;
        } else if (g->max) {
            for (int j = jlo; j < jhi; j++) {
                int o = h0 * g->w + j * g->sw - g->pl;
                yr[j] = x[o], a[j] = o;
            }
            for (int u = h0; u < h1; u++)
                for (int v = 0; v < g->kw; v++) {
                    int o = u * g->w + v - g->pl;
#pragma omp simd
                    for (int j = jlo; j < jhi; j++) {
                        float e = x[o + j * g->sw];
                        int gt = e > yr[j];
                        yr[j] = gt ? e : yr[j];
                        a[j] = gt ? o + j * g->sw : a[j];
                    }
                }
        } else {
            for (int j = jlo; j < jhi; j++) yr[j] = 0.0f;
            for (int u = h0; u < h1; u++)
                for (int v = 0; v < g->kw; v++) {
                    int o = u * g->w + v - g->pl;
#pragma omp simd
                    for (int j = jlo; j < jhi; j++) yr[j] += x[o + j * g->sw];
                }
            float inv = 1.0f / (float)((h1 - h0) * g->kw);
            for (int j = jlo; j < jhi; j++) yr[j] *= inv;
        }
        if (ar && g->max)
            for (int j = jlo; j < jhi; j++) ar[j] = a[j];
    }
}

/* one plane of the common 2x2 max pool with stride 2 inside the input (lenet, cifar's plain layers):
 * the stride a constant, so the compiler vectorises with shuffles, not gathers. The four values are
 * taken in row-major order and a later one wins only when larger, as in plane_fwd. */
DT_CLONES static void plane_fwd_2x2(const dt_pool_cfg *g, const float *restrict x, float *restrict y,
                                    int32_t *restrict arg)
{
    int w = g->w, ow = g->ow;
    for (int i = 0; i < g->oh; i++) {
        const float *r0 = x + (size_t)2 * i * w, *r1 = r0 + w;
        float *yr = y + (size_t)i * ow;
        int32_t *ar = arg ? arg + (size_t)i * ow : NULL, base = 2 * i * w;
        if (!ar) {
#pragma omp simd
            for (int j = 0; j < ow; j++) {
                float m = r0[2 * j], e = r0[2 * j + 1];
                m = e > m ? e : m, e = r1[2 * j], m = e > m ? e : m, e = r1[2 * j + 1];
                yr[j] = e > m ? e : m;
            }
            continue;
        }
#pragma omp simd
        for (int j = 0; j < ow; j++) {
            float m = r0[2 * j], e = r0[2 * j + 1];
            int32_t at = base + 2 * j;
            at = e > m ? base + 2 * j + 1 : at, m = e > m ? e : m, e = r1[2 * j];
            at = e > m ? base + w + 2 * j : at, m = e > m ? e : m, e = r1[2 * j + 1];
            at = e > m ? base + w + 2 * j + 1 : at, m = e > m ? e : m;
            yr[j] = m, ar[j] = at;
        }
    }
}

#ifdef DT_POOL_AVX2
/* plane_fwd_2x2 in AVX-512 registers: 16 outputs of a row at a time, a row's last ones under a
 * mask. lenet's rows of 14 and 7 outputs are shorter than the compiler's 16-wide loop above, which
 * ran them in its scalar remainder: 6% of an fp32 lenet iteration, 9% of a bf16 one on 2 threads of
 * an AVX-512 EPYC. Each register holds the four values a, b (row 2i), c, d (row 2i + 1) of 16
 * windows, split from 32 loaded floats by even and odd lane; then the same compares as the loop's,
 * in its order (ordered: a NaN never wins, and a NaN first stays). */
__attribute__((target("avx512f"))) static void plane_fwd_2x2_avx512(const dt_pool_cfg *g, const float *restrict x,
                                                                    float *restrict y, int32_t *restrict arg)
{
    const int w = g->w, ow = g->ow;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i one = _mm512_set1_epi32(1), down = _mm512_set1_epi32(w), diag = _mm512_set1_epi32(w + 1);
    for (int i = 0; i < g->oh; i++) {
        const float *r0 = x + (size_t)2 * i * w, *r1 = r0 + w;
        for (int j = 0; j < ow; j += 16) {
            int n = ow - j < 16 ? ow - j : 16, n2 = 2 * n;
            __mmask16 out = (__mmask16)((1u << n) - 1), lo = (__mmask16)(n2 >= 16 ? 0xffffu : (1u << n2) - 1),
                      hi = (__mmask16)(n2 > 16 ? (1u << (n2 - 16)) - 1 : 0);
            __m512 t0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * j), t1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * j + 16);
            __m512 u0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * j), u1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * j + 16);
            __m512 b = _mm512_permutex2var_ps(t0, odd, t1), c = _mm512_permutex2var_ps(u0, even, u1),
                   d = _mm512_permutex2var_ps(u0, odd, u1), m = _mm512_permutex2var_ps(t0, even, t1);
            __m512i base = _mm512_add_epi32(_mm512_set1_epi32(2 * i * w + 2 * j), even), at = base;
            __mmask16 gt = _mm512_cmp_ps_mask(b, m, _CMP_GT_OQ);
            m = _mm512_mask_mov_ps(m, gt, b), at = _mm512_mask_add_epi32(at, gt, base, one);
            gt = _mm512_cmp_ps_mask(c, m, _CMP_GT_OQ);
            m = _mm512_mask_mov_ps(m, gt, c), at = _mm512_mask_add_epi32(at, gt, base, down);
            gt = _mm512_cmp_ps_mask(d, m, _CMP_GT_OQ);
            m = _mm512_mask_mov_ps(m, gt, d), at = _mm512_mask_add_epi32(at, gt, base, diag);
            _mm512_mask_storeu_ps(y + (size_t)i * ow + j, out, m);
            if (arg) _mm512_mask_storeu_epi32(arg + (size_t)i * ow + j, out, at);
        }
    }
}
#endif

/* the 2x2 max pool with stride 2 inside the input, which has loops of its own */
static int pool_2x2(const dt_pool_cfg *g)
{
    return g->max && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->pt == 0 && g->pl == 0 &&
           2 * g->oh <= g->h && 2 * g->ow <= g->w;
}

/* whether it runs in AVX-512 registers: where the CPU has them, unless DTRAIN_POOL_AVX512=0
 * (plane_fwd_2x2, for tests and benchmarks) */
static int pool_2x2_avx512(void)
{
#ifdef DT_POOL_AVX2
    const char *env = getenv("DTRAIN_POOL_AVX512");
    return !(env && strcmp(env, "0") == 0) && __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* one plane: dx [h][w] = the gradient of dy [oh][ow] (+ dx_beta dx) */
DT_CLONES static void plane_bwd(const dt_pool_cfg *g, const int32_t *restrict arg, const float *restrict dy,
                                float *restrict dx, float dx_beta)
{
    size_t hw = (size_t)g->h * g->w;
    if (dx_beta == 0.0f) memset(dx, 0, hw * sizeof *dx);
    else if (dx_beta != 1.0f)
        for (size_t k = 0; k < hw; k++) dx[k] *= dx_beta;
    for (int i = 0; i < g->oh; i++)
        for (int j = 0; j < g->ow; j++) {
            float d = dy[i * g->ow + j];
            if (g->max) {
                int at = arg[i * g->ow + j];
                if (at >= 0) dx[at] += d;
                continue;
            }
            int h0, h1, w0, w1;
            window(g, i, j, &h0, &h1, &w0, &w1);
            int n = (h1 - h0) * (w1 - w0);
            if (n <= 0) continue;
            d /= (float)n;
            for (int u = h0; u < h1; u++)
                for (int v = w0; v < w1; v++) dx[u * g->w + v] += d;
        }
}

/* ---- NHWC max pooling ---------------------------------------------------------------------------- */

/* output row i of image n: x [h][w][c] of the image, y and arg [ow][c] of the row */
static void nhwc_row_plain(const dt_pool_cfg *g, const float *restrict x, float *restrict y, int32_t *restrict arg,
                           int i)
{
    const int C = g->c;
    for (int j = 0; j < g->ow; j++) {
        int h0, h1, w0, w1;
        window(g, i, j, &h0, &h1, &w0, &w1);
        float *yo = y + (size_t)j * C;
        int32_t *ao = arg ? arg + (size_t)j * C : NULL;
        if (h0 >= h1 || w0 >= w1) { /* wholly in the padding */
            for (int c = 0; c < C; c++) yo[c] = 0.0f;
            if (ao)
                for (int c = 0; c < C; c++) ao[c] = -1;
            continue;
        }
        for (int c = 0; c < C; c++) {
            int32_t at = h0 * g->w + w0;
            float m = x[(size_t)at * C + c];
            for (int u = h0; u < h1; u++)
                for (int v = w0; v < w1; v++) {
                    float e = x[((size_t)u * g->w + v) * C + c];
                    if (e > m) m = e, at = u * g->w + v;
                }
            yo[c] = m;
            if (ao) ao[c] = at;
        }
    }
}

#ifdef DT_POOL_AVX2
/* the same, 8 channels a register: compare (ordered, so a NaN never wins), blend the value and where */
__attribute__((target("avx2"))) static void nhwc_row_avx2(const dt_pool_cfg *g, const float *restrict x,
                                                         float *restrict y, int32_t *restrict arg, int i)
{
    const int C = g->c;
    for (int j = 0; j < g->ow; j++) {
        int h0, h1, w0, w1;
        window(g, i, j, &h0, &h1, &w0, &w1);
        float *yo = y + (size_t)j * C;
        int32_t *ao = arg ? arg + (size_t)j * C : NULL;
        if (h0 >= h1 || w0 >= w1) {
            for (int c = 0; c < C; c++) yo[c] = 0.0f;
            if (ao)
                for (int c = 0; c < C; c++) ao[c] = -1;
            continue;
        }
        for (int c0 = 0; c0 < C; c0 += 8) {
            __m256 m = _mm256_loadu_ps(x + ((size_t)h0 * g->w + w0) * C + c0);
            __m256 at = _mm256_castsi256_ps(_mm256_set1_epi32(h0 * g->w + w0));
            for (int u = h0; u < h1; u++)
                for (int v = w0; v < w1; v++) {
                    __m256 e = _mm256_loadu_ps(x + ((size_t)u * g->w + v) * C + c0);
                    __m256 gt = _mm256_cmp_ps(e, m, _CMP_GT_OQ);
                    m = _mm256_blendv_ps(m, e, gt);
                    at = _mm256_blendv_ps(at, _mm256_castsi256_ps(_mm256_set1_epi32(u * g->w + v)), gt);
                }
            _mm256_storeu_ps(yo + c0, m);
            if (ao) _mm256_storeu_si256((__m256i *)(ao + c0), _mm256_castps_si256(at));
        }
    }
}
#endif

static int nhwc_fwd(const dt_pool_cfg *g, int n_threads, int rows, const float *x, float *y, int32_t *argmax,
                    int vector)
{
    size_t in = (size_t)g->h * g->w * g->c, row = (size_t)g->ow * g->c;
    long tasks = (long)rows * g->oh;
    int nt = cpu_threads_for(n_threads, (size_t)rows * in), avx2 = 0;
#ifdef DT_POOL_AVX2
    avx2 = vector && g->c % 8 == 0 && __builtin_cpu_supports("avx2");
#endif
    (void)vector;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long t = 0; t < tasks; t++) {
        long n = t / g->oh;
        int i = (int)(t % g->oh);
        const float *xn = x + (size_t)n * in;
        float *yr = y + (size_t)t * row;
        int32_t *ar = argmax ? argmax + (size_t)t * row : NULL;
#ifdef DT_POOL_AVX2
        if (avx2) {
            nhwc_row_avx2(g, xn, yr, ar, i);
            continue;
        }
#endif
        (void)avx2;
        nhwc_row_plain(g, xn, yr, ar, i);
    }
    return 0;
}

/* dx of image n, channels [c0, c0 + cn): dx_beta dx, then each output's gradient added where its
 * max came from, outputs in row-major order */
static void nhwc_bwd_block(const dt_pool_cfg *g, const int32_t *restrict arg, const float *restrict dy,
                           float *restrict dx, float dx_beta, int c0, int cn)
{
    const int C = g->c;
    size_t hw = (size_t)g->h * g->w, ohw = (size_t)g->oh * g->ow;
    for (size_t p = 0; p < hw; p++) {
        float *d = dx + p * C + c0;
        if (dx_beta == 0.0f)
            for (int c = 0; c < cn; c++) d[c] = 0.0f;
        else if (dx_beta != 1.0f)
            for (int c = 0; c < cn; c++) d[c] *= dx_beta;
    }
    for (size_t q = 0; q < ohw; q++) {
        const int32_t *a = arg + q * C + c0;
        const float *e = dy + q * C + c0;
        for (int c = 0; c < cn; c++)
            if (a[c] >= 0) dx[(size_t)a[c] * C + c0 + c] += e[c];
    }
}

static int nhwc_bwd(const dt_pool_cfg *g, int n_threads, int rows, const int32_t *argmax, const float *dy, float *dx,
                    float dx_beta)
{
    size_t in = (size_t)g->h * g->w * g->c, out = (size_t)g->oh * g->ow * g->c;
    int blocks = (g->c + 15) / 16;
    long tasks = (long)rows * blocks;
    int nt = cpu_threads_for(n_threads, (size_t)rows * in);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long t = 0; t < tasks; t++) {
        long n = t / blocks;
        int c0 = (int)(t % blocks) * 16;
        nhwc_bwd_block(g, argmax + (size_t)n * out, dy + (size_t)n * out, dx + (size_t)n * in, dx_beta, c0,
                       DT_MIN(16, g->c - c0));
    }
    return 0;
}

int cpu_pool_forward_portable(const dt_pool_cfg *cfg, int n_threads, int rows, const float *x, float *y,
                              int32_t *argmax)
{
    if (cfg->layout == DT_LAYOUT_NHWC && cfg->max) return nhwc_fwd(cfg, n_threads, rows, x, y, argmax, 0);
    return cpu_pool_forward(cfg, n_threads, rows, x, y, argmax);
}

int cpu_pool_forward(const dt_pool_cfg *cfg, int n_threads, int rows, const float *x, float *y, int32_t *argmax)
{
    if (cfg->layout == DT_LAYOUT_NHWC && cfg->max) return nhwc_fwd(cfg, n_threads, rows, x, y, argmax, 1);
    if (cfg->layout != DT_LAYOUT_PLAIN) return dt_fail("pooling: our loops take NCHW, and NHWC max pooling, only");
    long planes = (long)rows * cfg->c;
    size_t in = (size_t)cfg->h * cfg->w, out = (size_t)cfg->oh * cfg->ow;
    int nt = cpu_threads_for(n_threads, (size_t)planes * in);
    const dt_pool_cfg *g = cfg;
    int is_2x2 = pool_2x2(g), avx512 = is_2x2 && pool_2x2_avx512();
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long p = 0; p < planes; p++) {
        int32_t *a = argmax ? argmax + (size_t)p * out : NULL;
#ifdef DT_POOL_AVX2
        if (avx512) {
            plane_fwd_2x2_avx512(cfg, x + (size_t)p * in, y + (size_t)p * out, a);
            continue;
        }
#endif
        if (is_2x2) plane_fwd_2x2(cfg, x + (size_t)p * in, y + (size_t)p * out, a);
        else plane_fwd(cfg, x + (size_t)p * in, y + (size_t)p * out, a);
    }
    return 0;
}

int cpu_pool_backward(const dt_pool_cfg *cfg, int n_threads, int rows, const int32_t *argmax, const float *dy,
                      float *dx, float dx_beta)
{
    if (cfg->max && !argmax) return dt_fail("max pooling backward without a training forward");
    if (cfg->layout == DT_LAYOUT_NHWC && cfg->max) return nhwc_bwd(cfg, n_threads, rows, argmax, dy, dx, dx_beta);
    if (cfg->layout != DT_LAYOUT_PLAIN) return dt_fail("pooling: our loops take NCHW, and NHWC max pooling, only");
    long planes = (long)rows * cfg->c;
    size_t in = (size_t)cfg->h * cfg->w, out = (size_t)cfg->oh * cfg->ow;
    int nt = cpu_threads_for(n_threads, (size_t)planes * in);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long p = 0; p < planes; p++)
        plane_bwd(cfg, cfg->max ? argmax + (size_t)p * out : NULL, dy + (size_t)p * out, dx + (size_t)p * in,
                  dx_beta);
    return 0;
}
