// backend_cuda_sparse — the sparse modes' work on the GPU (the twin of src/comm/memory.c and of
// topk_select in src/comm/sparse.c): residuals, top-k selection and sparse updates.
//
// The residual arithmetic is elementwise.h's (ew_velocity, ew_pair: every product and sum rounded
// on its own, as memory.c), so the GPU's residuals equal the CPU's bit for bit. Top-k sorts the
// keys |x| (as their bits) with their indices by CUB's radix sort, which is stable: equal keys keep
// index order, so ties go to the lower index as on the CPU; the k winners are sorted by index
// again (CUB) and gathered. Compiled -ftz=true, as the CPU flushes subnormals.
#include <cub/cub.cuh>

#include "backend_cuda.h"
#include "elementwise.h"
#include "launch.cuh"

struct cu_pair { // comm/sparse.h's dt_pair
    uint32_t i;
    float v;
};

__global__ void k_residual_plain(float *r, const float *g, size_t n)
{
    FOR_EACH(i, n) r[i] = EW_ADD(r[i], g[i]);
}

__global__ void k_residual_corrected(float *r, float *u, const float *g, const float *w, size_t n, float m, float wd)
{
    FOR_EACH(i, n) {
        float v = ew_velocity(u[i], g[i], w[i], m, wd);
        u[i] = v;
        r[i] = EW_ADD(r[i], v);
    }
}

__global__ void k_topk_keys(uint32_t *key, uint32_t *idx, const float *x, size_t n)
{
    FOR_EACH(i, n) {
        key[i] = ew_topk_key(x[i]);
        idx[i] = (uint32_t)i;
    }
}

__global__ void k_topk_gather(cu_pair *out, const uint32_t *idx, const float *x, size_t k)
{
    FOR_EACH(j, k) out[j] = cu_pair{idx[j], x[idx[j]]};
}

__global__ void k_pairs_apply(float *x, const cu_pair *p, size_t k, int how, float a)
{
    FOR_EACH(j, k) x[p[j].i] = ew_pair(x[p[j].i], p[j].v, how, a);
}

extern "C" int cuk_residual_add(cudaStream_t s, float *r, float *u, const float *g, const float *w, size_t n, float m,
                                float wd)
{
    if (n == 0) return 0;
    if (u) k_residual_corrected<<<blocks_for(n), THREADS, 0, s>>>(r, u, g, w, n, m, wd);
    else k_residual_plain<<<blocks_for(n), THREADS, 0, s>>>(r, g, n);
    return (int)cudaGetLastError();
}

extern "C" int cuk_pairs_apply(cudaStream_t s, float *x, const void *pairs, size_t k, int how, float a)
{
    if (k == 0) return 0;
    k_pairs_apply<<<blocks_for(k), THREADS, 0, s>>>(x, (const cu_pair *)pairs, k, how, a);
    return (int)cudaGetLastError();
}

// Scratch from the stream-ordered allocator: keys and indices in and out (4 n words) and CUB's
// temporary storage for the larger of the two sorts.
extern "C" int cuk_topk(cudaStream_t s, const float *x, size_t n, size_t k, void *pairs)
{
    if (k == 0) return 0;
    if (n > 0x7fffffffu || k > n) return (int)cudaErrorInvalidValue;
    int ni = (int)n, ki = (int)k;
    uint32_t *key_in = NULL, *key_out, *idx_in, *idx_out;
    size_t t1 = 0, t2 = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairsDescending(NULL, t1, key_in, key_in, key_in, key_in, ni, 0, 31, s);
    if (e == cudaSuccess) e = cub::DeviceRadixSort::SortKeys(NULL, t2, key_in, key_in, ki, 0, 32, s);
    if (e != cudaSuccess) return (int)e;
    size_t temp = ((t1 > t2 ? t1 : t2) + 255) / 256 * 256;
    char *base = NULL;
    if ((e = cudaMallocAsync((void **)&base, temp + 4 * n * sizeof(uint32_t), s)) != cudaSuccess) return (int)e;
    void *tmp = base; // CUB's storage first, at the allocation's alignment
    key_in = (uint32_t *)(base + temp), key_out = key_in + n, idx_in = key_out + n, idx_out = idx_in + n;
    k_topk_keys<<<blocks_for(n), THREADS, 0, s>>>(key_in, idx_in, x, n);
    e = cudaGetLastError();
    // largest key first; equal keys stay in index order (a stable sort)
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortPairsDescending(tmp, t1, key_in, key_out, idx_in, idx_out, ni, 0, 31, s);
    // the k winners' indices in increasing order (into key_in, free now)
    if (e == cudaSuccess) e = cub::DeviceRadixSort::SortKeys(tmp, t2, idx_out, key_in, ki, 0, 32, s);
    if (e == cudaSuccess) {
        k_topk_gather<<<blocks_for(k), THREADS, 0, s>>>((cu_pair *)pairs, key_in, x, k);
        e = cudaGetLastError();
    }
    cudaError_t f = cudaFreeAsync(base, s);
    return (int)(e != cudaSuccess ? e : f);
}
