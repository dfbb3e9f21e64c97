#include "ref.h"

#include <math.h>

void ref_dense_fwd(const double *x, const double *w, const double *b, double *y, int rows, int in, int out)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++) s += x[(size_t)r * in + i] * w[(size_t)o * in + i];
            y[(size_t)r * out + o] = s;
        }
}

void ref_dense_bwd(const double *x, const double *w, const double *dy, double *dx, double *dw, double *db, int rows,
                   int in, int out)
{
    for (int o = 0; o < out; o++) {
        if (db) {
            double s = 0.0;
            for (int r = 0; r < rows; r++) s += dy[(size_t)r * out + o];
            db[o] = s;
        }
        for (int i = 0; i < in; i++) {
            double s = 0.0;
            for (int r = 0; r < rows; r++) s += dy[(size_t)r * out + o] * x[(size_t)r * in + i];
            dw[(size_t)o * in + i] = s;
        }
    }
    if (dx)
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < in; i++) {
                double s = 0.0;
                for (int o = 0; o < out; o++) s += dy[(size_t)r * out + o] * w[(size_t)o * in + i];
                dx[(size_t)r * in + i] = s;
            }
}

void ref_relu_fwd(const double *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0;
}

void ref_relu_bwd(const double *x, const double *dy, double *dx, size_t n)
{
    for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0 ? dy[i] : 0.0;
}

void ref_dropout_fwd(const double *x, const uint8_t *mask, double p, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = mask[i] ? x[i] / (1.0 - p) : 0.0;
}

void ref_dropout_bwd(const uint8_t *mask, double p, const double *dy, double *dx, size_t n)
{
    for (size_t i = 0; i < n; i++) dx[i] = mask[i] ? dy[i] / (1.0 - p) : 0.0;
}

double ref_softmax_xent_fwd(const double *z, const int32_t *labels, double *prob, int rows, int classes)
{
    double loss = 0.0;
    for (int r = 0; r < rows; r++) {
        const double *zr = z + (size_t)r * classes;
        double mx = zr[0], s = 0.0;
        for (int c = 1; c < classes; c++) mx = zr[c] > mx ? zr[c] : mx;
        for (int c = 0; c < classes; c++) s += exp(zr[c] - mx);
        for (int c = 0; c < classes; c++) prob[(size_t)r * classes + c] = exp(zr[c] - mx) / s;
        loss += log(s) + mx - zr[labels[r]];
    }
    return loss;
}

void ref_softmax_xent_bwd(const double *prob, const int32_t *labels, double scale, double *dz, int rows, int classes)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < classes; c++)
            dz[(size_t)r * classes + c] = scale * (prob[(size_t)r * classes + c] - (c == labels[r] ? 1.0 : 0.0));
}
