#include "codec_tern.h"

#include <math.h>
#include <string.h>

#include "../cpu.h"

/* Sums in float over blocks of 4096 values, each in 16 lanes (lane j: values j, j + 16, ...; the last
 * partial row's value i in lane i % 16), the lanes then added pairwise (j + 8, j + 4, j + 2, j + 1),
 * the blocks in double: one order of additions, each product rounded on its own, whatever the CPU's
 * vectors (an OpenMP reduction's order, and fused multiply-adds, would follow the clone: AVX-512,
 * AVX2 and baseline CPUs gave different scalers) and what a device's kernel can repeat. */
DT_CLONES DT_NO_CONTRACT static void block_stats(const float *restrict g, size_t n, float *sum, float *sq, float *mx)
{
    float s[16] = {0}, q[16] = {0}, m = 0.0f;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
#pragma omp simd
        for (int j = 0; j < 16; j++) {
            float v = g[i + j];
            s[j] += v;
            q[j] += v * v;
        }
    for (int j = 0; i < n; i++, j++) s[j] += g[i], q[j] += g[i] * g[i];
    for (int w = 8; w > 0; w /= 2)
        for (int j = 0; j < w; j++) s[j] += s[j + w], q[j] += q[j + w];
#pragma omp simd reduction(max : m)
    for (size_t k = 0; k < n; k++) {
        float a = fabsf(g[k]);
        m = a > m ? a : m; /* not fmaxf: a library call that stops vectorisation; a NaN is passed over */
    }
    *sum = s[0], *sq = q[0], *mx = m;
}

void tern_stats(const float *g, size_t n, double *sum, double *sq, float *mx)
{
    *sum = 0.0, *sq = 0.0, *mx = 0.0f;
    for (size_t a = 0; a < n; a += 4096) {
        float s, q, m;
        block_stats(g + a, n - a < 4096 ? n - a : 4096, &s, &q, &m);
        *sum += s, *sq += q, *mx = fmaxf(*mx, m);
    }
}

float tern_scaler_of(double sum, double sq, float mx, size_t n, float clip_c)
{
    if (n == 0) return 0.0f;
    double mean = sum / (double)n, var = sq / (double)n - mean * mean;
    float sigma = (float)sqrt(var > 0 ? var : 0);
    float c = clip_c * sigma;
    return c > 0 && c < mx ? c : mx;
}

float tern_scaler(const float *g, size_t n, float clip_c)
{
    double sum, sq;
    float mx;
    tern_stats(g, n, &sum, &sq, &mx);
    return tern_scaler_of(sum, sq, mx, n, clip_c);
}

/* the coins of values [4 g, 4 g + 4): one splitmix64 finaliser per group of four */
static inline uint64_t coins(uint64_t key, uint64_t group)
{
    uint64_t z = key + group * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

DT_CLONES static void ternarize_block(const float *restrict g, size_t n, float clip, float scale, uint64_t key,
                                      uint64_t first_group, int8_t *restrict t)
{
    uint16_t u[1024];
    size_t groups = (n + 3) / 4;
#pragma omp simd
    for (size_t q = 0; q < groups; q++) {
        uint64_t h = coins(key, first_group + q);
        u[4 * q] = (uint16_t)h;
        u[4 * q + 1] = (uint16_t)(h >> 16);
        u[4 * q + 2] = (uint16_t)(h >> 32);
        u[4 * q + 3] = (uint16_t)(h >> 48);
    }
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(g[i]);
        a = (a < clip ? a : clip) * scale;
        int8_t sgn = g[i] > 0 ? 1 : -1;
        t[i] = (float)u[i] < a ? sgn : 0;
    }
}

void tern_ternarize(const float *g, size_t n, float clip, float s, uint64_t key, int8_t *t)
{
    if (s <= 0.0f) {
        memset(t, 0, n);
        return;
    }
    /* value i's coin: 16 bits of coins(key, i / 4); P(t != 0) = |clipped g| / s, to 1/65536 */
    const float scale = 65536.0f / s;
    for (size_t a = 0; a < n; a += 1024)
        ternarize_block(g + a, n - a < 1024 ? n - a : 1024, clip, scale, key, a / 4, t + a);
}

DT_CLONES void tern_pack(const int8_t *t, size_t n, uint8_t *codes)
{
    size_t full = n / 4;
#pragma omp simd
    for (size_t b = 0; b < full; b++) {
        uint8_t c = 0;
        for (int j = 0; j < 4; j++) {
            int8_t v = t[4 * b + (size_t)j];
            c |= (uint8_t)((v > 0 ? 1 : v < 0 ? 2 : 0) << (2 * j));
        }
        codes[b] = c;
    }
    if (n % 4) {
        uint8_t c = 0;
        for (size_t i = full * 4; i < n; i++) c |= (uint8_t)((t[i] > 0 ? 1 : t[i] < 0 ? 2 : 0) << (2 * (i % 4)));
        codes[full] = c;
    }
}

DT_CLONES void tern_unpack_add(const uint8_t *codes, size_t n, int8_t *acc)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        int c = (codes[i / 4] >> (2 * (i % 4))) & 3;
        acc[i] = (int8_t)(acc[i] + (c == 1) - (c == 2));
    }
}
