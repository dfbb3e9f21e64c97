// backend_cuda_sparse — the sparse modes' work on the GPU (the twin of src/comm/memory.c and of
// topk_select in src/comm/sparse.c): residuals, top-k selection and sparse updates.
//
// The residual arithmetic is elementwise.h's (ew_velocity, ew_pair: every product and sum rounded
// on its own, as memory.c), so the GPU's residuals equal the CPU's bit for bit. Top-k sorts the
// keys |x| (as their bits) with their indices by CUB's radix sort, which is stable: equal keys keep
// index order, so ties go to the lower index as on the CPU; the k winners are sorted by index
// again (CUB) and gathered. Compiled -ftz=true, as the CPU flushes subnormals.
//
// gTop-k's merge (sparse_merge_topk's twin): the two lists sorted together by index (CUB's stable
// radix sort: where an index meets, a's entry comes first), a's value + b's where it meets (the
// CPU's one addition), the union compacted (CUB), and where it holds more than k, the top-k above
// on the union's values (its positions are in index order, so ties go to the lower index) with
// the positions mapped back to indices.
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

__global__ void k_merge_split(uint32_t *key, float *val, const cu_pair *a, size_t na, const cu_pair *b, size_t nb)
{
    FOR_EACH(j, na + nb) {
        cu_pair p = j < na ? a[j] : b[j - na];
        key[j] = p.i;
        val[j] = p.v;
    }
}

// where an index begins (a head), its value: a's + b's where both hold it
__global__ void k_merge_heads(uint32_t *flag, float *sum, const uint32_t *key, const float *val, size_t m)
{
    FOR_EACH(j, m) {
        int head = j == 0 || key[j - 1] != key[j];
        flag[j] = (uint32_t)head;
        sum[j] = head && j + 1 < m && key[j + 1] == key[j] ? EW_ADD(val[j], val[j + 1]) : val[j];
    }
}

__global__ void k_merge_pack(cu_pair *out, const uint32_t *key, const float *val, size_t u)
{
    FOR_EACH(j, u) out[j] = cu_pair{key[j], val[j]};
}

// the top-k's pairs name positions in the union: their indices instead
__global__ void k_merge_index(cu_pair *out, const cu_pair *top, const uint32_t *key, size_t k)
{
    FOR_EACH(j, k) out[j] = cu_pair{key[top[j].i], top[j].v};
}

__global__ void k_zero_common(float *x, const cu_pair *a, size_t na, const cu_pair *b, size_t nb)
{
    FOR_EACH(j, na) {
        uint32_t i = a[j].i;
        size_t lo = 0, hi = nb;
        while (lo < hi) { // the first of b at or after i
            size_t mid = lo + (hi - lo) / 2;
            if (b[mid].i < i) lo = mid + 1;
            else hi = mid;
        }
        if (lo < nb && b[lo].i == i) x[i] = 0.0f;
    }
}

extern "C" int cuk_residual_add(cudaStream_t s, float *r, float *u, const float *g, const float *w, size_t n, float m,
                                float wd)
{
    if (n == 0) return 0;
    if (u) k_residual_corrected<<<blocks_for(n), THREADS, 0, s>>>(r, u, g, w, n, m, wd);
    else k_residual_plain<<<blocks_for(n), THREADS, 0, s>>>(r, g, n);
    return (int)cudaGetLastError();
}

extern "C" int cuk_pairs_zero_common(cudaStream_t s, float *x, const void *a, size_t na, const void *b, size_t nb)
{
    if (na == 0 || nb == 0) return 0;
    k_zero_common<<<blocks_for(na), THREADS, 0, s>>>(x, (const cu_pair *)a, na, (const cu_pair *)b, nb);
    return (int)cudaGetLastError();
}

