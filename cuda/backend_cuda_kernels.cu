// backend_cuda_kernels — the CUDA backend's own kernels (the twin of backend_cpu.c's loops and of
// the oneDNN primitives that backend_cpu_dnnl.c calls for pooling, LRN and the shortcut).
//
// Each kernel is a grid-stride loop over its unit of work (an element, a row, an output or input
// pixel) that calls one function of elementwise.h, the same function tests/check_cuda_twins.c
// runs on the host against the CPU backend. Gathers, not scatters: a backward kernel computes
// each input element's gradient from the outputs that read it, so nothing races and the sums
// come out in one order on every run.
#include "backend_cuda.h"
#include "elementwise.h"
#include "launch.cuh"
#include "launch.cuh"

#define LAUNCH(kernel, n, s, ...)                                                                                      \
    do {                                                                                                               \
        if ((n) == 0) return 0;                                                                                        \
        kernel<<<blocks_for(n), THREADS, 0, s>>>(__VA_ARGS__);                                                         \
        return (int)cudaGetLastError();                                                                                \
    } while (0)

// x, y: n floats, any shape
__global__ void k_relu_fwd(float *y, const float *x, size_t n)
{
    FOR_EACH(i, n) y[i] = ew_relu(x[i]);
}

__global__ void k_relu_bwd(float *dx, const float *dy, const float *y, size_t n, float beta)
{
    FOR_EACH(i, n) dx[i] = ew_relu_bwd(dx[i], dy[i], y[i], beta);
}

// x, y: n floats, element i the global element base + i of [rows][cols] (base = row0 * cols);
// forward with beta 0, backward (x = dy, y = dx) with the layer's beta
__global__ void k_dropout(float *y, const float *x, size_t n, uint64_t base, uint32_t th, float sc, uint64_t key,
                          float beta)
{
    FOR_EACH(i, n) y[i] = ew_put(y[i], ew_dropout(x[i], key, base + i, th, sc), beta);
}

// y: [rows][cols][hw] (hw 1: a dense layer's [rows][cols]); b: [cols]
__global__ void k_bias_add(float *y, const float *b, size_t n, int cols, int hw)
{
    FOR_EACH(i, n) y[i] += b[(i / (size_t)hw) % (size_t)cols];
}

// dy: [rows][cols]; db: [cols], one thread per column, rows added in order
__global__ void k_bias_grad(float *db, const float *dy, int rows, int cols, float beta)
{
    FOR_EACH(c, (size_t)cols) db[c] = ew_bias_grad_col(dy, rows, cols, (int)c, db[c], beta);
}

// logits, prob: [rows][classes]; labels: [rows]; loss (double), correct: [rows]; one thread per row
__global__ void k_softmax_xent_fwd(float *prob, const float *logits, const int32_t *labels, int rows, int classes,
                                   double *loss, int *correct)
{
    FOR_EACH(r, (size_t)rows)
    ew_softmax_xent_row(logits + r * classes, prob + r * classes, classes, labels[r], &loss[r], &correct[r]);
}

__global__ void k_softmax_xent_bwd(float *dx, const float *prob, const int32_t *labels, size_t n, int classes,
                                   float scale, float beta)
{
    FOR_EACH(i, n) dx[i] = ew_softmax_xent_bwd(dx[i], prob[i], (int)(i % classes) == labels[i / classes], scale, beta);
}

// w, g, v: n floats of the parameter arena (v NULL without momentum)
__global__ void k_sgd(float *w, const float *g, float *v, size_t n, float lr, float m, float wd, int nesterov)
{
    FOR_EACH(i, n) ew_sgd(w, g, v, i, lr, m, wd, nesterov);
}

__global__ void k_scale(float *x, float a, size_t n)
{
    FOR_EACH(i, n) x[i] = a == 0.0f ? 0.0f : x[i] * a;
}

__global__ void k_add(float *y, const float *x, size_t n, float beta)
{
    FOR_EACH(i, n) y[i] = ew_add(y[i], x[i], beta);
}

__global__ void k_add2(float *y, const float *a, const float *b, size_t n, int relu)
{
    FOR_EACH(i, n) y[i] = ew_add2(a[i], b[i], relu);
}

// --precision bf16 or fp16: x rounded into out (dense), and back into y; rows of cols values ld apart
__global__ void k_to_lowp(int fp16, const float *x, size_t n, uint16_t *out)
{
    FOR_EACH(i, n) out[i] = ew_lowp(fp16, x[i]);
}

__global__ void k_to_lowp_rows(int fp16, const float *x, size_t rows, size_t cols, size_t ld, uint16_t *out)
{
    FOR_EACH(i, rows * cols) out[i] = ew_lowp(fp16, x[(i / cols) * ld + i % cols]);
}

__global__ void k_from_lowp(int fp16, float *y, const uint16_t *v, size_t n, float beta)
{
    FOR_EACH(i, n) y[i] = ew_lowp_put(fp16, y[i], v[i], beta);
}

