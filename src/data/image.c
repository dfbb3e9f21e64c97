/* Separable resampling: per output column and row a short list of (source index, weight). */
#include "image.h"

#include <math.h>
#include <stdlib.h>

#include "../util.h"

typedef struct {
    int n;       /* taps per output coordinate */
    int *idx;    /* [out][n] */
    float *wt;   /* [out][n] */
} taps;

static int taps_make(taps *t, int in, int out, double start, double len)
{
    double scale = len / out, support = scale > 1.0 ? scale : 1.0;
    t->n = (int)ceil(support) * 2 + 1;
    t->idx = malloc(sizeof *t->idx * (size_t)out * t->n);
    t->wt = malloc(sizeof *t->wt * (size_t)out * t->n);
    if (!t->idx || !t->wt) {
        free(t->idx), free(t->wt);
        return dt_fail("out of memory");
    }
    for (int o = 0; o < out; o++) {
        double center = start + (o + 0.5) * scale, sum = 0.0;
        int lo = (int)floor(center - support), k = 0;
        int *ix = t->idx + (size_t)o * t->n;
        float *wt = t->wt + (size_t)o * t->n;
        for (int i = lo; i < lo + t->n; i++) {
            double d = fabs(i + 0.5 - center) / support, v = d < 1.0 ? 1.0 - d : 0.0;
            ix[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
            wt[k] = (float)v;
            sum += v;
            k++;
        }
        for (k = 0; k < t->n; k++) wt[k] = sum > 0 ? (float)(wt[k] / sum) : (k == t->n / 2 ? 1.0f : 0.0f);
    }
    return 0;
}

static void taps_free(taps *t)
{
    free(t->idx);
    free(t->wt);
}

/* the resampled image as floats 0..255 in out (c x oh x ow) */
static int resample(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh, int oh, int ow,
                    float *out)
{
    taps tx, ty;
    if (taps_make(&tx, w, ow, x0, rw) != 0) return -1;
    if (taps_make(&ty, h, oh, y0, rh) != 0) {
        taps_free(&tx);
        return -1;
    }
    /* rows of the source that any output row reads */
    int r0 = h, r1 = -1;
    for (int k = 0; k < oh * ty.n; k++) {
        if (ty.wt[k] == 0.0f) continue;
        r0 = DT_MIN(r0, ty.idx[k]);
        r1 = DT_MAX(r1, ty.idx[k]);
    }
    if (r1 < r0) r0 = r1 = 0;
    int nr = r1 - r0 + 1;
    float *tmp = malloc(sizeof *tmp * (size_t)nr * ow);
    if (!tmp) {
        taps_free(&tx), taps_free(&ty);
        return dt_fail("out of memory");
    }
    for (int ch = 0; ch < c; ch++) {
        const uint8_t *plane = src + (size_t)ch * h * w;
        for (int r = 0; r < nr; r++) { /* horizontal */
            const uint8_t *row = plane + (size_t)(r0 + r) * w;
            float *t = tmp + (size_t)r * ow;
            for (int o = 0; o < ow; o++) {
                const int *ix = tx.idx + (size_t)o * tx.n;
                const float *wt = tx.wt + (size_t)o * tx.n;
                float s = 0.0f;
                for (int k = 0; k < tx.n; k++) s += wt[k] * row[ix[k]];
                t[o] = s;
            }
        }
        float *op = out + (size_t)ch * oh * ow;
        for (int o = 0; o < oh; o++) { /* vertical */
            const int *iy = ty.idx + (size_t)o * ty.n;
            const float *wt = ty.wt + (size_t)o * ty.n;
            float *dst = op + (size_t)o * ow;
            for (int j = 0; j < ow; j++) dst[j] = 0.0f;
            for (int k = 0; k < ty.n; k++) {
                if (wt[k] == 0.0f) continue;
                const float *t = tmp + (size_t)(iy[k] - r0) * ow, wk = wt[k];
#pragma omp simd
                for (int j = 0; j < ow; j++) dst[j] += wk * t[j];
            }
        }
    }
    free(tmp);
    taps_free(&tx), taps_free(&ty);
    return 0;
}

int image_resample_f(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh, int oh,
                     int ow, const float *a, const float *b, float *out)
{
    if (resample(src, c, h, w, x0, y0, rw, rh, oh, ow, out) != 0) return -1;
    for (int ch = 0; ch < c; ch++) {
        float *p = out + (size_t)ch * oh * ow, ac = a[ch], bc = b[ch];
#pragma omp simd
        for (size_t i = 0; i < (size_t)oh * ow; i++) p[i] = p[i] * ac + bc;
    }
    return 0;
}

int image_resample_u8(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh, int oh,
                      int ow, uint8_t *out)
{
    size_t n = (size_t)c * oh * ow;
    float *f = malloc(sizeof *f * n);
    if (!f) return dt_fail("out of memory");
    if (resample(src, c, h, w, x0, y0, rw, rh, oh, ow, f) != 0) {
        free(f);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        float v = f[i] + 0.5f;
        out[i] = (uint8_t)(v < 0.0f ? 0 : v > 255.0f ? 255 : (int)v);
    }
    free(f);
    return 0;
}
