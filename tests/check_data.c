/* CIFAR and ImageNet-style data, augmentation, resampling and the loader thread. Files are
 * generated here in the true formats: CIFAR records byte by byte, PNGs with libpng's writer
 * (RGB, grey, RGBA, palette), JPEGs as their signature. */
#include <check.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu.h"
#include "data/formats.h"
#include "data/image.h"
#include "testutil.h"
#include "util.h"

static char root[512];

static void setup(void) { snprintf(root, sizeof root, "%s", tmpdir_create()); }
static void teardown(void) { tmpdir_remove(); }

static void sh(const char *fmt, const char *a)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, a, a, a);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- CIFAR ------------------------------------------------------------------------------------- */

/* n records; image i has pixel p = (i + p) % 251, label i % classes (and coarse label i % 20) */
static void write_cifar(const char *path, int n, int hundred, int classes)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < n; i++) {
        if (hundred) fputc(i % 20, f);
        fputc(i % classes, f);
        for (int p = 0; p < 3072; p++) fputc((i + p) % 251, f);
    }
    fclose(f);
}

static void cifar10_tree(const char *dir, int per_batch)
{
    char p[1024];
    mkdir(dir, 0755);
    for (int b = 1; b <= 5; b++) {
        snprintf(p, sizeof p, "%s/data_batch_%d.bin", dir, b);
        write_cifar(p, per_batch, 0, 10);
    }
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    write_cifar(p, per_batch, 0, 10);
}

START_TEST(cifar10_and_100_load)
{
    char dir[600], sub[700], p[800];
    dt_dataset *ds;
    snprintf(dir, sizeof dir, "%s/c10", root);
    cifar10_tree(dir, 7);
    ck_assert_msg(dataset_open("cifar10", dir, &ds) == 0, "%s", dt_errmsg());
    ck_assert_uint_eq(ds->train.n, 35);
    ck_assert_uint_eq(ds->test.n, 7);
    ck_assert(ds->c == 3 && ds->h == 32 && ds->w == 32 && ds->n_classes == 10);
    ck_assert_int_eq(ds->train.y[8], 1);                       /* batch 2, record 1 */
    ck_assert_int_eq(ds->train.x[8 * 3072 + 1024 + 5], (1 + 1029) % 251); /* green plane, pixel 5 */
    /* normalised with the CIFAR-10 channel statistics */
    uint32_t idx = 8;
    float x[3072];
    int32_t y;
    dataset_fill(ds, &ds->train, &idx, 1, x, &y);
    float want = ((float)((1 + 2048 + 7) % 251) / 255.0f - 0.4465f) / 0.2616f;
    ck_assert_msg(fabsf(x[2048 + 7] - want) < 1e-5f, "%g vs %g", x[2048 + 7], want);
    dataset_close(ds);

    /* the folder the archive unpacks to, inside DIR; CIFAR-100 with its two label bytes */
    snprintf(dir, sizeof dir, "%s/c100", root);
    snprintf(sub, sizeof sub, "%s/cifar-100-binary", dir);
    mkdir(dir, 0755), mkdir(sub, 0755);
    snprintf(p, sizeof p, "%s/train.bin", sub);
    write_cifar(p, 150, 1, 100);
    snprintf(p, sizeof p, "%s/test.bin", sub);
    write_cifar(p, 20, 1, 100);
    ck_assert_msg(dataset_open("cifar100", dir, &ds) == 0, "%s", dt_errmsg());
    ck_assert(ds->train.n == 150 && ds->n_classes == 100 && ds->train.y[123] == 23);
    dataset_close(ds);
}
END_TEST

/* every kind of damage names the file and what was expected */
START_TEST(cifar_damage_named)
{
    char dir[600], p[800];
    dt_dataset *ds;
    snprintf(dir, sizeof dir, "%s/bad", root);
    cifar10_tree(dir, 4);
    snprintf(p, sizeof p, "%s/data_batch_3.bin", dir);
    ck_assert_int_eq(truncate(p, 3073 * 4 - 100), 0);
    ck_assert_int_ne(dataset_open("cifar10", dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "data_batch_3.bin: 12192 bytes is not a whole number of 3073-byte records"),
                  "%s", dt_errmsg());

    cifar10_tree(dir, 4);
    write_cifar(p, 12, 0, 12); /* labels up to 11 */
    ck_assert_int_ne(dataset_open("cifar10", dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "data_batch_3.bin: record 10 has label 10 (expected 0..9"), "%s", dt_errmsg());

    cifar10_tree(dir, 4);
    unlink(p);
    ck_assert_int_ne(dataset_open("cifar10", dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "data_batch_3.bin: cannot open"), "%s", dt_errmsg());

    snprintf(p, sizeof p, "%s/train.bin", dir);
    write_cifar(p, 30, 1, 100);
    ck_assert_int_eq(truncate(p, 3074 * 30 + 3073), 0); /* one CIFAR-10-sized record too many */
    snprintf(p, sizeof p, "%s/test.bin", dir);
    write_cifar(p, 3, 1, 100);
    ck_assert_int_ne(dataset_open("cifar100", dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "train.bin: 95293 bytes is not a whole number of 3074-byte records"), "%s",
                  dt_errmsg());
}
END_TEST

