/* Reference CNN layers in double precision: direct loops from the definitions in backend.h,
 * NCHW, no tricks. What the finite-difference checks verify and the fast paths are held to. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define AT4(a, n, c, h, w, C, H, W) (a)[(((size_t)(n) * (C) + (c)) * (H) + (h)) * (W) + (w)]

void ref_conv_fwd(const ref_conv *g, const double *x, const double *w, const double *b, double *y)
{
    int cg = g->c / g->groups, og = g->o / g->groups;
    for (int n = 0; n < g->rows; n++)
        for (int o = 0; o < g->o; o++)
            for (int i = 0; i < g->oh; i++)
                for (int j = 0; j < g->ow; j++) {
                    double s = b ? b[o] : 0.0;
                    int grp = o / og;
                    for (int c = 0; c < cg; c++)
                        for (int u = 0; u < g->kh; u++)
                            for (int v = 0; v < g->kw; v++) {
                                int hi = i * g->sh - g->pt + u, wi = j * g->sw - g->pl + v;
                                if (hi < 0 || hi >= g->h || wi < 0 || wi >= g->w) continue;
                                s += AT4(x, n, grp * cg + c, hi, wi, g->c, g->h, g->w) *
                                     AT4(w, o, c, u, v, cg, g->kh, g->kw);
                            }
                    AT4(y, n, o, i, j, g->o, g->oh, g->ow) = s;
                }
}

void ref_conv_bwd(const ref_conv *g, const double *x, const double *w, const double *dy, double *dx, double *dw,
                  double *db)
{
    int cg = g->c / g->groups, og = g->o / g->groups;
    if (dx) memset(dx, 0, sizeof(double) * (size_t)g->rows * g->c * g->h * g->w);
    memset(dw, 0, sizeof(double) * (size_t)g->o * cg * g->kh * g->kw);
    if (db) memset(db, 0, sizeof(double) * (size_t)g->o);
    for (int n = 0; n < g->rows; n++)
        for (int o = 0; o < g->o; o++)
            for (int i = 0; i < g->oh; i++)
                for (int j = 0; j < g->ow; j++) {
                    double d = AT4(dy, n, o, i, j, g->o, g->oh, g->ow);
                    int grp = o / og;
                    if (db) db[o] += d;
                    for (int c = 0; c < cg; c++)
                        for (int u = 0; u < g->kh; u++)
                            for (int v = 0; v < g->kw; v++) {
                                int hi = i * g->sh - g->pt + u, wi = j * g->sw - g->pl + v;
                                if (hi < 0 || hi >= g->h || wi < 0 || wi >= g->w) continue;
                                AT4(dw, o, c, u, v, cg, g->kh, g->kw) +=
                                    d * AT4(x, n, grp * cg + c, hi, wi, g->c, g->h, g->w);
                                if (dx)
                                    AT4(dx, n, grp * cg + c, hi, wi, g->c, g->h, g->w) +=
                                        d * AT4(w, o, c, u, v, cg, g->kh, g->kw);
                            }
                }
}

/* the window of output (i, j), clipped to the input */
static void window(const ref_pool *g, int i, int j, int *h0, int *h1, int *w0, int *w1)
{
    *h0 = i * g->sh - g->pt, *w0 = j * g->sw - g->pl;
    *h1 = *h0 + g->kh, *w1 = *w0 + g->kw;
    if (*h0 < 0) *h0 = 0;
    if (*w0 < 0) *w0 = 0;
    if (*h1 > g->h) *h1 = g->h;
    if (*w1 > g->w) *w1 = g->w;
}

void ref_pool_fwd(const ref_pool *g, const double *x, double *y)
{
    for (int n = 0; n < g->rows; n++)
        for (int c = 0; c < g->c; c++)
            for (int i = 0; i < g->oh; i++)
                for (int j = 0; j < g->ow; j++) {
                    int h0, h1, w0, w1;
                    double s = g->max ? -INFINITY : 0.0;
                    window(g, i, j, &h0, &h1, &w0, &w1);
                    for (int u = h0; u < h1; u++)
                        for (int v = w0; v < w1; v++) {
                            double e = AT4(x, n, c, u, v, g->c, g->h, g->w);
                            if (g->max) s = e > s ? e : s;
                            else s += e;
                        }
                    if (!g->max) s /= (double)((h1 - h0) * (w1 - w0));
                    AT4(y, n, c, i, j, g->c, g->oh, g->ow) = s;
                }
}

void ref_pool_bwd(const ref_pool *g, const double *x, const double *dy, double *dx)
{
    memset(dx, 0, sizeof(double) * (size_t)g->rows * g->c * g->h * g->w);
    for (int n = 0; n < g->rows; n++)
        for (int c = 0; c < g->c; c++)
            for (int i = 0; i < g->oh; i++)
                for (int j = 0; j < g->ow; j++) {
                    int h0, h1, w0, w1, bu = -1, bv = -1;
                    double d = AT4(dy, n, c, i, j, g->c, g->oh, g->ow), best = -INFINITY;
                    window(g, i, j, &h0, &h1, &w0, &w1);
                    for (int u = h0; u < h1; u++)
                        for (int v = w0; v < w1; v++) {
                            if (g->max) {
                                double e = AT4(x, n, c, u, v, g->c, g->h, g->w);
                                if (e > best) best = e, bu = u, bv = v;
                            } else {
                                AT4(dx, n, c, u, v, g->c, g->h, g->w) += d / (double)((h1 - h0) * (w1 - w0));
                            }
                        }
                    if (g->max) AT4(dx, n, c, bu, bv, g->c, g->h, g->w) += d;
                }
}

