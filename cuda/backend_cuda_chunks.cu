// backend_cuda_chunks — csc on the GPU (the twin of src/comm/chunks.c): the correction and packing of
// the important chunks, and after the allreduce the fold of every chunk with its L1 norm; the CPU's
// bits for the same input.
//
// Both are masked kernels over the whole arena (or a range of it, as backward finishes it), not a
// launch per chunk: slot[c], the chunk's place among the packed ones or -1, says what each value does.
// The fold runs a warp per chunk: lane j takes the chunk's values j, j + 32, ... in turn and the lanes'
// sums are added by shuffles down, 16 apart, then 8, ..., the order chunks_l1 keeps on the CPU. The
// per-value arithmetic is elementwise.h's (ew_csc_correct, ew_csc_pack, ew_csc_lane, ew_csc_norm),
// which tests/check_cuda_twins.c runs on the host against chunks.c. Compiled with -ftz=true, as the CPU
// flushes subnormals.
#include "backend_cuda.h"
#include "elementwise.h"
#include "launch.cuh"

__global__ void k_csc_pack(float *g, const float *h, const float *w, float wd, size_t lo, size_t hi, size_t chunk,
                           const int32_t *slot, float scale, float limit, float *pack)
{
    FOR_EACH(t, hi - lo)
    {
        size_t i = lo + t, c = i / chunk;
        float v = ew_csc_correct(g[i], h[i], wd != 0.0f ? w[i] : 0.0f, wd);
        int32_t s = slot[c];
        g[i] = v;
        if (s >= 0) pack[(size_t)s * chunk + (i - c * chunk)] = ew_csc_pack(v, scale, limit);
    }
}

// a warp per chunk (the grid's threads come in whole warps: t % 32 is the lane)
__global__ void k_csc_fold(float *g, float *h, float *hu, float *w, const float *pack, const int32_t *slot, size_t n,
                           size_t chunk, size_t n_chunks, int p, float m, float lr, float *norms)
{
    FOR_EACH(t, n_chunks * 32)
    {
        size_t c = t / 32, a = c * chunk, len = a + chunk <= n ? chunk : n - a;
        int j = (int)(t % 32);
        int32_t s = slot[c];
        const float *sum = s >= 0 ? pack + (size_t)s * chunk : NULL;
        float l = ew_csc_lane(g + a, h + a, hu ? hu + a : NULL, hu ? w + a : NULL, sum, len, j, m, lr);
        for (int off = 16; off > 0; off /= 2) l = EW_ADD(l, __shfl_down_sync(0xffffffffu, l, off));
        if (j == 0) norms[c] = ew_csc_norm(l, s >= 0, p);
    }
}

extern "C" {

int cuk_csc_pack(cudaStream_t s, float *g, const float *h, const float *w, float wd, size_t lo, size_t hi, size_t chunk,
                 const int32_t *slot, float scale, float limit, float *pack)
{
    if (hi <= lo) return 0;
    k_csc_pack<<<blocks_for(hi - lo), THREADS, 0, s>>>(g, h, w, wd, lo, hi, chunk, slot, scale, limit, pack);
    return cudaGetLastError();
}

int cuk_csc_fold(cudaStream_t s, float *g, float *h, float *hu, float *w, const float *pack, const int32_t *slot,
                 size_t n, size_t chunk, int p, float m, float lr, float *norms)
{
    size_t n_chunks = (n + chunk - 1) / chunk;
    if (n == 0) return 0;
    k_csc_fold<<<blocks_for(n_chunks * 32), THREADS, 0, s>>>(g, h, hu, w, pack, slot, n, chunk, n_chunks, p, m, lr,
                                                             norms);
    return cudaGetLastError();
}

} // extern "C"
