/* The dataset table, IDX datasets, the per-epoch sampler. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../rng.h"
#include "../util.h"
#include "dataset.h"

typedef struct {
    const char *name;
    const char *dirs[3]; /* default locations, in order */
    const char *how;     /* how to get it, for the "not found" message */
    int (*open)(dt_dataset *ds, const char *dir);
    float mean, std; /* of the training pixels in [0, 1] (grey datasets) */
} dataset_desc;

static int open_idx(dt_dataset *ds, const char *dir);

static const dataset_desc descs[] = {
    {"fashion-mnist",
     {"/usr/share/datasets/fashion-mnist", "data/fashion-mnist", NULL},
     "install it with 'apt-get install dataset-fashion-mnist' or run datasets/fashion-mnist",
     open_idx, 0.2860f, 0.3530f},
    {"mnist", {"data/mnist", "/usr/share/datasets/mnist", NULL}, "run datasets/mnist DIR (see datasets/README.md)",
     open_idx, 0.1307f, 0.3081f},
};

static const dataset_desc *find_desc(const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(descs); i++)
        if (strcmp(descs[i].name, name) == 0) return &descs[i];
    return NULL;
}

const char *dataset_list(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(descs); i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", descs[i].name);
    }
    return buf;
}

const char *dataset_default_dirs(const char *name)
{
    static _Thread_local char buf[1024];
    const dataset_desc *d = find_desc(name);
    const char *env = getenv("DTRAIN_DATA");
    size_t off = 0;
    buf[0] = 0;
    if (!d) return buf;
    if (env) off += (size_t)snprintf(buf + off, sizeof buf - off, "$DTRAIN_DATA/%s", name);
    for (int i = 0; i < 3 && d->dirs[i]; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", off ? ", " : "", d->dirs[i]);
    return buf;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/BASE or DIR/BASE.gz, whichever exists (raw preferred). */
static int find_file(const char *dir, const char *base, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", dir, base);
    if (exists(out)) return 0;
    snprintf(out, n, "%s/%s.gz", dir, base);
    if (exists(out)) return 0;
    return -1;
}

static int load_idx_split(dt_dataset *ds, const char *dir, const char *prefix, dt_split *s)
{
    char ipath[1024], lpath[1024], ibase[64], lbase[64];
    uint32_t idims[3], ldims[1];
    snprintf(ibase, sizeof ibase, "%s-images-idx3-ubyte", prefix);
    snprintf(lbase, sizeof lbase, "%s-labels-idx1-ubyte", prefix);
    if (find_file(dir, ibase, ipath, sizeof ipath) != 0)
        return dt_fail("%s: no %s[.gz] (expected the four IDX files of %s in this directory)", dir, ibase, ds->name);
    if (find_file(dir, lbase, lpath, sizeof lpath) != 0)
        return dt_fail("%s: no %s[.gz] (expected the four IDX files of %s in this directory)", dir, lbase, ds->name);
    if (idx_load(ipath, 3, idims, &s->x) != 0) return -1;
    if (idx_load(lpath, 1, ldims, &s->y) != 0) return -1;
    if (idims[0] != ldims[0])
        return dt_fail("%s: %u labels for %u images in %s (expected one label per image)", lpath, ldims[0], idims[0],
                       ipath);
    if (ds->h == 0) {
        ds->c = 1;
        ds->h = (int)idims[1];
        ds->w = (int)idims[2];
    } else if (ds->h != (int)idims[1] || ds->w != (int)idims[2]) {
        return dt_fail("%s: images are %ux%u (expected %dx%d like the training images)", ipath, idims[1], idims[2],
                       ds->h, ds->w);
    }
    s->n = idims[0];
    for (size_t i = 0; i < s->n; i++)
        if (s->y[i] >= ds->n_classes)
            return dt_fail("%s: label %d at index %zu (expected 0..%d)", lpath, s->y[i], i, ds->n_classes - 1);
    return 0;
}

static int open_idx(dt_dataset *ds, const char *dir)
{
    ds->n_classes = 10;
    if (load_idx_split(ds, dir, "train", &ds->train) != 0) return -1;
    return load_idx_split(ds, dir, "t10k", &ds->test);
}

int dataset_open(const char *name, const char *dir, dt_dataset **out)
{
    const dataset_desc *d = find_desc(name);
    dt_dataset *ds;
    char chosen[512] = "", envdir[512];
    if (!d) return dt_fail("--dataset: unknown dataset '%s' (expected one of %s)", name, dataset_list());
    if (dir) {
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return dt_fail("--data-dir %s: %s (expected a directory holding %s)", dir,
                           stat(dir, &st) != 0 ? strerror(errno) : "not a directory", name);
        snprintf(chosen, sizeof chosen, "%s", dir);
    } else {
        const char *env = getenv("DTRAIN_DATA");
        char probe[1024];
        const char *cands[4];
        int nc = 0;
        if (env) {
            snprintf(envdir, sizeof envdir, "%s/%s", env, name);
            cands[nc++] = envdir;
        }
        for (int i = 0; i < 3 && d->dirs[i]; i++) cands[nc++] = d->dirs[i];
        for (int i = 0; i < nc && !chosen[0]; i++)
            if (find_file(cands[i], "train-images-idx3-ubyte", probe, sizeof probe) == 0)
                snprintf(chosen, sizeof chosen, "%s", cands[i]);
        if (!chosen[0])
            return dt_fail("--dataset %s: not found in %s (%s, or give --data-dir DIR)", name,
                           dataset_default_dirs(name), d->how);
    }
    if (!(ds = calloc(1, sizeof *ds))) return dt_fail("out of memory");
    snprintf(ds->name, sizeof ds->name, "%s", name);
    snprintf(ds->dir, sizeof ds->dir, "%s", chosen);
    for (int c = 0; c < 3; c++) {
        ds->mean[c] = d->mean;
        ds->std[c] = d->std;
    }
    if (d->open(ds, chosen) != 0) {
        dataset_close(ds);
        return -1;
    }
    *out = ds;
    return 0;
}

void dataset_close(dt_dataset *ds)
{
    if (!ds) return;
    free(ds->train.x);
    free(ds->train.y);
    free(ds->test.x);
    free(ds->test.y);
    free(ds);
}

void dataset_fill(const dt_dataset *ds, const dt_split *s, const uint32_t *idx, int rows, float *x, int32_t *y)
{
    size_t plane = (size_t)ds->h * ds->w, d = (size_t)ds->c * plane;
    for (int r = 0; r < rows; r++) {
        const uint8_t *src = s->x + (size_t)idx[r] * d;
        float *dst = x + (size_t)r * d;
        for (int c = 0; c < ds->c; c++) {
            const float a = 1.0f / (255.0f * ds->std[c]), b = -ds->mean[c] / ds->std[c];
            const uint8_t *restrict sp = src + (size_t)c * plane;
            float *restrict dp = dst + (size_t)c * plane;
#pragma omp simd
            for (size_t j = 0; j < plane; j++) dp[j] = (float)sp[j] * a + b;
        }
        y[r] = s->y[idx[r]];
    }
}

void split_range(size_t n, int r, int p, size_t *first, size_t *count)
{
    size_t a = n * (size_t)r / (size_t)p, b = n * (size_t)(r + 1) / (size_t)p;
    *first = a;
    *count = b - a;
}

int sampler_create(dt_sampler **out, size_t n, int batch, int rank, int size, uint64_t seed)
{
    dt_sampler *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    if (n > UINT32_MAX) {
        free(s);
        return dt_fail("dataset of %zu samples is larger than 2^32", n);
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
    s->iters = (long)((n + (size_t)batch - 1) / (size_t)batch);
    for (size_t i = 0; i < n; i++) s->perm[i] = (uint32_t)i;
    *out = s;
    return 0;
}

void sampler_epoch(dt_sampler *s, int epoch)
{
    dt_rng rng;
    rng_seed(&rng, s->seed, rng_stream_id("shuffle") + (uint64_t)epoch);
    for (size_t i = 0; i < s->n; i++) s->perm[i] = (uint32_t)i;
    for (size_t i = s->n; i > 1; i--) {
        size_t j = (size_t)rng_below(&rng, i);
        uint32_t t = s->perm[i - 1];
        s->perm[i - 1] = s->perm[j];
        s->perm[j] = t;
    }
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
