/* pack — ImageNet-style JPEG/PNG trees decoded and resized once into a packed uint8 file that training
 * memory-maps, and the --dataset imagenet opener.
 *
 * File (little-endian), SPLIT-SIDE-CHANNELS.pack, e.g. train-256-3.pack:
 *   0    "DTRAINPK"            8    u32 version (1)        12   u32 header bytes (4096)
 *   16   u64 images n          24   u32 channels, side, side, classes
 *   40   u64 labels offset     48   u64 names offset       56   u64 names bytes
 *   64   u64 data offset       72   u64 data bytes (n * channels * side * side)
 *   80   u64 source fingerprint (imgtree_fingerprint of the tree it came from)
 *   88   u64 image checksums offset (8-byte aligned)
 *   96   u64 images of the tree left out as unreadable (--on-bad-image skip; 0 in older packs)
 *   120  u64 FNV-1a checksum of bytes 0..119, the labels, the names and the image checksums
 *   labels: n u16; names: the class folder names, one per line; image checksums: n u64, each
 *   pack_image_sum of one image's pixels, checked the first time a run reads the image; data
 *   (page aligned): n images, planar C x side x side.
 * Every count and offset of a header is checked against overflow and the file's size before
 * anything is read or allocated.
 * Packs live in DIR/.dtrain-pack (or, when DIR is read-only, ~/.cache/dtrain/<DIR with / as _>);
 * a pack whose fingerprint no longer matches its tree (images added, removed or rewritten) is rebuilt.
 * A directory that holds only the .pack files (copied elsewhere) is used as it is. Packs are
 * written to a temporary file, synced and renamed into place: never half a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../util.h"
#include "formats.h"
#include "image.h"
#include "imgtree.h"

#define MAGIC "DTRAINPK"
#define PACK_VERSION 2
#define DECODE_RULES 2 /* how images are decoded (decode.c), where it changed what a pack holds */
#define HEADER 4096

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t checksum(const uint8_t *base, uint64_t n, uint64_t labels_off, uint64_t names_off, uint64_t names_bytes,
                         uint64_t sums_off)
{
    uint64_t h = dt_hash64(base, 120, DT_HASH_PACK_SEED);
    h = dt_hash64(base + labels_off, n * 2, h);
    h = dt_hash64(base + names_off, names_bytes, h);
    return dt_hash64(base + sums_off, n * 8, h);
}

