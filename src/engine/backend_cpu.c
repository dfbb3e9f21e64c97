/* The CPU backend: host memory, GEMM, elementwise kernels as plain loops.
 *
 * GEMMs run on oneDNN's sgemm, like the convolutions (backend_cpu_dnnl.c), so everything runs on
 * one OpenMP thread pool. With OpenBLAS's own pthread pool beside it, the two pools' idle
 * threads spun against each other: mlp at 2 threads ran at 12.8k samples/s with OpenBLAS and
 * 68-100k with oneDNN's sgemm; at 1 thread oneDNN is as fast or 5% faster (measured for issue #3).
 *
 * Hot elementwise loops are compiled three times (AVX-512, AVX2, baseline x86-64) and the best
 * one is picked at load time, so one binary runs everywhere and uses the full vector width
 * where it exists. Memory-bound loops (the optimizer over the whole arena) are fused into one
 * pass: each of w, g, v is read once and written at most once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu.h"
#include "../rng.h"
#include "../util.h"
#include "backend.h"
#include "backend_cpu.h"

#include <omp.h>

/* Elementwise loops over large arrays run on oneDNN's OpenMP pool (the backend's threads), each
 * thread on a contiguous range through a kernel compiled for the CPU's vector width. Below
 * CPU_PAR_MIN elements the loop stays on the calling thread (cpu_threads_for). */

#define PAR_RANGE(be, n, body)                                                                                         \
    do {                                                                                                               \
        int nt_ = cpu_threads_for((be)->n_threads, (n));                                                               \
        if (nt_ <= 1) {                                                                                                \
            size_t a = 0, b = (n);                                                                                     \
            body;                                                                                                      \
        } else {                                                                                                       \
            _Pragma("omp parallel for schedule(static) num_threads(nt_)") for (int t_ = 0; t_ < nt_; t_++)             \
            {                                                                                                          \
                size_t a = (n) * (size_t)t_ / (size_t)nt_ / 16 * 16,                                                   \
                       b = t_ + 1 == nt_ ? (n) : (n) * (size_t)(t_ + 1) / (size_t)nt_ / 16 * 16;                       \
                body;                                                                                                  \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

static void *cpu_alloc(dt_backend *be, size_t bytes)
{
    (void)be;
    return dt_zalloc(bytes);
}

static void cpu_free(dt_backend *be, void *p)
{
    (void)be;
    dt_free(p);
}

/* large copies between buffers that do not overlap on all the backend's threads, as the other
 * elementwise loops (one thread's memmove was 2.7% of a resnet20 iteration: add's forward copies) */
static int cpu_copy(dt_backend *be, void *dst, const void *src, size_t bytes)
{
    if (dst == src || !bytes) return 0;
    const char *d = dst, *s = src;
    if (bytes / sizeof(float) < CPU_PAR_MIN || (d < s + bytes && s < d + bytes)) {
        memmove(dst, src, bytes);
        return 0;
    }
    PAR_RANGE(be, bytes, memcpy((char *)dst + a, s + a, b - a));
    return 0;
}

static int cpu_sync(dt_backend *be)
{
    (void)be;
    return 0;
}

static int cpu_memory(dt_backend *be, size_t *free_bytes, size_t *total_bytes)
{
    (void)be;
    return dt_host_memory(free_bytes, total_bytes);
}

static int cpu_gemm(dt_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return 0;
    if (k > 0 && ((cpu_impl *)be->impl)->bf16)
        return cpu_gemm_bf16(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (k <= 0) { /* C = beta*C, which a GEMM with k = 0 means but not every library accepts */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
        return 0;
    }
    dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (s != dnnl_success)
        return dt_fail("oneDNN sgemm %c%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d: status %d", ta ? 'T' : 'N',
                       tb ? 'T' : 'N', m, n, k, lda, ldb, ldc, (int)s);
    return 0;
}

DT_CLONES static void round_rows(uint16_t *restrict dst, const float *restrict src, size_t r0, size_t r1, size_t cols,
                                 size_t ld)
{
    for (size_t r = r0; r < r1; r++) {
#pragma omp simd
        for (size_t c = 0; c < cols; c++) dst[r * cols + c] = cpu_bf16_of(src[r * ld + c]);
    }
}

void cpu_round_bf16(int n_threads, uint16_t *dst, const float *src, size_t rows, size_t cols, size_t ld)
{
    int nt = rows > 1 ? cpu_threads_for(n_threads, rows * cols) : 1;
    if (nt <= 1) {
        round_rows(dst, src, 0, rows, cols, ld);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int t = 0; t < nt; t++) round_rows(dst, src, rows * t / nt, rows * (t + 1) / nt, cols, ld);
}

/* oneDNN's ISA values are bit sets: one includes another's bits */
static int has_isa(dnnl_cpu_isa_t want)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)want) == (unsigned)want;
}

int cpu_has_bf16(void) { return has_isa(dnnl_cpu_isa_avx512_core_bf16); }
int cpu_has_avx512(void) { return has_isa(dnnl_cpu_isa_avx512_core); }
int cpu_has_amx(void) { return has_isa(dnnl_cpu_isa_avx512_core_amx); }

DT_CLONES static int cpu_bias_add(dt_backend *be, float *y, const float *b, int rows, int cols)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        float *restrict yr = y + (size_t)r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++) yr[c] += b[c];
    }
    return 0;
}

