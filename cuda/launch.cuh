// launch — the shape every kernel of this backend runs in: a grid-stride loop over its units of
// work (an element, a row, a pixel), THREADS threads a block, at most 65536 blocks. Included by the
// .cu files only.
#ifndef DT_CUDA_LAUNCH_CUH
#define DT_CUDA_LAUNCH_CUH

#include <stddef.h>

#define THREADS 256

static inline unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > 65536) b = 65536;
    return b ? (unsigned)b : 1u;
}

#define FOR_EACH(i, n)                                                                                                 \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

#endif