uint64_t pack_image_sum(const uint8_t *p, size_t n)
{
    uint64_t h = DT_HASH_PACK_SEED, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { /* FNV-1a over 64-bit words: ~8 bytes per multiply */
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* [off, off + len) lies inside a file of `total` bytes, without overflowing */
static int inside(uint64_t off, uint64_t len, uint64_t total) { return off <= total && len <= total - off; }

/* ---- reading ------------------------------------------------------------------------------------ */

typedef struct pack_info {
    char **names; /* class names */
    int n_classes;
} pack_info;

static void info_free(pack_info *pi)
{
    for (int i = 0; i < pi->n_classes; i++) free(pi->names[i]);
    free(pi->names);
    pi->names = NULL;
    pi->n_classes = 0;
}

/* 0: opened into s; 1: missing or made from another tree (why in *why); -1: damaged (error set).
 * classes (n_classes of them; NULL: packs without their tree): the tree's class folders, whose
 * order numbers the labels; a pack of other ones is stale, also where its own images are the same
 * (val's pack, when a class folder was added to train/) */
static int pack_open(const char *path, int channels, int side, int check_fp, uint64_t fp, char **classes,
                     int n_classes, dt_split *s, pack_info *pi, char *why, size_t why_n)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a named pipe refused below, not waited on */
    struct stat st;
    if (fd < 0) {
        snprintf(why, why_n, "no %s", path);
        return 1;
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dt_fail("%s: cannot stat (%s)", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dt_fail("%s: %s (expected a dtrain pack, a file; delete it to rebuild)", path, dt_file_kind(st.st_mode));
    }
    if ((size_t)st.st_size < HEADER) {
        close(fd);
        return dt_fail("%s: %lld bytes, shorter than a pack header (expected a dtrain pack; delete it to rebuild)",
                       path, (long long)st.st_size);
    }
    size_t bytes = (size_t)st.st_size;
    uint8_t *m = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return dt_fail("%s: cannot map (%s)", path, strerror(errno));
#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        dt_fail(__VA_ARGS__);                                                                                          \
        goto bad;                                                                                                      \
    } while (0)
    if (memcmp(m, MAGIC, 8) != 0) BAD("%s: not a dtrain pack (bad magic; delete it to rebuild)", path);
    uint32_t version = get32(m + 8);
    if (version != PACK_VERSION) {
        munmap(m, bytes);
        snprintf(why, why_n, "%s is a version %u pack, this dtrain makes version %d", path, version, PACK_VERSION);
        return 1;
    }
    uint64_t n = get64(m + 16), loff = get64(m + 40), noff = get64(m + 48), nb = get64(m + 56), doff = get64(m + 64),
             db = get64(m + 72), soff = get64(m + 88);
    uint32_t c = get32(m + 24), h = get32(m + 28), w = get32(m + 32), k = get32(m + 36);
    if (c != (uint32_t)channels || h != (uint32_t)side || w != (uint32_t)side) {
        munmap(m, bytes);
        snprintf(why, why_n, "%s holds %ux%ux%u images, not %dx%dx%d", path, c, h, w, channels, side, side);
        return 1;
    }
    uint64_t per = (uint64_t)c * h * w; /* channels and side match the run's: small */
    if (n == 0 || n > bytes / per || k == 0 || k > 65535 || loff < HEADER || !inside(loff, 2 * n, bytes) ||
        nb > (1u << 24) || !inside(noff, nb, bytes) || soff % 8 || !inside(soff, 8 * n, bytes) || db != n * per ||
        doff % 4096 || !inside(doff, db, bytes) || doff + db != bytes)
        BAD("%s: inconsistent pack header or size %zu bytes (truncated or damaged; delete it to rebuild)", path, bytes);
    if (checksum(m, n, loff, noff, nb, soff) != get64(m + 120))
        BAD("%s: checksum mismatch in the pack header (damaged; delete it to rebuild)", path);
    if (check_fp && get64(m + 80) != fp) {
        munmap(m, bytes);
        snprintf(why, why_n, "the images, or how dtrain decodes them, changed since %s was made", path);
        return 1;
    }
    if (!(s->y = malloc(sizeof *s->y * n))) BAD("out of memory");
    for (uint64_t i = 0; i < n; i++) {
        s->y[i] = (uint16_t)(m[loff + 2 * i] | m[loff + 2 * i + 1] << 8);
        if (s->y[i] >= k)
            BAD("%s: image %llu has label %u of %u classes (damaged)", path, (unsigned long long)i, s->y[i], k);
    }
    pi->n_classes = (int)k;
    if (!(pi->names = calloc(k, sizeof *pi->names))) BAD("out of memory");
    const char *p = (const char *)m + noff, *end = p + nb;
    for (uint32_t i = 0; i < k; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) BAD("%s: %u class names for %u classes (damaged)", path, i, k);
        if (!(pi->names[i] = strndup(p, (size_t)(nl - p)))) BAD("out of memory");
        p = nl + 1;
    }
    int other = classes && (int)k != n_classes;
    for (uint32_t i = 0; classes && !other && i < k; i++) other = strcmp(pi->names[i], classes[i]) != 0;
    if (other) {
        snprintf(why, why_n, "%s was made for other class folders (%u classes; the tree has %d now)", path, k,
                 n_classes);
        free(s->y);
        s->y = NULL;
        info_free(pi);
        munmap(m, bytes);
        return 1;
    }
    if (!(s->checked = calloc((size_t)n, 1))) BAD("out of memory");
    s->n = n;
    s->map = m;
    s->map_bytes = bytes;
    s->x = m + doff;
    s->sums = m + soff;
    s->pack_sum = get64(m + 120);
    s->skipped = get64(m + 96);
    snprintf(s->origin, sizeof s->origin, "%s", path);
    return 0;
bad:
    free(s->y);
    s->y = NULL;
    free(s->checked);
    s->checked = NULL;
    info_free(pi);
    munmap(m, bytes);
    return -1;
#undef BAD
}

/* ---- writing ------------------------------------------------------------------------------------ */

