/* Separable resampling: per output column and row a short list of (source index, weight).
 *
 * The sums are those of the plain two-pass filter (each output column's taps in source order,
 * horizontally into rows of floats, then each output row's taps in order), bit for bit:
 * tests/check_data.c keeps that filter as its reference. What makes this one faster changes no
 * rounding: taps of weight 0 (which add +0) are left out, each source row is made floats once,
 * the vertical sums stay in registers and are scaled, shifted and mirrored as they are stored,
 * and the memory comes from the caller's scratch instead of malloc per image. */
#include "image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu.h"
#include "../util.h"

typedef struct {
    int n;     /* taps per output coordinate, after the zero weights at both ends are left out */
    int *idx;  /* [out][n] */
    float *wt; /* [out][n]; a shorter list ends in weights 0 on its last index */
} taps;

/* the full filter's tap count for a scale (PIL's support: 1 source pixel, more when shrinking) */
static int taps_full(int out, double len)
{
    double scale = len / out, support = scale > 1.0 ? scale : 1.0;
    return (int)ceil(support) * 2 + 1;
}

/* The taps of `out` coordinates over [start, start + len) of `in`, in tmp's room for the full
 * filter (out * taps_full ints and floats), then packed in place to the non-zero span. */
static void taps_make(taps *t, int in, int out, double start, double len, int *ix_mem, float *wt_mem)
{
    double scale = len / out, support = scale > 1.0 ? scale : 1.0;
    int n = taps_full(out, len), span = 1;
    for (int o = 0; o < out; o++) {
        double center = start + (o + 0.5) * scale, sum = 0.0;
        int lo = (int)floor(center - support), k = 0, first = -1, last = -1;
        int *ix = ix_mem + (size_t)o * n;
        float *wt = wt_mem + (size_t)o * n;
        for (int i = lo; i < lo + n; i++) {
            double d = fabs(i + 0.5 - center) / support, v = d < 1.0 ? 1.0 - d : 0.0;
            ix[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
            wt[k] = (float)v;
            sum += v;
            k++;
        }
        for (k = 0; k < n; k++) {
            wt[k] = sum > 0 ? (float)(wt[k] / sum) : (k == n / 2 ? 1.0f : 0.0f);
            if (wt[k] != 0.0f) last = k, first = first < 0 ? k : first;
        }
        if (first >= 0) span = DT_MAX(span, last - first + 1);
    }
    /* pack: output o keeps its taps first..first+span-1 (weights 0 past its last non-zero one),
     * written from the front: o's packed list never reaches an entry not yet read */
    for (int o = 0; o < out; o++) {
        const int *ix = ix_mem + (size_t)o * n;
        const float *wt = wt_mem + (size_t)o * n;
        int *pix = ix_mem + (size_t)o * span;
        float *pwt = wt_mem + (size_t)o * span;
        int first = 0, last = 0;
        while (first < n - 1 && wt[first] == 0.0f) first++;
        for (int k = first; k < n; k++)
            if (wt[k] != 0.0f) last = k;
        int last_ix = ix[last];
        for (int k = 0; k < span; k++) {
            int s = first + k;
            float v = s <= last ? wt[s] : 0.0f;
            pix[k] = s <= last ? ix[s] : last_ix;
            pwt[k] = v;
        }
    }
    t->n = span, t->idx = ix_mem, t->wt = wt_mem;
}

void image_scratch_free(image_scratch *s)
{
    free(s->mem);
    s->mem = NULL, s->cap = 0;
}

static void *scratch_get(image_scratch *s, size_t bytes)
{
    if (bytes > s->cap) {
        free(s->mem);
        s->cap = 0;
        if (!(s->mem = malloc(bytes))) return NULL;
        s->cap = bytes;
    }
    return s->mem;
}

/* the value of an output pixel, as floats 0..255, is stored by one of these */
typedef struct {
    float *f;        /* a[c] * value + b[c] */
    uint8_t *u8;     /* rounded, clamped */
    const float *a, *b;
    int flip;        /* mirrored left-right */
} sink;

DT_NO_CONTRACT static inline void store_row(const sink *k, int ch, size_t at, const float *acc, int ow)
{
    if (k->u8) {
        uint8_t *o = k->u8 + at;
        for (int j = 0; j < ow; j++) {
            float v = acc[j] + 0.5f;
            o[j] = (uint8_t)(v < 0.0f ? 0 : v > 255.0f ? 255 : (int)v);
        }
        return;
    }
    float *o = k->f + at, ac = k->a[ch], bc = k->b[ch];
    if (k->flip) {
#pragma omp simd
        for (int j = 0; j < ow; j++) o[j] = acc[ow - 1 - j] * ac + bc;
        return;
    }
#pragma omp simd
    for (int j = 0; j < ow; j++) o[j] = acc[j] * ac + bc;
}

DT_NO_CONTRACT static int resample(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh,
                                   int oh, int ow, const sink *out, image_scratch *scr)
{
    int nx = taps_full(ow, rw), ny = taps_full(oh, rh);
    double sy = rh / oh > 1.0 ? rh / oh : 1.0;
    /* rows any output row can read: within the support of the window's ends, inside the image */
    size_t nr_max = (size_t)DT_MIN((double)h, ceil(rh + 2.0 * sy) + 3.0);
    size_t taps_n = (size_t)ow * nx + (size_t)oh * ny;
    size_t bytes = (sizeof(int) + sizeof(float)) * taps_n + sizeof(float) * ((size_t)w + (size_t)ow + nr_max * ow) + 64;
    image_scratch local = {0};
    char *m = scratch_get(scr ? scr : &local, bytes);
    if (!m) return dt_fail("out of memory");
    taps tx, ty;
    int *txi = (int *)m, *tyi = txi + (size_t)ow * nx;
    float *txw = (float *)(tyi + (size_t)oh * ny), *tyw = txw + (size_t)ow * nx, *rowf = tyw + (size_t)oh * ny;
    float *acc = rowf + w, *tmp = acc + ow;
    taps_make(&tx, w, ow, x0, rw, txi, txw);
    taps_make(&ty, h, oh, y0, rh, tyi, tyw);
    /* rows of the source that any output row reads, columns that any output column reads */
    int r0 = h, r1 = -1, c0 = w, c1 = -1;
    for (int k = 0; k < oh * ty.n; k++) {
        if (ty.wt[k] == 0.0f) continue;
        r0 = DT_MIN(r0, ty.idx[k]);
        r1 = DT_MAX(r1, ty.idx[k]);
    }
    if (r1 < r0) r0 = r1 = 0;
    for (int k = 0; k < ow * tx.n; k++) c0 = DT_MIN(c0, tx.idx[k]), c1 = DT_MAX(c1, tx.idx[k]);
    for (int k = 0; k < ow * tx.n; k++) tx.idx[k] -= c0;
    int nr = r1 - r0 + 1, ncol = c1 - c0 + 1;
    if ((size_t)nr > nr_max) { /* cannot happen: the taps lie within the support */
        image_scratch_free(&local);
        return dt_fail("internal: resampling reads %d rows, planned %zu", nr, nr_max);
    }
    for (int ch = 0; ch < c; ch++) {
        const uint8_t *plane = src + (size_t)ch * h * w;
        for (int r = 0; r < nr; r++) { /* horizontal */
            const uint8_t *row = plane + (size_t)(r0 + r) * w + c0;
            float *t = tmp + (size_t)r * ow;
#pragma omp simd
            for (int i = 0; i < ncol; i++) rowf[i] = row[i];
            const int *ix = tx.idx;
            const float *wt = tx.wt;
            switch (tx.n) { /* s = 0 + w0 x0 + w1 x1 + ... in order; 0 + p is p for p >= +0 */
            case 1:
                for (int o = 0; o < ow; o++) t[o] = wt[o] * rowf[ix[o]];
                break;
            case 2:
                for (int o = 0; o < ow; o++, ix += 2, wt += 2) t[o] = wt[0] * rowf[ix[0]] + wt[1] * rowf[ix[1]];
                break;
            case 3:
                for (int o = 0; o < ow; o++, ix += 3, wt += 3)
                    t[o] = wt[0] * rowf[ix[0]] + wt[1] * rowf[ix[1]] + wt[2] * rowf[ix[2]];
                break;
            default:
                for (int o = 0; o < ow; o++, ix += tx.n, wt += tx.n) {
                    float s = 0.0f;
                    for (int k = 0; k < tx.n; k++) s += wt[k] * rowf[ix[k]];
                    t[o] = s;
                }
            }
        }
        for (int o = 0; o < oh; o++) { /* vertical: the row's taps of weight > 0, in order */
            const int *iy = ty.idx + (size_t)o * ty.n;
            const float *wy = ty.wt + (size_t)o * ty.n;
            const float *t[3] = {0};
            float wk[3];
            int n = 0, k = 0;
            for (; k < ty.n && n < 3; k++)
                if (wy[k] != 0.0f) t[n] = tmp + (size_t)(iy[k] - r0) * ow, wk[n++] = wy[k];
            if (n == 1) {
#pragma omp simd
                for (int j = 0; j < ow; j++) acc[j] = wk[0] * t[0][j];
            } else if (n == 2) {
#pragma omp simd
                for (int j = 0; j < ow; j++) acc[j] = wk[0] * t[0][j] + wk[1] * t[1][j];
            } else if (n == 3) {
#pragma omp simd
                for (int j = 0; j < ow; j++) acc[j] = wk[0] * t[0][j] + wk[1] * t[1][j] + wk[2] * t[2][j];
                for (; k < ty.n; k++) { /* more taps (shrinking): added one at a time, as before */
                    if (wy[k] == 0.0f) continue;
                    const float *tk = tmp + (size_t)(iy[k] - r0) * ow, wv = wy[k];
#pragma omp simd
                    for (int j = 0; j < ow; j++) acc[j] += wv * tk[j];
                }
            } else
                for (int j = 0; j < ow; j++) acc[j] = 0.0f;
            store_row(out, ch, ((size_t)ch * oh + o) * ow, acc, ow);
        }
    }
    image_scratch_free(&local);
    return 0;
}

int image_resample_f(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh, int oh,
                     int ow, const float *a, const float *b, int flip, image_scratch *scr, float *out)
{
    sink k = {out, NULL, a, b, flip};
    return resample(src, c, h, w, x0, y0, rw, rh, oh, ow, &k, scr);
}

int image_resample_u8(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh, int oh,
                      int ow, image_scratch *scr, uint8_t *out)
{
    sink k = {NULL, out, NULL, NULL, 0};
    return resample(src, c, h, w, x0, y0, rw, rh, oh, ow, &k, scr);
}
