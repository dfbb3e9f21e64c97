/* loader_rate DIR SIZE OUT THREADS REPEATS — how fast dtrain's loader makes training samples: the
 * ImageNet-style tree in DIR (train/CLASS/IMAGE, packed once at SIZE x SIZE, as a run packs it) and
 * synthetic samples of the same size (what --dataset synthetic and tools/bench_gpu feed a net),
 * each through the training augmentation (random resized crop to OUT x OUT, flip, mean/std) by
 * dataset_fill_view, the loader's own call, on 1 thread and on THREADS.
 *
 * Prints one JSON line per (data, threads): samples/s, the best of REPEATS batches of 64 samples
 * (the machine is noisy). tools/bench_loader runs it beside torchvision's transforms on the same
 * images and prints the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/data.h"
#include "util.h"

enum { BATCH = 64 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the best rate of `repeats` batches, each of other samples (indices walk the split) */
static int rate(const dt_dataset *ds, int out, int threads, int repeats, double *best)
{
    dt_augment aug;
    if (augment_parse("resized-crop,flip", "imagenet", &aug) != 0) return -1;
    float *x = malloc(sizeof(float) * 3 * (size_t)out * out * BATCH);
    int32_t y[BATCH];
    uint32_t idx[BATCH];
    if (!x) return dt_fail("out of memory");
    *best = 0.0;
    /* the rounds before 0 read every image once (a run checks each packed image's checksum on its
     * first read; the pages come in), then batch after batch is timed */
    long warm = ds->synthetic ? 1 : (long)((ds->train.n + BATCH - 1) / BATCH);
    for (long r = -warm; r < repeats; r++) {
        for (int i = 0; i < BATCH; i++) idx[i] = (uint32_t)(((size_t)(r + warm) * BATCH + (size_t)i) % ds->train.n);
        dt_view v = {out, out, &aug, 0x5eedULL + (uint64_t)r, threads};
        double t = now();
        if (dataset_fill_view(ds, &ds->train, &v, idx, BATCH, x, y) != 0) {
            free(x);
            return -1;
        }
        t = now() - t;
        if (r >= 0 && BATCH / t > *best) *best = BATCH / t;
    }
    free(x);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: loader_rate DIR SIZE OUT THREADS REPEATS\n");
        return 2;
    }
    int size = atoi(argv[2]), out = atoi(argv[3]), threads = atoi(argv[4]), repeats = atoi(argv[5]);
    if (size < 8 || out < 1 || out > size || threads < 1 || repeats < 1) {
        fprintf(stderr, "loader_rate: expected SIZE >= 8, 1 <= OUT <= SIZE, THREADS >= 1, REPEATS >= 1\n");
        return 2;
    }
    dt_data_opts o = {0};
    o.image_size = size, o.channels = 3, o.threads = threads, o.may_pack = 1;
    dt_dataset *tree = NULL, *syn = NULL;
    if (dataset_open_opts("imagenet", argv[1], &o, &tree) != 0) {
        fprintf(stderr, "loader_rate: %s\n", dt_errmsg());
        return 1;
    }
    dt_synthetic so = {"imagenet", 3, size, size, tree->n_classes, 1000000, 1000, 7};
    if (dataset_open_synthetic(&so, &syn) != 0) {
        fprintf(stderr, "loader_rate: %s\n", dt_errmsg());
        return 1;
    }
    int counts[2] = {1, threads};
    for (int k = 0; k < (threads > 1 ? 2 : 1); k++)
        for (int d = 0; d < 2; d++) {
            double best = 0.0;
            if (rate(d ? syn : tree, out, counts[k], repeats, &best) != 0) {
                fprintf(stderr, "loader_rate: %s\n", dt_errmsg());
                return 1;
            }
            printf("{\"data\":\"%s\",\"threads\":%d,\"size\":%d,\"out\":%d,\"samples_per_s\":%.1f}\n",
                   d ? "synthetic" : "tree", counts[k], size, out, best);
            fflush(stdout);
        }
    dataset_close(tree);
    dataset_close(syn);
    return 0;
}
