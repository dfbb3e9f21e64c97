// backend_cuda_codec — the gradient codecs on the GPU (the twin of src/comm/codec_t16.c,
// codec_fp16.c and codec_q8.c): the same bytes for the same input, so that a rank coding on its GPU
// and one coding on its CPU agree.
//
// Each value's arithmetic is a function of elementwise.h (ew_t16, ew_fp16, ew_q8 and their
// decoders), which tests/check_cuda_twins.c runs on the host against the CPU codecs. This file is
// compiled with -ftz=true: the program flushes subnormals on the CPU (FTZ/DAZ, src/cpu.h), and so
// does this code. q8 first finds each block's largest |x| as the largest of its bits (an integer
// maximum, NaN above infinity, in any order), then quantises.
#include "backend_cuda.h"
#include "elementwise.h"
#include "launch.cuh"

#define TILE 4096 // values one thread block reduces for q8's scales

__global__ void k_t16_enc(uint16_t *o, const float *x, size_t n)
{
    FOR_EACH(i, n) o[i] = ew_t16(x[i]);
}

__global__ void k_t16_dec(float *x, const uint16_t *v, size_t n, int add)
{
    FOR_EACH(i, n) x[i] = add ? EW_ADD(x[i], ew_t16_dec(v[i])) : ew_t16_dec(v[i]);
}

__global__ void k_fp16_enc(uint16_t *o, const float *x, size_t n)
{
    FOR_EACH(i, n) o[i] = ew_fp16(x[i]);
}

__global__ void k_fp16_dec(float *x, const uint16_t *v, size_t n, int add)
{
    FOR_EACH(i, n) x[i] = add ? EW_ADD(x[i], ew_fp16_dec(v[i])) : ew_fp16_dec(v[i]);
}

// q8, value i of n in block k = i / b at byte k (4 + b): 4 bytes of scale, then b codes (the last
// block short). Tile t covers up to TILE values of one block: block t / tiles, part t % tiles.
__global__ void k_q8_absmax(uint32_t *mx, const float *x, size_t n, size_t b, size_t tiles, size_t n_tiles)
{
    __shared__ uint32_t warp_max[THREADS / 32];
    for (size_t t = blockIdx.x; t < n_tiles; t += gridDim.x) {
        size_t k = t / tiles, lo = k * b + (t % tiles) * TILE, hi = lo + TILE;
        if (hi > (k + 1) * b) hi = (k + 1) * b;
        if (hi > n) hi = n;
        uint32_t m = 0;
        for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) m = max(m, ew_q8_absbits(x[i]));
        for (int d = 16; d > 0; d /= 2) m = max(m, __shfl_down_sync(0xffffffffu, m, d));
        if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < THREADS / 32; w++) m = max(m, warp_max[w]);
            atomicMax(mx + k, m);
        }
        __syncthreads();
    }
}

__global__ void k_q8_enc(uint8_t *o, const float *x, size_t n, size_t b, const uint32_t *mx)
{
    FOR_EACH(i, n) {
        size_t k = i / b, j = i - k * b;
        float s = ew_q8_scale(mx[k]);
        uint8_t *blk = o + k * (4 + b);
        blk[4 + j] = (uint8_t)ew_q8(x[i], ew_q8_inv(s));
        if (j == 0) memcpy(blk, &s, 4); // unaligned when b is not a multiple of 4: byte by byte
    }
}

__global__ void k_q8_dec(float *x, const uint8_t *in, size_t n, size_t b, int add)
{
    FOR_EACH(i, n) {
        size_t k = i / b, j = i - k * b;
        const uint8_t *blk = in + k * (4 + b);
        float s;
        memcpy(&s, blk, 4);
        int8_t q = (int8_t)blk[4 + j];
        float step = ew_q8_step(s);
        x[i] = add ? ew_q8_dec_add(x[i], q, step) : ew_q8_dec(q, step);
    }
}

static size_t q8_block(int block, size_t n) { return block > 0 ? (size_t)block : n > 0 ? n : 1; }

extern "C" int cuk_wire_encode(cudaStream_t s, int kind, int block, const float *x, size_t n, void *out)
{
    if (n == 0) return 0;
    switch (kind) {
    case DT_WIRE_T16: k_t16_enc<<<blocks_for(n), THREADS, 0, s>>>((uint16_t *)out, x, n); break;
    case DT_WIRE_FP16: k_fp16_enc<<<blocks_for(n), THREADS, 0, s>>>((uint16_t *)out, x, n); break;
    case DT_WIRE_Q8: {
        size_t b = q8_block(block, n), nb = (n + b - 1) / b, tiles = (b + TILE - 1) / TILE, n_tiles = nb * tiles;
        uint32_t *mx = NULL;
        cudaError_t e = cudaMallocAsync((void **)&mx, nb * sizeof *mx, s);
        if (e != cudaSuccess) return (int)e;
        if ((e = cudaMemsetAsync(mx, 0, nb * sizeof *mx, s)) != cudaSuccess) {
            cudaFreeAsync(mx, s);
            return (int)e;
        }
        k_q8_absmax<<<n_tiles < 65536 ? (unsigned)n_tiles : 65536u, THREADS, 0, s>>>(mx, x, n, b, tiles, n_tiles);
        k_q8_enc<<<blocks_for(n), THREADS, 0, s>>>((uint8_t *)out, x, n, b, mx);
        e = cudaGetLastError();
        cudaError_t f = cudaFreeAsync(mx, s);
        return (int)(e != cudaSuccess ? e : f);
    }
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int cuk_wire_decode(cudaStream_t s, int kind, int block, const void *in, size_t n, float *x, int add)
{
    if (n == 0) return 0;
    switch (kind) {
    case DT_WIRE_T16: k_t16_dec<<<blocks_for(n), THREADS, 0, s>>>(x, (const uint16_t *)in, n, add); break;
    case DT_WIRE_FP16: k_fp16_dec<<<blocks_for(n), THREADS, 0, s>>>(x, (const uint16_t *)in, n, add); break;
    case DT_WIRE_Q8:
        k_q8_dec<<<blocks_for(n), THREADS, 0, s>>>(x, (const uint8_t *)in, n, q8_block(block, n), add);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
