/* augment — from stored uint8 samples to the float batches the net reads.
 *
 * Training (PAPERS.md's recipes, selectable with --augment):
 *   crop=P        pad the image with P zero pixels on every side and take a random window of the
 *                 output size (CIFAR: P = 4, with flip)
 *   resized-crop  a random window of 8-100 % of the area and aspect ratio 3/4-4/3, resized to
 *                 the output size (ImageNet, with flip), as torchvision's RandomResizedCrop
 *   flip          mirror left-right with probability 1/2
 * Evaluation: the centre window of the output size. Always: x = (pixel/255 - mean[c]) / std[c].
 * Each sample's random draws come from (key, its index in the split) alone, so they do not depend
 * on threads, ranks or prefetching, and a resumed run draws what the uninterrupted run drew.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"
#include "data.h"
#include "formats.h"
#include "image.h"

int augment_parse(const char *spec, const char *dataset, dt_augment *out)
{
    memset(out, 0, sizeof *out);
    if (!strcmp(spec, "none")) return 0;
    if (!strcmp(spec, "default")) { /* for synthetic data: the name of the dataset it is shaped like */
        if (!strcmp(dataset, "cifar10") || !strcmp(dataset, "cifar100")) out->pad_crop = 4, out->flip = 1;
        else if (!strcmp(dataset, "imagenet")) out->resized_crop = 1, out->flip = 1;
        return 0;
    }
    char buf[256], *save = NULL, *tok;
    if (strlen(spec) >= sizeof buf) return dt_fail("'%.32s...' is too long", spec);
    if (dt_list_check(spec, ',') != 0) return -1;
    strcpy(buf, spec);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long p;
        if ((!strcmp(tok, "flip") && out->flip) || (!strcmp(tok, "resized-crop") && out->resized_crop) ||
            (!strncmp(tok, "crop=", 5) && out->pad_crop))
            return dt_fail("'%s' lists %.*s twice", spec, !strncmp(tok, "crop=", 5) ? 4 : (int)strlen(tok), tok);
        if (!strcmp(tok, "flip")) out->flip = 1;
        else if (!strcmp(tok, "resized-crop")) out->resized_crop = 1;
        else if (!strncmp(tok, "crop=", 5)) {
            if (dt_parse_long(tok + 5, 0, 64, "crop", &p) != 0) return -1;
            out->pad_crop = (int)p;
            if (p == 0) out->pad_crop = -1; /* a random window without padding */
        } else
            return dt_fail("unknown item '%s' (expected default, none, or a comma list of crop=PAD, "
                           "resized-crop, flip)",
                           tok);
    }
    if (out->pad_crop && out->resized_crop) return dt_fail("crop= and resized-crop exclude each other");
    return 0;
}

void augment_describe(const dt_augment *a, char *buf, size_t n)
{
    buf[0] = 0;
    if (a->pad_crop) snprintf(buf + strlen(buf), n - strlen(buf), "random crop, padding %d", DT_MAX(a->pad_crop, 0));
    if (a->resized_crop) snprintf(buf + strlen(buf), n - strlen(buf), "random resized crop");
    if (a->flip) snprintf(buf + strlen(buf), n - strlen(buf), "%sflip", buf[0] ? ", " : "");
    if (!buf[0]) snprintf(buf, n, "none");
}

/* torchvision's RandomResizedCrop.get_params: a window of h x w at (y, x) */
static void resized_window(dt_rng *r, int H, int W, int *y, int *x, int *h, int *w)
{
    double area = (double)H * W, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
    for (int k = 0; k < 10; k++) {
        double target = area * (0.08 + 0.92 * rng_uniform_d(r)), ratio = exp(lr0 + (lr1 - lr0) * rng_uniform_d(r));
        int cw = (int)lround(sqrt(target * ratio)), ch = (int)lround(sqrt(target / ratio));
        if (cw > 0 && cw <= W && ch > 0 && ch <= H) {
            *y = (int)rng_below(r, (uint64_t)(H - ch + 1));
            *x = (int)rng_below(r, (uint64_t)(W - cw + 1));
            *h = ch, *w = cw;
            return;
        }
    }
    double in = (double)W / H; /* fall back to the centre, the aspect clamped */
    if (in < 3.0 / 4.0) *w = W, *h = (int)lround(W / (3.0 / 4.0));
    else if (in > 4.0 / 3.0) *h = H, *w = (int)lround(H * (4.0 / 3.0));
    else *w = W, *h = H;
    *y = (H - *h) / 2, *x = (W - *w) / 2;
}

/* one sample: stored c x H x W uint8 at src into c x oh x ow floats at dst (scr: the thread's
 * resampling memory); -1 when out of memory */
