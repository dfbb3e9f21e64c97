/* chunks — csc's arithmetic on one chunk (chunks.h). Compiled without contractions: a fused
 * multiply-add would round once where the device twins (cuda/elementwise.h) round twice. */
#include <math.h>
#include <string.h>

#include "chunks.h"

#include "../cpu.h"

#define LANES 32

DT_NO_CONTRACT void chunks_correct(float *restrict g, const float *restrict h, const float *restrict w, float wd,
                                   size_t n)
{
    if (wd != 0.0f)
        for (size_t i = 0; i < n; i++) g[i] += h[i] + wd * w[i];
    else
        for (size_t i = 0; i < n; i++) g[i] += h[i];
}

void chunks_pack(float *restrict out, const float *restrict g, size_t n, float scale, float limit)
{
    for (size_t i = 0; i < n; i++) {
        float v = g[i] * scale;
        out[i] = fabsf(v) > limit ? NAN : v;
    }
}

float chunks_l1(const float *restrict x, size_t n)
{
    float s[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) s[j] += fabsf(x[i + j]);
    for (int j = 0; i + (size_t)j < n; j++) s[j] += fabsf(x[i + j]);
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++) s[j] += s[j + w];
    return s[0];
}

DT_NO_CONTRACT float chunks_fold(float *restrict g, float *restrict h, float *restrict hu, float *restrict w,
                                 const float *restrict sum, size_t n, int p, float m, float lr)
{
    float l1;
    if (sum) {
        memcpy(g, sum, n * sizeof *g);
        l1 = chunks_l1(g, n) / (float)p;
        memset(h, 0, n * sizeof *h);
        if (hu)
            for (size_t i = 0; i < n; i++) {
                hu[i] = m * hu[i] + lr * g[i];
                w[i] -= hu[i];
            }
        return l1;
    }
    l1 = chunks_l1(g, n);
    if (hu) {
        for (size_t i = 0; i < n; i++) h[i] = m * g[i];
    } else {
        memcpy(h, g, n * sizeof *h);
        memset(g, 0, n * sizeof *g);
    }
    return l1;
}
