/* sampler — the order of each epoch and every rank's slice of each global batch (sampler.c).
 * Internal to the data module: the loader walks it. */
#ifndef DT_SAMPLER_H
#define DT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "../split.h"

/* Up to this many samples the order is drawn as a permutation array (Fisher-Yates, 4 bytes a
 * sample); above it, as a keyed bijection computed per position (sampler_at), which needs no memory
 * and no time per epoch: Fisher-Yates over 10^9 indices took 75 s at the first batch of each epoch,
 * and 4 GB on every rank. Every real dataset is below it (ImageNet-21k: 14 million images). */
#define SAMPLER_ARRAY_MAX ((size_t)1 << 25)

typedef struct dt_sampler {
    uint64_t seed;
    size_t n;      /* samples in the split */
    uint32_t *perm; /* the epoch's order; NULL when keyed */
    uint32_t *slice; /* keyed: this rank's indices of the last sampler_slice */
    uint64_t key;  /* keyed: the epoch's key */
    int half;      /* keyed: the bijection's domain is 4^half >= n */
    int epoch;     /* whose order perm (or key) holds, -1 none yet */
    int batch;     /* global batch */
    int rank, size;
    long iters;    /* batches per epoch: ceil(n / batch); the last may be short */
    int shuffle;   /* 0: every epoch in file order (--no-shuffle) */
} dt_sampler;

int sampler_create(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed, int shuffle);
/* sampler_create with the keyed order above array_max samples instead of SAMPLER_ARRAY_MAX (tests) */
int sampler_create_max(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed, int shuffle,
                       size_t array_max);
/* the sample at position i of the current epoch's order */
uint32_t sampler_at(const dt_sampler *s, size_t i);
/* Draws the order of epoch e (0-based); a pure function of (seed, e); file order without shuffle. */
void sampler_epoch(dt_sampler *s, int epoch);
/* This rank's part of global batch it: indices (into the split), how many, the global row of
 * the first one, and the size of the whole global batch (shorter for the last batch). With the
 * keyed order the indices are computed into s->slice, valid until the next call. */
void sampler_slice(dt_sampler *s, long it, const uint32_t **idx, int *rows, int64_t *row0, int *global_rows);
void sampler_destroy(dt_sampler *s);

#endif