typedef struct pack_job {
    const imgtree *t;
    uint8_t *data, *sums;
    size_t d;
    int channels, side;
    int skip;     /* --on-bad-image skip: an unreadable image is left out (bad[i] = 1), not an error */
    uint8_t *bad; /* [n] */
    size_t n_bad;
    atomic_size_t next, done;
    atomic_int failed;
    pthread_mutex_t mu;
    char err[1024];
} pack_job;

static void *pack_worker(void *arg)
{
    pack_job *j = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->t->n || atomic_load(&j->failed)) break;
        if (dt_stop_signal()) {
            pthread_mutex_lock(&j->mu);
            if (!atomic_load(&j->failed))
                snprintf(j->err, sizeof j->err, "packing stopped by a signal; run again to pack");
            atomic_store(&j->failed, 1);
            pthread_mutex_unlock(&j->mu);
            break;
        }
        if (image_load_square(j->t->files[i], j->channels, j->side, j->data + i * j->d) == 0)
            put64(j->sums + 8 * i, pack_image_sum(j->data + i * j->d, j->d));
        else if (j->skip) {
            pthread_mutex_lock(&j->mu);
            j->bad[i] = 1;
            if (++j->n_bad <= 20) fprintf(stderr, "dtrain: skipping an unreadable image: %s\n", dt_errmsg());
            if (j->n_bad == 20) fprintf(stderr, "dtrain: (further skipped images are counted, not named)\n");
            pthread_mutex_unlock(&j->mu);
        } else {
            pthread_mutex_lock(&j->mu);
            if (!atomic_load(&j->failed))
                snprintf(j->err, sizeof j->err, "%s (--on-bad-image skip leaves unreadable images out)", dt_errmsg());
            atomic_store(&j->failed, 1);
            pthread_mutex_unlock(&j->mu);
            break;
        }
        atomic_fetch_add(&j->done, 1);
    }
    return NULL;
}

/* Leaves the images marked bad out of a pack laid out for n images (labels at HEADER): the labels,
 * names, image checksums and pixels move down over them (every destination lies at or before its
 * source, and each table moves after the one before it), and the header takes the new layout.
 * Returns the new size of the file. */
