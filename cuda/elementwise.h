/* elementwise — the arithmetic of the CUDA backend's own kernels, one function per element (or
 * per row, pixel or channel where that is the kernel's unit of work).
 *
 * Each function is compiled twice: by nvcc for the device, where backend_cuda_kernels.cu and
 * backend_cuda_bn.cu call it from their kernels, and by the C compiler for the host, where
 * tests/check_cuda_twins.c runs it over whole tensors and compares with the CPU backend. So the
 * arithmetic the GPU runs is checked by `make check` on a machine without a GPU; only the
 * kernels' indexing and launch shapes need the GPU tests (tests/check_cuda.c).
 *
 * Conventions are the CPU backend's (src/engine/backend.h): row-major fp32, NCHW activations,
 * beta 0 overwrites and any other beta adds.
 */
#ifndef DT_CUDA_ELEMENTWISE_H
#define DT_CUDA_ELEMENTWISE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rng.h"

#ifdef __CUDACC__
#define DT_HD __host__ __device__ static inline
#else
#define DT_HD static inline
#endif

/* beta 0: v; else acc + v (the backend's "overwrite or add") */
DT_HD float ew_put(float acc, float v, float beta) { return beta == 0.0f ? v : acc + v; }

DT_HD float ew_relu(float x) { return x > 0.0f ? x : 0.0f; }
/* dy where the relu's output y is > 0, else +0 (also where y is NaN) */
DT_HD float ew_relu_mask(float dy, float y) { return y > 0.0f ? dy : 0.0f; }
DT_HD float ew_relu_bwd(float dx, float dy, float y, float beta) { return ew_put(dx, ew_relu_mask(dy, y), beta); }

/* Dropout: element idx (global: (row0 + r) * cols + c) is kept when 24 bits of the counter-based
 * hash reach thresh = p * 2^24; kept values are scaled by s = 1 / (1 - p). Integer arithmetic, so
 * the mask is bit-identical on every device. */
DT_HD uint32_t ew_dropout_thresh(float p) { return (uint32_t)(p * 16777216.0f); }
DT_HD float ew_dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }
DT_HD int ew_dropout_keep(uint64_t key, uint64_t idx, uint32_t thresh)
{
    return (uint32_t)(rng_hash_inline(key, idx) >> 40) >= thresh;
}
DT_HD float ew_dropout(float x, uint64_t key, uint64_t idx, uint32_t thresh, float s)
{
    return ew_dropout_keep(key, idx, thresh) ? x * s : 0.0f;
}

/* SGD (PyTorch semantics) on element i: d = g + wd w; v = m v + d; d = nesterov ? d + m v : v;
 * w -= lr d. v may be NULL when m == 0. */
DT_HD void ew_sgd(float *w, const float *g, float *v, size_t i, float lr, float m, float wd, int nesterov)
{
    if (m == 0.0f || !v) {
        w[i] -= lr * (g[i] + wd * w[i]);
    } else if (!nesterov) {
        float vi = m * v[i] + (g[i] + wd * w[i]);
        v[i] = vi;
        w[i] -= lr * vi;
    } else {
        float d = g[i] + wd * w[i];
        float vi = m * v[i] + d;
        v[i] = vi;
        w[i] -= lr * (d + m * vi);
    }
}

/* y = beta y + x (beta 0: y = x, whatever y held) */
DT_HD float ew_add(float y, float x, float beta) { return beta == 0.0f ? x : beta * y + x; }
/* the add layer's forward in one pass (add2): a + b, the bits of a copy of a and ew_add of b with
 * beta 1 (1 * a is a), then relu_fwd's select where the layer takes the relu after it */
DT_HD float ew_add2(float a, float b, int relu)
{
    float s = a + b;
    return relu ? ew_relu(s) : s;
}

/* The gradient of a bias: column c of dy summed over rows in row order, in float, as the CPU
 * does (so the two agree bit for bit). */
DT_HD float ew_bias_grad_col(const float *dy, int rows, int cols, int c, float old, float beta)
{
    float s = beta == 0.0f ? 0.0f : old;
    for (int r = 0; r < rows; r++) s += dy[(size_t)r * cols + c];
    return s;
}