// Scratch from the stream-ordered allocator: CUB's storage, then m words each of keys and values in
// and out, heads' flags, the union's sums, its compacted keys and values, its top-k's pairs (2 k
// words) and the union's size.
extern "C" int cuk_pairs_merge(cudaStream_t s, const void *a, size_t na, const void *b, size_t nb, size_t k, void *out,
                               size_t *n_out)
{
    size_t m = na + nb;
    *n_out = 0;
    if (m == 0 || k == 0) return 0;
    if (m > 0x7fffffffu) return (int)cudaErrorInvalidValue;
    int mi = (int)m, *count = NULL;
    uint32_t *ukey = NULL, *flag = NULL;
    float *uval = NULL;
    size_t t1 = 0, t2 = 0, t3 = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, t1, ukey, ukey, uval, uval, mi, 0, 32, s);
    if (e == cudaSuccess) e = cub::DeviceSelect::Flagged(NULL, t2, ukey, flag, ukey, count, mi, s);
    if (e == cudaSuccess) e = cub::DeviceSelect::Flagged(NULL, t3, uval, flag, uval, count, mi, s);
    if (e != cudaSuccess) return (int)e;
    size_t temp = t1 > t2 ? t1 : t2;
    temp = ((temp > t3 ? temp : t3) + 255) / 256 * 256;
    char *base = NULL;
    if ((e = cudaMallocAsync((void **)&base, temp + (8 * m + 2 * k + 1) * sizeof(uint32_t), s)) != cudaSuccess)
        return (int)e;
    void *tmp = base;
    uint32_t *key_in = (uint32_t *)(base + temp), *key_out = key_in + m;
    float *val_in = (float *)(key_out + m), *val_out = val_in + m, *sum = val_out + m;
    flag = (uint32_t *)(sum + m), ukey = flag + m, uval = (float *)(ukey + m);
    cu_pair *top = (cu_pair *)(uval + m);
    count = (int *)(top + k);
    size_t u = 0;
    k_merge_split<<<blocks_for(m), THREADS, 0, s>>>(key_in, val_in, (const cu_pair *)a, na, (const cu_pair *)b, nb);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cub::DeviceRadixSort::SortPairs(tmp, t1, key_in, key_out, val_in, val_out, mi, 0, 32, s);
    if (e == cudaSuccess) {
        k_merge_heads<<<blocks_for(m), THREADS, 0, s>>>(flag, sum, key_out, val_out, m);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cub::DeviceSelect::Flagged(tmp, t2, key_out, flag, ukey, count, mi, s);
    if (e == cudaSuccess) e = cub::DeviceSelect::Flagged(tmp, t3, sum, flag, uval, count, mi, s);
    int ui = 0;
    if (e == cudaSuccess) e = cudaMemcpyAsync(&ui, count, sizeof ui, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    u = (size_t)ui;
    if (e == cudaSuccess && u <= k) {
        k_merge_pack<<<blocks_for(u), THREADS, 0, s>>>((cu_pair *)out, ukey, uval, u);
        e = cudaGetLastError();
    } else if (e == cudaSuccess) {
        e = (cudaError_t)cuk_topk(s, uval, u, k, top);
        if (e == cudaSuccess) {
            k_merge_index<<<blocks_for(k), THREADS, 0, s>>>((cu_pair *)out, top, ukey, k);
            e = cudaGetLastError();
        }
    }
    cudaError_t f = cudaFreeAsync(base, s);
    if (e == cudaSuccess && f == cudaSuccess) *n_out = u < k ? u : k;
    return (int)(e != cudaSuccess ? e : f);
}

extern "C" int cuk_pairs_apply(cudaStream_t s, float *x, const void *pairs, size_t k, int how, float a)
{
    if (k == 0) return 0;
    k_pairs_apply<<<blocks_for(k), THREADS, 0, s>>>(x, (const cu_pair *)pairs, k, how, a);
    return (int)cudaGetLastError();
}

__global__ void k_topk_sample(float *out, const float *x, size_t n, size_t m)
{
    FOR_EACH(s, m) out[s] = fabsf(x[ew_topk_sample_index(s, n)]);
}

__global__ void k_above_flags(uint8_t *flag, uint32_t *idx, const float *x, size_t n, float thr)
{
    FOR_EACH(i, n) {
        flag[i] = (uint8_t)ew_topk_above(x[i], thr);
        idx[i] = (uint32_t)i;
    }
}

// the k indices taken: the first c of the partition's front (those that passed, in index order), then
// the first k - c of the others, which the partition wrote in reverse order at its end
__global__ void k_above_take(uint32_t *key, const uint32_t *part, size_t n, size_t k, const int *count)
{
    size_t c = (size_t)*count;
    FOR_EACH(j, k) key[j] = j < c ? part[j] : part[n - 1 - (j - c)];
}

// the sample of |x| (the threshold is made on the host, as the CPU makes it)
extern "C" int cuk_topk_sample(cudaStream_t s, const float *x, size_t n, size_t m, float *out)
{
    if (m == 0) return 0;
    if (n == 0) return (int)cudaErrorInvalidValue;
    k_topk_sample<<<blocks_for(m), THREADS, 0, s>>>(out, x, n, m);
    return (int)cudaGetLastError();
}

// the candidates' values (part[0..c): the indices that reached the threshold, in order)
__global__ void k_above_values(float *val, const uint32_t *part, const float *x, size_t c)
{
    FOR_EACH(j, c) val[j] = x[part[j]];
}

// be->topk_above (sparse.c's topk_select_sampled after its sample): CUB's partition by the flags (those
// that reach thr first, in index order; the rest behind them in reverse order), the count to the host;
// k or more: cuk_topk over the candidates' values, positions mapped back to indices; fewer: the k
// indices taken (all candidates, then the first of the rest), sorted (CUB), gathered. Scratch from the
// stream-ordered allocator: CUB's storage, indices and their partition (2 n words), the candidates'
// values (n), the k keys taken and sorted and the top-k's pairs (4 k words), the count, the flags (n bytes).
extern "C" int cuk_topk_above(cudaStream_t s, const float *x, size_t n, size_t k, float thr, void *pairs)
{
    if (k == 0) return 0;
    if (n > 0x7fffffffu || k > n) return (int)cudaErrorInvalidValue;
    int ni = (int)n, ki = (int)k, *count = NULL, c = 0;
    uint32_t *idx = NULL;
    uint8_t *flag = NULL;
    size_t t1 = 0, t2 = 0;
    cudaError_t e = cub::DevicePartition::Flagged(NULL, t1, idx, flag, idx, count, ni, s);
    if (e == cudaSuccess) e = cub::DeviceRadixSort::SortKeys(NULL, t2, idx, idx, ki, 0, 32, s);
    if (e != cudaSuccess) return (int)e;
    size_t temp = ((t1 > t2 ? t1 : t2) + 255) / 256 * 256, words = 3 * n + 4 * k + 1;
    char *base = NULL;
    if ((e = cudaMallocAsync((void **)&base, temp + words * sizeof(uint32_t) + n, s)) != cudaSuccess) return (int)e;
    void *tmp = base;
    idx = (uint32_t *)(base + temp);
    uint32_t *part = idx + n, *key = part + n + n, *sorted = key + k;
    float *val = (float *)(part + n);
    cu_pair *top = (cu_pair *)(sorted + k);
    count = (int *)(top + k);
    flag = (uint8_t *)(count + 1);
    k_above_flags<<<blocks_for(n), THREADS, 0, s>>>(flag, idx, x, n, thr);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cub::DevicePartition::Flagged(tmp, t1, idx, flag, part, count, ni, s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(&c, count, sizeof c, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e == cudaSuccess && (size_t)c >= k) { // the k largest are among the candidates
        k_above_values<<<blocks_for((size_t)c), THREADS, 0, s>>>(val, part, x, (size_t)c);
        e = cudaGetLastError();
        if (e == cudaSuccess) e = (cudaError_t)cuk_topk(s, val, (size_t)c, k, top);
        if (e == cudaSuccess) {
            k_merge_index<<<blocks_for(k), THREADS, 0, s>>>((cu_pair *)pairs, top, part, k);
            e = cudaGetLastError();
        }
    } else if (e == cudaSuccess) {
        k_above_take<<<blocks_for(k), THREADS, 0, s>>>(key, part, n, k, count);
        e = cudaGetLastError();
        if (e == cudaSuccess) e = cub::DeviceRadixSort::SortKeys(tmp, t2, key, sorted, ki, 0, 32, s);
        if (e == cudaSuccess) {
            k_topk_gather<<<blocks_for(k), THREADS, 0, s>>>((cu_pair *)pairs, sorted, x, k);
            e = cudaGetLastError();
        }
    }
    cudaError_t f = cudaFreeAsync(base, s);
    return (int)(e != cudaSuccess ? e : f);
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