/* ---- resampling and augmentation ------------------------------------------------------------- */

START_TEST(resample_exact_cases)
{
    enum { H = 6, W = 8 };
    uint8_t img[3 * H * W], out[3 * 12 * 16];
    for (int i = 0; i < 3 * H * W; i++) img[i] = (uint8_t)(i * 7 % 256);
    /* the whole image at its own size: every pixel as it was */
    ck_assert_int_eq(image_resample_u8(img, 3, H, W, 0, 0, W, H, H, W, NULL, out), 0);
    ck_assert_int_eq(memcmp(img, out, sizeof img), 0);
    /* an integer window at its own size: a plain crop */
    ck_assert_int_eq(image_resample_u8(img, 3, H, W, 2, 1, 4, 3, 3, 4, NULL, out), 0);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) ck_assert_int_eq(out[(c * 3 + i) * 4 + j], img[(c * H + 1 + i) * W + 2 + j]);
    /* a constant image stays constant at any scale; a horizontal ramp shrinks to its box means */
    uint8_t flat[H * W], ramp[4 * 8];
    memset(flat, 77, sizeof flat);
    ck_assert_int_eq(image_resample_u8(flat, 1, H, W, 0, 0, W, H, 12, 16, NULL, out), 0);
    for (int i = 0; i < 12 * 16; i++) ck_assert_int_eq(out[i], 77);
    ck_assert_int_eq(image_resample_u8(flat, 1, H, W, 0.5, 0.25, 5.5, 3.5, 2, 3, NULL, out), 0);
    for (int i = 0; i < 6; i++) ck_assert_int_eq(out[i], 77);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) ramp[i * 8 + j] = (uint8_t)(j * 20);
    ck_assert_int_eq(image_resample_u8(ramp, 1, 4, 8, 0, 0, 8, 4, 4, 4, NULL, out), 0);
    /* 2x shrink: the triangle filter of support 2 over [a b c d] centred between b and c */
    for (int i = 0; i < 4; i++) ck_assert_int_eq(out[i * 4 + 1], 50); /* columns 2,3 (40, 60) and neighbours */
}
END_TEST

/* The plain two-pass filter the resampler's sums are defined by (src/data/image.c says so): all
 * taps of every output coordinate, weights 0 included, horizontal into rows, then vertical; then
 * a * value + b and the mirror, each a pass of its own. The resampler must give its bits. */
typedef struct {
    int n, *idx;
    float *wt;
} ref_taps;

static void ref_taps_make(ref_taps *t, int in, int out, double start, double len)
{
    double scale = len / out, support = scale > 1.0 ? scale : 1.0;
    t->n = (int)ceil(support) * 2 + 1;
    t->idx = malloc(sizeof *t->idx * (size_t)out * t->n);
    t->wt = malloc(sizeof *t->wt * (size_t)out * t->n);
    for (int o = 0; o < out; o++) {
        double center = start + (o + 0.5) * scale, sum = 0.0;
        int lo = (int)floor(center - support), k = 0;
        for (int i = lo; i < lo + t->n; i++, k++) {
            double d = fabs(i + 0.5 - center) / support, v = d < 1.0 ? 1.0 - d : 0.0;
            t->idx[o * t->n + k] = i < 0 ? 0 : i >= in ? in - 1 : i;
            t->wt[o * t->n + k] = (float)v;
            sum += v;
        }
        for (k = 0; k < t->n; k++)
            t->wt[o * t->n + k] = sum > 0 ? (float)(t->wt[o * t->n + k] / sum) : (k == t->n / 2 ? 1.0f : 0.0f);
    }
}

