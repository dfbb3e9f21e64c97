#include "codec_tern.h"

#include <math.h>
#include <string.h>

#include "../rng.h"

float tern_scaler(const float *g, size_t n, float clip_c)
{
    double sum = 0.0, sq = 0.0;
    float mx = 0.0f;
    if (n == 0) return 0.0f;
    for (size_t i = 0; i < n; i++) {
        sum += g[i];
        sq += (double)g[i] * g[i];
        mx = fmaxf(mx, fabsf(g[i]));
    }
    double mean = sum / (double)n, var = sq / (double)n - mean * mean;
    float sigma = (float)sqrt(var > 0 ? var : 0);
    float c = clip_c * sigma;
    return c > 0 && c < mx ? c : mx;
}

void tern_ternarize(const float *g, size_t n, float clip, float s, uint64_t key, int8_t *t)
{
    if (s <= 0.0f) {
        memset(t, 0, n);
        return;
    }
    const float inv = 1.0f / s;
    for (size_t i = 0; i < n; i++) {
        float a = fminf(fabsf(g[i]), clip) * inv; /* probability of a non-zero: |clipped g| / s */
        float u = (float)(rng_hash(key, i) >> 40) * (1.0f / 16777216.0f);
        t[i] = u < a ? (g[i] > 0 ? 1 : -1) : 0;
    }
}

void tern_pack(const int8_t *t, size_t n, uint8_t *codes)
{
    memset(codes, 0, (n + 3) / 4);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = t[i] > 0 ? 1 : t[i] < 0 ? 2 : 0;
        codes[i / 4] |= (uint8_t)(c << (2 * (i % 4)));
    }
}

void tern_unpack_add(const uint8_t *codes, size_t n, int8_t *acc)
{
    static const int8_t val[4] = {0, 1, -1, 0};
    for (size_t i = 0; i < n; i++) acc[i] = (int8_t)(acc[i] + val[(codes[i / 4] >> (2 * (i % 4))) & 3]);
}