DT_CLONES static int cpu_bias_grad(dt_backend *be, float *db, const float *dy, int rows, int cols, float beta)
{
    (void)be;
    if (beta == 0.0f) memset(db, 0, sizeof(float) * (size_t)cols);
    for (int r = 0; r < rows; r++) {
        const float *restrict d = dy + (size_t)r * cols;
        float *restrict o = db;
#pragma omp simd
        for (int c = 0; c < cols; c++) o[c] += d[c];
    }
    return 0;
}

DT_CLONES static void relu_fwd(float *restrict y, const float *restrict x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static int cpu_relu_fwd(dt_backend *be, float *y, const float *x, size_t n)
{
    PAR_RANGE(be, n, relu_fwd(y + a, x + a, b - a));
    return 0;
}

DT_CLONES static void relu_bwd(float *restrict dx, const float *restrict dy, const float *restrict y, size_t n,
                               float beta)
{
    if (beta == 0.0f) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

static int cpu_relu_bwd(dt_backend *be, float *dx, const float *dy, const float *y, size_t n, float beta)
{
    PAR_RANGE(be, n, relu_bwd(dx + a, dy + a, y + a, b - a, beta));
    return 0;
}

/* keep element with probability 1-p: compare 24 hash bits with p * 2^24 */
static inline int dropout_keep(uint64_t key, uint64_t idx, uint32_t thresh)
{
    return (uint32_t)(rng_hash(key, idx) >> 40) >= thresh;
}

static int cpu_dropout_fwd(dt_backend *be, float *y, const float *x, int rows, int cols, float p, uint64_t key,
                            int64_t row0)
{
    (void)be;
    uint32_t thresh = (uint32_t)(p * 16777216.0f);
    float s = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (int r = 0; r < rows; r++) {
        uint64_t base = (uint64_t)(row0 + r) * (uint64_t)cols;
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            y[i] = dropout_keep(key, base + (uint64_t)c, thresh) ? x[i] * s : 0.0f;
        }
    }
    return 0;
}

static int cpu_dropout_bwd(dt_backend *be, float *dx, const float *dy, int rows, int cols, float p, uint64_t key,
                            int64_t row0, float beta)
{
    (void)be;
    uint32_t thresh = (uint32_t)(p * 16777216.0f);
    float s = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (int r = 0; r < rows; r++) {
        uint64_t base = (uint64_t)(row0 + r) * (uint64_t)cols;
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            float v = dropout_keep(key, base + (uint64_t)c, thresh) ? dy[i] * s : 0.0f;
            dx[i] = beta == 0.0f ? v : dx[i] + v;
        }
    }
    return 0;
}

