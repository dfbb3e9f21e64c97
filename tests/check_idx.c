/* IDX files and datasets: valid raw and gzip files load; every kind of damage is named; the
 * sampler splits global batches exactly and reproducibly. Files are generated here in the true
 * format (big-endian header, unsigned bytes). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/formats.h"
#include "data/sampler.h"
#include "testutil.h"
#include "util.h"

/* IDX bytes: magic 00 00 type ndims, sizes, then `count` bytes of data (value i % mod) */
static size_t idx_bytes(uint8_t *buf, int type, int ndims, const uint32_t *dims, size_t count, int mod)
{
    size_t o = 0;
    buf[o++] = 0;
    buf[o++] = 0;
    buf[o++] = (uint8_t)type;
    buf[o++] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++) {
        buf[o++] = (uint8_t)(dims[i] >> 24);
        buf[o++] = (uint8_t)(dims[i] >> 16);
        buf[o++] = (uint8_t)(dims[i] >> 8);
        buf[o++] = (uint8_t)dims[i];
    }
    for (size_t i = 0; i < count; i++) buf[o++] = (uint8_t)(i % (size_t)mod);
    return o;
}

static const char *write_gz(const char *name, const uint8_t *data, size_t n)
{
    static char path[512];
    const char *p = write_bytes(name, "", 0); /* just for the path */
    snprintf(path, sizeof path, "%s", p);
    gzFile f = gzopen(path, "wb");
    gzwrite(f, data, (unsigned)n);
    gzclose(f);
    return path;
}

static uint8_t buf[1 << 16];

/* a complete small dataset: N train / M test images of 4x3, labels 0..9 */
static void write_dataset(const char *sub, int gz, int n_train, int n_test)
{
    static uint8_t dbuf[1 << 16]; /* its own: callers keep theirs in buf */
    char name[256];
    uint32_t d3[3] = {0, 4, 3}, d1[1];
    const char *split[2] = {"train", "t10k"};
    int count[2] = {n_train, n_test};
    for (int s = 0; s < 2; s++) {
        d3[0] = d1[0] = (uint32_t)count[s];
        size_t n = idx_bytes(dbuf, 8, 3, d3, (size_t)count[s] * 12, 256);
        snprintf(name, sizeof name, "%s/%s-images-idx3-ubyte%s", sub, split[s], gz ? ".gz" : "");
        if (gz) write_gz(name, dbuf, n);
        else write_bytes(name, dbuf, n);
        n = idx_bytes(dbuf, 8, 1, d1, (size_t)count[s], 10);
        snprintf(name, sizeof name, "%s/%s-labels-idx1-ubyte%s", sub, split[s], gz ? ".gz" : "");
        if (gz) write_gz(name, dbuf, n);
        else write_bytes(name, dbuf, n);
    }
}

static char root[512];

static void setup(void)
{
    char cmd[2048];
    snprintf(root, sizeof root, "%s", tmpdir_create());
    snprintf(cmd, sizeof cmd, "mkdir -p %s/raw %s/gz %s/bad", root, root, root);
    ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void) { tmpdir_remove(); }

START_TEST(raw_and_gz_load_identically)
{
    dt_dataset *a, *b;
    char dir[600];
    write_dataset("raw", 0, 25, 7);
    write_dataset("gz", 1, 25, 7);
    snprintf(dir, sizeof dir, "%s/raw", root);
    ck_assert_msg(dataset_open("mnist", dir, &a) == 0, "%s", dt_errmsg());
    snprintf(dir, sizeof dir, "%s/gz", root);
    ck_assert_msg(dataset_open("mnist", dir, &b) == 0, "%s", dt_errmsg());
    ck_assert_uint_eq(a->train.n, 25);
    ck_assert_uint_eq(a->test.n, 7);
    ck_assert_int_eq(a->c, 1);
    ck_assert_int_eq(a->h, 4);
    ck_assert_int_eq(a->w, 3);
    ck_assert_int_eq(memcmp(a->train.x, b->train.x, 25 * 12), 0);
    ck_assert_int_eq(memcmp(a->test.y, b->test.y, 7), 0);
    ck_assert_int_eq(a->train.y[13], 3);
    /* normalisation: x = (pixel/255 - mean)/std with the dataset's constants */
    uint32_t idx[2] = {0, 1};
    float x[24];
    int32_t y[2];
    dataset_fill(a, &a->train, idx, 2, x, y);
    ck_assert_int_eq(y[1], 1);
    ck_assert(fabsf(x[12 + 5] - ((float)((12 + 5) % 256) / 255.0f - a->mean[0]) / a->std[0]) < 1e-5f);
    dataset_close(a);
    dataset_close(b);
}
END_TEST

