/* t16 — 16-bit truncation (Pipe-SGD §3.2): keep the upper half of each fp32 (sign, 8 exponent
 * bits, 7 mantissa bits), i.e. bfloat16 rounded toward zero. 2 bytes per value. */
#include <stdint.h>

#include "../cpu.h"
#include "codec.h"

static size_t t16_bytes(const dt_codec *c, size_t n)
{
    (void)c;
    return n * 2;
}

DT_CLONES static void t16_encode(const dt_codec *c, const float *restrict x, size_t n, void *out)
{
    (void)c;
    const uint32_t *restrict u = (const uint32_t *)x;
    uint16_t *restrict o = out;
#pragma omp simd
    for (size_t i = 0; i < n; i++) o[i] = (uint16_t)(u[i] >> 16);
}

DT_CLONES static void t16_decode(const dt_codec *c, const void *in, size_t n, float *restrict x)
{
    (void)c;
    const uint16_t *restrict v = in;
    uint32_t *restrict u = (uint32_t *)x;
#pragma omp simd
    for (size_t i = 0; i < n; i++) u[i] = (uint32_t)v[i] << 16;
}

DT_CLONES static void t16_decode_add(const dt_codec *c, const void *in, size_t n, float *restrict x)
{
    (void)c;
    const uint16_t *restrict v = in;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        union {
            uint32_t u;
            float f;
        } b = {.u = (uint32_t)v[i] << 16};
        x[i] += b.f;
    }
}

const dt_codec_desc codec_t16 = {
    .name = "t16",
    .wire = DT_WIRE_T16,
    .help = "16-bit truncation: the upper half of each fp32, bfloat16 rounded toward zero (2 bytes)",
    .bytes = t16_bytes,
    .encode = t16_encode,
    .decode = t16_decode,
    .decode_add = t16_decode_add,
};
