/* chunks — csc's arithmetic on one chunk of the gradient arena (mode_csc.c; GradientFlow §V-B).
 *
 * One definition of every value csc computes, so that a backend that keeps csc's state in its own
 * memory (backend.h's csc_pack and csc_fold: the CUDA backend's kernels, the guarded test backend)
 * gives these bits: each product and sum rounded on its own (no fused multiply-add), in the order
 * written here.
 * A chunk's L1 norm is summed in 32 lanes: lane j adds |x[i]| for i = j, j + 32, j + 64, ... in
 * turn, then the lanes are added pairwise, 16 apart, 8 apart, ... 1 apart (lane j takes lane j + w):
 * the order one warp of 32 threads keeps, and one the CPU vectorizes.
 */
#ifndef DT_CHUNKS_H
#define DT_CHUNKS_H

#include <stddef.h>

/* The correction before the allreduce: g[i] = g[i] + h[i], or g[i] + (h[i] + wd w[i]) where wd != 0
 * (momentum correction: weight decay enters the gradient here). */
void chunks_correct(float *g, const float *h, const float *w, float wd, size_t n);
/* The packing of an important chunk: out[i] = g[i] * scale, NaN where that is above limit in
 * magnitude (dynamic loss scaling: it could saturate fp16 in the sum; limit INFINITY: never). */
void chunks_pack(float *out, const float *g, size_t n, float scale, float limit);
/* The L1 norm of x[0..n) in the 32-lane order above. */
float chunks_l1(const float *x, size_t n);
/* After the allreduce, one chunk of n values. An important chunk (sum: its allreduced values): g = sum,
 * h = 0, and with momentum correction (hu not NULL) hu = m hu + lr g and w = w - hu; its norm is
 * chunks_l1(g) / p. Another (sum NULL): its norm is chunks_l1(g), then h = m g with momentum correction,
 * else h = g and g = 0 (the optimizer sees zeros there). Returns the norm. */
float chunks_fold(float *g, float *h, float *hu, float *w, const float *sum, size_t n, int p, float m, float lr);

#endif