static int cpu_softmax_xent_fwd(dt_backend *be, float *prob, const float *logits, const int32_t *labels, int rows,
                                 int classes, double *loss_sum, int64_t *n_correct)
{
    (void)be;
    double loss = 0.0;
    int64_t correct = 0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * classes;
        float *p = prob + (size_t)r * classes;
        int arg = 0;
        float mx = z[0];
        for (int c = 1; c < classes; c++)
            if (z[c] > mx) mx = z[c], arg = c;
        float sum = 0.0f;
        for (int c = 0; c < classes; c++) {
            p[c] = expf(z[c] - mx);
            sum += p[c];
        }
        float inv = 1.0f / sum;
        for (int c = 0; c < classes; c++) p[c] *= inv;
        /* log-sum-exp form: exact even when prob[label] underflows */
        loss += (double)logf(sum) + (double)mx - (double)z[labels[r]];
        correct += arg == labels[r];
    }
    *loss_sum += loss;
    *n_correct += correct;
    return 0;
}

static int cpu_softmax_xent_bwd(dt_backend *be, float *dx, const float *prob, const int32_t *labels, int rows,
                                 int classes, float scale, float beta)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *p = prob + (size_t)r * classes;
        float *d = dx + (size_t)r * classes;
        for (int c = 0; c < classes; c++) {
            float v = scale * (p[c] - (c == labels[r] ? 1.0f : 0.0f));
            d[c] = beta == 0.0f ? v : d[c] + v;
        }
    }
    return 0;
}

DT_CLONES static void sgd_step(float *restrict w, const float *restrict g, float *restrict v, size_t n, float lr,
                               float m, float wd, int nesterov)
{
    if (m == 0.0f || !v) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
    } else if (!nesterov) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float vi = m * v[i] + (g[i] + wd * w[i]); /* PyTorch's order: d = g + wd w first */
            v[i] = vi;
            w[i] -= lr * vi;
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + wd * w[i];
            float vi = m * v[i] + d;
            v[i] = vi;
            w[i] -= lr * (d + m * vi);
        }
    }
}

static int cpu_sgd_step(dt_backend *be, float *w, const float *g, float *v, size_t n, float lr, float m, float wd,
                         int nesterov)
{
    PAR_RANGE(be, n, sgd_step(w + a, g + a, v ? v + a : NULL, b - a, lr, m, wd, nesterov));
    return 0;
}

DT_CLONES static void add(float *restrict y, const float *restrict x, size_t n, float beta)
{
    if (beta == 0.0f) {
        memcpy(y, x, n * sizeof(float));
        return;
    }
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = beta * y[i] + x[i];
}

static int cpu_add(dt_backend *be, float *y, const float *x, size_t n, float beta)
{
    if (beta == 0.0f && y == x) return 0;
    PAR_RANGE(be, n, add(y + a, x + a, b - a, beta));
    return 0;
}

/* a + b is what a copy of a and an add of b (1 * a + b) give; relu_fwd's select after it */
DT_CLONES static void add2(float *restrict y, const float *restrict u, const float *restrict v, size_t n, int relu)
{
    if (relu) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float s = u[i] + v[i];
            y[i] = s > 0.0f ? s : 0.0f;
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] = u[i] + v[i];
    }
}

static int cpu_add2(dt_backend *be, float *y, const float *u, const float *v, size_t n, int relu)
{
    PAR_RANGE(be, n, add2(y + a, u + a, v + a, b - a, relu));
    return 0;
}

/* add2 on the residual stream in bf16 (DT_ADD2_*): the operands' floats, add2's sum and select, y
 * rounded as cpu_bf16_of; each combination of flags its own loop (the flags constants in it) */
static inline __attribute__((always_inline)) void add2_bf16_body(void *restrict y, const void *restrict u,
                                                                 const void *restrict v, size_t i0, size_t i1,
                                                                 const int relu, const int ub, const int vb,
                                                                 const int yb)
{
    const float *uf = u, *vf = v;
    const uint16_t *uh = u, *vh = v;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
        float s = (ub ? cpu_float_of_bf16(uh[i]) : uf[i]) + (vb ? cpu_float_of_bf16(vh[i]) : vf[i]);
        if (relu) s = s > 0.0f ? s : 0.0f;
        if (yb)
            ((uint16_t *)y)[i] = cpu_bf16_of(s);
        else
            ((float *)y)[i] = s;
    }
}

