/* imgtree — ImageNet-style trees of class folders of JPEG and PNG images.
 *
 *   ROOT/train/<class>/<image>.JPEG    ROOT/val/<class>/<image>.JPEG    (.jpg, .jpeg, .png alike)
 *
 * Classes are the folders of train/ in byte order of their names (n01440764, n01443537, ...),
 * numbered from 0; val/ uses the same numbers and may not hold a class train/ lacks. Every file of
 * a class folder must be an image by its name (.jpg, .jpeg, .png in any case); anything else is
 * named in the error. Decoding is decode.c's (image_load_square). */
#include "imgtree.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../util.h"
#include "image.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* names in dir (not hidden), sorted; dirs: subdirectories only, else regular files only */
static int list(const char *dir, int dirs, char ***out, int *n_out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL, path[4096];
    int n = 0, cap = 0;
    if (!d) return dt_fail("%s: cannot open (%s)", dir, strerror(errno));
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        /* nothing is left out unsaid: a dangling link, an unreadable entry, a stray file or folder */
        if (stat(path, &st) != 0) {
            dt_fail("%s: cannot read (%s)", path, strerror(errno));
            goto bad;
        }
        if (dirs && !S_ISDIR(st.st_mode)) {
            dt_fail("%s: not a folder (expected only class folders in %s; hidden files, named .*, are left out)", path,
                    dir);
            goto bad;
        }
        if (!dirs && !S_ISREG(st.st_mode)) {
            dt_fail("%s: not a file (expected only .JPEG, .jpeg, .jpg or .png images in class folders; hidden files, "
                    "named .*, are left out)",
                    path);
            goto bad;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            char **g = realloc(v, sizeof *g * (size_t)cap);
            if (!g) goto oom;
            v = g;
        }
        if (!(v[n] = strdup(e->d_name))) goto oom;
        n++;
    }
    closedir(d);
    if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    *n_out = n;
    return 0;
oom:
    dt_fail("out of memory listing %s", dir);
bad:
    closedir(d);
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    return -1;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

void imgtree_free(imgtree *t)
{
    if (!t) return;
    free_list(t->classes, t->n_classes);
    for (size_t i = 0; i < t->n; i++) free(t->files[i]);
    free(t->files);
    free(t->labels);
    free(t);
}

int imgtree_classes(const char *root, char ***classes, int *n)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/train", root);
    if (list(dir, 1, classes, n) != 0) return -1;
    if (*n == 0) return dt_fail("%s: no class folders (expected train/<class>/ folders of images)", dir);
    if (*n > 65535) return dt_fail("%s: %d class folders (at most 65535)", dir, *n);
    return 0;
}

