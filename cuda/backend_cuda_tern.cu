// backend_cuda_tern — TernGrad on the GPU (the twin of src/comm/codec_tern.c): a tensor's sums for its
// scaler in the CPU's one order, the ternary values from the same coins, their 2-bit codes, and the
// aggregate scaled back; the CPU's bits for the same input and key.
//
// The sums: one thread per lane (16 of each 4096-value block) adds its values in turn, then one thread
// adds each block's lanes pairwise and the blocks in double, in order, as block_stats and tern_stats do
// on the CPU; the largest |x| is an integer maximum of the bits (any order), a NaN passed over as on the CPU. The per-value arithmetic is
// elementwise.h's (ew_tern_lane, ew_tern_lanes_sum, ew_tern_coin, ew_tern, ew_tern_code), which
// tests/check_cuda_twins.c runs on the host against the CPU codec. Compiled with -ftz=true, as the CPU
// flushes subnormals.
#include "backend_cuda.h"
#include "elementwise.h"
#include "launch.cuh"

#define TERN_BLOCK 4096

__global__ void k_tern_lanes(float *ls, float *lq, unsigned int *mx, const float *x, size_t n, size_t blocks)
{
    FOR_EACH(t, blocks * 16)
    {
        size_t lo = t / 16 * TERN_BLOCK, hi = lo + TERN_BLOCK < n ? lo + TERN_BLOCK : n;
        int j = (int)(t % 16);
        unsigned int m = 0;
        ew_tern_lane(x, lo, hi, j, &ls[t], &lq[t]);
        for (size_t i = lo + (size_t)j; i < hi; i += 16) m = max(m, (unsigned int)ew_tern_absbits(x[i]));
        atomicMax(mx, m);
    }
}

// each block's 16 lanes pairwise, a thread a block, into the block's first lane
__global__ void k_tern_block_sums(float *ls, float *lq, size_t blocks)
{
    FOR_EACH(b, blocks)
    {
        float v[16];
        for (int j = 0; j < 16; j++) v[j] = ls[b * 16 + j];
        ls[b * 16] = ew_tern_lanes_sum(v);
        for (int j = 0; j < 16; j++) v[j] = lq[b * 16 + j];
        lq[b * 16] = ew_tern_lanes_sum(v);
    }
}

// the blocks' sums added in double in block order, as the CPU adds them (one thread: the order is
// the result; a load a block, where the lanes' pairwise sums took 32 in this thread)
__global__ void k_tern_blocks(double *out, const float *ls, const float *lq, size_t blocks)
{
    double sum = 0.0, sq = 0.0;
    for (size_t b = 0; b < blocks; b++) sum += ls[b * 16], sq += lq[b * 16];
    out[0] = sum, out[1] = sq;
}

__global__ void k_tern_enc(int8_t *t, const float *x, size_t n, float clip, float scale, uint64_t key)
{
    FOR_EACH(i, n) t[i] = ew_tern(x[i], clip, scale, ew_tern_coin(key, i));
}

__global__ void k_tern_pack(uint8_t *codes, const int8_t *t, size_t n)
{
    FOR_EACH(b, (n + 3) / 4)
    {
        unsigned c = 0;
        for (size_t j = 0; j < 4 && 4 * b + j < n; j++) c |= ew_tern_code(t[4 * b + j]) << (2 * j);
        codes[b] = (uint8_t)c;
    }
}

__global__ void k_tern_dec(float *x, const int8_t *acc, size_t n, float s)
{
    FOR_EACH(i, n) x[i] = EW_MUL(s, (float)acc[i]);
}

__global__ void k_tern_sum(int8_t *acc, const uint8_t *codes, size_t code_bytes, int p, size_t n)
{
    FOR_EACH(i, n) acc[i] = ew_tern_sum(codes, code_bytes, p, i);
}

extern "C" {

size_t cuk_tern_lanes_floats(size_t n) { return (n + TERN_BLOCK - 1) / TERN_BLOCK * 16; }

int cuk_tern_stats(cudaStream_t s, const float *x, size_t n, float *lanes, double *out, unsigned int *mx)
{
    size_t blocks = (n + TERN_BLOCK - 1) / TERN_BLOCK, l = blocks * 16;
    if (n == 0) return cudaMemsetAsync(out, 0, 2 * sizeof *out, s);
    k_tern_lanes<<<blocks_for(l), THREADS, 0, s>>>(lanes, lanes + l, mx, x, n, blocks);
    k_tern_block_sums<<<blocks_for(blocks), THREADS, 0, s>>>(lanes, lanes + l, blocks);
    k_tern_blocks<<<1, 1, 0, s>>>(out, lanes, lanes + l, blocks);
    return cudaGetLastError();
}

int cuk_tern_encode(cudaStream_t s, const float *x, size_t n, float clip, float scale, uint64_t key, int8_t *t)
{
    if (n == 0) return 0;
    if (!(scale > 0.0f)) return cudaMemsetAsync(t, 0, n, s);
    k_tern_enc<<<blocks_for(n), THREADS, 0, s>>>(t, x, n, clip, scale, key);
    return cudaGetLastError();
}

int cuk_tern_pack(cudaStream_t s, const int8_t *t, size_t n, uint8_t *codes)
{
    if (n == 0) return 0;
    k_tern_pack<<<blocks_for((n + 3) / 4), THREADS, 0, s>>>(codes, t, n);
    return cudaGetLastError();
}

int cuk_tern_sum(cudaStream_t s, const uint8_t *codes, int p, size_t code_bytes, size_t n, int8_t *acc)
{
    if (n == 0) return 0;
    k_tern_sum<<<blocks_for(n), THREADS, 0, s>>>(acc, codes, code_bytes, p, n);
    return cudaGetLastError();
}

int cuk_tern_decode(cudaStream_t s, const int8_t *acc, size_t n, float sc, float *x)
{
    if (n == 0) return 0;
    k_tern_dec<<<blocks_for(n), THREADS, 0, s>>>(x, acc, n, sc);
    return cudaGetLastError();
}
}