/* Softmax and cross-entropy of one row: prob, the row's loss (log-sum-exp form, exact even when
 * prob[label] underflows) and whether its argmax (the first maximum) is the label. */
DT_HD void ew_softmax_xent_row(const float *z, float *p, int classes, int label, double *loss, int *correct)
{
    int arg = 0;
    float mx = z[0];
    for (int c = 1; c < classes; c++)
        if (z[c] > mx) mx = z[c], arg = c;
    float sum = 0.0f;
    for (int c = 0; c < classes; c++) {
        p[c] = expf(z[c] - mx);
        sum += p[c];
    }
    float inv = 1.0f / sum;
    for (int c = 0; c < classes; c++) p[c] *= inv;
    *loss = (double)logf(sum) + (double)mx - (double)z[label];
    *correct = arg == label;
}

DT_HD float ew_softmax_xent_bwd(float dx, float p, int is_label, float scale, float beta)
{
    return ew_put(dx, scale * (p - (is_label ? 1.0f : 0.0f)), beta);
}

/* ---- batch normalisation (per channel; sums in double, as backend_cpu_bn.c) --------------------- */

/* From the sums of x - k and (x - k)^2 over n values (k the channel's first value): the mean and
 * the biased variance. */
DT_HD void ew_bn_stats(double s1, double s2, double k, double n, float *mean, float *var, double *dmean, double *dvar)
{
    double d = s1 / n, v = s2 / n - d * d;
    *dmean = k + d;
    *dvar = v > 0.0 ? v : 0.0;
    *mean = (float)*dmean;
    *var = (float)*dvar;
}

/* the per-channel affine map of forward: y = (x - m) a + b */
DT_HD float ew_bn_scale(double var, float eps, float scale) { return (float)(1.0 / sqrt(var + (double)eps) * scale); }
DT_HD float ew_bn_norm(float x, float m, float a, float b) { return (x - m) * a + b; }

/* Backward's per-channel coefficients from the sums of dy (sdy), dy (x - saved mean) (sdx) and
 * x - saved mean (sx) over n values: dx = (dy - u - (x - m) k) a. */
DT_HD void ew_bn_bwd_coeffs(double sdy, double sdx, double sx, double n, float var, float eps, float scale,
                            float *dscale, float *dshift, float *u, float *k, float *a)
{
    double dmean = sx / n, sdxm = sdx - dmean * sdy;
    double inv = 1.0 / sqrt((double)var + (double)eps), kk = sdxm / n * inv * inv;
    *dshift = (float)sdy;
    *dscale = (float)(sdxm * inv);
    *u = (float)(sdy / n - dmean * kk);
    *k = (float)kk;
    *a = (float)(inv * scale);
}

DT_HD float ew_bn_dx(float dx, float dy, float x, float m, float u, float k, float a, float beta)
{
    return beta == 0.0f ? (dy - u - (x - m) * k) * a : beta * dx + (dy - u - (x - m) * k) * a;
}

/* ---- local response normalisation across channels ----------------------------------------------
 * At one pixel of one sample (channel c at x[c * hw]): the window of channel c is channels
 * c - h ... c + h with h = (size-1)/2 (oneDNN's, so an even size spans size - 1 channels), s_c = k + alpha/size * sum
 * of x^2 over it, y_c = x_c s_c^-beta. */
DT_HD float ew_lrn_s(const float *x, size_t hw, int C, int c, int size, float alpha, float k)
{
    int lo = c - (size - 1) / 2, hi = c + (size - 1) / 2;
    float sum = 0.0f;
    for (int j = lo < 0 ? 0 : lo; j <= hi && j < C; j++) sum += x[(size_t)j * hw] * x[(size_t)j * hw];
    return k + alpha / (float)size * sum;
}

DT_HD float ew_lrn_fwd(const float *x, size_t hw, int C, int c, int size, float alpha, float beta, float k)
{
    return x[(size_t)c * hw] * powf(ew_lrn_s(x, hw, C, c, size, alpha, k), -beta);
}

