/* backend — the kernels a compute device supplies; layers call only these.
 *
 * A backend owns memory on its device and the kernels that work on it. Layers, the net and the
 * optimizer never touch a pointer's contents directly: they call through this table, so a CUDA
 * backend (cuBLAS/cuDNN) can implement the same table without any layer changing. The CPU
 * backend (backend_cpu.c) is the reference and what CI tests.
 *
 * Conventions: all matrices are row-major fp32. Activations are [rows][cols] where rows is the
 * batch and cols the per-sample size. `beta` arguments select overwrite (0) or accumulate (1)
 * for gradients that several consumers add into.
 */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_backend dt_backend;

/* How a backend lays out an activation of C x H x W per sample. Layers never look inside: they
 * pass layouts to the backend's ops and call to_plain/from_plain where they need NCHW. */
typedef enum {
    DT_LAYOUT_PLAIN = 0,   /* NCHW */
    DT_LAYOUT_BLOCK16 = 1, /* oneDNN nChw16c: [N][C/16][H][W][16]; only for C a multiple of 16 */
} dt_layout;

/* Convolution: C x H x W in, O x OH x OW out; kernel KH x KW, stride SH x SW, padding top/bottom/
 * left/right, groups; weights [O][C/groups][KH][KW] (PyTorch's layout), bias [O]. */
typedef struct dt_conv_cfg {
    int c, h, w, o, oh, ow, kh, kw, sh, sw, pt, pb, pl, pr, groups, bias;
    dt_layout in_layout, out_layout;
} dt_conv_cfg;

/* Pooling: max, or average over the window's values inside the input (padding excluded). */
typedef struct dt_pool_cfg {
    int max, c, h, w, oh, ow, kh, kw, sh, sw, pt, pb, pl, pr;
    dt_layout layout;
} dt_pool_cfg;

/* Batch normalisation over N, H, W per channel; scale and shift [C]. */
typedef struct dt_bn_cfg {
    int c, h, w;
    float eps;
    dt_layout layout;
} dt_bn_cfg;

/* Local response normalisation across channels (Caffe/AlexNet):
 * y = x / (k + alpha/size * sum over size neighbouring channels of x^2)^beta */
typedef struct dt_lrn_cfg {
    int c, h, w, size;
    float alpha, beta, k;
    dt_layout layout;
} dt_lrn_cfg;

struct dt_backend {
    const char *name;
    int n_threads;
    void *impl;

    /* memory on the device, 64-byte aligned and zeroed */
    void *(*alloc)(dt_backend *be, size_t bytes);
    void (*free)(dt_backend *be, void *p);
    void (*to_device)(dt_backend *be, void *dst, const void *src, size_t bytes);
    void (*to_host)(dt_backend *be, void *dst, const void *src, size_t bytes);
    void (*copy)(dt_backend *be, void *dst, const void *src, size_t bytes); /* device to device */
    /* waits until queued work is done (timing, host reads) */
    void (*sync)(dt_backend *be);

