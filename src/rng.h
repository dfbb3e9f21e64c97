/* rng — random numbers that are reproducible from one --seed.
 *
 * Two kinds: a sequential generator (xoshiro256**, state is plain data so checkpoints can save
 * it) for shuffles and initialisation, and a counter-based hash for things that must not depend
 * on how work is split over ranks (dropout masks keyed by the global sample index, so 1 rank and
 * 4 ranks draw the same mask for the same sample). Streams are derived from (seed, name).
 */
#ifndef DT_RNG_H
#define DT_RNG_H

#include <stdint.h>

typedef struct dt_rng {
    uint64_t s[4];
} dt_rng;

/* Seeds a generator for stream `stream` of seed `seed`. */
void rng_seed(dt_rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(dt_rng *r);
/* Uniform in [0, 1) with 24 random bits (float) or 53 (double). */
float rng_uniform(dt_rng *r);
double rng_uniform_d(dt_rng *r);
/* Standard normal (Box-Muller, one value per call). */
double rng_normal(dt_rng *r);
/* Uniform integer in [0, n), unbiased. */
uint64_t rng_below(dt_rng *r, uint64_t n);

/* Stateless: a well-mixed 64-bit value for (key, counter). */
uint64_t rng_hash(uint64_t key, uint64_t counter);

/* rng_hash's arithmetic, inline, for code that must draw the same numbers elsewhere: the CUDA
 * kernels (dropout masks) compile this very function for the device. */
#ifdef __CUDACC__
#define DT_RNG_INLINE __host__ __device__ static inline
#else
#define DT_RNG_INLINE static inline
#endif
DT_RNG_INLINE uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
DT_RNG_INLINE uint64_t rng_hash_inline(uint64_t key, uint64_t counter)
{
    uint64_t x = key ^ (counter * 0xd1b54a32d192ed03ULL);
    uint64_t a = rng_splitmix64(&x);
    return a ^ rng_splitmix64(&x);
}
/* Stream id for a name ("dense1.weight", "shuffle"), so streams do not depend on table order. */
uint64_t rng_stream_id(const char *name);

#endif
