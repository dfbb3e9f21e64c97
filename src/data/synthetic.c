/* The synthetic dataset (--dataset synthetic): samples of a net's input shape and class count,
 * made on the fly, for measuring speed without data (as Horovod's and PyTorch's synthetic
 * benchmarks).
 *
 * Nothing is stored: sample i of a split is a function of (seed, split, i) alone, its pixels
 * uniform bytes from a counter hash and its label the hash modulo the classes. So every rank
 * count sees the same sample at the same global index, and a resumed run the same data. The
 * dataset copies the layout of the one the net's shape belongs to (dataset_for_input): stored
 * size, normalisation and default augmentation, so the loader, prefetcher, augmentation and
 * sharding do exactly what they do for real data; only the file reads are missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"
#include "data.h"
#include "formats.h"

/* the split's key: train 0, test 1 */
static uint64_t split_key(const dt_dataset *ds, const dt_split *s)
{
    return rng_hash(ds->synth_seed ^ 0x5e7e71c5a7a5e7ULL, s == &ds->test ? 1 : 0);
}

void synthetic_sample(const dt_dataset *ds, const dt_split *s, uint32_t i, uint8_t *px, uint16_t *label)
{
    uint64_t key = rng_hash(split_key(ds, s), i);
    size_t d = (size_t)ds->c * ds->h * ds->w, k = 0;
    uint64_t ctr = 1;
    for (; k + 8 <= d; k += 8, ctr++) { /* the hash's bytes from the lowest */
        uint64_t h = rng_hash_inline(key, ctr);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(px + k, &h, 8);
#else
        for (int b = 0; b < 8; b++) px[k + (size_t)b] = (uint8_t)(h >> (8 * b));
#endif
    }
    for (uint64_t h = rng_hash_inline(key, ctr); k < d; k++, h >>= 8) px[k] = (uint8_t)h;
    *label = (uint16_t)(rng_hash(key, 0) % (uint64_t)ds->n_classes);
}

int dataset_open_synthetic(const dt_synthetic *o, dt_dataset **out)
{
    dt_dataset *ds;
    if (o->c < 1 || o->c > 3 || o->h < 1 || o->w < 1)
        return dt_fail("--dataset synthetic: the net's input is %dx%dx%d (expected 1 or 3 channels)", o->c, o->h, o->w);
    if (o->n_classes < 1 || o->n_classes > 65535)
        return dt_fail("--dataset synthetic: the net ends in %d classes (expected 1 to 65535)", o->n_classes);
    if (o->n_train < 1 || o->n_train > UINT32_MAX || o->n_test > UINT32_MAX)
        return dt_fail("--synthetic-samples %zu: expected 1 to %u", o->n_train, UINT32_MAX);
    if (!(ds = calloc(1, sizeof *ds))) return dt_fail("out of memory");
    snprintf(ds->name, sizeof ds->name, "synthetic");
    snprintf(ds->dir, sizeof ds->dir, "generated, shaped like %s", o->like ? o->like : "the net's input");
    ds->c = o->c, ds->h = o->h, ds->w = o->w;
    ds->n_classes = o->n_classes;
    ds->synthetic = 1;
    ds->synth_seed = o->seed;
    if (!o->like || dataset_norm(o->like, ds->mean, ds->std, &ds->crop) != 0)
        for (int k = 0; k < 3; k++) ds->mean[k] = 0.5f, ds->std[k] = 0.25f;
    snprintf(ds->like, sizeof ds->like, "%s", o->like ? o->like : "");
    ds->train.n = o->n_train;
    ds->test.n = o->n_test;
    snprintf(ds->train.origin, sizeof ds->train.origin, "synthetic training samples");
    snprintf(ds->test.origin, sizeof ds->test.origin, "synthetic test samples");
    uint64_t id[] = {o->seed, o->n_train, o->n_test, (uint64_t)o->c, (uint64_t)o->h, (uint64_t)o->w,
                     (uint64_t)o->n_classes};
    ds->fingerprint = dt_hash64(id, sizeof id, DT_HASH_INIT);
    *out = ds;
    return 0;
}
