/* dataset — labelled images in memory, found by name, and how a global batch is split.
 *
 * Owns: the decoded samples (uint8, [n][C*H*W]) and labels of the train and test splits.
 * A dataset is found by name (--dataset) in a default directory or in --data-dir; every file is
 * validated on load (idx.c). Batches: one permutation per epoch from (seed, epoch) on every rank,
 * no communication; global batch i is perm[i*B, (i+1)*B) and rank r takes its contiguous slice
 * of it, so P ranks with global batch B see exactly the samples 1 rank sees with batch B.
 * Knows nothing of ranks beyond the (rank, size) integers it is given.
 */
#ifndef DT_DATASET_H
#define DT_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_split {
    size_t n;
    uint8_t *x; /* [n][c*h*w] */
    uint8_t *y; /* [n] */
} dt_split;

typedef struct dt_dataset {
    char name[32];
    char dir[512];
    int c, h, w;
    int n_classes;
    float mean[3], std[3]; /* per channel, in [0, 1] pixel units: x = (pixel/255 - mean) / std */
    dt_split train, test;
} dt_dataset;

/* Opens dataset NAME from DIR (NULL: its default locations). */
int dataset_open(const char *name, const char *dir, dt_dataset **out);
void dataset_close(dt_dataset *ds);
/* "fashion-mnist, mnist" */
const char *dataset_list(void);
/* Where NAME is looked for when --data-dir is not given ("a, b, c"), for messages and --help. */
const char *dataset_default_dirs(const char *name);

/* Writes rows samples (indices idx[]) as normalised floats into x [rows][c*h*w], labels into y. */
void dataset_fill(const dt_dataset *ds, const dt_split *s, const uint32_t *idx, int rows, float *x, int32_t *y);

/* The per-epoch order and this rank's slice of each global batch. */
typedef struct dt_sampler {
    uint64_t seed;
    size_t n;      /* samples in the split */
    uint32_t *perm;
    int batch;     /* global batch */
    int rank, size;
    long iters;    /* batches per epoch: ceil(n / batch); the last may be short */
} dt_sampler;

int sampler_create(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed);
/* Draws the order of epoch e (0-based); a pure function of (seed, e). */
void sampler_epoch(dt_sampler *s, int epoch);
/* This rank's part of global batch it: indices (into the split), how many, the global row of
 * the first one, and the size of the whole global batch (shorter for the last batch). */
void sampler_slice(const dt_sampler *s, long it, const uint32_t **idx, int *rows, int64_t *row0, int *global_rows);
void sampler_destroy(dt_sampler *s);

/* Rows [first, first+count) of an n-row set assigned to rank r of p, balanced (sizes differ by ≤1). */
void split_range(size_t n, int r, int p, size_t *first, size_t *count);

/* IDX (MNIST-family) files, raw or gzip. kind: "images" (3 dims) or "labels" (1 dim). */
int idx_load(const char *path, int want_dims, uint32_t *dims, uint8_t **data);

#endif
