/* Reference layers in double precision: plain loops, written from the definitions, used to
 * (1) verify each gradient formula by finite differences in double, and (2) check the engine's
 * fp32 kernels against them. Shapes as in the engine: x [rows][in], row-major. */
#ifndef DT_TEST_REF_H
#define DT_TEST_REF_H

#include <stddef.h>
#include <stdint.h>

/* y[r][o] = sum_i x[r][i] W[o][i] + b[o] */
void ref_dense_fwd(const double *x, const double *w, const double *b, double *y, int rows, int in, int out);
/* dW = dy^T x, db = sum_r dy, dx = dy W */
void ref_dense_bwd(const double *x, const double *w, const double *dy, double *dx, double *dw, double *db, int rows,
                   int in, int out);
void ref_relu_fwd(const double *x, double *y, size_t n);
void ref_relu_bwd(const double *x, const double *dy, double *dx, size_t n);
/* mask[i] in {0,1}; y = x * mask / (1-p) */
void ref_dropout_fwd(const double *x, const uint8_t *mask, double p, double *y, size_t n);
void ref_dropout_bwd(const uint8_t *mask, double p, const double *dy, double *dx, size_t n);
/* returns sum_r -log softmax(z_r)[label_r]; prob filled */
double ref_softmax_xent_fwd(const double *z, const int32_t *labels, double *prob, int rows, int classes);
/* dz = scale * (prob - onehot) */
void ref_softmax_xent_bwd(const double *prob, const int32_t *labels, double scale, double *dz, int rows, int classes);

#endif