/* one damaged file among good ones → the loader's message */
static const char *open_with(const char *file, const uint8_t *data, size_t n, int gz)
{
    char dir[600], name[300];
    dt_dataset *ds;
    static char err[1024];
    uint8_t *copy = malloc(n ? n : 1); /* write_dataset reuses buf */
    memcpy(copy, data, n);
    data = copy;
    write_dataset("bad", 0, 20, 5);
    snprintf(name, sizeof name, "bad/%s%s", file, gz ? ".gz" : "");
    if (gz) {
        char raw[600];
        snprintf(raw, sizeof raw, "%s/bad/%s", root, file);
        remove(raw);
        write_gz(name, data, n);
    } else {
        write_bytes(name, data, n);
    }
    free(copy);
    snprintf(dir, sizeof dir, "%s/bad", root);
    if (dataset_open("mnist", dir, &ds) == 0) {
        dataset_close(ds);
        return NULL;
    }
    snprintf(err, sizeof err, "%s", dt_errmsg());
    return err;
}

#define EXPECT_ERROR(msg, substr)                                                                                      \
    do {                                                                                                               \
        const char *m_ = (msg);                                                                                        \
        ck_assert_msg(m_ != NULL, "loaded, but should have failed with '%s'", substr);                                 \
        ck_assert_msg(strstr(m_, substr) != NULL, "message '%s' lacks '%s'", m_, substr);                              \
    } while (0)

START_TEST(truncated_raw)
{
    uint32_t d[3] = {20, 4, 3};
    size_t n = idx_bytes(buf, 8, 3, d, 20 * 12, 256);
    EXPECT_ERROR(open_with("train-images-idx3-ubyte", buf, n - 7, 0),
                 "truncated (header says 240 data bytes, found 233)");
    EXPECT_ERROR(open_with("train-images-idx3-ubyte", buf, 10, 0), "truncated header (10 bytes, expected 16)");
    EXPECT_ERROR(open_with("train-images-idx3-ubyte", buf, 2, 0), "file has 2 bytes (expected an IDX header");
    /* a gzip stream of nothing: what it decompresses to is named, not the file's size */
    EXPECT_ERROR(open_with("train-images-idx3-ubyte", buf, 0, 1), "decompresses to 0 bytes (expected an IDX header");
}
END_TEST

START_TEST(trailing_bytes)
{
    uint32_t d[1] = {20};
    size_t n = idx_bytes(buf, 8, 1, d, 23, 10);
    EXPECT_ERROR(open_with("train-labels-idx1-ubyte", buf, n, 0),
                 "trailing data (header says 20 data bytes, found 23)");
    /* gzipped: refused as the stream passes the header's size, not inflated to its end first (a
     * 3 MB file that inflated to 3 GB before this check) */
    EXPECT_ERROR(open_with("train-labels-idx1-ubyte", buf, n, 1),
                 "trailing data (header says 20 data bytes, the gzip stream holds more)");
}
END_TEST