/* per channel over n and hw; var biased */
static void bn_stats(const double *x, int rows, int c, int hw, double *mean, double *var)
{
    double m = (double)rows * hw;
    for (int k = 0; k < c; k++) {
        double s = 0.0, q = 0.0;
        for (int n = 0; n < rows; n++)
            for (int i = 0; i < hw; i++) s += x[((size_t)n * c + k) * hw + i];
        s /= m;
        for (int n = 0; n < rows; n++)
            for (int i = 0; i < hw; i++) {
                double d = x[((size_t)n * c + k) * hw + i] - s;
                q += d * d;
            }
        mean[k] = s;
        var[k] = q / m;
    }
}

void ref_bn_fwd(const double *x, const double *gamma, const double *beta, double *y, double *mean, double *var,
                int rows, int c, int hw, double eps)
{
    bn_stats(x, rows, c, hw, mean, var);
    for (int n = 0; n < rows; n++)
        for (int k = 0; k < c; k++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)n * c + k) * hw + i;
                y[o] = (x[o] - mean[k]) / sqrt(var[k] + eps) * gamma[k] + beta[k];
            }
}

void ref_bn_bwd(const double *x, const double *gamma, const double *dy, double *dx, double *dgamma, double *dbeta,
                int rows, int c, int hw, double eps)
{
    double *mean = malloc(sizeof *mean * (size_t)c), *var = malloc(sizeof *var * (size_t)c), m = (double)rows * hw;
    bn_stats(x, rows, c, hw, mean, var);
    for (int k = 0; k < c; k++) {
        double inv = 1.0 / sqrt(var[k] + eps), sd = 0.0, sdx = 0.0;
        for (int n = 0; n < rows; n++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)n * c + k) * hw + i;
                sd += dy[o];
                sdx += dy[o] * (x[o] - mean[k]) * inv;
            }
        dgamma[k] = sdx;
        dbeta[k] = sd;
        for (int n = 0; n < rows; n++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)n * c + k) * hw + i;
                double xh = (x[o] - mean[k]) * inv;
                dx[o] = gamma[k] * inv / m * (m * dy[o] - sd - xh * sdx);
            }
    }
    free(mean);
    free(var);
}

/* the channels in the window of channel k */
static void lrn_range(int k, int c, int size, int *lo, int *hi)
{
    *lo = k - (size - 1) / 2;
    *hi = k + size / 2;
    if (*lo < 0) *lo = 0;
    if (*hi > c - 1) *hi = c - 1;
}

static double lrn_scale(const double *x, int n, int k, int i, int c, int hw, int size, double alpha, double kk)
{
    int lo, hi;
    double s = 0.0;
    lrn_range(k, c, size, &lo, &hi);
    for (int q = lo; q <= hi; q++) {
        double e = x[((size_t)n * c + q) * hw + i];
        s += e * e;
    }
    return kk + alpha / size * s;
}

void ref_lrn_fwd(const double *x, double *y, int rows, int c, int hw, int size, double alpha, double beta, double k)
{
    for (int n = 0; n < rows; n++)
        for (int q = 0; q < c; q++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)n * c + q) * hw + i;
                y[o] = x[o] * pow(lrn_scale(x, n, q, i, c, hw, size, alpha, k), -beta);
            }
}

void ref_lrn_bwd(const double *x, const double *dy, double *dx, int rows, int c, int hw, int size, double alpha,
                 double beta, double k)
{
    /* y_q = x_q s_q^-b, s_q = k + a/size sum_{p in win(q)} x_p^2:
     * dx_p = dy_p s_p^-b - 2ab/size x_p sum_{q: p in win(q)} dy_q x_q s_q^(-b-1) */
    for (int n = 0; n < rows; n++)
        for (int p = 0; p < c; p++)
            for (int i = 0; i < hw; i++) {
                size_t o = ((size_t)n * c + p) * hw + i;
                double acc = 0.0;
                for (int q = 0; q < c; q++) {
                    int lo, hi;
                    lrn_range(q, c, size, &lo, &hi);
                    if (p < lo || p > hi) continue;
                    size_t oq = ((size_t)n * c + q) * hw + i;
                    acc += dy[oq] * x[oq] * pow(lrn_scale(x, n, q, i, c, hw, size, alpha, k), -beta - 1.0);
                }
                dx[o] = dy[o] * pow(lrn_scale(x, n, p, i, c, hw, size, alpha, k), -beta) -
                        2.0 * alpha * beta / size * x[o] * acc;
            }
}