static uint64_t pack_compact(uint8_t *m, size_t n, const uint8_t *bad, size_t n_bad, size_t d, uint64_t names_bytes)
{
    uint64_t noff = get64(m + 48), soff = get64(m + 88), doff = get64(m + 64), loff = HEADER;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!bad[i]) m[loff + 2 * k] = m[loff + 2 * i], m[loff + 2 * k + 1] = m[loff + 2 * i + 1], k++;
    uint64_t noff2 = loff + 2 * (uint64_t)k, soff2 = (noff2 + names_bytes + 7) / 8 * 8;
    memmove(m + noff2, m + noff, names_bytes);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (!bad[i]) memmove(m + soff2 + 8 * k++, m + soff + 8 * i, 8);
    uint64_t doff2 = (soff2 + 8 * (uint64_t)k + 4095) / 4096 * 4096;
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (!bad[i]) memmove(m + doff2 + k++ * d, m + doff + i * d, d);
    put64(m + 16, k), put64(m + 48, noff2), put64(m + 64, doff2), put64(m + 72, (uint64_t)k * d), put64(m + 88, soff2);
    put64(m + 96, n_bad);
    return doff2 + (uint64_t)k * d;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int pack_write(const char *root, const char *split, char **classes, int n_classes, uint64_t fp, const char *path,
                      const dt_data_opts *o)
{
    imgtree *t = NULL;
    char tmp[PATH_MAX + 64], what[64];
    if (imgtree_scan(root, split, classes, n_classes, &t) != 0) {
        imgtree_free(t);
        return -1;
    }
    size_t d = (size_t)o->channels * o->image_size * o->image_size, names_bytes = 0;
    for (int i = 0; i < n_classes; i++) names_bytes += strlen(classes[i]) + 1;
    uint64_t loff = HEADER, noff = loff + 2 * (uint64_t)t->n, soff = (noff + names_bytes + 7) / 8 * 8;
    uint64_t doff = (soff + 8 * (uint64_t)t->n + 4095) / 4096 * 4096;
    uint64_t bytes = doff + (uint64_t)t->n * d;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dt_temp_add(tmp);
        flock(fd, LOCK_EX | LOCK_NB); /* being written: not a killed run's (dt_remove_stale_temps) */
        dt_remove_stale_temps(path, tmp);
    }
    if (fd < 0) {
        imgtree_free(t);
        return dt_fail("%s: cannot create (%s)", tmp, strerror(errno));
    }
    uint8_t *m = MAP_FAILED;
    /* the blocks reserved before the mapping is written: a page a full disk cannot back would be
     * SIGBUS where the write touches it, not an error (a file system that cannot reserve: as before) */
    int r = posix_fallocate(fd, 0, (off_t)bytes);
    if (r != 0 && r != EOPNOTSUPP && r != EINVAL) {
        dt_fail("%s: cannot make a %llu-byte file (%s)", tmp, (unsigned long long)bytes, strerror(r));
        goto fail;
    }
    if (ftruncate(fd, (off_t)bytes) != 0 ||
        (m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        dt_fail("%s: cannot make a %llu-byte file (%s)", tmp, (unsigned long long)bytes, strerror(errno));
        goto fail;
    }
    memcpy(m, MAGIC, 8);
    put32(m + 8, PACK_VERSION), put32(m + 12, HEADER), put64(m + 16, t->n);
    put32(m + 24, (uint32_t)o->channels), put32(m + 28, (uint32_t)o->image_size),
        put32(m + 32, (uint32_t)o->image_size);
    put32(m + 36, (uint32_t)n_classes);
    put64(m + 40, loff), put64(m + 48, noff), put64(m + 56, names_bytes), put64(m + 64, doff);
    put64(m + 72, (uint64_t)t->n * d), put64(m + 80, fp), put64(m + 88, soff);
    for (size_t i = 0; i < t->n; i++)
        m[loff + 2 * i] = (uint8_t)t->labels[i], m[loff + 2 * i + 1] = (uint8_t)(t->labels[i] >> 8);
    char *np = (char *)m + noff;
    for (int i = 0; i < n_classes; i++) np += sprintf(np, "%s\n", classes[i]);
    pack_job j = {.t = t, .data = m + doff, .sums = m + soff, .d = d, .channels = o->channels, .side = o->image_size,
                  .skip = o->skip_bad};
    if (j.skip && !(j.bad = calloc(t->n, 1))) {
        dt_fail("out of memory");
        goto fail;
    }
    pthread_mutex_init(&j.mu, NULL);
    int nt = o->threads > 0 ? o->threads : 1;
    pthread_t th[64];
    nt = nt > 64 ? 64 : nt;
    int started = 0;
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, pack_worker, &j) != 0) break;
    double t0 = now(), last = t0;
    snprintf(what, sizeof what, "packing %s", split);
    if (started == 0) pack_worker(&j);
    while (started > 0 && atomic_load(&j.done) < t->n && !atomic_load(&j.failed)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        size_t done = atomic_load(&j.done);
        if (o->progress && done < t->n && now() - last >= 1.0) { /* the whole count: the one line after the loop */
            last = now();
            o->progress(o->progress_arg, what, done, t->n, last - t0);
        }
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&j.mu);
    if (atomic_load(&j.failed)) {
        dt_fail("%s", j.err);
        free(j.bad);
        goto fail;
    }
    if (o->progress) o->progress(o->progress_arg, what, t->n, t->n, now() - t0);
    uint64_t final = bytes;
    if (j.n_bad == t->n) {
        dt_fail("%s/%s: none of its %zu images could be read (the first skipped is named above)", root, split, t->n);
        free(j.bad);
        goto fail;
    }
    if (j.n_bad) { /* a class folder all of whose images were left out: as an empty one, refused */
        size_t *good = calloc((size_t)n_classes, sizeof *good), *all = calloc((size_t)n_classes, sizeof *all);
        int empty = -1;
        for (size_t i = 0; good && all && i < t->n; i++) all[t->labels[i]]++, good[t->labels[i]] += !j.bad[i];
        for (int k = 0; good && all && k < n_classes && empty < 0; k++)
            if (all[k] && !good[k]) empty = k;
        if (!good || !all || empty >= 0) {
            if (empty >= 0)
                dt_fail("%s/%s/%s: none of its %zu images could be read, so the class would have no images in %s "
                        "(the first skipped is named above; expected at least one readable image in a class folder)",
                        root, split, classes[empty], all[empty], split);
            else
                dt_fail("out of memory");
            free(good), free(all), free(j.bad);
            goto fail;
        }
        free(good), free(all);
        final = pack_compact(m, t->n, j.bad, j.n_bad, d, names_bytes);
        fprintf(stderr, "dtrain: %s/%s: %zu of %zu images left out as unreadable (--on-bad-image skip)\n", root, split,
                j.n_bad, t->n);
    }
    free(j.bad);
    /* the image checksums are in now */
    put64(m + 120, checksum(m, get64(m + 16), loff, get64(m + 48), names_bytes, get64(m + 88)));
    if (msync(m, bytes, MS_SYNC) != 0) {
        dt_fail("%s: cannot write (%s)", tmp, strerror(errno));
        goto fail;
    }
    munmap(m, bytes);
    m = MAP_FAILED;
    if ((final < bytes && ftruncate(fd, (off_t)final) != 0) || fsync(fd) != 0) {
        dt_fail("%s: cannot write (%s)", tmp, strerror(errno));
        goto fail;
    }
    close(fd);
    imgtree_free(t);
    dt_temp_remove(tmp);
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        return dt_fail("%s: cannot rename into place (%s)", path, strerror(errno));
    }
    return dt_sync_dir_of(path);