/* dx_c = dy_c s_c^-beta - 2 alpha beta / size x_c sum over j whose window holds c of dy_j x_j s_j^(-beta-1) */
DT_HD float ew_lrn_bwd(const float *x, const float *dy, size_t hw, int C, int c, int size, float alpha, float beta,
                       float k)
{
    int lo = c - (size - 1) / 2, hi = c + (size - 1) / 2;
    float acc = 0.0f;
    for (int j = lo < 0 ? 0 : lo; j <= hi && j < C; j++) {
        float s = ew_lrn_s(x, hw, C, j, size, alpha, k);
        acc += dy[(size_t)j * hw] * x[(size_t)j * hw] * powf(s, -beta - 1.0f);
    }
    float sc = ew_lrn_s(x, hw, C, c, size, alpha, k);
    return dy[(size_t)c * hw] * powf(sc, -beta) - 2.0f * alpha * beta / (float)size * x[(size_t)c * hw] * acc;
}

/* ---- pooling: one output element (i, j) of one H x W plane -------------------------------------
 * Max takes the first maximum among the window's values inside the input (padding never wins) and
 * reports its index in the plane; average divides by the number of inside values. */
DT_HD float ew_pool_fwd(const float *x, int h, int w, int i, int j, int kh, int kw, int sh, int sw, int pt, int pl,
                        int max, int *argmax)
{
    int y0 = i * sh - pt, x0 = j * sw - pl, y1 = y0 + kh, x1 = x0 + kw;
    if (y0 < 0) y0 = 0;
    if (x0 < 0) x0 = 0;
    if (y1 > h) y1 = h;
    if (x1 > w) x1 = w;
    /* the first value seeds the maximum, as on the CPU: a NaN there stays, a later one never wins */
    float best = y0 < y1 && x0 < x1 ? x[y0 * w + x0] : 0.0f, sum = 0.0f;
    int at = y0 * w + x0;
    for (int y = y0; y < y1; y++)
        for (int xx = x0; xx < x1; xx++) {
            float v = x[y * w + xx];
            if (v > best) best = v, at = y * w + xx;
            sum += v;
        }
    if (max) {
        *argmax = at;
        return best;
    }
    int n = (y1 - y0) * (x1 - x0);
    return n > 0 ? sum / (float)n : 0.0f;
}

/* The gradient of input element (y, x) of a plane: the sum over the windows that hold it of dy
 * (max: where it was the window's argmax; average: dy divided by the window's count). */
DT_HD float ew_pool_bwd(const float *dy, const int *argmax, int h, int w, int oh, int ow, int y, int x, int kh, int kw,
                        int sh, int sw, int pt, int pl, int max)
{
    int i0 = y + pt - kh + 1, i1 = (y + pt) / sh, j0 = x + pl - kw + 1, j1 = (x + pl) / sw;
    i0 = i0 <= 0 ? 0 : (i0 + sh - 1) / sh;
    j0 = j0 <= 0 ? 0 : (j0 + sw - 1) / sw;
    if (i1 >= oh) i1 = oh - 1;
    if (j1 >= ow) j1 = ow - 1;
    float acc = 0.0f;
    for (int i = i0; i <= i1; i++)
        for (int j = j0; j <= j1; j++) {
            if (max) {
                if (argmax[i * ow + j] == y * w + x) acc += dy[i * ow + j];
                continue;
            }
            int a0 = i * sh - pt, b0 = j * sw - pl, a1 = a0 + kh, b1 = b0 + kw;
            if (a0 < 0) a0 = 0;
            if (b0 < 0) b0 = 0;
            if (a1 > h) a1 = h;
            if (b1 > w) b1 = w;
            acc += dy[i * ow + j] / (float)((a1 - a0) * (b1 - b0));
        }
    return acc;
}

/* ---- the ResNet option-A shortcut: output channel front + c is input channel c subsampled ------ */

/* the input index that output element (n, oc, i, j) copies, or -1 for a zero channel */
DT_HD long long ew_shortcut_src(int n, int oc, int i, int j, int C, int H, int W, int front, int stride)
{
    int c = oc - front;
    if (c < 0 || c >= C) return -1;
    return (((long long)n * C + c) * H + (long long)i * stride) * W + (long long)j * stride;
}

