/* data — the data module's public header: labelled images, found by name, augmented into float batches, split over
 * ranks.
 *
 * Owns: the samples (uint8, [n][C*H*W], channel-major) and labels of the train and test splits,
 * in memory (IDX, CIFAR) or memory-mapped from a packed file (ImageNet-style JPEG/PNG folders,
 * pack.c). A dataset is found by name (--dataset) in a default directory or in --data-dir;
 * every file is validated on open. Knows nothing of ranks beyond the integers it is given.
 *
 * Internal headers: sampler.h, formats.h, image.h, imgtree.h.
 * Files: dataset.c (the table, opening), idx.c (MNIST family), cifar.c (CIFAR-10/100 binary),
 * imgtree.c (class folders of images), decode.c (JPEG with libjpeg-turbo, PNG with libpng),
 * image.c (resizing), pack.c (the packed uint8 file),
 * synthetic.c (samples made on the fly from the seed, for speed runs without data),
 * augment.c (crops, flips, mean/std into floats), sampler.c (per-epoch order, per-rank slices),
 * loader.c (the loader thread).
 */
#ifndef DT_DATA_H
#define DT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "../split.h"
#include "../util.h"

typedef struct dt_split {
    size_t n;
    const uint8_t *x; /* [n][c*h*w] */
    uint16_t *y;      /* [n] */
    uint8_t *own;     /* x when it was read into memory (freed on close) */
    void *map;        /* the mapped pack file x points into (unmapped on close) */
    size_t map_bytes;
    const uint8_t *sums; /* packed: each image's checksum (u64 LE, pack_image_sum), NULL otherwise */
    uint8_t *checked;    /* packed: 1 once image i's pixels were found intact in this run */
    char origin[256];    /* the file, for messages */
    uint64_t pack_sum;   /* packed: the header's checksum */
    size_t skipped;      /* packed: images of the tree left out as unreadable (--on-bad-image skip) */
} dt_split;

typedef struct dt_dataset {
    char name[32];
    char dir[512];
    int c, h, w; /* of a stored sample */
    int n_classes;
    int crop;    /* samples are larger than a net's input and cropped to it (ImageNet-style) */
    float mean[3], std[3]; /* per channel, in [0, 1] pixel units: x = (pixel/255 - mean) / std */
    dt_split train, test;
    uint64_t fingerprint; /* of both splits' samples and labels: ranks compare it at start-up */
    int synthetic;        /* samples made on the fly (synthetic.c): the splits hold no x or y */
    uint64_t synth_seed;
    char like[32];        /* synthetic: the dataset whose layout it copies ("": none) */
    struct {
        uint64_t dev, ino;
        char path[512];
    } files[8]; /* the files the splits were read from (not an image tree's images): dataset_file_named */
    int n_files;
} dt_dataset;

/* What opening may need beyond the name and directory. */
typedef struct dt_data_opts {
    int image_size; /* ImageNet-style: side of the packed square images */
    int channels;   /* ImageNet-style: 1 (grey) or 3 (RGB) */
    int threads;    /* for packing */
    int may_pack;   /* this process may pack an image tree that has no pack yet (else it waits for one) */
    int scan_only;  /* a dry run: such a tree is scanned (sizes, labels), not packed; its splits hold no pixels */
    int skip_bad;   /* packing leaves an unreadable image out (counted in the pack) instead of failing */
    /* progress while packing: called about once a second and at the end */
    void (*progress)(void *arg, const char *what, size_t done, size_t total, double seconds);
    void *progress_arg;
} dt_data_opts;

/* Opens dataset NAME from DIR (NULL: its default locations). Fails with DT_DATA_NOT_FOUND (and
 * the message) when no location holds it (DIR lacks its files), with -1 on any other error. */
#define DT_DATA_NOT_FOUND (-2)
int dataset_open(const char *name, const char *dir, dt_dataset **out);
/* 0 when the shuffled order of n training samples (4 bytes each, on every rank, up to 2^25 samples;
 * none above: sampler.h) fits this host's free memory with room to spare; else -1 with a message
 * (what --dry-run checks too). sampler_bytes: those bytes. */
int sampler_fits(size_t n);
size_t sampler_bytes(size_t n);
int dataset_open_opts(const char *name, const char *dir, const dt_data_opts *o, dt_dataset **out);
void dataset_close(dt_dataset *ds);
/* The file of the dataset that path names (links followed), or NULL: an output must not replace one. */
const char *dataset_file_named(const dt_dataset *ds, const char *path);
/* The split directory of an image tree (DIR/train, DIR/val) that path would be in, or NULL: an output
 * there would be taken for an image by the next scan, or replace one. */