DT_CLONES static void add2_bf16(void *restrict y, const void *restrict u, const void *restrict v, size_t i0, size_t i1,
                                int flags)
{
    _Static_assert(DT_ADD2_RELU == 1 && DT_ADD2_A_BF16 == 2 && DT_ADD2_B_BF16 == 4 && DT_ADD2_Y_BF16 == 8, "bits");
#define ADD2_CASE(f)                                                                                                   \
    case f:                                                                                                            \
        add2_bf16_body(y, u, v, i0, i1, (f) % 2, (f) / 2 % 2, (f) / 4 % 2, (f) / 8);                                   \
        break;
#define ADD2_CASES4(f) ADD2_CASE(f) ADD2_CASE((f) + 1) ADD2_CASE((f) + 2) ADD2_CASE((f) + 3)
    switch (flags & 15) {
        ADD2_CASES4(0) ADD2_CASES4(4) ADD2_CASES4(8) ADD2_CASES4(12)
    }
#undef ADD2_CASES4
#undef ADD2_CASE
}

static int cpu_add2_bf16(dt_backend *be, void *y, const void *u, const void *v, size_t n, int flags)
{
    if (flags & ~15) return dt_fail("internal: add2_bf16: flags %#x", (unsigned)flags);
    PAR_RANGE(be, n, add2_bf16(y, u, v, a, b, flags));
    return 0;
}

/* relu_bwd with y in bf16: y > 0 where the float it stands for is */
DT_CLONES static void relu_bwd_bf16(float *restrict dx, const float *restrict dy, const uint16_t *restrict y, size_t n,
                                    float beta)
{
    if (beta == 0.0f) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] = cpu_float_of_bf16(y[i]) > 0.0f ? dy[i] : 0.0f;
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] += cpu_float_of_bf16(y[i]) > 0.0f ? dy[i] : 0.0f;
    }
}

static int cpu_relu_bwd_bf16(dt_backend *be, float *dx, const float *dy, const void *y, size_t n, float beta)
{
    const uint16_t *yh = y;
    PAR_RANGE(be, n, relu_bwd_bf16(dx + a, dy + a, yh + a, b - a, beta));
    return 0;
}

/* a layer's channels: few, so one thread; never fused, as the contract says (cuda/elementwise.h,
 * ew_bn_running, is the GPU's twin) */
DT_NO_CONTRACT static int cpu_bn_running(dt_backend *be, float *rmean, float *rvar, const float *mean, const float *var,
                                         size_t n, float m, double unbias)
{
    (void)be;
    for (size_t i = 0; i < n; i++) {
        rmean[i] = (1.0f - m) * rmean[i] + m * mean[i];
        rvar[i] = (1.0f - m) * rvar[i] + m * (float)(var[i] * unbias);
    }
    return 0;
}

