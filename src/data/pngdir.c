/* pngdir — ImageNet-style trees of class folders of PNG images, read with libpng.
 *
 *   ROOT/train/<class>/<image>.png     ROOT/val/<class>/<image>.png
 *
 * Classes are the folders of train/ in byte order of their names (n01440764, n01443537, ...),
 * numbered from 0; val/ uses the same numbers and may not hold a class train/ lacks. Every file of
 * a class folder must be a PNG: a JPEG is rejected with the command that converts it, anything
 * else by name. Each image becomes a square of side S: the centred square of its shorter side,
 * resampled to S x S (antialiased), as RGB (grey images repeated over the channels, alpha
 * composited on black) or grey. */
#include "pngdir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../util.h"
#include "image.h"

#define MAX_SIDE 32768

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
        if (stat(path, &st) != 0) continue;
        if (dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) continue;
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
    closedir(d);
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    return dt_fail("out of memory listing %s", dir);
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

void pngdir_free(pngdir *t)
{
    if (!t) return;
    free_list(t->classes, t->n_classes);
    for (size_t i = 0; i < t->n; i++) free(t->files[i]);
    free(t->files);
    free(t->labels);
    free(t);
}

int pngdir_classes(const char *root, char ***classes, int *n)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/train", root);
    if (list(dir, 1, classes, n) != 0) return -1;
    if (*n == 0) return dt_fail("%s: no class folders (expected train/<class>/*.png)", dir);
    if (*n > 65535) return dt_fail("%s: %d class folders (at most 65535)", dir, *n);
    return 0;
}

int pngdir_scan(const char *root, const char *split, char **classes, int n_classes, pngdir **out)
{
    char dir[4096], cdir[4096 + 256];
    pngdir *t = calloc(1, sizeof *t);
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
            dt_fail("%s: no images in this class folder (expected at least one .png)", cdir);
            goto fail;
        }
        for (int i = 0; i < nf; i++) {
            if (ends_with(files[i], ".jpg") || ends_with(files[i], ".jpeg")) {
                dt_fail("%s/%s: a JPEG; dtrain reads PNG only (convert the tree once, e.g. with ImageMagick: "
                        "find %s -name '*.JPEG' -exec mogrify -format png {} + and remove the JPEGs)",
                        cdir, files[i], root);
                free_list(files, nf);
                goto fail;
            }
            if (!ends_with(files[i], ".png")) {
                dt_fail("%s/%s: not a .png file (expected only PNG images in class folders)", cdir, files[i]);
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
    if (t->n == 0) return dt_fail("%s: no class folders with images (expected %s/<class>/*.png)", dir, dir);
    return 0;
fail:
    free_list(sub, n_sub);
    return -1;
}

int pngdir_fingerprint(const char *root, const char *split, uint64_t *fp)
{
    char dir[4096], cdir[4096 + 256];
    char **sub = NULL;
    int n = 0;
    uint64_t h = 1469598103934665603ull;
    snprintf(dir, sizeof dir, "%s/%s", root, split);
    if (list(dir, 1, &sub, &n) != 0) return -1;
    /* adding, removing or renaming a file changes its folder's modification time */
    for (int k = 0; k < n; k++) {
        struct stat st;
        snprintf(cdir, sizeof cdir, "%s/%s", dir, sub[k]);
        uint64_t v = stat(cdir, &st) == 0 ? (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec : 0;
        for (const char *c = sub[k]; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
        for (int b = 0; b < 8; b++) h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    free_list(sub, n);
    *fp = h;
    return 0;
}

int png_load_square(const char *path, int channels, int side, uint8_t *out)
{
    png_image im;
    FILE *f = fopen(path, "rb");
    uint8_t sig[8];
    if (!f) return dt_fail("%s: cannot open (%s)", path, strerror(errno));
    size_t got = fread(sig, 1, 8, f);
    fclose(f);
    if (got >= 3 && sig[0] == 0xff && sig[1] == 0xd8 && sig[2] == 0xff)
        return dt_fail("%s: a JPEG named .png (dtrain reads PNG only; convert it, e.g. mogrify -format png)", path);
    if (got < 8 || png_sig_cmp(sig, 0, 8) != 0) return dt_fail("%s: not a PNG file (no PNG signature)", path);
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path)) return dt_fail("%s: libpng: %s", path, im.message);
    if (im.width < 1 || im.height < 1 || im.width > MAX_SIDE || im.height > MAX_SIDE) {
        dt_fail("%s: %ux%u pixels (expected 1 to %d on each side)", path, im.width, im.height, MAX_SIDE);
        png_image_free(&im);
        return -1;
    }
    im.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    int w = (int)im.width, h = (int)im.height;
    uint8_t *pix = calloc(1, PNG_IMAGE_SIZE(im)), *planar = malloc((size_t)channels * w * h);
    if (!pix || !planar) {
        free(pix), free(planar);
        png_image_free(&im);
        return dt_fail("out of memory decoding %s", path);
    }
    if (!png_image_finish_read(&im, NULL, pix, 0, NULL)) { /* alpha composites onto the zeros: black */
        dt_fail("%s: libpng: %s", path, im.message);
        free(pix), free(planar);
        png_image_free(&im);
        return -1;
    }
    for (int c = 0; c < channels; c++)
        for (size_t i = 0; i < (size_t)w * h; i++) planar[(size_t)c * w * h + i] = pix[i * channels + c];
    free(pix);
    int s = w < h ? w : h;
    int rc = image_resample_u8(planar, channels, h, w, (w - s) / 2.0, (h - s) / 2.0, s, s, side, side, out);
    free(planar);
    return rc;
}
