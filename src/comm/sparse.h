/* sparse — top-k selection over the arena and the merge of sparse vectors (gTop-k's ⊤).
 *
 * A sparse vector is k (index, value) pairs sorted by index. "Largest" always means largest
 * |value|, ties going to the lower index, so every rank and every run picks the same set.
 *
 * topk_select is exact and avoids sorting d values: it estimates the threshold of the k-th
 * largest |a| from a fixed pseudo-random sample (a little below it, so at least k values pass),
 * collects the values above it in one scan, and fixes the result up with a selection among
 * those candidates; if the estimate misses (too few or far too many candidates) it moves the
 * threshold and scans again, and in the end falls back to a selection over all values.
 * topk_select_sort is the reference it is tested and benchmarked against: a full sort.
 */
#ifndef DT_SPARSE_H
#define DT_SPARSE_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_pair {
    uint32_t i;
    float v;
} dt_pair;

typedef struct dt_topk dt_topk;

int topk_create(dt_topk **out, size_t max_n, size_t max_k);
void topk_destroy(dt_topk *t);
/* The k largest |a[i]| of a[0..n), sorted by index, into out[0..k). k <= n. */
int topk_select(dt_topk *t, const float *a, size_t n, size_t k, dt_pair *out);
/* Scans of the arena the last topk_select needed (1 when the sample's estimate held). */
int topk_last_scans(const dt_topk *t);
/* Reference: sorts all n by (|a| desc, index asc), keeps k, sorts them by index. */
int topk_select_sort(const float *a, size_t n, size_t k, dt_pair *out);

/* --topk-select sampled, DGC's threshold from a sample (Lin et al. 2018), where topk_select
 * would sample: the threshold is the sample's estimate of the k-th largest |a|. Where k or more values
 * reach it, the k largest of those, which are the k largest of all (as topk_select); where fewer do,
 * no second scan with a lower threshold (topk_select's): those that reach it and the first of the rest
 * in index order make up k. Exactly k pairs sorted by index, the k largest or close to them
 * (tools/bench_sparse measures how close). Where topk_select would not sample (small n, or a sample of
 * n/4 or more): topk_select's exact selection. */
int topk_select_sampled(dt_topk *t, const float *a, size_t n, size_t k, dt_pair *out);
/* Its pieces, for a device that scans its own memory: the sample's size (0: select exactly); the
 * index of sample value s (rng_hash(0x5a17, s) mod n); the threshold from the sample of |a| (m values,
 * reordered): its floor(rho m)-th largest (at least the first), rho = k / n; how many values reach a
 * threshold; where fewer than k do, the pairs of those that do and of the first of the rest. */
#define DT_TOPK_MAX_SAMPLE 200000 /* values */
size_t topk_sample_size(size_t n, size_t k);
size_t topk_sample_index(size_t s, size_t n);
float topk_sample_threshold(float *sample, size_t m, size_t n, size_t k);
size_t topk_count_above(const float *a, size_t n, float thr);
void topk_take_above(const float *a, size_t n, size_t k, float thr, dt_pair *out);

/* gTop-k's ⊤ (Shi et al., Def. 1): a + b summed where indices meet, then the k largest of the
 * union, sorted by index. a, b sorted by index; out may not alias them; tmp holds na + nb pairs.
 * Returns how many pairs went out (min(k, |union|)). */
size_t sparse_merge_topk(const dt_pair *a, size_t na, const dt_pair *b, size_t nb, size_t k, dt_pair *out,
                         dt_pair *tmp);

/* Partially orders p[0..n) so that p[0..k) are the k largest (any order within). */
void pairs_select(dt_pair *p, size_t n, size_t k);
void pairs_sort_by_index(dt_pair *p, size_t n);

/* The timing model's costs on this CPU, timed on generated values (heavy-tailed, as gradients;
 * best of 3): seconds for topk_select (sampled: topk_select_sampled) of k of n values, and per
 * output pair of sparse_merge_topk (merging two lists of k pairs). */
int sparse_costs(size_t n, size_t k, int sampled, double *select_s, double *merge_pair_s);

#endif