/* the output index whose gradient input element (n, c, y, x) receives, or -1 */
DT_HD long long ew_shortcut_dst(int n, int c, int y, int x, int O, int OH, int OW, int front, int stride)
{
    if (y % stride || x % stride || y / stride >= OH || x / stride >= OW) return -1;
    return (((long long)n * O + c + front) * OH + y / stride) * OW + x / stride;
}

/* ---- the gradient codecs of src/comm/codec_*.c (--compress), value by value ---------------------
 * The same bytes as the CPU's codecs for the same input, and the same floats decoded: the device
 * and the host never fuse a multiply and an add here (the CPU's q8 decode-and-add rounds twice). */

#ifdef __CUDA_ARCH__
#define EW_MUL(a, b) __fmul_rn(a, b)
#define EW_ADD(a, b) __fadd_rn(a, b)
#define EW_SUB(a, b) __fsub_rn(a, b)
#define EW_DIV(a, b) __fdiv_rn(a, b)
#else
#define EW_MUL(a, b) ((a) * (b))
#define EW_ADD(a, b) ((a) + (b))
#define EW_SUB(a, b) ((a) - (b))
#define EW_DIV(a, b) ((a) / (b))
#endif

DT_HD uint32_t ew_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
DT_HD float ew_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* --precision bf16: a GEMM's or convolution's input rounded to bfloat16, to nearest even, a NaN
 * kept a (quiet) NaN: the CPU backend's rounding (cpu_round_bf16, as vcvtneps2bf16), bit for bit */
DT_HD uint16_t ew_bf16(float f)
{
    uint32_t u = ew_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* and back (exact), put into y as the backend's beta says */
DT_HD float ew_bf16_put(float y, uint16_t v, float beta) { return ew_add(y, ew_float((uint32_t)v << 16), beta); }

/* t16: the upper half of the fp32 (bfloat16 rounded toward zero) */
DT_HD uint16_t ew_t16(float x) { return (uint16_t)(ew_bits(x) >> 16); }
DT_HD float ew_t16_dec(uint16_t v) { return ew_float((uint32_t)v << 16); }

/* fp16: IEEE half, round to nearest even, saturating at +-65504, NaN kept (codec_fp16.c) */
DT_HD uint16_t ew_fp16(float f)
{
    uint32_t x = ew_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7bffu);
    if (ax < 0x38800000u) return (uint16_t)(sign | (uint32_t)nearbyintf(EW_MUL(ew_float(ax), 16777216.0f)));
    return (uint16_t)(sign | ((ax - (112u << 23) + 0x0fffu + ((ax >> 13) & 1u)) >> 13));
}
DT_HD float ew_fp16_dec(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float f = EW_MUL((float)m, 1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return ew_float(e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13)));
}

/* --precision fp16: a GEMM's or convolution's input rounded to IEEE half as the GPU's conversion
 * (__float2half_rn): to nearest even, beyond 65504 infinite (loss scaling then skips the step),
 * NaN kept; otherwise the codec's rounding */
DT_HD uint16_t ew_half(float f)
{
    uint32_t x = ew_bits(f), ax = x & 0x7fffffffu;
    if (ax >= 0x477ff000u && ax <= 0x7f800000u) return (uint16_t)(((x >> 16) & 0x8000u) | 0x7c00u);
    return ew_fp16(f);
}

/* --precision fp16 (fp16 1) or bf16 (0): the rounding, and the widening put into y as the backend's
 * beta says */
DT_HD uint16_t ew_lowp(int fp16, float f) { return fp16 ? ew_half(f) : ew_bf16(f); }
DT_HD float ew_lowp_put(int fp16, float y, uint16_t v, float beta)
{
    return fp16 ? ew_add(y, ew_fp16_dec(v), beta) : ew_bf16_put(y, v, beta);
}

/* loss scaling: *x *= a; 1 when the result is not finite (its exponent all ones), as the CPU's */
DT_HD int ew_unscale(float *x, float a)
{
    *x = EW_MUL(*x, a);
    return (ew_bits(*x) & 0x7f800000u) == 0x7f800000u;
}

