#include "rng.h"

#include <math.h>
#include <string.h>

#include "util.h"

static uint64_t splitmix64(uint64_t *x) { return rng_splitmix64(x); }

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(dt_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ rng_hash(stream, 0x5eed);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t rng_next(dt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float rng_uniform(dt_rng *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }

double rng_uniform_d(dt_rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double rng_normal(dt_rng *r)
{
    double u1 = rng_uniform_d(r), u2 = rng_uniform_d(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t rng_below(dt_rng *r, uint64_t n)
{
    /* Lemire's nearly-divisionless method would need 128-bit math; rejection is simple and exact. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do v = rng_next(r);
    while (v >= limit);
    return v % n;
}

uint64_t rng_hash(uint64_t key, uint64_t counter) { return rng_hash_inline(key, counter); }

uint64_t rng_stream_id(const char *name) { return dt_hash64(name, strlen(name), DT_HASH_INIT); }