START_TEST(truncated_gz)
{
    uint32_t d[3] = {20, 4, 3};
    size_t n = idx_bytes(buf, 8, 3, d, 20 * 12, 256);
    char dir[600];
    write_dataset("bad", 0, 20, 5);
    /* gzip the images, then cut the compressed file */
    const char *p = write_gz("bad/train-images-idx3-ubyte.gz", buf, n);
    char raw[600];
    snprintf(raw, sizeof raw, "%s/bad/train-images-idx3-ubyte", root);
    remove(raw);
    FILE *f = fopen(p, "rb");
    uint8_t z[4096];
    size_t zn = fread(z, 1, sizeof z, f);
    fclose(f);
    write_bytes("bad/train-images-idx3-ubyte.gz", z, zn / 2);
    snprintf(dir, sizeof dir, "%s/bad", root);
    dt_dataset *ds;
    ck_assert_int_ne(dataset_open("mnist", dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "train-images-idx3-ubyte.gz") && (strstr(dt_errmsg(), "truncated") ||
                                                                       strstr(dt_errmsg(), "unexpected end")),
                  "%s", dt_errmsg());
}
END_TEST

START_TEST(bad_headers)
{
    uint32_t d3[3] = {20, 4, 3}, d1[1] = {20};
    size_t n = idx_bytes(buf, 8, 3, d3, 240, 256);
    buf[0] = 0x1f;
    EXPECT_ERROR(open_with("train-images-idx3-ubyte", buf, n, 0), "bad magic 1f 00 08 03 (expected 00 00 08 03");
    n = idx_bytes(buf, 0x0d, 3, d3, 240, 256);
    EXPECT_ERROR(open_with("train-images-idx3-ubyte", buf, n, 0), "IDX data type 0x0d (expected 0x08, unsigned bytes)");
    n = idx_bytes(buf, 8, 3, d3, 240, 256);
    EXPECT_ERROR(open_with("train-labels-idx1-ubyte", buf, n, 0), "has 3 dimensions (expected 1: labels N)");
    d3[1] = 0;
    n = idx_bytes(buf, 8, 3, d3, 0, 256);
    EXPECT_ERROR(open_with("train-images-idx3-ubyte", buf, n, 1), "dimension 1 is 0");
    n = idx_bytes(buf, 8, 1, d1, 20, 13);
    EXPECT_ERROR(open_with("train-labels-idx1-ubyte", buf, n, 1), "label 10 at index 10 (expected 0..9)");
    d1[0] = 19;
    n = idx_bytes(buf, 8, 1, d1, 19, 10);
    EXPECT_ERROR(open_with("train-labels-idx1-ubyte", buf, n, 0), "19 labels for 20 images");
    uint32_t other[3] = {5, 5, 5};
    n = idx_bytes(buf, 8, 3, other, 125, 256);
    EXPECT_ERROR(open_with("t10k-images-idx3-ubyte", buf, n, 0),
                 "images are 5x5 (expected 4x3 like the training images)");
}
END_TEST

START_TEST(missing_files_and_dirs)
{
    char dir[600], cmd[700];
    dt_dataset *ds;
    write_dataset("bad", 0, 20, 5);
    snprintf(cmd, sizeof cmd, "rm %s/bad/t10k-labels-idx1-ubyte", root);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(dir, sizeof dir, "%s/bad", root);
    ck_assert_int_ne(dataset_open("mnist", dir, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "no t10k-labels-idx1-ubyte[.gz] (expected the four IDX files of mnist"), "%s",
                  dt_errmsg());
    ck_assert_int_ne(dataset_open("mnist", "/nonexistent/dir", &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "--data-dir /nonexistent/dir: No such file or directory"), "%s", dt_errmsg());
    ck_assert_int_ne(dataset_open("cifar1000", NULL, &ds), 0);
    ck_assert_msg(strstr(dt_errmsg(), "unknown dataset 'cifar1000' (expected one of fashion-mnist, mnist"), "%s",
                  dt_errmsg());
}
END_TEST

START_TEST(split_range_balanced)
{
    size_t total = 0, prev_end = 0;
    for (int r = 0; r < 4; r++) {
        size_t first, count;
        split_range(30, r, 4, &first, &count);
        ck_assert_uint_eq(first, prev_end);
        ck_assert(count == 7 || count == 8);
        prev_end = first + count;
        total += count;
    }
    ck_assert_uint_eq(total, 30);
}
END_TEST