DT_CLONES static void scale(float *x, float s, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static int cpu_scale(dt_backend *be, float *x, float s, size_t n)
{
    if (s == 0.0f) {
        PAR_RANGE(be, n, memset(x + a, 0, (b - a) * sizeof *x));
        return 0;
    }
    PAR_RANGE(be, n, scale(x + a, s, b - a));
    return 0;
}

/* x *= s; 1 if a result is not finite (|x| all ones in the exponent: inf or NaN, read from the bits so
 * that no compiler's finite-math assumption drops the test) */
DT_CLONES static int unscale(float *x, float s, size_t n)
{
    uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        x[i] *= s;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

static int cpu_grad_unscale(dt_backend *be, float *g, size_t n, float a, int32_t *flag)
{
    int bad = 0;
    int nt = cpu_threads_for(be->n_threads, n);
    if (nt > 1) {
#pragma omp parallel for schedule(static) num_threads(nt) reduction(| : bad)
        for (int t = 0; t < nt; t++) {
            size_t a0 = n * (size_t)t / (size_t)nt, a1 = n * (size_t)(t + 1) / (size_t)nt;
            bad |= unscale(g + a0, a, a1 - a0);
        }
    } else {
        bad = unscale(g, a, n);
    }
    if (bad) *flag = 1;
    return 0;
}

static void cpu_destroy(dt_backend *be)
{
    if (!be) return;
    backend_cpu_dnnl_fini(be);
    free(be->impl);
    free(be);
}

int backend_cpu_create(dt_backend **out, int n_threads)
{
    dt_backend_opts o = {.n_threads = n_threads, .device = -1};
    return backend_cpu_create_with(out, &o);
}

int backend_cpu_create_with(dt_backend **out, const dt_backend_opts *o)
{
    int n_threads = o->n_threads;
    if (o->precision == DT_PRECISION_FP16)
        return dt_fail(
            "--precision fp16: the CPU backend has no fp16 GEMMs or convolutions (oneDNN 2.6 has none for "
            "CPUs), and emulated fp16 would run slower than fp32; fp16 runs on GPUs (--device cuda), bf16 on "
            "CPUs with AVX512_BF16 or AMX");
    if (o->precision == DT_PRECISION_BF16 && !cpu_has_bf16())
        return dt_fail("--precision bf16: this CPU (%s) has neither AVX512_BF16 nor AMX, and emulated bf16 "
                       "would run slower than fp32; use --precision fp32",
                       backend_cpu_describe());
    dt_backend *be = calloc(1, sizeof *be);
    cpu_impl *impl = calloc(1, sizeof *impl);
    if (!be || !impl) {
        free(be);
        free(impl);
        return dt_fail("out of memory");
    }
    be->impl = impl;
    impl->bf16 = o->precision == DT_PRECISION_BF16;
    /* oneDNN's AMX convolutions take NHWC; in nChw16c they fall back to AVX512_BF16 kernels that ran
     * resnet20 at 0.56x fp32 on a Xeon with AMX, 1.45x with NHWC (tools/bench_bf16). Without AVX-512
     * its pooling has no kernel for nChw16c (AVX2's take nChw8c or NHWC) and falls back to its
     * reference code: cifar-quick trained at 110 samples/s on an AVX2 EPYC, 590 in NHWC (resnet20
     * +8%, 1 thread) */
    impl->nhwc = o->channels_last == 1 ||
                 (o->channels_last == 0 && ((impl->bf16 && cpu_has_amx()) || !cpu_has_avx512()));
    /* oneDNN's NHWC max pooling: its AVX2 kernel 3-5x slower than our loops on an AVX2 EPYC, its
     * AVX-512 one 2-3x faster than them on an AVX-512 EPYC (cifar-quick's first pool, standalone) */
    impl->nhwc_max_ours = !cpu_has_avx512();
    be->name = "cpu";
    be->host_memory = 1;
    be->fuses_bn_relu = 1;
    be->n_threads = n_threads < 1 ? 1 : n_threads;
    be->destroy = cpu_destroy;
    be->alloc = cpu_alloc;
    be->free = cpu_free;
    be->to_device = cpu_copy;
    be->to_host = cpu_copy;
    be->copy = cpu_copy;
    be->sync = cpu_sync;
    be->memory = cpu_memory;
    be->gemm = cpu_gemm;
    be->bias_add = cpu_bias_add;
    be->bias_grad = cpu_bias_grad;
    be->relu_fwd = cpu_relu_fwd;
    be->relu_bwd = cpu_relu_bwd;
    be->dropout_fwd = cpu_dropout_fwd;
    be->dropout_bwd = cpu_dropout_bwd;
    be->softmax_xent_fwd = cpu_softmax_xent_fwd;
    be->softmax_xent_bwd = cpu_softmax_xent_bwd;
    be->sgd_step = cpu_sgd_step;
    be->scale = cpu_scale;
    be->grad_unscale = cpu_grad_unscale;
    be->add = cpu_add;
    be->add2 = cpu_add2;
    if (impl->bf16) be->add2_bf16 = cpu_add2_bf16, be->relu_bwd_bf16 = cpu_relu_bwd_bf16;
    be->bn_running = cpu_bn_running;
    omp_set_num_threads(be->n_threads);
    cpu_flush_denormals();
    if (backend_cpu_dnnl_init(be) != 0) {
        cpu_destroy(be);
        return -1;
    }
    *out = be;
    return 0;
}