DT_NO_CONTRACT static void ref_resample(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw,
                                        double rh, int oh, int ow, float *out)
{
    ref_taps tx, ty;
    ref_taps_make(&tx, w, ow, x0, rw);
    ref_taps_make(&ty, h, oh, y0, rh);
    float *tmp = malloc(sizeof *tmp * (size_t)h * ow);
    for (int ch = 0; ch < c; ch++) {
        for (int r = 0; r < h; r++)
            for (int o = 0; o < ow; o++) {
                float s = 0.0f;
                for (int k = 0; k < tx.n; k++)
                    s += tx.wt[o * tx.n + k] * src[((size_t)ch * h + r) * w + tx.idx[o * tx.n + k]];
                tmp[(size_t)r * ow + o] = s;
            }
        for (int o = 0; o < oh; o++) {
            float *dst = out + ((size_t)ch * oh + o) * ow;
            for (int j = 0; j < ow; j++) dst[j] = 0.0f;
            for (int k = 0; k < ty.n; k++) {
                float wk = ty.wt[o * ty.n + k];
                if (wk == 0.0f) continue;
                for (int j = 0; j < ow; j++) dst[j] += wk * tmp[(size_t)ty.idx[o * ty.n + k] * ow + j];
            }
        }
    }
    free(tmp), free(tx.idx), free(tx.wt), free(ty.idx), free(ty.wt);
}

/* random images, windows (inside and across the edges, fractional, 1 pixel to 3x the image) and
 * output sizes (1 to 2.5x up, down to 1/9): image_resample_f and _u8 give the reference's bits,
 * with and without the mirror, reusing one scratch across sizes */
START_TEST(resample_matches_the_plain_filter)
{
    uint64_t seed = 88172645463325252ULL;
#define RND() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
    image_scratch scr = {0};
    long checked = 0;
    for (int it = 0; it < 400; it++) {
        int c = it % 3 == 0 ? 1 : 3, h = 1 + (int)(RND() % 70), w = 1 + (int)(RND() % 70);
        double rw = 0.5 + (double)(RND() % 10000) / 10000.0 * (it % 7 == 0 ? 3.0 * w : w);
        double rh = 0.5 + (double)(RND() % 10000) / 10000.0 * (it % 5 == 0 ? 3.0 * h : h);
        double x0 = (double)(RND() % 1000) / 1000.0 * w - (it % 4 == 0 ? rw / 2 : 0.0);
        double y0 = (double)(RND() % 1000) / 1000.0 * h - (it % 6 == 0 ? rh / 2 : 0.0);
        if (it % 3 == 1) x0 = (double)(int)x0, y0 = (double)(int)y0, rw = (double)(int)rw + 1, rh = (double)(int)rh + 1;
        int oh = 1 + (int)(RND() % (unsigned)(2.5 * rh + 1)), ow = 1 + (int)(RND() % (unsigned)(2.5 * rw + 1));
        if (it % 8 == 0) oh = DT_MAX(1, (int)(rh / 9)), ow = DT_MAX(1, (int)(rw / 9));
        size_t n = (size_t)c * h * w, m = (size_t)c * oh * ow;
        uint8_t *img = malloc(n), *u8 = malloc(m), *u8_ref = malloc(m);
        float *got = malloc(sizeof(float) * m), *ref = malloc(sizeof(float) * m), a[3], b[3];
        for (size_t i = 0; i < n; i++) img[i] = (uint8_t)(it % 9 == 0 ? 255 * (RND() & 1) : RND());
        for (int k = 0; k < 3; k++)
            a[k] = 1.0f / (255.0f * (0.2f + 0.01f * k)), b[k] = -(0.4f + 0.05f * k) / (0.2f + 0.01f * k);
        ref_resample(img, c, h, w, x0, y0, rw, rh, oh, ow, ref);
        for (size_t i = 0; i < m; i++) {
            float v = ref[i] + 0.5f;
            u8_ref[i] = (uint8_t)(v < 0.0f ? 0 : v > 255.0f ? 255 : (int)v);
        }
        ck_assert_int_eq(image_resample_u8(img, c, h, w, x0, y0, rw, rh, oh, ow, it % 2 ? &scr : NULL, u8), 0);
        ck_assert_msg(!memcmp(u8, u8_ref, m), "u8: %dx%dx%d window %g,%g %gx%g to %dx%d", c, h, w, x0, y0, rw, rh, oh,
                      ow);
        for (size_t i = 0; i < m; i++) {
            size_t ch = i / ((size_t)oh * ow);
            ref[i] = ref[i] * a[ch] + b[ch];
        }
        for (int flip = 0; flip < 2; flip++) {
            ck_assert_int_eq(image_resample_f(img, c, h, w, x0, y0, rw, rh, oh, ow, a, b, flip, &scr, got), 0);
            for (size_t i = 0; i < m; i++) {
                size_t j = i % ow, row = i / ow, want = flip ? row * ow + (ow - 1 - j) : i;
                ck_assert_msg(!memcmp(&got[i], &ref[want], sizeof(float)),
                              "flip %d: %dx%dx%d window %g,%g %gx%g to %dx%d: element %zu is %a, the plain filter's %a",
                              flip, c, h, w, x0, y0, rw, rh, oh, ow, i, (double)got[i], (double)ref[want]);
            }
            checked += (long)m;
        }
        free(img), free(u8), free(u8_ref), free(got), free(ref);
    }
    image_scratch_free(&scr);
    ck_assert(checked > 100000);
#undef RND
}
END_TEST

