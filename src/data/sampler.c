/* sampler — the order of each epoch and every rank's slice of each global batch.
 *
 * One permutation per epoch from (seed, epoch) on every rank, no communication; global batch i
 * is perm[i*B, (i+1)*B) and rank r takes its contiguous, balanced slice of it, so P ranks with
 * global batch B see exactly the samples 1 rank sees with batch B. */
#include <stdlib.h>

#include "../rng.h"
#include "../util.h"
#include "data.h"
#include "sampler.h"

int sampler_fits(size_t n)
{
    size_t avail, total, need = sizeof(uint32_t) * n;
    if (n > UINT32_MAX) return dt_fail("dataset of %zu samples is larger than 2^32", n);
    if (dt_host_memory(&avail, &total) == 0 && need > avail / 2)
        return dt_fail("the shuffle of %zu training samples needs %.3g GB of indices on each rank, and %.3g GB of "
                       "this host's %.3g GB are free (expected fewer samples)",
                       n, (double)need / 1e9, (double)avail / 1e9, (double)total / 1e9);
    return 0;
}

int sampler_create(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed, int shuffle)
{
    dt_sampler *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    if (sampler_fits(n) != 0) {
        free(s);
        return -1;
    }
    s->perm = malloc(sizeof *s->perm * (n ? n : 1));
    if (!s->perm) {
        free(s);
        return dt_fail("out of memory");
    }
    s->n = n;
    s->batch = batch;
    s->rank = rank;
    s->size = size;
    s->seed = seed;
    s->shuffle = shuffle;
    s->iters = (long)((n + (size_t)batch - 1) / (size_t)batch);
    s->epoch = -1;
    for (size_t i = 0; i < n; i++) s->perm[i] = (uint32_t)i;
    *out = s;
    return 0;
}

void sampler_epoch(dt_sampler *s, int epoch)
{
    dt_rng rng;
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

void sampler_slice(const dt_sampler *s, long it, const uint32_t **idx, int *rows, int64_t *row0, int *global_rows)
{
    size_t start = (size_t)it * (size_t)s->batch;
    size_t b = DT_MIN((size_t)s->batch, s->n - start);
    size_t first, count;
    split_range(b, s->rank, s->size, &first, &count);
    *idx = s->perm + start + first;
    *rows = (int)count;
    *row0 = (int64_t)first;
    *global_rows = (int)b;
}

void sampler_destroy(dt_sampler *s)
{
    if (!s) return;
    free(s->perm);
    free(s);
}