int imgtree_scan(const char *root, const char *split, char **classes, int n_classes, imgtree **out)
{
    char dir[4096], cdir[4096 + 256];
    imgtree *t = calloc(1, sizeof *t);
    size_t cap = 0;
    char **sub = NULL;
    int n_sub = 0;
    if (!t) return dt_fail("out of memory");
    *out = t;
    snprintf(dir, sizeof dir, "%s/%s", root, split);
    if (list(dir, 1, &sub, &n_sub) != 0) return -1;
    for (int k = 0; k < n_sub; k++) {
        char **key = &sub[k];
        char **found = bsearch(key, classes, (size_t)n_classes, sizeof *classes, cmp_str);
        if (!found) {
            dt_fail("%s/%s: a class folder that train/ does not have (expected the classes of train/)", dir, sub[k]);
            goto fail;
        }
        int label = (int)(found - classes);
        char **files = NULL;
        int nf = 0;
        snprintf(cdir, sizeof cdir, "%s/%s", dir, sub[k]);
        if (list(cdir, 0, &files, &nf) != 0) goto fail;
        if (nf == 0) {
            free_list(files, nf);
            dt_fail("%s: no images in this class folder (expected at least one .JPEG, .jpeg, .jpg or .png)", cdir);
            goto fail;
        }
        for (int i = 0; i < nf; i++) {
            if (!ends_with(files[i], ".png") && !ends_with(files[i], ".jpg") && !ends_with(files[i], ".jpeg")) {
                dt_fail(
                    "%s/%s: not an image file by its name (expected only .JPEG, .jpeg, .jpg or .png images in class "
                    "folders)",
                    cdir, files[i]);
                free_list(files, nf);
                goto fail;
            }
            if (t->n == cap) {
                cap = cap ? 2 * cap : 4096;
                char **g = realloc(t->files, sizeof *g * cap);
                uint16_t *l = realloc(t->labels, sizeof *l * cap);
                if (g) t->files = g;
                if (l) t->labels = l;
                if (!g || !l) {
                    free_list(files, nf);
                    dt_fail("out of memory");
                    goto fail;
                }
            }
            size_t len = strlen(cdir) + strlen(files[i]) + 2;
            if (!(t->files[t->n] = malloc(len))) {
                free_list(files, nf);
                dt_fail("out of memory");
                goto fail;
            }
            snprintf(t->files[t->n], len, "%s/%s", cdir, files[i]);
            t->labels[t->n++] = (uint16_t)label;
        }
        free_list(files, nf);
    }
    free_list(sub, n_sub);
    if (t->n == 0)
        return dt_fail("%s: no class folders with images (expected %s/<class>/ folders of images)", dir, dir);
    return 0;
fail:
    free_list(sub, n_sub);
    return -1;
}

/* a class folder's files: names, sizes and modification times (a folder that cannot be listed
 * hashes to 0: the pack is rebuilt, and the scan says why) */
static uint64_t folder_sum(const char *cdir, int *pngs)
{
    char **files = NULL, path[4096 + 512];
    int nf = 0;
    if (list(cdir, 0, &files, &nf) != 0) {
        dt_err_clear();
        return 0;
    }
    uint64_t h = DT_HASH_PACK_SEED;
    for (int i = 0; i < nf; i++) {
        struct stat st;
        size_t len = strlen(files[i]);
        if (len > 4 && strcasecmp(files[i] + len - 4, ".png") == 0) *pngs = 1;
        snprintf(path, sizeof path, "%s/%s", cdir, files[i]);
        int64_t v[3] = {-1, -1, -1};
        if (stat(path, &st) == 0) v[0] = (int64_t)st.st_size, v[1] = st.st_mtim.tv_sec, v[2] = st.st_mtim.tv_nsec;
        h = dt_hash64(v, sizeof v, dt_hash64(files[i], strlen(files[i]) + 1, h));
    }
    free_list(files, nf);
    return h;
}

int imgtree_fingerprint(const char *root, const char *split, int threads, uint64_t *fp, int *pngs)
{
    char dir[4096];
    char **sub = NULL;
    int n = 0;
    snprintf(dir, sizeof dir, "%s/%s", root, split);
    if (list(dir, 1, &sub, &n) != 0) return -1;
    uint64_t *sums = calloc((size_t)n + 1, sizeof *sums);
    int *png = calloc((size_t)n + 1, sizeof *png);
    if (!sums || !png) {
        free(sums), free(png);
        free_list(sub, n);
        return dt_fail("out of memory");
    }
    /* every image's name, size and modification time: an image rewritten in place under its own
     * name leaves its folder's time as it was (a stat of each, some 2 us warm; folders on threads) */
#pragma omp parallel for schedule(dynamic) num_threads(threads > 0 ? threads : 1)
    for (int k = 0; k < n; k++) {
        char cdir[4096 + 256];
        snprintf(cdir, sizeof cdir, "%s/%s", dir, sub[k]);
        sums[k] = folder_sum(cdir, &png[k]);
    }
    uint64_t h = DT_HASH_PACK_SEED;
    *pngs = 0;
    for (int k = 0; k < n; k++) {
        h = dt_hash64(&sums[k], sizeof sums[k], dt_hash64(sub[k], strlen(sub[k]) + 1, h));
        *pngs |= png[k];
    }
    free(sums), free(png);
    free_list(sub, n);
    *fp = h;
    return 0;
}