// loss scaling: g *= a, *flag = 1 where a result is not finite
__global__ void k_bn_running(float *rmean, float *rvar, const float *mean, const float *var, size_t n, float m,
                             double unbias)
{
    FOR_EACH(i, n) ew_bn_running(rmean, rvar, mean, var, i, m, unbias);
}

__global__ void k_unscale(float *g, float a, size_t n, int32_t *flag)
{
    FOR_EACH(i, n) if (ew_unscale(&g[i], a)) *flag = 1;
}

// x: [rows][C][H][W], y and argmax: [rows][C][OH][OW] (NCHW); one thread per output
__global__ void k_pool_fwd(dt_pool_cfg c, size_t n, const float *x, float *y, int *argmax)
{
    size_t plane_out = (size_t)c.oh * c.ow;
    FOR_EACH(o, n)
    {
        size_t p = o / plane_out;
        int ij = (int)(o % plane_out), at;
        y[o] = ew_pool_fwd(x + p * c.h * c.w, c.h, c.w, ij / c.ow, ij % c.ow, c.kh, c.kw, c.sh, c.sw, c.pt, c.pl, c.max,
                           &at);
        if (argmax) argmax[o] = at;
    }
}

// dy, argmax: [rows][C][OH][OW]; dx: [rows][C][H][W]; one thread per input element
__global__ void k_pool_bwd(dt_pool_cfg c, size_t n, const float *dy, const int *argmax, float *dx, float beta)
{
    size_t plane_in = (size_t)c.h * c.w, plane_out = (size_t)c.oh * c.ow;
    FOR_EACH(e, n)
    {
        size_t p = e / plane_in;
        int yx = (int)(e % plane_in);
        float g = ew_pool_bwd(dy + p * plane_out, argmax ? argmax + p * plane_out : NULL, c.h, c.w, c.oh, c.ow,
                              yx / c.w, yx % c.w, c.kh, c.kw, c.sh, c.sw, c.pt, c.pl, c.max);
        dx[e] = ew_put(dx[e], g, beta);
    }
}

// x, y: [rows][C][H][W]; one thread per element, reading its channel window at its pixel
__global__ void k_lrn_fwd(dt_lrn_cfg c, size_t n, const float *x, float *y)
{
    size_t hw = (size_t)c.h * c.w;
    FOR_EACH(e, n)
    {
        size_t base = e / (hw * c.c) * hw * c.c + e % hw;
        y[e] = ew_lrn_fwd(x + base, hw, c.c, (int)(e / hw % c.c), c.size, c.alpha, c.beta, c.k);
    }
}

__global__ void k_lrn_bwd(dt_lrn_cfg c, size_t n, const float *x, const float *dy, float *dx, float beta)
{
    size_t hw = (size_t)c.h * c.w;
    FOR_EACH(e, n)
    {
        size_t base = e / (hw * c.c) * hw * c.c + e % hw;
        dx[e] = ew_put(
            dx[e], ew_lrn_bwd(x + base, dy + base, hw, c.c, (int)(e / hw % c.c), c.size, c.alpha, c.beta, c.k), beta);
    }
}

// x: [rows][C][H][W]; y: [rows][O][OH][OW]; one thread per output
__global__ void k_shortcut_fwd(dt_shortcut_cfg c, size_t n, const float *x, float *y)
{
    FOR_EACH(o, n)
    {
        int j = (int)(o % c.ow), i = (int)(o / c.ow % c.oh), oc = (int)(o / ((size_t)c.ow * c.oh) % c.o);
        int r = (int)(o / ((size_t)c.ow * c.oh * c.o));
        long long at = ew_shortcut_src(r, oc, i, j, c.c, c.h, c.w, c.front, c.stride);
        y[o] = at < 0 ? 0.0f : x[at];
    }
}

__global__ void k_shortcut_bwd(dt_shortcut_cfg c, size_t n, const float *dy, float *dx, float beta)
{
    FOR_EACH(e, n)
    {
        int xx = (int)(e % c.w), yy = (int)(e / c.w % c.h), ch = (int)(e / ((size_t)c.w * c.h) % c.c);
        int r = (int)(e / ((size_t)c.w * c.h * c.c));
        long long at = ew_shortcut_dst(r, ch, yy, xx, c.o, c.oh, c.ow, c.front, c.stride);
        dx[e] = ew_put(dx[e], at < 0 ? 0.0f : dy[at], beta);
    }
}