static dt_dataset *small_ds(int c, int h, int w, int n)
{
    dt_dataset *ds = calloc(1, sizeof *ds);
    uint8_t *x = malloc((size_t)n * c * h * w);
    ds->c = c, ds->h = h, ds->w = w, ds->n_classes = 10;
    for (int k = 0; k < 3; k++) ds->mean[k] = 0.0f, ds->std[k] = 1.0f;
    for (size_t i = 0; i < (size_t)n * c * h * w; i++) x[i] = (uint8_t)(i % 255);
    ds->train.own = x, ds->train.x = x, ds->train.n = (size_t)n;
    ds->train.y = malloc(sizeof(uint16_t) * n);
    for (int i = 0; i < n; i++) ds->train.y[i] = (uint16_t)(i % 10);
    ds->test = ds->train;
    ds->test.own = NULL, ds->test.y = NULL;
    return ds;
}

static float px(const dt_dataset *ds, uint32_t i, int c, int y, int x)
{
    return (float)ds->train.x[(size_t)i * ds->c * ds->h * ds->w + ((size_t)c * ds->h + y) * ds->w + x] / 255.0f;
}

/* pad-crop windows lie within the padding, flips mirror, draws depend on (key, index) only */
START_TEST(augmentation_properties)
{
    dt_dataset *ds = small_ds(3, 10, 10, 50);
    dt_augment aug;
    ck_assert_int_eq(augment_parse("crop=2,flip", "x", &aug), 0);
    float *a = malloc(sizeof(float) * 300 * 4), *b = malloc(sizeof(float) * 300 * 4);
    int32_t y[4];
    uint32_t idx[4] = {3, 17, 3, 49};
    dt_view v = {10, 10, &aug, 99, 1};
    dataset_fill_view(ds, &ds->train, &v, idx, 4, a, y);
    ck_assert_int_eq(memcmp(a, a + 600, 300 * sizeof(float)), 0); /* sample 3 twice: the same draw */
    ck_assert_int_eq(y[1], 7);
    uint32_t one = 17;
    dataset_fill_view(ds, &ds->train, &v, &one, 1, b, y);
    ck_assert_int_eq(memcmp(a + 300, b, 300 * sizeof(float)), 0); /* independent of its batch */
    /* every output is a shifted (and maybe mirrored) copy of the image with zero padding: find it */
    int shifts[5][5] = {{0}}, flips = 0;
    for (uint32_t s = 0; s < 50; s++) {
        dataset_fill_view(ds, &ds->train, &v, &s, 1, b, y);
        int found = 0;
        for (int f = 0; f < 2 && !found; f++)
            for (int dy = -2; dy <= 2 && !found; dy++)
                for (int dx = -2; dx <= 2 && !found; dx++) {
                    int ok = 1;
                    for (int c = 0; c < 3 && ok; c++)
                        for (int i = 0; i < 10 && ok; i++)
                            for (int j = 0; j < 10 && ok; j++) {
                                int sy = i + dy, sx = (f ? 9 - j : j) + dx;
                                float want = sy < 0 || sy > 9 || sx < 0 || sx > 9 ? 0.0f : px(ds, s, c, sy, sx);
                                ok = fabsf(b[(c * 10 + i) * 10 + j] - want) < 1e-6f;
                            }
                    if (ok) found = 1, shifts[dy + 2][dx + 2]++, flips += f;
                }
        ck_assert_msg(found, "sample %u is no padded crop of the image", s);
    }
    ck_assert_msg(flips > 10 && flips < 40, "%d flips of 50", flips);
    int used = 0;
    for (int i = 0; i < 25; i++) used += shifts[i / 5][i % 5] > 0;
    ck_assert_msg(used >= 12, "only %d of 25 offsets drawn", used);
    /* a padding wider than the image (crop=30 on 10 x 10): within the pixel range, nothing written
     * past the sample (a window beside the image wrote its row of zeros past it: a heap overflow) */
    ck_assert_int_eq(augment_parse("crop=30", "x", &aug), 0);
    float *g = malloc(sizeof(float) * 400);
    int zeros = 0;
    for (uint32_t s = 0; s < 50; s++) {
        for (int i = 0; i < 400; i++) g[i] = 7.0f;
        dataset_fill_view(ds, &ds->train, &v, &s, 1, g, y);
        for (int i = 300; i < 400; i++) ck_assert_msg(g[i] == 7.0f, "crop=30: sample %u wrote past its end (%d)", s, i);
        int nz = 0;
        for (int i = 0; i < 300; i++) ck_assert(g[i] >= 0.0f && g[i] <= 1.0f), nz += g[i] != 0.0f;
        zeros += nz == 0;
    }
    ck_assert_msg(zeros > 0 && zeros < 50, "crop=30: %d of 50 windows beside the image", zeros);
    free(g);
    /* evaluation of a larger stored image: the centre window */
    dt_view ev = {6, 4, NULL, 0, 1};
    dataset_fill_view(ds, &ds->train, &ev, &one, 1, b, y);
    ck_assert(fabsf(b[0] - px(ds, 17, 0, 2, 3)) < 1e-6f && fabsf(b[6 * 4 + 5] - px(ds, 17, 1, 3, 4)) < 1e-6f);
    /* resized crops: finite, within the pixel range, different for different samples */
    ck_assert_int_eq(augment_parse("resized-crop", "x", &aug), 0);
    dt_view rv = {6, 6, &aug, 5, 2};
    dataset_fill_view(ds, &ds->train, &rv, idx, 2, b, y);
    for (int i = 0; i < 2 * 108; i++) ck_assert(b[i] >= 0.0f && b[i] <= 1.0f);
    ck_assert_int_ne(memcmp(b, b + 108, 108 * sizeof(float)), 0);
    /* parsing */
    ck_assert_int_ne(augment_parse("crop=2,twist", "x", &aug), 0);
    ck_assert_msg(strstr(dt_errmsg(), "unknown item 'twist'"), "%s", dt_errmsg());
    ck_assert_int_ne(augment_parse("crop=2,resized-crop", "x", &aug), 0);
    ck_assert_int_eq(augment_parse("default", "cifar10", &aug), 0);
    ck_assert(aug.pad_crop == 4 && aug.flip && !aug.resized_crop);
    ck_assert_int_eq(augment_parse("default", "imagenet", &aug), 0);
    ck_assert(aug.resized_crop && aug.flip);
    free(a), free(b);
    dataset_close(ds);
}
END_TEST