fail:
    if (m != MAP_FAILED) munmap(m, bytes);
    close(fd);
    unlink(tmp);
    dt_temp_remove(tmp);
    imgtree_free(t);
    return -1;
}

/* ---- the dataset -------------------------------------------------------------------------------- */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p */
static int mkdirs(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *c = p + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *c = '/';
        }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* where DIR's packs go: DIR/.dtrain-pack if it exists or can be made, else the user's cache */
static int pack_dir(const char *root, int create, char *out, size_t n)
{
    snprintf(out, n, "%s/.dtrain-pack", root);
    if (is_dir(out)) return 0;
    if (access(root, W_OK) == 0 && (!create || mkdir(out, 0755) == 0 || errno == EEXIST)) return 0;
    char real[PATH_MAX], *p;
    const char *base = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (!realpath(root, real)) snprintf(real, sizeof real, "%s", root);
    for (p = real; *p; p++)
        if (*p == '/') *p = '_';
    int k = base && *base ? snprintf(out, n, "%s/dtrain/%s", base, real)
                          : snprintf(out, n, "%s/.cache/dtrain/%s", home ? home : "/tmp", real);
    if (k < 0 || (size_t)k >= n) return dt_fail("%s: path too long for a pack directory", root);
    if (create && mkdirs(out) != 0)
        return dt_fail("%s is read-only and %s cannot be made (%s)", root, out, strerror(errno));
    return 0;
}

/* A dry run's view of a tree that has no pack yet: the sizes and labels of ROOT/SPLIT, no pixels. */
static int scan_split(const char *root, const char *split, char **classes, int n_classes, dt_split *s, pack_info *pi)
{
    imgtree *t;
    if (imgtree_scan(root, split, classes, n_classes, &t) != 0) return -1;
    s->n = t->n;
    s->y = t->labels;
    t->labels = NULL;
    imgtree_free(t);
    snprintf(s->origin, sizeof s->origin, "%s/%s (not packed yet)", root, split);
    if (!(pi->names = calloc((size_t)n_classes, sizeof *pi->names))) return dt_fail("out of memory");
    pi->n_classes = n_classes;
    for (int i = 0; i < n_classes; i++)
        if (!(pi->names[i] = strdup(classes[i]))) return dt_fail("out of memory");
    return 0;
}