extern "C" {

int cuk_relu_fwd(cudaStream_t s, float *y, const float *x, size_t n) { LAUNCH(k_relu_fwd, n, s, y, x, n); }

int cuk_relu_bwd(cudaStream_t s, float *dx, const float *dy, const float *y, size_t n, float beta)
{
    LAUNCH(k_relu_bwd, n, s, dx, dy, y, n, beta);
}

int cuk_dropout(cudaStream_t s, float *y, const float *x, size_t n, uint64_t base, float p, uint64_t key, float beta)
{
    LAUNCH(k_dropout, n, s, y, x, n, base, ew_dropout_thresh(p), ew_dropout_scale(p), key, beta);
}

int cuk_bias_add(cudaStream_t s, float *y, const float *b, int rows, int cols, int hw)
{
    size_t n = (size_t)rows * cols * hw;
    LAUNCH(k_bias_add, n, s, y, b, n, cols, hw);
}

int cuk_bias_grad(cudaStream_t s, float *db, const float *dy, int rows, int cols, float beta)
{
    LAUNCH(k_bias_grad, (size_t)cols, s, db, dy, rows, cols, beta);
}

int cuk_softmax_xent_fwd(cudaStream_t s, float *prob, const float *logits, const int32_t *labels, int rows,
                         int classes, double *loss, int *correct)
{
    LAUNCH(k_softmax_xent_fwd, (size_t)rows, s, prob, logits, labels, rows, classes, loss, correct);
}

int cuk_softmax_xent_bwd(cudaStream_t s, float *dx, const float *prob, const int32_t *labels, int rows, int classes,
                         float scale, float beta)
{
    size_t n = (size_t)rows * classes;
    LAUNCH(k_softmax_xent_bwd, n, s, dx, prob, labels, n, classes, scale, beta);
}

int cuk_sgd(cudaStream_t s, float *w, const float *g, float *v, size_t n, float lr, float m, float wd, int nesterov)
{
    LAUNCH(k_sgd, n, s, w, g, v, n, lr, m, wd, nesterov);
}

int cuk_scale(cudaStream_t s, float *x, float a, size_t n) { LAUNCH(k_scale, n, s, x, a, n); }

int cuk_add(cudaStream_t s, float *y, const float *x, size_t n, float beta) { LAUNCH(k_add, n, s, y, x, n, beta); }

int cuk_add2(cudaStream_t s, float *y, const float *a, const float *b, size_t n, int relu)
{
    LAUNCH(k_add2, n, s, y, a, b, n, relu);
}

int cuk_to_lowp(cudaStream_t s, int fp16, const float *x, size_t rows, size_t cols, size_t ld, uint16_t *out)
{
    if (ld == cols) LAUNCH(k_to_lowp, rows * cols, s, fp16, x, rows * cols, out);
    LAUNCH(k_to_lowp_rows, rows * cols, s, fp16, x, rows, cols, ld, out);
}

int cuk_from_lowp(cudaStream_t s, int fp16, float *y, const uint16_t *v, size_t n, float beta)
{
    LAUNCH(k_from_lowp, n, s, fp16, y, v, n, beta);
}

int cuk_unscale(cudaStream_t s, float *g, float a, size_t n, int32_t *flag) { LAUNCH(k_unscale, n, s, g, a, n, flag); }
int cuk_bn_running(cudaStream_t s, float *rmean, float *rvar, const float *mean, const float *var, size_t n, float m,
                   double unbias)
{
    LAUNCH(k_bn_running, n, s, rmean, rvar, mean, var, n, m, unbias);
}

int cuk_pool_fwd(cudaStream_t s, const dt_pool_cfg *c, int rows, const float *x, float *y, int *argmax)
{
    size_t n = (size_t)rows * c->c * c->oh * c->ow;
    LAUNCH(k_pool_fwd, n, s, *c, n, x, y, argmax);
}

int cuk_pool_bwd(cudaStream_t s, const dt_pool_cfg *c, int rows, const float *dy, const int *argmax, float *dx,
                 float beta)
{
    size_t n = (size_t)rows * c->c * c->h * c->w;
    LAUNCH(k_pool_bwd, n, s, *c, n, dy, argmax, dx, beta);
}

int cuk_lrn_fwd(cudaStream_t s, const dt_lrn_cfg *c, int rows, const float *x, float *y)
{
    size_t n = (size_t)rows * c->c * c->h * c->w;
    LAUNCH(k_lrn_fwd, n, s, *c, n, x, y);
}

int cuk_lrn_bwd(cudaStream_t s, const dt_lrn_cfg *c, int rows, const float *x, const float *dy, float *dx, float beta)
{
    size_t n = (size_t)rows * c->c * c->h * c->w;
    LAUNCH(k_lrn_bwd, n, s, *c, n, x, dy, dx, beta);
}

int cuk_shortcut_fwd(cudaStream_t s, const dt_shortcut_cfg *c, int rows, const float *x, float *y)
{
    size_t n = (size_t)rows * c->o * c->oh * c->ow;
    LAUNCH(k_shortcut_fwd, n, s, *c, n, x, y);
}

int cuk_shortcut_bwd(cudaStream_t s, const dt_shortcut_cfg *c, int rows, const float *dy, float *dx, float beta)
{
    size_t n = (size_t)rows * c->c * c->h * c->w;
    LAUNCH(k_shortcut_bwd, n, s, *c, n, dy, dx, beta);
}

} // extern "C"