const char *dataset_tree_holding(const dt_dataset *ds, const char *path);
/* "fashion-mnist, mnist, cifar10, cifar100, imagenet, synthetic" */
const char *dataset_list(void);
int dataset_known(const char *name);
/* The dataset a net's input (n_dims sizes d, C x H x W or flat) and class count belong to, when
 * --dataset is not given: 1x28x28 → fashion-mnist, 3x32x32 → cifar10 or cifar100, larger RGB →
 * imagenet; NULL when none fits. */
const char *dataset_for_input(int n_dims, const int *d, int n_classes);
/* The dataset of that shape whatever the class count (cifar10 for 3x32x32): what --dataset
 * synthetic copies (its size, normalisation, default augmentation). */
const char *dataset_for_shape(int n_dims, const int *d);
/* Whether dataset name's samples have that shape, whatever the class counts (--classes N takes
 * data of fewer classes). */
int dataset_fits_shape(const char *name, int n_dims, const int *d);
/* 1 if dataset NAME has samples of that input shape and class count (mnist and fashion-mnist
 * alike; synthetic: any). */
int dataset_fits_input(const char *name, int n_dims, const int *d, int n_classes);
/* NAME's normalisation (per channel, [0, 1] units) and whether it crops; -1 for an unknown name. */
int dataset_norm(const char *name, float *mean, float *std, int *crop);
/* NAME's published training and test sizes (NULL or unknown: 50,000 and 10,000). */
void dataset_sizes(const char *name, size_t *n_train, size_t *n_test);

/* The synthetic dataset: c x h x w stored samples of n_classes, shaped like `like` (its
 * normalisation and cropping; NULL: none), made from seed. */
typedef struct dt_synthetic {
    const char *like;
    int c, h, w, n_classes;
    size_t n_train, n_test;
    uint64_t seed;
} dt_synthetic;
int dataset_open_synthetic(const dt_synthetic *s, dt_dataset **out);
/* Where NAME is looked for when --data-dir is not given ("a, b, c"), for messages and --help. */
const char *dataset_default_dirs(const char *name);
/* A dataset the name refers to crops its samples to the net's input (ImageNet-style)? */
int dataset_crops(const char *name);

/* Writes rows samples (indices idx[]) as normalised floats of the stored size into x
 * [rows][c*h*w], labels into y: no augmentation. Fails only on a damaged packed image. */
int dataset_fill(const dt_dataset *ds, const dt_split *s, const uint32_t *idx, int rows, float *x, int32_t *y);

/* ---- augmentation (augment.c) ------------------------------------------------------------------ */

typedef struct dt_augment {
    int pad_crop;     /* random crop of the stored size from the image padded with this many zeros */
    int resized_crop; /* random resized crop: area 8-100 %, aspect 3/4-4/3, resized to the output */
    int flip;         /* horizontal flip with probability 1/2 */
} dt_augment;

/* "default" (the dataset's, PAPERS.md), "none", or a comma list of crop=PAD, resized-crop, flip. */
int augment_parse(const char *spec, const char *dataset, dt_augment *out);
/* "crop=4, flip" for the banner */
void augment_describe(const dt_augment *a, char *buf, size_t n);

/* What a batch looks like to the net: output size, and the augmentation (NULL: evaluation, which
 * centre-crops a larger stored sample). key selects the random draws (seed and epoch); each
 * sample's draws are a function of (key, its index in the split) alone. */
typedef struct dt_view {
    int h, w;
    const dt_augment *aug;
    uint64_t key;
    int threads; /* threads that make a batch's samples (0 or 1: the caller's alone) */
} dt_view;

int dataset_fill_view(const dt_dataset *ds, const dt_split *s, const dt_view *v, const uint32_t *idx, int rows,
                      float *x, int32_t *y);

/* ---- the loader thread (loader.c) -------------------------------------------------------------- */

/* One local batch as the net takes it. */
typedef struct dt_batch {
    float *x;     /* [rows][c*h*w of the view] */
    int32_t *y;
    int rows, global_rows;
    int64_t row0;
} dt_batch;

typedef struct dt_loader dt_loader;

/* A loader of the training batches of this rank: iterations it0.. of `iters_per_epoch` per epoch,
 * shuffled each epoch (or in file order), up to `depth` batches ahead on a thread of its own
 * (depth 0: in the caller, on demand), each batch's samples made by `threads` threads (where the
 * host's cores are free: the compute runs on a GPU). Batches live in memory from mem (NULL:
 * ordinary; a GPU's page-locked memory, which its copies read at the bus's full rate). */
int loader_create(dt_loader **out, const dt_dataset *ds, const dt_augment *aug, int out_h, int out_w, int batch,
                  int rank, int size, uint64_t seed, int shuffle, int depth, long it0, long total, int threads,
                  const dt_host_allocator *mem);
/* The batch of iteration it (they come in order); valid until the next call. */
int loader_next(dt_loader *l, long it, dt_batch *b);
void loader_destroy(dt_loader *l);

#endif
