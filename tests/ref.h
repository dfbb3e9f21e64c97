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

/* --- CNN layers (ref_cnn.c), NCHW --- */
typedef struct ref_conv {
    int rows, c, h, w, o, oh, ow, kh, kw, sh, sw, pt, pl, groups; /* bottom/right padding follows from oh/ow */
} ref_conv;
void ref_conv_fwd(const ref_conv *g, const double *x, const double *w, const double *b, double *y);
/* dx (may be NULL), dw, db (may be NULL) overwritten */
void ref_conv_bwd(const ref_conv *g, const double *x, const double *w, const double *dy, double *dx, double *dw,
                  double *db);

/* max, or the average of the window's elements inside the input (padding excluded) */
typedef struct ref_pool {
    int max, rows, c, h, w, oh, ow, kh, kw, sh, sw, pt, pl;
} ref_pool;
void ref_pool_fwd(const ref_pool *g, const double *x, double *y);
void ref_pool_bwd(const ref_pool *g, const double *x, const double *dy, double *dx);

/* training mode: batch mean and biased variance per channel (written to mean, var) */
void ref_bn_fwd(const double *x, const double *gamma, const double *beta, double *y, double *mean, double *var,
                int rows, int c, int hw, double eps);
void ref_bn_bwd(const double *x, const double *gamma, const double *dy, double *dx, double *dgamma, double *dbeta,
                int rows, int c, int hw, double eps);

/* across channels: y = x (k + alpha/size sum x^2 over the size channels around)^-beta */
void ref_lrn_fwd(const double *x, double *y, int rows, int c, int hw, int size, double alpha, double beta, double k);
void ref_lrn_bwd(const double *x, const double *dy, double *dx, int rows, int c, int hw, int size, double alpha,
                 double beta, double k);

#endif
