/* backend_cpu.h — what the files of the CPU backend share (backend_cpu.c: memory, GEMM,
 * elementwise kernels; backend_cpu_dnnl.c: the CNN ops, on oneDNN; backend_cpu_bn.c: batch
 * normalisation, our own). Internal to them. */
#ifndef DT_BACKEND_CPU_H
#define DT_BACKEND_CPU_H

#include <dnnl.h>

#include "backend.h"

typedef struct cpu_impl {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
} cpu_impl;

int backend_cpu_dnnl_init(dt_backend *be);
/* batch normalisation with double per-channel sums (backend_cpu_bn.c); arguments as bn_fwd and
 * bn_bwd of backend.h */
int cpu_bn_forward(const dt_bn_cfg *cfg, int n_threads, int rows, int train, const float *x, const float *scale,
                   const float *shift, float *mean, float *var, float *y);
int cpu_bn_backward(const dt_bn_cfg *cfg, int n_threads, int rows, const float *x, const float *scale,
                    const float *mean, const float *var, const float *dy, float *dx, float dx_beta, float *dscale,
                    float *dshift);
void backend_cpu_dnnl_fini(dt_backend *be);

#endif