/* every rank's slices of each batch, put together, are exactly that batch of the permutation */
START_TEST(sampler_slices_partition_batches)
{
    const size_t n = 103;
    const int batch = 10, p = 3;
    dt_sampler *s[3];
    for (int r = 0; r < p; r++) ck_assert_int_eq(sampler_create(&s[r], n, batch, r, p, 42, 1), 0);
    ck_assert_int_eq(s[0]->iters, 11);
    for (int r = 0; r < p; r++) sampler_epoch(s[r], 2);
    int seen[103] = {0};
    for (long it = 0; it < s[0]->iters; it++) {
        int covered = 0, global = 0;
        for (int r = 0; r < p; r++) {
            const uint32_t *idx;
            int rows, g;
            int64_t row0;
            sampler_slice(s[r], it, &idx, &rows, &row0, &g);
            ck_assert_int_eq(row0, covered);
            for (int i = 0; i < rows; i++) {
                ck_assert_uint_eq(idx[i], s[0]->perm[it * batch + covered + i]);
                seen[idx[i]]++;
            }
            covered += rows;
            global = g;
        }
        ck_assert_int_eq(covered, global);
        ck_assert_int_eq(global, it == 10 ? 3 : 10); /* the last batch is short, not dropped */
    }
    for (size_t i = 0; i < n; i++) ck_assert_int_eq(seen[i], 1);
    /* a pure function of (seed, epoch) */
    uint32_t keep[103];
    memcpy(keep, s[0]->perm, sizeof keep);
    sampler_epoch(s[0], 3);
    ck_assert_int_ne(memcmp(keep, s[0]->perm, sizeof keep), 0);
    sampler_epoch(s[0], 2);
    ck_assert_int_eq(memcmp(keep, s[0]->perm, sizeof keep), 0);
    for (int r = 0; r < p; r++) sampler_destroy(s[r]);
}
END_TEST

/* Above SAMPLER_ARRAY_MAX samples the order is a keyed bijection (forced here at small n): every
 * epoch is a permutation of [0, n) for n around powers of 4, the slices of the ranks partition its
 * batches, it is a pure function of (seed, epoch), epochs and seeds differ, every sample comes
 * first about equally often (2000 epochs of 10), and without shuffle it is file order */