/* an allocator that keeps what it handed out (the loader's batches in a GPU's page-locked memory) */
typedef struct {
    void *p[16];
    int live, made;
} counting;

static void *count_alloc(void *ctx, size_t bytes)
{
    counting *c = ctx;
    void *p = dt_zalloc(bytes);
    if (p && c->made < 16) c->p[c->made] = p;
    c->made++, c->live++;
    return p;
}

static void count_free(void *ctx, void *p)
{
    ((counting *)ctx)->live--;
    dt_free(p);
}

static int handed_out(const counting *c, const void *p)
{
    for (int i = 0; i < c->made && i < 16; i++)
        if (c->p[i] == p) return 1;
    return 0;
}

/* the loader thread hands out exactly what filling in the caller gives, across epochs */
START_TEST(prefetch_changes_nothing)
{
    counting mem = {0};
    dt_host_allocator pinned = {.alloc = count_alloc, .free = count_free, .ctx = &mem};
    dt_dataset *ds = small_ds(3, 8, 8, 37);
    dt_augment aug = {.pad_crop = 2, .flip = 1};
    dt_loader *sync, *ahead;
    const long total = 3 * 5; /* batch 8 of 37: 5 per epoch, the last short */
    ck_assert_int_eq(loader_create(&sync, ds, &aug, 8, 8, 8, 1, 3, 7, 1, 0, 2, total, 1, NULL), 0);
    ck_assert_int_eq(loader_create(&ahead, ds, &aug, 8, 8, 8, 1, 3, 7, 1, 3, 2, total, 3, &pinned), 0);
    ck_assert_int_eq(mem.made, 2 * 4); /* x and y of the batch in use and 3 ahead */
    for (long it = 2; it < total; it++) {
        dt_batch a, b;
        ck_assert_int_eq(loader_next(sync, it, &a), 0);
        ck_assert_int_eq(loader_next(ahead, it, &b), 0);
        ck_assert_int_eq(a.rows, b.rows);
        ck_assert_int_eq(a.global_rows, it % 5 == 4 ? 5 : 8);
        ck_assert_int_eq(a.row0, b.row0);
        ck_assert_int_eq(memcmp(a.y, b.y, sizeof(int32_t) * a.rows), 0);
        ck_assert_int_eq(memcmp(a.x, b.x, sizeof(float) * 192 * a.rows), 0);
        ck_assert(handed_out(&mem, b.x) && handed_out(&mem, b.y));
    }
    ck_assert_int_ne(loader_next(ahead, total, &(dt_batch){0}), 0);
    loader_destroy(sync);
    loader_destroy(ahead);
    ck_assert_int_eq(mem.live, 0);
    dataset_close(ds);
}
END_TEST

/* ---- the synthetic dataset and the dataset a net implies --------------------------------------- */

