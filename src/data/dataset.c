/* The dataset table, finding a dataset's directory, IDX datasets, and filling plain batches. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../registry.h"
#include "../util.h"
#include "formats.h"

typedef struct {
    const char *name;
    const char *dirs[3]; /* default locations, in order */
    const char *probe[2]; /* a file (or, ending in '/', a directory) whose presence marks the dataset */
    const char *how;     /* how to get it, for the "not found" message */
    float mean[3], std[3]; /* of the training pixels in [0, 1] */
    int crop;
    size_t n_train, n_test; /* the published sizes: what --dataset synthetic makes by default */
} dataset_desc;

static const dataset_desc fashion_mnist = {
    "fashion-mnist", {"/usr/share/datasets/fashion-mnist", "data/fashion-mnist", NULL},
    {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"},
    "install it with 'apt-get install dataset-fashion-mnist' or run datasets/fashion-mnist",
    {0.2860f, 0.2860f, 0.2860f}, {0.3530f, 0.3530f, 0.3530f}, 0, 60000, 10000};
static const dataset_desc mnist = {
    "mnist", {"data/mnist", "/usr/share/datasets/mnist", NULL},
    {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"}, "run datasets/mnist DIR (see datasets/README.md)",
    {0.1307f, 0.1307f, 0.1307f}, {0.3081f, 0.3081f, 0.3081f}, 0, 60000, 10000};
static const dataset_desc cifar10 = {
    "cifar10", {"data/cifar10", "data/cifar-10-batches-bin", "/usr/share/datasets/cifar10"},
    {"data_batch_1.bin", "cifar-10-batches-bin/data_batch_1.bin"},
    "download cifar-10-binary.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html and unpack it there",
    {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}, 0, 50000, 10000};
static const dataset_desc cifar100 = {
    "cifar100", {"data/cifar100", "data/cifar-100-binary", "/usr/share/datasets/cifar100"},
    {"train.bin", "cifar-100-binary/train.bin"},
    "download cifar-100-binary.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html and unpack it there",
    {0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}, 0, 50000, 10000};
static const dataset_desc imagenet = {
    "imagenet", {"data/imagenet", "/usr/share/datasets/imagenet", NULL}, {"train/", NULL},
    "put train/<class>/*.JPEG and val/<class>/*.JPEG there (or .png; the first run packs them into one file; see "
    "datasets/README.md)",
    {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, 1, 1281167, 50000};

static const dataset_desc *const descs[] = {&fashion_mnist, &mnist, &cifar10, &cifar100, &imagenet};
static const dt_registry registry = DT_REGISTRY("dataset", descs);

static const dataset_desc *find_desc(const char *name) { return registry_find(&registry, name); }

const char *dataset_list(void)
{
    static char buf[256];
    if (!buf[0]) {
        registry_list(&registry, buf, sizeof buf);
        strncat(buf, ", synthetic", sizeof buf - strlen(buf) - 1);
    }
    return buf;
}

int dataset_known(const char *name) { return find_desc(name) || !strcmp(name, "synthetic"); }

const char *dataset_for_shape(int n_dims, const int *d)
{
    long size = 1;
    for (int i = 0; i < n_dims; i++) size *= d[i];
    if ((n_dims == 3 && d[0] == 1 && d[1] == 28 && d[2] == 28) || (n_dims == 2 && d[0] == 28 && d[1] == 28) ||
        (n_dims == 1 && size == 784)) /* 1x28x28, 28x28 or 784: the samples of MNIST and its likes */
        return "fashion-mnist";
    if (n_dims == 3 && d[0] == 3 && d[1] == 32 && d[2] == 32) return "cifar10";
    if (n_dims == 3 && d[0] == 3 && d[1] >= 64 && d[2] >= 64) return "imagenet";
    return NULL;
}

const char *dataset_for_input(int n_dims, const int *d, int n_classes)
{
    const char *s = dataset_for_shape(n_dims, d);
    if (!s || !strcmp(s, "imagenet")) return s;
    if (!strcmp(s, "cifar10")) return n_classes == 10 ? "cifar10" : n_classes == 100 ? "cifar100" : NULL;
    return n_classes == 10 ? s : NULL;
}

int dataset_fits_input(const char *name, int n_dims, const int *d, int n_classes)
{
    const char *f = dataset_for_input(n_dims, d, n_classes);
    if (!strcmp(name, "synthetic")) return 1;
    if (!f) return 0;
    if (!strcmp(f, "fashion-mnist")) return !strcmp(name, "fashion-mnist") || !strcmp(name, "mnist");
    return !strcmp(f, name);
}

int dataset_fits_shape(const char *name, int n_dims, const int *d)
{
    return dataset_fits_input(name, n_dims, d, strcmp(name, "cifar100") == 0 ? 100 : 10); /* its own classes */
}

int dataset_norm(const char *name, float *mean, float *std, int *crop)
{
    const dataset_desc *d = find_desc(name);
    if (!d) return -1;
    memcpy(mean, d->mean, sizeof d->mean);
    memcpy(std, d->std, sizeof d->std);
    *crop = d->crop;
    return 0;
}

void dataset_sizes(const char *name, size_t *n_train, size_t *n_test)
{
    const dataset_desc *d = name ? find_desc(name) : NULL;
    *n_train = d ? d->n_train : 50000;
    *n_test = d ? d->n_test : 10000;
}

int dataset_crops(const char *name)
{
    const dataset_desc *d = find_desc(name);
    return d && d->crop;
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


/* does dir hold the dataset (one of its probe paths)? */
static int probe(const dataset_desc *d, const char *dir)
{
    char p[1024];
    for (int i = 0; i < 2 && d->probe[i]; i++) {
        size_t n = strlen(d->probe[i]);
        snprintf(p, sizeof p, "%s/%s", dir, d->probe[i]);
        if (d->probe[i][n - 1] == '/' ? dt_is_kind(p, 1) : dt_is_kind(p, 0)) return 1;
    }
    return 0;
}

/* DIR/BASE or DIR/BASE.gz, whichever exists (raw preferred): 0; -1 with a message where one of
 * the names is there but no regular file (a directory, a pipe, a link to nowhere); 1 where neither
 * is there. */
static int find_file(const char *dir, const char *base, char *out, size_t n)
{
    struct stat st;
    for (int gz = 0; gz < 2; gz++) {
        snprintf(out, n, "%s/%s%s", dir, base, gz ? ".gz" : "");
        if (dt_is_kind(out, 0)) return 0;
    }
    for (int gz = 0; gz < 2; gz++) {
        snprintf(out, n, "%s/%s%s", dir, base, gz ? ".gz" : "");
        if (lstat(out, &st) != 0) continue;
        int dangling = S_ISLNK(st.st_mode) && stat(out, &st) != 0; /* else st: what the link leads to */
        return dt_fail("%s: %s (expected the IDX file)", out,
                       dangling ? "a symbolic link to nothing" : dt_file_kind(st.st_mode));
    }
    return 1;
}

static int load_idx_split(dt_dataset *ds, const char *dir, const char *prefix, dt_split *s)
{
    char ipath[1024], lpath[1024], ibase[64], lbase[64];
    uint32_t idims[3], ldims[1];
    uint8_t *labels = NULL;
    snprintf(ibase, sizeof ibase, "%s-images-idx3-ubyte", prefix);
    snprintf(lbase, sizeof lbase, "%s-labels-idx1-ubyte", prefix);
    int ri = find_file(dir, ibase, ipath, sizeof ipath), rl = ri < 0 ? -1 : find_file(dir, lbase, lpath, sizeof lpath);
    if (ri < 0 || rl < 0) return -1;
    if (ri || rl) {
        /* none of the four there: the dataset is not here (exit 2); some: a partial set (exit 1) */
        static const char *const all[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
        char path[1024], missing[300] = "";
        int n_there = 0;
        for (int i = 0; i < 4; i++) {
            int r = find_file(dir, all[i], path, sizeof path);
            dt_err_clear();
            n_there += r <= 0;
            if (r > 0) snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s[.gz]",
                                missing[0] ? ", " : "", all[i]);
        }
        if (n_there == 0) {
            dt_fail("%s: none of the four IDX files of %s (%s)", dir, ds->name, missing);
            return DT_DATA_NOT_FOUND;
        }
        return dt_fail("%s: no %s (expected the four IDX files of %s in this directory)", dir, missing, ds->name);
    }
    if (idx_load(ipath, 3, idims, &s->own) != 0) return -1;
    s->x = s->own;
    if (idx_load(lpath, 1, ldims, &labels) != 0) return -1;
    dataset_note_file(ds, ipath);
    dataset_note_file(ds, lpath);
    if (idims[0] != ldims[0]) {
        free(labels);
        return dt_fail("%s: %u labels for %u images in %s (expected one label per image)", lpath, ldims[0], idims[0],
                       ipath);
    }
    if (ds->h == 0) {
        ds->c = 1;
        ds->h = (int)idims[1];
        ds->w = (int)idims[2];
    } else if (ds->h != (int)idims[1] || ds->w != (int)idims[2]) {
        free(labels);
        return dt_fail("%s: images are %ux%u (expected %dx%d like the training images)", ipath, idims[1], idims[2],
                       ds->h, ds->w);
    }
    s->n = idims[0];
    if (!(s->y = malloc(sizeof *s->y * s->n))) {
        free(labels);
        return dt_fail("out of memory");
    }
    for (size_t i = 0; i < s->n; i++) {
        if (labels[i] >= ds->n_classes) {
            dt_fail("%s: label %d at index %zu (expected 0..%d)", lpath, labels[i], i, ds->n_classes - 1);
            free(labels);
            return -1;
        }
        s->y[i] = labels[i];
    }
    free(labels);
    return 0;
}

static int open_idx(dt_dataset *ds, const char *dir)
{
    ds->n_classes = 10;
    int rc = load_idx_split(ds, dir, "train", &ds->train);
    if (rc != 0) return rc;
    return load_idx_split(ds, dir, "t10k", &ds->test);
}

int dataset_open(const char *name, const char *dir, dt_dataset **out)
{
    dt_data_opts o = {.image_size = 256, .channels = 3, .threads = 1, .may_pack = 1};
    return dataset_open_opts(name, dir, &o, out);
}

/* A split's fingerprint: a pack's header checksum (it covers the labels and every image's
 * checksum), or a hash of the samples and labels read into memory. */
static uint64_t split_sum(const dt_dataset *ds, const dt_split *s)
{
    if (s->map) return s->pack_sum;
    if (!s->x) return 0;
    size_t d = (size_t)ds->c * ds->h * ds->w;
    return pack_image_sum(s->x, s->n * d) ^ dt_hash64(s->y, s->n * sizeof *s->y, DT_HASH_INIT);
}

int dataset_open_opts(const char *name, const char *dir, const dt_data_opts *o, dt_dataset **out)
{
    const dataset_desc *d = find_desc(name);
    dt_dataset *ds;
    char chosen[512] = "", envdir[512];
    int rc;
    if (!d) return dt_fail("--dataset: unknown dataset '%s' (expected one of %s)", name, dataset_list());
    if (dir) {
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return dt_fail("--data-dir %s: %s (expected a directory holding %s)", dir,
                           stat(dir, &st) != 0 ? strerror(errno) : "not a directory", name);
        snprintf(chosen, sizeof chosen, "%s", dir);
    } else {
        const char *env = getenv("DTRAIN_DATA");
        const char *cands[4];
        int nc = 0;
        if (env) {
            snprintf(envdir, sizeof envdir, "%s/%s", env, name);
            cands[nc++] = envdir;
        }
        for (int i = 0; i < 3 && d->dirs[i]; i++) cands[nc++] = d->dirs[i];
        for (int i = 0; i < nc && !chosen[0]; i++)
            if (probe(d, cands[i])) snprintf(chosen, sizeof chosen, "%s", cands[i]);
        if (!chosen[0])
        {
            dt_fail("--dataset %s: not found in %s (%s, or give --data-dir DIR; to measure speed without data: "
                    "--dataset synthetic)",
                    name, dataset_default_dirs(name), d->how);
            return DT_DATA_NOT_FOUND;
        }
    }
    if (!(ds = calloc(1, sizeof *ds))) return dt_fail("out of memory");
    snprintf(ds->name, sizeof ds->name, "%s", name);
    snprintf(ds->dir, sizeof ds->dir, "%s", chosen);
    memcpy(ds->mean, d->mean, sizeof ds->mean);
    memcpy(ds->std, d->std, sizeof ds->std);
    ds->crop = d->crop;
    if (!strcmp(name, "cifar10") || !strcmp(name, "cifar100"))
        rc = cifar_open(ds, chosen, strcmp(name, "cifar100") == 0);
    else if (!strcmp(name, "imagenet")) rc = imagenet_open(ds, chosen, o);
    else rc = open_idx(ds, chosen);
    if (rc != 0) {
        dataset_close(ds);
        return rc == DT_DATA_NOT_FOUND ? rc : -1;
    }
    if (ds->train.n == 0 || ds->test.n == 0) {
        dt_fail("%s: the %s split of %s is empty (expected samples in both)", chosen, ds->train.n ? "test" : "training",
                name);
        dataset_close(ds);
        return -1;
    }
    ds->fingerprint = split_sum(ds, &ds->train) ^ (split_sum(ds, &ds->test) * 31);
    *out = ds;
    return 0;
}

static void split_free(dt_split *s)
{
    free(s->own);
    free(s->y);
    free(s->checked);
    if (s->map) munmap(s->map, s->map_bytes);
}

void dataset_note_file(dt_dataset *ds, const char *path)
{
    struct stat st;
    if (ds->n_files >= (int)DT_ARRAY_LEN(ds->files) || stat(path, &st) != 0) return;
    ds->files[ds->n_files].dev = (uint64_t)st.st_dev;
    ds->files[ds->n_files].ino = (uint64_t)st.st_ino;
    snprintf(ds->files[ds->n_files].path, sizeof ds->files[0].path, "%s", path);
    ds->n_files++;
}

const char *dataset_tree_holding(const dt_dataset *ds, const char *path)
{
    static char out[PATH_MAX + 8];
    char dir[PATH_MAX], real[PATH_MAX], top[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!ds || strcmp(ds->name, "imagenet") != 0 || ds->synthetic) return NULL;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    if (!realpath(dir, real)) return NULL;
    for (int i = 0; i < 2; i++) {
        char split[PATH_MAX + 8];
        snprintf(split, sizeof split, "%s/%s", ds->dir, i ? "val" : "train");
        size_t len;
        if (!realpath(split, top) || strncmp(real, top, len = strlen(top)) != 0 || (real[len] && real[len] != '/'))
            continue;
        snprintf(out, sizeof out, "%s", split);
        return out;
    }
    return NULL;
}

const char *dataset_file_named(const dt_dataset *ds, const char *path)
{
    struct stat st;
    if (!ds || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    for (int i = 0; i < ds->n_files; i++)
        if (ds->files[i].dev == (uint64_t)st.st_dev && ds->files[i].ino == (uint64_t)st.st_ino)
            return ds->files[i].path;
    return NULL;
}

void dataset_close(dt_dataset *ds)
{
    if (!ds) return;
    split_free(&ds->train);
    split_free(&ds->test);
    free(ds);
}

int dataset_fill(const dt_dataset *ds, const dt_split *s, const uint32_t *idx, int rows, float *x, int32_t *y)
{
    dt_view v = {ds->h, ds->w, NULL, 0, 1};
    return dataset_fill_view(ds, s, &v, idx, rows, x, y);
}
