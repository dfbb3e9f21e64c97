/* fp16 — IEEE half precision with round-to-nearest-even (GradientFlow's wire format). Values
 * beyond ±65504 saturate instead of becoming infinite (no loss scaling needed); values below
 * 2^-24 become subnormal or zero. 2 bytes per value. F16C does the conversion where the CPU
 * has it; the portable path gives the same bits (tests/check_codec.c compares them). */
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif
#include <math.h>

#include "codec.h"

uint16_t codec_fp16_from_float(float f);
float codec_fp16_to_float(uint16_t h);

static _Atomic unsigned long long saturated; /* codec_fp16_saturated: one addition an encode call */

unsigned long long codec_fp16_saturated(void) { return saturated; }

uint16_t codec_fp16_from_float(float f)
{
    uint32_t x, ax, sign;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN stays NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7bffu); /* would round to inf: saturate at 65504 */
    if (ax < 0x38800000u) { /* below 2^-14: a half subnormal m * 2^-24, m rounded to nearest even */
        float v;
        memcpy(&v, &ax, sizeof v);
        return (uint16_t)(sign | (uint32_t)nearbyintf(v * 16777216.0f));
    }
    /* normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even */
    return (uint16_t)(sign | ((ax - (112u << 23) + 0x0fffu + ((ax >> 13) & 1u)) >> 13));
}

float codec_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
    float f;
    if (e == 0) {
        f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    bits = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));
    memcpy(&f, &bits, sizeof f);
    return f;
}

static size_t fp16_bytes(const dt_codec *c, size_t n)
{
    (void)c;
    return n * 2;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_F16C_PATH 1
__attribute__((target("avx,f16c,popcnt"))) static size_t enc_f16c(const float *x, size_t n, uint16_t *o,
                                                                   unsigned long long *sat)
{
    const __m256 hi = _mm256_set1_ps(65504.0f), lo = _mm256_set1_ps(-65504.0f), abs = _mm256_set1_ps(-0.0f),
                 edge = _mm256_set1_ps(65520.0f); /* from here on the rounding would give infinity */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        __m256 c = _mm256_blendv_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), v, nan);
        *sat += (unsigned)__builtin_popcount((unsigned)_mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_andnot_ps(abs, v), edge, _CMP_GE_OQ)));
        _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}

__attribute__((target("avx,f16c"))) static size_t dec_f16c(const uint16_t *v, size_t n, float *x, int add)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
        if (add) f = _mm256_add_ps(f, _mm256_loadu_ps(x + i));
        _mm256_storeu_ps(x + i, f);
    }
    return i;
}

static int have_f16c(void)
{
    static int cached = -1;
    unsigned a, b, c, d; /* F16C from cpuid: clang before 15 has no "f16c" in __builtin_cpu_supports */
    if (cached < 0) cached = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && __builtin_cpu_supports("avx");
    return cached;
}
#endif

static void fp16_encode(const dt_codec *c, const float *x, size_t n, void *out)
{
    (void)c;
    uint16_t *o = out;
    size_t i = 0;
    unsigned long long sat = 0;
#ifdef HAVE_F16C_PATH
    if (have_f16c()) i = enc_f16c(x, n, o, &sat);
#endif
    for (; i < n; i++) {
        o[i] = codec_fp16_from_float(x[i]);
        sat += fabsf(x[i]) >= 65520.0f; /* rounds to infinity, sent as 65504 */
    }
    if (sat) saturated += sat;
}

static void fp16_decode(const dt_codec *c, const void *in, size_t n, float *x)
{
    (void)c;
    const uint16_t *v = in;
    size_t i = 0;
#ifdef HAVE_F16C_PATH
    if (have_f16c()) i = dec_f16c(v, n, x, 0);
#endif
    for (; i < n; i++) x[i] = codec_fp16_to_float(v[i]);
}

static void fp16_decode_add(const dt_codec *c, const void *in, size_t n, float *x)
{
    (void)c;
    const uint16_t *v = in;
    size_t i = 0;
#ifdef HAVE_F16C_PATH
    if (have_f16c()) i = dec_f16c(v, n, x, 1);
#endif
    for (; i < n; i++) x[i] += codec_fp16_to_float(v[i]);
}

const dt_codec_desc codec_fp16 = {
    .name = "fp16",
    .wire = DT_WIRE_FP16,
    .help = "IEEE half, round to nearest even, saturating at ±65504 (2 bytes)",
    .bytes = fp16_bytes,
    .encode = fp16_encode,
    .decode = fp16_decode,
    .decode_add = fp16_decode_add,
};