static int open_split(dt_dataset *ds, const char *root, const char *dir, const char *split, char **classes,
                      int n_classes, const dt_data_opts *o, dt_split *s, pack_info *pi)
{
    char path[PATH_MAX], why[PATH_MAX + 128], tree[PATH_MAX];
    uint64_t fp = 0;
    snprintf(path, sizeof path, "%s/%s-%d-%d.pack", dir, split, o->image_size, o->channels);
    snprintf(tree, sizeof tree, "%s/%s", root, split);
    int have_tree = is_dir(tree), pngs = 0;
    if (have_tree && imgtree_fingerprint(root, split, o->threads, &fp, &pngs) != 0) return -1;
    /* PNGs and images of one channel are decoded as PIL converts them since 2026-12-06 (16-bit
     * samples and alpha were taken as linear light, grey was libjpeg's luma): their packs from
     * before are packed again once */
    const uint8_t rules = DECODE_RULES;
    if (have_tree && (pngs || o->channels == 1)) fp = dt_hash64(&rules, 1, fp);
    char **tree_classes = have_tree ? classes : NULL;
    int rc = pack_open(path, o->channels, o->image_size, have_tree, fp, tree_classes, n_classes, s, pi, why,
                       sizeof why);
    if (rc == 0) dataset_note_file(ds, path);
    if (rc <= 0) return rc;
    if (!have_tree) {
        dt_fail("%s: %s, and no %s/<class>/ images to make it from (expected train/ and val/ class folders of JPEG or "
                "PNG images)",
                root, why, tree);
        return strcmp(split, "train") == 0 && access(path, F_OK) != 0 ? DT_DATA_NOT_FOUND : -1; /* nothing of it here */
    }
    if (o->scan_only) return scan_split(root, split, classes, n_classes, s, pi);
    if (!o->may_pack) return dt_fail("%s (another process was to pack it)", why);
    if (pack_write(root, split, classes, n_classes, fp, path, o) != 0) return -1;
    rc = pack_open(path, o->channels, o->image_size, 1, fp, tree_classes, n_classes, s, pi, why, sizeof why);
    if (rc > 0) return dt_fail("%s right after packing it", why);
    if (rc == 0) dataset_note_file(ds, path);
    return rc;
}

int imagenet_open(dt_dataset *ds, const char *root, const dt_data_opts *o)
{
    char dir[PATH_MAX], train_tree[PATH_MAX];
    char **classes = NULL;
    int n_classes = 0, rc = -1;
    pack_info tr = {0}, va = {0};
    if (o->channels != 1 && o->channels != 3)
        return dt_fail("imagenet: images of %d channels (expected a net whose input has 1 or 3)", o->channels);
    if (o->image_size < 8 || o->image_size > 4096)
        return dt_fail("imagenet: image size %d (expected 8 to 4096)", o->image_size);
    ds->c = o->channels, ds->h = ds->w = o->image_size;
    if (o->channels == 1) /* grey: the mean of the RGB statistics */
        ds->mean[0] = (0.485f + 0.456f + 0.406f) / 3, ds->std[0] = (0.229f + 0.224f + 0.225f) / 3;
    snprintf(train_tree, sizeof train_tree, "%s/train", root);
    if (is_dir(train_tree)) {
        if (imgtree_classes(root, &classes, &n_classes) != 0) goto out;
        if (pack_dir(root, o->may_pack, dir, sizeof dir) != 0) goto out;
    } else {
        snprintf(dir, sizeof dir, "%s", root); /* packs only */
    }
    if ((rc = open_split(ds, root, dir, "train", classes, n_classes, o, &ds->train, &tr)) != 0) {
        rc = rc == DT_DATA_NOT_FOUND ? rc : -1;
        goto out;
    }
    rc = -1;
    if (open_split(ds, root, dir, "val", classes, n_classes, o, &ds->test, &va) != 0) goto out;
    if (tr.n_classes != va.n_classes) {
        dt_fail("%s: the train pack has %d classes, the val pack %d (expected the same)", dir, tr.n_classes,
                va.n_classes);
        goto out;
    }
    for (int i = 0; i < tr.n_classes; i++)
        if (strcmp(tr.names[i], va.names[i]) != 0) {
            dt_fail("%s: class %d is %s in the train pack and %s in val (expected the same classes)", dir, i,
                    tr.names[i], va.names[i]);
            goto out;
        }
    ds->n_classes = tr.n_classes;
    rc = 0;
out:
    for (int i = 0; i < n_classes; i++) free(classes[i]);
    free(classes);
    info_free(&tr);
    info_free(&va);
    return rc;
}