/* P ranks get the rows of the one-rank batch (augmented the same), whatever P */
START_TEST(synthetic_same_for_any_rank_count)
{
    dt_synthetic sy = {.like = "cifar10", .c = 3, .h = 32, .w = 32, .n_classes = 10, .n_train = 1000, .n_test = 100,
                       .seed = 5};
    dt_dataset *ds, *again;
    dt_augment aug = {.pad_crop = 4, .flip = 1};
    const size_t d = 3 * 32 * 32;
    ck_assert_int_eq(dataset_open_synthetic(&sy, &ds), 0);
    ck_assert_int_eq(dataset_open_synthetic(&sy, &again), 0);
    ck_assert(ds->synthetic && ds->train.n == 1000 && ds->test.n == 100 && ds->n_classes == 10);
    ck_assert(ds->fingerprint == again->fingerprint);
    ck_assert(ds->mean[0] == 0.4914f); /* cifar10's normalisation */
    dt_loader *one, *part[4];
    const long total = 2 * 125; /* two epochs of batch 8 */
    ck_assert_int_eq(loader_create(&one, ds, &aug, 32, 32, 8, 0, 1, 9, 1, 0, 0, total, 1, NULL), 0);
    for (int r = 0; r < 4; r++)
        ck_assert_int_eq(loader_create(&part[r], again, &aug, 32, 32, 8, r, 4, 9, 1, 2, 0, total, 2, NULL), 0);
    int seen[10] = {0};
    for (long it = 0; it < total; it++) {
        dt_batch a, b;
        ck_assert_int_eq(loader_next(one, it, &a), 0);
        for (int r = 0; r < 4; r++) {
            ck_assert_int_eq(loader_next(part[r], it, &b), 0);
            ck_assert_int_eq(b.rows, 2);
            ck_assert_int_eq(memcmp(b.y, a.y + b.row0, sizeof(int32_t) * 2), 0);
            ck_assert_int_eq(memcmp(b.x, a.x + (size_t)b.row0 * d, sizeof(float) * d * 2), 0);
        }
        for (int i = 0; i < a.rows; i++) {
            ck_assert(a.y[i] >= 0 && a.y[i] < 10);
            seen[a.y[i]]++;
        }
        ck_assert_int_ne(memcmp(a.x, a.x + d, sizeof(float) * d), 0); /* samples differ */
    }
    int classes = 0;
    for (int k = 0; k < 10; k++) classes += seen[k] > 0;
    ck_assert_int_ge(classes, 8);
    /* a sample is a function of (seed, split, index): the test split and another seed differ */
    uint32_t idx = 3;
    float x0[3072], x1[3072];
    int32_t y0, y1;
    ck_assert_int_eq(dataset_fill(ds, &ds->train, &idx, 1, x0, &y0), 0);
    ck_assert_int_eq(dataset_fill(again, &again->train, &idx, 1, x1, &y1), 0);
    ck_assert(memcmp(x0, x1, sizeof x0) == 0 && y0 == y1);
    ck_assert_int_eq(dataset_fill(ds, &ds->test, &idx, 1, x1, &y1), 0);
    ck_assert_int_ne(memcmp(x0, x1, sizeof x0), 0);
    dataset_close(again);
    sy.seed = 6;
    ck_assert_int_eq(dataset_open_synthetic(&sy, &again), 0);
    ck_assert(ds->fingerprint != again->fingerprint);
    ck_assert_int_eq(dataset_fill(again, &again->train, &idx, 1, x1, &y1), 0);
    ck_assert_int_ne(memcmp(x0, x1, sizeof x0), 0);
    loader_destroy(one);
    for (int r = 0; r < 4; r++) loader_destroy(part[r]);
    dataset_close(ds);
    dataset_close(again);
    /* shapes it cannot make */
    sy.c = 4;
    ck_assert_int_ne(dataset_open_synthetic(&sy, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "expected 1 or 3 channels"), "%s", dt_errmsg());
}
END_TEST

START_TEST(dataset_follows_the_input)
{
    const int mnist[] = {1, 28, 28}, flat[] = {784}, cifar[] = {3, 32, 32}, big[] = {3, 224, 224}, odd[] = {3, 20, 20};
    const int square[] = {28, 28}, other[] = {14, 56};
    ck_assert_str_eq(dataset_for_input(3, mnist, 10), "fashion-mnist");
    ck_assert_str_eq(dataset_for_input(1, flat, 10), "fashion-mnist");
    ck_assert_str_eq(dataset_for_input(2, square, 10), "fashion-mnist"); /* shape=28x28 */
    ck_assert_ptr_null(dataset_for_input(2, other, 10));
    ck_assert_str_eq(dataset_for_input(3, cifar, 10), "cifar10");
    ck_assert_str_eq(dataset_for_input(3, cifar, 100), "cifar100");
    ck_assert_str_eq(dataset_for_input(3, big, 1000), "imagenet");
    ck_assert_ptr_null(dataset_for_input(3, cifar, 7));
    ck_assert_ptr_null(dataset_for_input(3, odd, 10));
    ck_assert_ptr_null(dataset_for_input(3, mnist, 5));
}
END_TEST