/* batch norm's running statistics of channel i (backend.h's bn_running; the CPU's bits) */
DT_HD void ew_bn_running(float *rmean, float *rvar, const float *mean, const float *var, size_t i, float m,
                         double unbias)
{
    float k = EW_SUB(1.0f, m);
    rmean[i] = EW_ADD(EW_MUL(k, rmean[i]), EW_MUL(m, mean[i]));
    rvar[i] = EW_ADD(EW_MUL(k, rvar[i]), EW_MUL(m, (float)((double)var[i] * unbias)));
}

/* q8: a block's scale from the largest bits of |x| over it (ew_q8_absbits; NaN above infinity), 0
 * when that is not finite; q = round(127 x / s) half away from zero; decoded q s / 127 */
DT_HD uint32_t ew_q8_absbits(float x) { return ew_bits(x) & 0x7fffffffu; }
DT_HD float ew_q8_scale(uint32_t absmax_bits)
{
    return absmax_bits < 0x7f800000u ? ew_float(absmax_bits) : 0.0f;
}
DT_HD float ew_q8_inv(float s) /* 0 where 127 / s is infinite (s below 3.7e-37): codes 0 */
{
    float inv = s > 0.0f ? 127.0f / s : 0.0f;
    return inv <= 3.40282347e38f ? inv : 0.0f;
}
DT_HD int8_t ew_q8(float x, float inv)
{
    float v = EW_MUL(x, inv);
    v = v >= 0.0f ? EW_ADD(v, 0.5f) : EW_ADD(v, -0.5f);
    return (int8_t)(int)v;
}
DT_HD float ew_q8_step(float s) { return s / 127.0f; }
DT_HD float ew_q8_dec(int8_t q, float step) { return EW_MUL((float)q, step); }
DT_HD float ew_q8_dec_add(float x, int8_t q, float step) { return EW_ADD(x, EW_MUL((float)q, step)); }

/* ---- the sparse modes' residuals (src/comm/memory.c), each product and sum rounded on its own ---- */

/* momentum correction's velocity: v = m u + g + wd w (then u = v, r += v) */
DT_HD float ew_velocity(float u, float g, float w, float m, float wd)
{
    return EW_ADD(EW_ADD(EW_MUL(m, u), g), EW_MUL(wd, w));
}
/* a pair applied to x[i]: DT_PAIRS_SET (0) v, DT_PAIRS_ZERO (1) 0, DT_PAIRS_SUB (2) x - a v,
 * DT_PAIRS_ADD (3) x + a v */
DT_HD float ew_pair(float x, float v, int how, float a)
{
    return how == 0 ? v : how == 1 ? 0.0f : how == 2 ? EW_SUB(x, EW_MUL(a, v)) : EW_ADD(x, EW_MUL(a, v));
}
/* top-k's sort key: |x| as its bits (larger |x|, larger key) */
DT_HD uint32_t ew_topk_key(float x) { return ew_bits(x) & 0x7fffffffu; }
/* --topk-select sampled (src/comm/sparse.c): the index of sample value s of n, and whether x passes thr */
DT_HD size_t ew_topk_sample_index(size_t s, size_t n) { return (size_t)(rng_hash_inline(0x5a17, s) % n); }
DT_HD int ew_topk_above(float x, float thr) { return fabsf(x) >= thr; }

/* ---- TernGrad (src/comm/codec_tern.c) ------------------------------------------------------------ */

/* sigma's sums in their one order: a block of up to 4096 values [lo, hi) in 16 lanes, lane j the
 * values at lo + j, lo + j + 16, ... in turn; then the lanes pairwise (ew_tern_lanes_sum) */
