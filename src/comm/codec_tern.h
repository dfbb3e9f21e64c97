/* codec_tern — TernGrad's ternary codes (Wen et al. 2017, §3.1-3.3).
 *
 * A tensor's gradient g is clipped to ±c sigma (sigma its standard deviation); its scaler is
 * s = max |clipped g|. Each value becomes t = sign(g) b, b ~ Bernoulli(|clipped g| / s), so that
 * E[s t] = clipped g (unbiased within the clip, up to the coin's resolution: probabilities are
 * quantised to 1/65536). Value i's coin is 16 bits of a splitmix64 of (key, i / 4): a rank's stream is
 * fixed by its key. Codes are 2 bits, four per byte, value i in bits 2(i%4):
 * 00 = 0, 01 = +1, 10 = -1.
 */
#ifndef DT_CODEC_TERN_H
#define DT_CODEC_TERN_H

#include <stddef.h>
#include <stdint.h>

/* s = min(c sigma, max|g|); 0 for an all-zero g. sigma's sums in one fixed order (codec_tern.c:
 * float lanes per block of 4096, the blocks in double), the same bits on every CPU. */
float tern_scaler(const float *g, size_t n, float clip_c);
/* tern_scaler in two steps: the sums and maximum (what a device computes, backend.h's tern_stats),
 * and the scaler from them */
void tern_stats(const float *g, size_t n, double *sum, double *sq, float *mx);
float tern_scaler_of(double sum, double sq, float mx, size_t n, float clip_c);
/* t[i] in {-1, 0, +1} for g[i] clipped to ±clip (clip = c sigma), with scaler s (shared). */
void tern_ternarize(const float *g, size_t n, float clip, float s, uint64_t key, int8_t *t);
/* 2-bit packing of t[0..n) into (n + 3) / 4 bytes, and the sum of packed codes into acc. */
void tern_pack(const int8_t *t, size_t n, uint8_t *codes);
void tern_unpack_add(const uint8_t *codes, size_t n, int8_t *acc);

#endif
