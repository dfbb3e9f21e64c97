/* sampler — the order of each epoch and every rank's slice of each global batch.
 *
 * One permutation per epoch from (seed, epoch) on every rank, no communication; global batch i
 * is perm[i*B, (i+1)*B) and rank r takes its contiguous, balanced slice of it, so P ranks with
 * global batch B see exactly the samples 1 rank sees with batch B.
 *
 * The order: Fisher-Yates up to SAMPLER_ARRAY_MAX samples; above, position i holds f(i), f a
 * bijection of [0, n) keyed by (seed, epoch): a 4-round Feistel network on 2 x half bits (4^half
 * the smallest power of 4 >= n), its rounds rng_hash of the right half, walking its cycle from i
 * until the value is below n (fewer than 4 steps on average, since 4^half < 4n). */
#include <stdlib.h>

#include "../rng.h"
#include "../util.h"
#include "data.h"
#include "sampler.h"

size_t sampler_bytes(size_t n) { return n > SAMPLER_ARRAY_MAX ? 0 : sizeof(uint32_t) * n; }

int sampler_fits(size_t n)
{
    size_t avail, total, need = sampler_bytes(n);
    if (n > UINT32_MAX) return dt_fail("dataset of %zu samples is larger than 2^32", n);
    if (dt_host_memory(&avail, &total) == 0 && need > avail / 2)
        return dt_fail("the shuffle of %zu training samples needs %.3g GB of indices on each rank, and %.3g GB of "
                       "this host's %.3g GB are free (expected fewer samples)",
                       n, (double)need / 1e9, (double)avail / 1e9, (double)total / 1e9);
    return 0;
}

int sampler_create(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed, int shuffle)
{
    return sampler_create_max(out, n, batch, rank, size, seed, shuffle, SAMPLER_ARRAY_MAX);
}

int sampler_create_max(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed, int shuffle,
                       size_t array_max)
{
    dt_sampler *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    if (sampler_fits(n) != 0) {
        free(s);
        return -1;
    }
    if (n <= array_max) s->perm = malloc(sizeof *s->perm * (n ? n : 1));
    else s->slice = malloc(sizeof *s->slice * (size_t)batch);
    if (!s->perm && !s->slice) {
        free(s);
        return dt_fail("out of memory");
    }
    while (s->slice && ((size_t)1 << (2 * s->half)) < n) s->half++;
    s->n = n;
    s->batch = batch;
    s->rank = rank;
    s->size = size;
    s->seed = seed;
    s->shuffle = shuffle;
    s->iters = (long)((n + (size_t)batch - 1) / (size_t)batch);
    s->epoch = -1;
    for (size_t i = 0; s->perm && i < n; i++) s->perm[i] = (uint32_t)i;
    *out = s;
    return 0;
}

/* one pass of the keyed Feistel network over 2 x half bits: a bijection of [0, 4^half) */
static uint64_t feistel(uint64_t key, int half, uint64_t v)
{
    uint64_t mask = ((uint64_t)1 << half) - 1, l = v >> half, r = v & mask;
    for (uint64_t round = 0; round < 4; round++) {
        uint64_t t = l ^ (rng_hash(key + round, r) & mask);
        l = r, r = t;
    }
    return l << half | r;
}

uint32_t sampler_at(const dt_sampler *s, size_t i)
{
    if (s->perm) return s->perm[i];
    if (!s->shuffle) return (uint32_t)i;
    uint64_t v = i;
    do v = feistel(s->key, s->half, v);
    while (v >= s->n);
    return (uint32_t)v;
}

void sampler_epoch(dt_sampler *s, int epoch)
{
    dt_rng rng;
    if (!s->perm) {
        s->key = rng_hash(s->seed ^ rng_stream_id("shuffle, keyed"), (uint64_t)epoch);
        s->epoch = epoch;
        return;
    }
    rng_seed(&rng, s->seed, rng_stream_id("shuffle") + (uint64_t)epoch);
    for (size_t i = 0; i < s->n; i++) s->perm[i] = (uint32_t)i;
    for (size_t i = s->n; s->shuffle && i > 1; i--) {
        size_t j = (size_t)rng_below(&rng, i);
        uint32_t t = s->perm[i - 1];
        s->perm[i - 1] = s->perm[j];
        s->perm[j] = t;
    }
    s->epoch = epoch;
}

void sampler_slice(dt_sampler *s, long it, const uint32_t **idx, int *rows, int64_t *row0, int *global_rows)
{
    size_t start = (size_t)it * (size_t)s->batch;
    size_t b = DT_MIN((size_t)s->batch, s->n - start);
    size_t first, count;
    split_range(b, s->rank, s->size, &first, &count);
    if (!s->perm)
        for (size_t i = 0; i < count; i++) s->slice[i] = sampler_at(s, start + first + i);
    *idx = s->perm ? s->perm + start + first : s->slice;
    *rows = (int)count;
    *row0 = (int64_t)first;
    *global_rows = (int)b;
}

void sampler_destroy(dt_sampler *s)
{
    if (!s) return;
    free(s->perm);
    free(s->slice);
    free(s);
}