DT_HD void ew_tern_lane(const float *x, size_t lo, size_t hi, int j, float *s, float *q)
{
    float a = 0.0f, b = 0.0f;
    for (size_t i = lo + (size_t)j; i < hi; i += 16) a = EW_ADD(a, x[i]), b = EW_ADD(b, EW_MUL(x[i], x[i]));
    *s = a, *q = b;
}
/* |x|'s bits for the largest |x| (an integer maximum), 0 for a NaN: passed over, as the CPU's does */
DT_HD uint32_t ew_tern_absbits(float x)
{
    uint32_t b = ew_bits(x) & 0x7fffffffu;
    return b > 0x7f800000u ? 0u : b;
}
DT_HD float ew_tern_lanes_sum(float *v) /* v[16], overwritten */
{
    for (int w = 8; w > 0; w /= 2)
        for (int j = 0; j < w; j++) v[j] = EW_ADD(v[j], v[j + w]);
    return v[0];
}
/* value i's 16-bit coin: bits 16 (i % 4) up of the splitmix64 finaliser of (key, i / 4) */
DT_HD uint16_t ew_tern_coin(uint64_t key, uint64_t i)
{
    uint64_t z = key + (i / 4) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (uint16_t)(z >> (16 * (i % 4)));
}
/* the ternary value: sign(g) where the coin is below |g| clipped at clip, times scale = 65536 / s */
DT_HD int8_t ew_tern(float g, float clip, float scale, uint16_t coin)
{
    float a = fabsf(g);
    a = EW_MUL(a < clip ? a : clip, scale);
    return (float)coin < a ? (g > 0.0f ? 1 : -1) : 0;
}
/* its 2-bit code: 00 = 0, 01 = +1, 10 = -1 */
DT_HD unsigned ew_tern_code(int8_t t) { return t > 0 ? 1u : t < 0 ? 2u : 0u; }
/* value i summed over p ranks' codes (rank r's at codes + r code_bytes), as tern_unpack_add adds them */
DT_HD int8_t ew_tern_sum(const uint8_t *codes, size_t code_bytes, int p, size_t i)
{
    int s = 0;
    for (int r = 0; r < p; r++) {
        unsigned c = (codes[(size_t)r * code_bytes + i / 4] >> (2 * (i % 4))) & 3u;
        s += (c == 1u) - (c == 2u);
    }
    return (int8_t)s;
}

/* ---- csc (src/comm/chunks.c), value by value and lane by lane ------------------------------------ */

/* the correction: g + h, or g + (h + wd w) where wd != 0 */
DT_HD float ew_csc_correct(float g, float h, float w, float wd)
{
    return wd != 0.0f ? EW_ADD(g, EW_ADD(h, EW_MUL(wd, w))) : EW_ADD(g, h);
}
/* a packed value: g scale, NaN where that is above limit in magnitude */
DT_HD float ew_csc_pack(float g, float scale, float limit)
{
    float v = EW_MUL(g, scale);
    return fabsf(v) > limit ? NAN : v;
}
/* chunks_fold on lane j of one chunk of len values: its values j, j + 32, ... in turn (sum: the chunk's
 * allreduced values, or NULL; hu NULL without momentum correction); returns the lane's sum of |g| */
DT_HD float ew_csc_lane(float *g, float *h, float *hu, float *w, const float *sum, size_t len, int j, float m, float lr)
{
    float l = 0.0f;
    for (size_t i = (size_t)j; i < len; i += 32) {
        if (sum) {
            float v = sum[i];
            g[i] = v;
            h[i] = 0.0f;
            l = EW_ADD(l, fabsf(v));
            if (hu) {
                float u = EW_ADD(EW_MUL(m, hu[i]), EW_MUL(lr, v));
                hu[i] = u;
                w[i] = EW_SUB(w[i], u);
            }
        } else {
            float v = g[i];
            l = EW_ADD(l, fabsf(v));
            if (hu) {
                h[i] = EW_MUL(m, v);
            } else {
                h[i] = v;
                g[i] = 0.0f;
            }
        }
    }
    return l;
}
/* the 32 lanes' sums added pairwise: lane j takes lane j + 16, then j + 8, ... (v[32], overwritten; a
 * warp's shuffles down do the same) */
DT_HD float ew_csc_lanes_sum(float *v)
{
    for (int w = 16; w > 0; w /= 2)
        for (int j = 0; j < w; j++) v[j] = EW_ADD(v[j], v[j + w]);
    return v[0];
}
/* a chunk's norm from its L1 sum: divided by the ranks for an important (allreduced) chunk */
DT_HD float ew_csc_norm(float l1, int important, int p) { return important ? EW_DIV(l1, (float)p) : l1; }

#endif