static int fill_one(const dt_dataset *ds, const dt_view *v, uint64_t index, const uint8_t *src, float *dst,
                     image_scratch *scr)
{
    const int c = ds->c, H = ds->h, W = ds->w, oh = v->h, ow = v->w;
    float a[3], b[3];
    dt_rng r;
    int y0 = (H - oh) / 2, x0 = (W - ow) / 2, pad = 0, flip = 0;
    for (int k = 0; k < c; k++) a[k] = 1.0f / (255.0f * ds->std[k]), b[k] = -ds->mean[k] / ds->std[k];
    if (v->aug) {
        rng_seed(&r, v->key, index);
        if (v->aug->resized_crop) {
            int y, x, h, w;
            resized_window(&r, H, W, &y, &x, &h, &w);
            flip = v->aug->flip && (rng_next(&r) >> 63);
            return image_resample_f(src, c, H, W, x, y, w, h, oh, ow, a, b, flip, scr, dst);
        }
        if (v->aug->pad_crop) {
            pad = DT_MAX(v->aug->pad_crop, 0);
            y0 = (int)rng_below(&r, (uint64_t)(H + 2 * pad - oh + 1)) - pad;
            x0 = (int)rng_below(&r, (uint64_t)(W + 2 * pad - ow + 1)) - pad;
        }
        flip = v->aug->flip && (rng_next(&r) >> 63);
    }
    for (int k = 0; k < c; k++) { /* a window at (y0, x0), zero pixels outside the image */
        const uint8_t *plane = src + (size_t)k * H * W;
        float *out = dst + (size_t)k * oh * ow, zero = b[k], ak = a[k], bk = b[k];
        for (int i = 0; i < oh; i++) {
            int y = y0 + i;
            float *o = out + (size_t)i * ow;
            if (y < 0 || y >= H) {
                for (int j = 0; j < ow; j++) o[j] = zero;
                continue;
            }
            const uint8_t *row = plane + (size_t)y * W;
            /* the window's columns on the image: [j0, j1), within [0, ow) also where a padding wider
             * than the image puts the window beside it (x0 < -ow or x0 >= W) */
            int j0 = DT_MIN(ow, DT_MAX(0, -x0)), j1 = DT_MAX(j0, DT_MIN(ow, W - x0));
            for (int j = 0; j < j0; j++) o[j] = zero;
#pragma omp simd
            for (int j = j0; j < j1; j++) o[j] = (float)row[x0 + j] * ak + bk;
            for (int j = j1; j < ow; j++) o[j] = zero;
        }
    }
    if (!flip) return 0;
    for (int k = 0; k < c; k++)
        for (int i = 0; i < oh; i++) {
            float *o = dst + ((size_t)k * oh + i) * ow;
            for (int j = 0; j < ow / 2; j++) {
                float t = o[j];
                o[j] = o[ow - 1 - j];
                o[ow - 1 - j] = t;
            }
        }
    return 0;
}

/* a packed image is checked against its checksum the first time a run reads it: 1 if it matches
 * (or was checked before), quietly */
static int matches(const dt_split *s, uint32_t i, size_t d)
{
    uint64_t want = 0;
    if (!s->sums || s->checked[i]) return 1;
    for (int b = 7; b >= 0; b--) want = want << 8 | s->sums[8 * (size_t)i + (size_t)b];
    if (pack_image_sum(s->x + (size_t)i * d, d) != want) return 0;
    s->checked[i] = 1;
    return 1;
}

static int intact(const dt_split *s, uint32_t i, size_t d)
{
    if (!matches(s, i, d))
        return dt_fail(
            "%s: image %u is damaged (its pixels do not match their checksum; delete the pack to rebuild it)",
            s->origin, i);
    return 0;
}

int dataset_fill_view(const dt_dataset *ds, const dt_split *s, const dt_view *v, const uint32_t *idx, int rows,
                      float *x, int32_t *y)
{
    size_t d = (size_t)ds->c * ds->h * ds->w, od = (size_t)ds->c * v->h * v->w;
    /* samples are independent (each its own draws), so they may be made on several threads */
    int nt = v->threads > 1 && rows > 1 ? DT_MIN(v->threads, rows) : 1, no_mem = 0, bad = rows;
    if (ds->synthetic) { /* made here, then as stored samples */
#pragma omp parallel num_threads(nt) reduction(| : no_mem)
        {
            uint8_t *px = malloc(d);
            image_scratch scr = {0};
            no_mem = !px;
#pragma omp for schedule(static)
            for (int r = 0; r < rows; r++) {
                uint16_t label;
                if (!px) continue;
                synthetic_sample(ds, s, idx[r], px, &label);
                if (fill_one(ds, v, idx[r], px, x + (size_t)r * od, &scr) != 0) no_mem = 1;
                y[r] = label;
            }
            free(px);
            image_scratch_free(&scr);
        }
        return no_mem ? dt_fail("out of memory making a batch") : 0;
    }
#pragma omp parallel num_threads(nt) reduction(min : bad) reduction(| : no_mem)
    {
        image_scratch scr = {0};
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            if (!matches(s, idx[r], d)) { /* the message is made below, on one thread */
                bad = DT_MIN(bad, r);
                continue;
            }
            if (fill_one(ds, v, idx[r], s->x + (size_t)idx[r] * d, x + (size_t)r * od, &scr) != 0) no_mem = 1;
            y[r] = s->y[idx[r]];
        }
        image_scratch_free(&scr);
    }
    if (bad < rows) return intact(s, idx[bad], d);
    return no_mem ? dt_fail("out of memory making a batch") : 0;
}
