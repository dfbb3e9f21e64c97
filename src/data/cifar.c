/* CIFAR-10 and CIFAR-100 in their binary formats (https://www.cs.toronto.edu/~kriz/cifar.html):
 *   CIFAR-10:  data_batch_1.bin .. data_batch_5.bin, test_batch.bin; per record 1 label byte
 *              (0-9) and 3072 pixel bytes: the 1024 red, then green, then blue values of a 32x32
 *              image, row by row — already the C, H, W order the engine uses.
 *   CIFAR-100: train.bin, test.bin; per record a coarse label (0-19), a fine label (0-99) and the
 *              same 3072 bytes. dtrain trains on the fine labels.
 * A directory may hold the files or the folder the archive unpacks to (cifar-10-batches-bin,
 * cifar-100-binary). Checked: every file present, sizes a whole number of records, labels in
 * range. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util.h"
#include "data.h"
#include "formats.h"

#define PIXELS 3072

/* the directory holding the files: DIR or DIR/SUB */
static void locate(const char *dir, const char *sub, const char *probe, char *out, size_t n)
{
    struct stat st;
    char p[1200];
    snprintf(out, n, "%s/%s", dir, sub);
    snprintf(p, sizeof p, "%s/%s", out, probe);
    if (stat(p, &st) == 0) return;
    snprintf(out, n, "%s", dir);
}

/* Appends the records of one file to s (grown as needed). */
static int read_file(const char *path, int label_bytes, int n_labels, dt_split *s, size_t *cap)
{
    mode_t kind;
    FILE *f = dt_fopen_regular(path, &kind); /* a named pipe refused, not waited on */
    struct stat st;
    size_t rec = (size_t)label_bytes + PIXELS;
    if (!f && kind)
        return dt_fail("%s: %s (expected a CIFAR-%s binary file)", path, dt_file_kind(kind),
                       label_bytes == 1 ? "10" : "100");
    if (!f)
        return dt_fail("%s: cannot open (%s; expected the CIFAR-%s binary files here)", path, strerror(errno),
                       label_bytes == 1 ? "10" : "100");
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return dt_fail("%s: not a regular file", path);
    }
    size_t bytes = (size_t)st.st_size, n = bytes / rec;
    if (bytes == 0) {
        fclose(f);
        return dt_fail("%s: an empty file (expected CIFAR-%s records of %zu bytes; cut short while copying?)", path,
                       label_bytes == 1 ? "10" : "100", rec);
    }
    if (bytes % rec != 0) {
        fclose(f);
        return dt_fail("%s: %zu bytes is not a whole number of %zu-byte records (expected the CIFAR-%s binary "
                       "format: %s + 3072 pixels per image; truncated or another file?)",
                       path, bytes, rec, label_bytes == 1 ? "10" : "100",
                       label_bytes == 1 ? "1 label byte" : "coarse and fine label bytes");
    }
    if (s->n + n > *cap) {
        size_t c = DT_MAX(*cap * 2, s->n + n);
        uint8_t *x = realloc(s->own, c * PIXELS);
        uint16_t *y = x ? realloc(s->y, c * sizeof *y) : NULL;
        if (x) s->own = x;
        if (y) s->y = y;
        if (!x || !y) {
            fclose(f);
            return dt_fail("out of memory reading %s", path);
        }
        *cap = c;
    }
    uint8_t *buf = malloc(rec * 1024);
    if (!buf) {
        fclose(f);
        return dt_fail("out of memory");
    }
    for (size_t done = 0; done < n;) {
        size_t k = DT_MIN(n - done, (size_t)1024);
        if (fread(buf, rec, k, f) != k) {
            free(buf);
            fclose(f);
            return dt_fail("%s: read error after %zu records", path, done);
        }
        for (size_t i = 0; i < k; i++) {
            const uint8_t *r = buf + i * rec;
            uint8_t coarse = r[0], label = r[label_bytes - 1];
            if (label_bytes == 2 && coarse >= 20) {
                dt_fail("%s: record %zu has coarse label %d (expected 0..19: is this a CIFAR-100 file?)", path,
                        done + i, coarse);
                goto bad;
            }
            if (label >= n_labels) {
                dt_fail("%s: record %zu has label %d (expected 0..%d: is this a CIFAR-%s file?)", path, done + i, label,
                        n_labels - 1, label_bytes == 1 ? "10" : "100");
                goto bad;
            }
            s->y[s->n + done + i] = label;
            memcpy(s->own + (s->n + done + i) * PIXELS, r + label_bytes, PIXELS);
        }
        done += k;
    }
    free(buf);
    fclose(f);
    s->n += n;
    s->x = s->own;
    return 0;
bad:
    free(buf);
    fclose(f);
    return -1;
}

/* a failed read of the first file, which is not there: the dataset is not here at all */
static int absent(int first, const char *path)
{
    return first && access(path, F_OK) != 0 ? DT_DATA_NOT_FOUND : -1;
}

int cifar_open(dt_dataset *ds, const char *dir, int hundred)
{
    char d[1024], p[1200];
    size_t cap_train = 0, cap_test = 0;
    ds->c = 3, ds->h = 32, ds->w = 32;
    if (!hundred) {
        ds->n_classes = 10;
        locate(dir, "cifar-10-batches-bin", "data_batch_1.bin", d, sizeof d);
        for (int b = 1; b <= 5; b++) {
            snprintf(p, sizeof p, "%s/data_batch_%d.bin", d, b);
            if (read_file(p, 1, 10, &ds->train, &cap_train) != 0) return absent(b == 1, p);
            dataset_note_file(ds, p);
        }
        snprintf(p, sizeof p, "%s/test_batch.bin", d);
        if (read_file(p, 1, 10, &ds->test, &cap_test) != 0) return -1;
        dataset_note_file(ds, p);
        return 0;
    }
    ds->n_classes = 100;
    locate(dir, "cifar-100-binary", "train.bin", d, sizeof d);
    snprintf(p, sizeof p, "%s/train.bin", d);
    if (read_file(p, 2, 100, &ds->train, &cap_train) != 0) return absent(1, p);
    dataset_note_file(ds, p);
    snprintf(p, sizeof p, "%s/test.bin", d);
    if (read_file(p, 2, 100, &ds->test, &cap_test) != 0) return -1;
    dataset_note_file(ds, p);
    return 0;
}