/* ---- ImageNet-style PNG folders ---------------------------------------------------------------- */

/* a w x h PNG of the given format filled with one colour */
static void write_png(const char *path, int w, int h, png_uint_32 format, const uint8_t rgba[4])
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w, im.height = (png_uint_32)h, im.format = format;
    size_t ch = PNG_IMAGE_PIXEL_CHANNELS(format), n = (size_t)w * h;
    uint8_t *buf = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ch; k++) buf[i * ch + k] = format == PNG_FORMAT_GRAY ? rgba[0] : rgba[k];
    ck_assert_msg(png_image_write_to_file(&im, path, 0, buf, 0, NULL), "%s", im.message);
    free(buf);
}

static void png_tree(const char *dir)
{
    char p[1024];
    const uint8_t red[4] = {200, 10, 10, 255}, blue[4] = {0, 0, 250, 255}, grey[4] = {90, 0, 0, 0},
                  half[4] = {100, 200, 40, 128};
    const char *classes[] = {"b_blue", "a_red"};
    for (int s = 0; s < 2; s++) {
        const char *split = s ? "val" : "train";
        for (int k = 0; k < 2; k++) {
            snprintf(p, sizeof p, "mkdir -p %s/%s/%s", dir, split, classes[k]);
            ck_assert_int_eq(system(p), 0);
        }
        for (int i = 0; i < 3 + s; i++) {
            snprintf(p, sizeof p, "%s/%s/a_red/r%d.png", dir, split, i);
            write_png(p, 20 + 7 * i, 14 + 3 * i, PNG_FORMAT_RGB, red); /* landscape, various sizes */
            snprintf(p, sizeof p, "%s/%s/b_blue/b%d.png", dir, split, i);
            write_png(p, 9, 30, PNG_FORMAT_RGB, blue); /* portrait, smaller than the pack side */
        }
    }
    snprintf(p, sizeof p, "%s/train/a_red/grey.png", dir);
    write_png(p, 16, 16, PNG_FORMAT_GRAY, grey);
    snprintf(p, sizeof p, "%s/train/b_blue/alpha.png", dir);
    write_png(p, 16, 16, PNG_FORMAT_RGBA, half);
}

static int open_tree(const char *dir, dt_dataset **ds)
{
    dt_data_opts o = {.image_size = 12, .channels = 3, .threads = 2, .may_pack = 1};
    return dataset_open_opts("imagenet", dir, &o, ds);
}

START_TEST(png_tree_packs_and_maps)
{
    char dir[600], pack[800];
    dt_dataset *ds;
    snprintf(dir, sizeof dir, "%s/img", root);
    png_tree(dir);
    ck_assert_msg(open_tree(dir, &ds) == 0, "%s", dt_errmsg());
    ck_assert(ds->n_classes == 2 && ds->train.n == 8 && ds->test.n == 8 && ds->c == 3 && ds->h == 12);
    /* classes in name order: a_red 0, b_blue 1; files sorted within: grey.png, r0, r1, r2 */
    ck_assert(ds->train.y[0] == 0 && ds->train.y[3] == 0 && ds->train.y[4] == 1);
    const uint8_t *g = ds->train.x, *r1 = ds->train.x + 2 * 432, *alpha = ds->train.x + 4 * 432;
    for (int i = 0; i < 144; i++) {
        ck_assert(g[i] == 90 && g[144 + i] == 90 && g[288 + i] == 90); /* grey to RGB */
        ck_assert(r1[i] == 200 && r1[144 + i] == 10 && r1[288 + i] == 10);
        /* half-transparent (100, 200, 40): its colour, alpha dropped, as PIL's convert("RGB") */
        ck_assert_msg(alpha[i] == 100 && alpha[144 + i] == 200 && alpha[288 + i] == 40, "%d %d %d", alpha[i],
                      alpha[144 + i], alpha[288 + i]);
    }
    dataset_close(ds);
    /* opened again: the pack is reused, not rebuilt */
    snprintf(pack, sizeof pack, "%s/.dtrain-pack/train-12-3.pack", dir);
    struct stat a, b;
    ck_assert_int_eq(stat(pack, &a), 0);
    sleep(1);
    ck_assert_msg(open_tree(dir, &ds) == 0, "%s", dt_errmsg());
    dataset_close(ds);
    ck_assert_int_eq(stat(pack, &b), 0);
    ck_assert(a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_ino == b.st_ino);
    /* an added image changes its folder: the pack is rebuilt */
    char p[800];
    snprintf(p, sizeof p, "%s/train/a_red/new.png", dir);
    write_png(p, 12, 12, PNG_FORMAT_RGB, (const uint8_t[4]){1, 2, 3, 4});
    ck_assert_msg(open_tree(dir, &ds) == 0, "%s", dt_errmsg());
    ck_assert_uint_eq(ds->train.n, 9);
    dataset_close(ds);
    /* the packs alone, elsewhere, open as they are */
    sh("mkdir %s/copied && cp %s/img/.dtrain-pack/*.pack %s/copied/", root);
    snprintf(dir, sizeof dir, "%s/copied", root);
    ck_assert_msg(open_tree(dir, &ds) == 0, "%s", dt_errmsg());
    ck_assert_uint_eq(ds->train.n, 9);
    dataset_close(ds);
    /* ... and a damaged one is refused */
    snprintf(p, sizeof p, "%s/train-12-3.pack", dir);
    FILE *f = fopen(p, "r+b");
    fseek(f, 4096, SEEK_SET);
    fputc(7, f); /* a label */
    fclose(f);
    ck_assert_int_ne(open_tree(dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "train-12-3.pack: checksum mismatch"), "%s", dt_errmsg());
    ck_assert_int_eq(truncate(p, 5000), 0);
    ck_assert_int_ne(open_tree(dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "inconsistent pack header or size 5000 bytes"), "%s", dt_errmsg());
}
END_TEST

