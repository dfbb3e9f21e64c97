/* q8 — 8-bit scalar quantisation (Pipe-SGD §3.2): per block of `block` values (0: per vector
 * encoded, as in the paper, where each message of the ring has one scale), the scale
 * s = max|x| (fp32, sent with the block) and q = round(127 x / s) as int8; decoded as q s / 127.
 * Layout per block: 4 bytes of scale, then one byte per value; the last block may be short.
 * About 4x smaller than fp32 (plus 4 bytes per block). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../cpu.h"
#include "codec.h"

/* values per scale: the block, or the whole vector (at least 1, so that n = 0 has no blocks) */
static size_t block_of(const dt_codec *c, size_t n) { return c->block > 0 ? (size_t)c->block : n > 0 ? n : 1; }

static size_t q8_bytes(const dt_codec *c, size_t n)
{
    size_t b = block_of(c, n);
    return n + 4 * ((n + b - 1) / b);
}

/* max |x| as the bits of |x| (for non-negative floats the integers' order): NaN above infinity, so a
 * block with a NaN always has a non-finite scale, whatever the vector width (a float max drops NaNs
 * or keeps them by lane); the GPU's atomicMax takes the same */
DT_CLONES static float absmax(const float *restrict x, size_t n)
{
    const uint32_t *restrict u = (const uint32_t *)x;
    uint32_t m = 0;
#pragma omp simd reduction(max : m)
    for (size_t i = 0; i < n; i++) {
        uint32_t a = u[i] & 0x7fffffffu;
        m = m > a ? m : a;
    }
    float f;
    memcpy(&f, &m, sizeof f);
    return f;
}

DT_CLONES static void quantise(const float *restrict x, size_t n, float inv, int8_t *restrict q)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * inv; /* in [-127, 127] */
        v = v >= 0.0f ? v + 0.5f : v - 0.5f;
        q[i] = (int8_t)(int)v; /* round half away from zero */
    }
}

/* x + q s rounded twice, never fused into one multiply-add (which the vector clones would otherwise
 * make): the same sums on every CPU and on the GPU (cuda/elementwise.h, ew_q8_dec_add) */
DT_NO_CONTRACT DT_CLONES static void dequantise(const int8_t *restrict q, size_t n, float s, float *restrict x, int add)
{
    if (add) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) x[i] += (float)q[i] * s;
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) x[i] = (float)q[i] * s;
    }
}

static void q8_encode(const dt_codec *c, const float *x, size_t n, void *out)
{
    uint8_t *o = out;
    size_t b = block_of(c, n);
    for (size_t at = 0; at < n; at += b) {
        size_t len = n - at < b ? n - at : b;
        float s = absmax(x + at, len);
        if (!isfinite(s)) s = 0.0f; /* a diverged gradient sends zeros rather than garbage */
        memcpy(o, &s, 4);
        /* below 127 / FLT_MAX (3.7e-37) 127 / s is infinite, and x * inf no code (x86 and a GPU convert
         * an infinity to int differently): such a block sends codes 0, on the GPU too (ew_q8_inv) */
        float inv = s > 0.0f ? 127.0f / s : 0.0f;
        quantise(x + at, len, inv <= FLT_MAX ? inv : 0.0f, (int8_t *)(o + 4));
        o += 4 + len;
    }
}

static void q8_decode_impl(const dt_codec *c, const void *in, size_t n, float *x, int add)
{
    const uint8_t *p = in;
    size_t b = block_of(c, n);
    for (size_t at = 0; at < n; at += b) {
        size_t len = n - at < b ? n - at : b;
        float s;
        memcpy(&s, p, 4);
        dequantise((const int8_t *)(p + 4), len, s / 127.0f, x + at, add);
        p += 4 + len;
    }
}

static void q8_decode(const dt_codec *c, const void *in, size_t n, float *x) { q8_decode_impl(c, in, n, x, 0); }
static void q8_decode_add(const dt_codec *c, const void *in, size_t n, float *x) { q8_decode_impl(c, in, n, x, 1); }

const dt_codec_desc codec_q8 = {
    .name = "q8",
    .wire = DT_WIRE_Q8,
    .help = "8-bit quantisation with an fp32 scale (max |x|) per block of --compress-block values (0: per message)",
    .bytes = q8_bytes,
    .encode = q8_encode,
    .decode = q8_decode,
    .decode_add = q8_decode_add,
};