    /* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C (row-major, like cblas_sgemm) */
    void (*gemm)(dt_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
    /* y[r][c] += b[c] for r < rows, c < cols */
    void (*bias_add)(dt_backend *be, float *y, const float *b, int rows, int cols);
    /* db[c] = beta * db[c] + sum_r dy[r][c] */
    void (*bias_grad)(dt_backend *be, float *db, const float *dy, int rows, int cols, float beta);
    /* y = max(x, 0); dx = beta * dx + dy * (y > 0) */
    void (*relu_fwd)(dt_backend *be, float *y, const float *x, size_t n);
    void (*relu_bwd)(dt_backend *be, float *dx, const float *dy, const float *y, size_t n, float beta);
    /* Inverted dropout with drop probability p. The mask of element (r, c) is a pure function of
     * (key, (row0 + r) * cols + c), so it is identical however a global batch is split over ranks
     * and backward regenerates it instead of storing it. */
    void (*dropout_fwd)(dt_backend *be, float *y, const float *x, int rows, int cols, float p, uint64_t key,
                        int64_t row0);
    void (*dropout_bwd)(dt_backend *be, float *dx, const float *dy, int rows, int cols, float p, uint64_t key,
                        int64_t row0, float beta);
    /* prob = softmax(logits) per row; adds sum of -log prob[label] to *loss_sum (double) and the
     * number of rows whose argmax equals the label to *n_correct. labels live on the device. */
    void (*softmax_xent_fwd)(dt_backend *be, float *prob, const float *logits, const int32_t *labels, int rows,
                             int classes, double *loss_sum, int64_t *n_correct);
    /* dx = beta * dx + scale * (prob - onehot(label)) */
    void (*softmax_xent_bwd)(dt_backend *be, float *dx, const float *prob, const int32_t *labels, int rows,
                             int classes, float scale, float beta);
    /* SGD with momentum / Nesterov / weight decay on n elements (PyTorch semantics):
     * d = g + wd*w; v = m*v + d; d = nesterov ? d + m*v : v; w -= lr*d. v may be NULL if m == 0. */
    void (*sgd_step)(dt_backend *be, float *w, const float *g, float *v, size_t n, float lr, float momentum,
                     float wd, int nesterov);
    /* x *= a */
    void (*scale)(dt_backend *be, float *x, float a, size_t n);
    /* y = beta * y + x */
    void (*add)(dt_backend *be, float *y, const float *x, size_t n, float beta);

    /* --- the layers of CNNs. Each op gets a plan once per layer (from its configuration; NULL
     * and an error on failure) and then runs for any number of rows. Backward writes dx
     * overwriting (dx_beta 0) or adding (1); dx, dw may be NULL when not wanted. --- */
    dt_layout (*layout_for)(dt_backend *be, int c, int h, int w);
    /* floats a [rows][C][H][W] activation takes in layout (padding included) */
    size_t (*act_size)(dt_backend *be, dt_layout layout, int rows, int c, int h, int w);
    void (*to_plain)(dt_backend *be, dt_layout from, const float *x, float *y, int rows, int c, int h, int w);
    void (*from_plain)(dt_backend *be, dt_layout to, const float *x, float *y, int rows, int c, int h, int w,
                       float beta);

    void *(*conv_plan)(dt_backend *be, const dt_conv_cfg *cfg);
    int (*conv_fwd)(dt_backend *be, void *plan, int rows, const float *x, const float *w, const float *b, float *y);
    int (*conv_bwd)(dt_backend *be, void *plan, int rows, const float *x, const float *w, const float *dy, float *dx,
                    float dx_beta, float *dw, float *db);
    void *(*pool_plan)(dt_backend *be, const dt_pool_cfg *cfg);
    int (*pool_fwd)(dt_backend *be, void *plan, int rows, int train, const float *x, float *y);
    int (*pool_bwd)(dt_backend *be, void *plan, int rows, const float *dy, float *dx, float dx_beta);
    /* training: batch statistics (written to mean/var, biased variance) normalise x; evaluation:
     * the given running statistics */
    void *(*bn_plan)(dt_backend *be, const dt_bn_cfg *cfg);
    int (*bn_fwd)(dt_backend *be, void *plan, int rows, int train, const float *x, const float *scale,
                  const float *shift, float *mean, float *var, float *y);
    int (*bn_bwd)(dt_backend *be, void *plan, int rows, const float *x, const float *scale, const float *mean,
                  const float *var, const float *dy, float *dx, float dx_beta, float *dscale, float *dshift);
    void *(*lrn_plan)(dt_backend *be, const dt_lrn_cfg *cfg);
    int (*lrn_fwd)(dt_backend *be, void *plan, int rows, int train, const float *x, float *y);
    int (*lrn_bwd)(dt_backend *be, void *plan, int rows, const float *x, const float *dy, float *dx, float dx_beta);
    void (*plan_free)(dt_backend *be, void *plan);
};

/* The CPU backend: oneDNN for GEMM and the CNN ops, plain loops the compiler vectorises for the rest. */
int backend_cpu_create(dt_backend **out, int n_threads);
/* One line for the banner: the library and the instruction set its kernels use. */
const char *backend_cpu_describe(void);
void backend_destroy(dt_backend *be);

#endif
