/* sampler — the order of each epoch and every rank's slice of each global batch (sampler.c).
 * Internal to the data module: the loader walks it. */
#ifndef DT_SAMPLER_H
#define DT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "../split.h"

typedef struct dt_sampler {
    uint64_t seed;
    size_t n;      /* samples in the split */
    uint32_t *perm;
    int epoch;     /* whose order perm holds, -1 none yet */
    int batch;     /* global batch */
    int rank, size;
    long iters;    /* batches per epoch: ceil(n / batch); the last may be short */
    int shuffle;   /* 0: every epoch in file order (--no-shuffle) */
} dt_sampler;

int sampler_create(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed, int shuffle);
/* Draws the order of epoch e (0-based); a pure function of (seed, e); file order without shuffle. */
void sampler_epoch(dt_sampler *s, int epoch);
/* This rank's part of global batch it: indices (into the split), how many, the global row of
 * the first one, and the size of the whole global batch (shorter for the last batch). */
void sampler_slice(const dt_sampler *s, long it, const uint32_t **idx, int *rows, int64_t *row0, int *global_rows);
void sampler_destroy(dt_sampler *s);

#endif