static void expect_tree_error(const char *dir, const char *want)
{
    dt_dataset *ds;
    ck_assert_int_ne(open_tree(dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), want), "message '%s' lacks '%s'", dt_errmsg(), want);
}

START_TEST(png_tree_damage_named)
{
    char dir[600], p[4000];
    snprintf(dir, sizeof dir, "%s/t", root);
    png_tree(dir);
    snprintf(p, sizeof p, "%s/train/a_red/r1.png", dir);
    ck_assert_int_eq(truncate(p, 60), 0);
    expect_tree_error(dir, "train/a_red/r1.png: a damaged PNG (libpng: ");

    sh("rm -rf %s/t", root);
    png_tree(dir);
    snprintf(p, sizeof p, "%s/train/a_red/photo.JPEG", dir);
    FILE *f = fopen(p, "wb");
    fwrite("\xff\xd8\xff\xe0", 1, 4, f);
    fclose(f);
    expect_tree_error(dir, "train/a_red/photo.JPEG: a damaged JPEG (libjpeg: ");
    char q[900];
    snprintf(q, sizeof q, "%s/train/a_red/photo.png", dir);
    rename(p, q);
    expect_tree_error(dir, "train/a_red/photo.png: a damaged JPEG (libjpeg: "); /* by its bytes, not its name */
    unlink(q);
    snprintf(p, sizeof p, "%s/train/a_red/notes.txt", dir);
    f = fopen(p, "w");
    fclose(f);
    expect_tree_error(dir, "train/a_red/notes.txt: not an image file by its name");
    unlink(p);

    snprintf(p, sizeof p, "mkdir %s/train/c_empty", dir);
    ck_assert_int_eq(system(p), 0);
    expect_tree_error(dir, "train/c_empty: no images in this class folder");
    snprintf(p, sizeof p, "rmdir %s/train/c_empty && mkdir %s/val/z_extra && cp %s/val/a_red/r0.png %s/val/z_extra/",
             dir, dir, dir, dir);
    ck_assert_int_eq(system(p), 0);
    expect_tree_error(dir, "val/z_extra: a class folder that train/ does not have");

    sh("rm -rf %s/t && mkdir -p %s/t/train", root);
    expect_tree_error(dir, "t/train: no class folders (expected train/<class>/ folders of images)");
    sh("rm -rf %s/t && mkdir -p %s/t/x", root);
    expect_tree_error(dir, "t/train/<class>/ images to make it from");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("cifar, png trees, augmentation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, cifar10_and_100_load);
    tcase_add_test(tc, cifar_damage_named);
    tcase_add_test(tc, resample_exact_cases);
    tcase_add_test(tc, resample_matches_the_plain_filter);
    tcase_add_test(tc, augmentation_properties);
    tcase_add_test(tc, prefetch_changes_nothing);
    tcase_add_test(tc, synthetic_same_for_any_rank_count);
    tcase_add_test(tc, dataset_follows_the_input);
    tcase_add_test(tc, png_tree_packs_and_maps);
    tcase_add_test(tc, png_tree_damage_named);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
