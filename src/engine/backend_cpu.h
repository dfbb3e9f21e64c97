/* backend_cpu.h — what the two files of the CPU backend share (backend_cpu.c: memory, GEMM,
 * elementwise kernels; backend_cpu_dnnl.c: the CNN ops on oneDNN). Internal to them. */
#ifndef DT_BACKEND_CPU_H
#define DT_BACKEND_CPU_H

#include <dnnl.h>

#include "backend.h"

typedef struct cpu_impl {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
} cpu_impl;

int backend_cpu_dnnl_init(dt_backend *be);
void backend_cpu_dnnl_fini(dt_backend *be);

#endif