START_TEST(sampler_keyed_order)
{
    const size_t ns[] = {1, 2, 3, 4, 5, 15, 16, 17, 103, 1000, 4096, 4097};
    for (size_t t = 0; t < DT_ARRAY_LEN(ns); t++) {
        size_t n = ns[t];
        dt_sampler *s[3];
        for (int r = 0; r < 3; r++) ck_assert_int_eq(sampler_create_max(&s[r], n, 7, r, 3, 42, 1, 0), 0);
        ck_assert_ptr_null(s[0]->perm);
        for (int e = 0; e < 3; e++) {
            int *seen = calloc(n, sizeof *seen);
            size_t fixed = 0;
            for (int r = 0; r < 3; r++) sampler_epoch(s[r], e);
            for (long it = 0; it < s[0]->iters; it++) {
                int covered = 0;
                for (int r = 0; r < 3; r++) {
                    const uint32_t *idx;
                    int rows, g;
                    int64_t row0;
                    sampler_slice(s[r], it, &idx, &rows, &row0, &g);
                    ck_assert_int_eq(row0, covered);
                    for (int i = 0; i < rows; i++) {
                        ck_assert_uint_lt(idx[i], n);
                        ck_assert_uint_eq(idx[i], sampler_at(s[0], (size_t)it * 7 + (size_t)covered + (size_t)i));
                        seen[idx[i]]++;
                        fixed += idx[i] == (size_t)it * 7 + (size_t)covered + (size_t)i;
                    }
                    covered += rows;
                }
            }
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(seen[i] == 1, "n %zu epoch %d: sample %zu seen %d times", n, e, i, seen[i]);
            if (n >= 100) ck_assert_msg(fixed < n / 20, "n %zu: %zu samples stay in place", n, fixed);
            free(seen);
        }
        if (n >= 16) { /* a pure function of (seed, epoch); another epoch or seed, another order */
            dt_sampler *o;
            ck_assert_int_eq(sampler_create_max(&o, n, 7, 0, 1, 43, 1, 0), 0);
            sampler_epoch(s[0], 1), sampler_epoch(o, 1);
            uint32_t a = sampler_at(s[0], 0), b = sampler_at(s[0], 1), c = sampler_at(s[0], 2), d = 0;
            for (size_t i = 0; i < 3; i++) d += sampler_at(o, i) != sampler_at(s[0], i);
            ck_assert_msg(d > 0, "n %zu: seeds 42 and 43 begin alike", n);
            sampler_epoch(s[0], 2);
            d = (sampler_at(s[0], 0) != a) + (sampler_at(s[0], 1) != b) + (sampler_at(s[0], 2) != c);
            ck_assert_msg(d > 0, "n %zu: epochs 1 and 2 begin alike", n);
            sampler_epoch(s[0], 1);
            ck_assert(sampler_at(s[0], 0) == a && sampler_at(s[0], 1) == b && sampler_at(s[0], 2) == c);
            sampler_destroy(o);
        }
        for (int r = 0; r < 3; r++) sampler_destroy(s[r]);
    }
    dt_sampler *s;
    int first[10] = {0};
    ck_assert_int_eq(sampler_create_max(&s, 10, 5, 0, 1, 7, 1, 0), 0);
    for (int e = 0; e < 2000; e++) {
        sampler_epoch(s, e);
        first[sampler_at(s, 0)]++;
    }
    for (int i = 0; i < 10; i++)
        ck_assert_msg(first[i] > 140 && first[i] < 260, "sample %d first in %d of 2000 epochs", i, first[i]);
    sampler_destroy(s);
    ck_assert_int_eq(sampler_create_max(&s, 25, 10, 0, 1, 7, 0, 0), 0); /* --no-shuffle */
    sampler_epoch(s, 1);
    for (size_t i = 0; i < 25; i++) ck_assert_uint_eq(sampler_at(s, i), i);
    sampler_destroy(s);
}
END_TEST

/* --no-shuffle: every epoch in file order, sliced over ranks as usual */
START_TEST(sampler_file_order)
{
    dt_sampler *s[2];
    for (int r = 0; r < 2; r++) ck_assert_int_eq(sampler_create(&s[r], 25, 10, r, 2, 42, 0), 0);
    for (int e = 0; e < 3; e++) {
        uint32_t next = 0;
        for (int r = 0; r < 2; r++) sampler_epoch(s[r], e);
        for (long it = 0; it < s[0]->iters; it++)
            for (int r = 0; r < 2; r++) {
                const uint32_t *idx;
                int rows, g;
                int64_t row0;
                sampler_slice(s[r], it, &idx, &rows, &row0, &g);
                for (int i = 0; i < rows; i++) ck_assert_uint_eq(idx[i], next++);
            }
        ck_assert_uint_eq(next, 25);
    }
    for (int r = 0; r < 2; r++) sampler_destroy(s[r]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("idx");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, raw_and_gz_load_identically);
    tcase_add_test(tc, truncated_raw);
    tcase_add_test(tc, trailing_bytes);
    tcase_add_test(tc, truncated_gz);
    tcase_add_test(tc, bad_headers);
    tcase_add_test(tc, missing_files_and_dirs);
    TCase *ts = tcase_create("sampler");
    tcase_add_test(ts, split_range_balanced);
    tcase_add_test(ts, sampler_slices_partition_batches);
    tcase_add_test(ts, sampler_file_order);
    tcase_add_test(ts, sampler_keyed_order);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, ts);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
