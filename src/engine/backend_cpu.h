/* backend_cpu.h — what the files of the CPU backend share (backend_cpu.c: memory, GEMM,
 * elementwise kernels; backend_cpu_dnnl.c: the CNN ops, on oneDNN; our own loops where oneDNN's
 * do not serve: backend_cpu_bn.c batch normalisation, backend_cpu_lrn.c LRN where oneDNN has no
 * fast kernel, backend_cpu_pool.c NCHW pooling). Internal to them. */
#ifndef DT_BACKEND_CPU_H
#define DT_BACKEND_CPU_H

#include <dnnl.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"

/* Loops over fewer than CPU_PAR_MIN values stay on the calling thread: waking the pool costs more */
#define CPU_PAR_MIN 32768
static inline int cpu_threads_for(int n_threads, size_t work)
{
    return work >= CPU_PAR_MIN && n_threads > 1 ? n_threads : 1;
}

/* bfloat16 of f, rounded to nearest even (as the CPU's vcvtneps2bf16); a NaN stays a (quiet) NaN */
static inline uint16_t cpu_bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* the float a bfloat16 stands for (exactly: its upper half) */
static inline float cpu_float_of_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct cpu_impl {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    int bf16;                 /* --precision bf16: GEMMs and convolutions on bf16 inputs */
    int nhwc;                 /* activations of 16k channels NHWC, not nChw16c (layout_for) */
    int nhwc_max_ours;        /* NHWC max pooling in our loops, not oneDNN's (backend_cpu_pool.c) */
    struct gemm_bf16 *gemm;   /* bf16 GEMMs' primitives by shape (backend_cpu_dnnl.c) */
    uint16_t *ab16;           /* the operands of the last bf16 GEMM, rounded */
    size_t ab16_n;
} cpu_impl;

int backend_cpu_dnnl_init(dt_backend *be);
/* batch normalisation with double per-channel sums (backend_cpu_bn.c); arguments as bn_fwd and
 * bn_bwd of backend.h */
int cpu_bn_forward(const dt_bn_cfg *cfg, int n_threads, int rows, int train, const float *x, const float *scale,
                   const float *shift, float *mean, float *var, float *y);
int cpu_bn_backward(const dt_bn_cfg *cfg, int n_threads, int rows, const float *x, const float *scale,
                    const float *mean, const float *var, const float *dy, const float *y, float *dx, float dx_beta,
                    float *dscale, float *dshift);
/* LRN in our own loops, every layout (backend_cpu_lrn.c; taken where oneDNN has only its
 * reference code); arguments as lrn_fwd and lrn_bwd of backend.h */
int cpu_lrn_forward(const dt_lrn_cfg *cfg, int n_threads, int rows, const float *x, float *y);
int cpu_lrn_backward(const dt_lrn_cfg *cfg, int n_threads, int rows, const float *x, const float *dy, float *dx,
                     float dx_beta);
/* pooling of NCHW activations, and max pooling of NHWC ones, in our own loops
 * (backend_cpu_pool.c): forward as pool_fwd of backend.h, argmax (max pooling in training; else NULL) receiving where
 * each maximum came from, which backward takes */
int cpu_pool_forward(const dt_pool_cfg *cfg, int n_threads, int rows, const float *x, float *y, int32_t *argmax);
int cpu_pool_backward(const dt_pool_cfg *cfg, int n_threads, int rows, const int32_t *argmax, const float *dy,
                      float *dx, float dx_beta);
/* cpu_pool_forward without its AVX2 loop (NHWC max pooling): what CPUs without AVX2 run, for tests */
int cpu_pool_forward_portable(const dt_pool_cfg *cfg, int n_threads, int rows, const float *x, float *y,
                              int32_t *argmax);
void backend_cpu_dnnl_fini(dt_backend *be);
/* C = alpha * op(A) op(B) + beta * C as backend.h's gemm, with A and B rounded to bf16 and the
 * products summed in fp32 (oneDNN's matmul) */
int cpu_gemm_bf16(dt_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);
/* dst[r][c] = src[r * ld + c] rounded to bfloat16 (to nearest even, as the CPU's vcvtneps2bf16) */
void cpu_round_bf16(int n_threads, uint16_t *dst, const float *src, size_t rows, size_t cols, size_t ld);
/* 1 when oneDNN runs bf16 on this CPU's own instructions (AVX512_BF16 or AMX) */
int cpu_has_bf16(void);
/* 1 when oneDNN has AMX here (its bf16 convolutions then want channels-last activations) */
int cpu_has_amx(void);
/* oneDNN's AVX-512 kernels run here (else the activations stay NHWC: see backend_cpu_create_with) */
int cpu_has_avx512(void);

#endif
