/* concat — its inputs side by side along the channels (Inception's branches): C x H x W inputs of
 * the same H x W give a (C1 + C2 + ...) x H x W output; vectors give their concatenation.
 * backward: each input's gradient is its slice of dy. Inputs by name: in=a,b,c. No keys.
 *
 * Each sample of an activation is contiguous in the layouts the backend keeps, and in NCHW and
 * nChw16c (when every channel count is a multiple of 16) the channels of a sample come first to
 * last, so when the inputs share the output's layout the concatenation of a sample is its
 * inputs' samples one after the other: one copy per input and sample. Otherwise (a branch of 8
 * channels, or channels last over more than one pixel) the inputs go through plain NCHW scratch
 * (to_plain / from_plain). */
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "layer.h"

typedef struct {
    int direct;   /* every input is in the output's layout (always so for vectors: plain) */
    float *plain; /* [rows][C][H][W] scratch (not direct) */
    float *part;  /* [rows][largest Ci][H][W] scratch (not direct) */
} concat_state;

static int concat_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    (void)l, (void)kv, (void)n_kv, (void)where;
    return 0;
}

static int concat_infer(dt_layer *l, const char *where)
{
    const dt_shape *a = &l->in[0]->out;
    int c = 0;
    for (int i = 0; i < l->n_in; i++) {
        const dt_shape *b = &l->in[i]->out;
        int same = b->n_dims == a->n_dims;
        for (int d = 1; same && d < a->n_dims; d++) same = b->d[d] == a->d[d];
        if (!same || (a->n_dims != 1 && a->n_dims != 3)) {
            char x[48], y[48];
            shape_format(a, x, sizeof x);
            shape_format(b, y, sizeof y);
            return dt_fail("%s: concat: inputs '%s' (%s) and '%s' (%s) differ in more than their channels (expected "
                           "C x H x W inputs of the same H x W, or vectors)",
                           where, l->in[0]->name, x, l->in[i]->name, y);
        }
        c += b->d[0];
    }
    l->out = *a;
    l->out.d[0] = c;
    l->out_size = l->in[0]->out_size / (size_t)a->d[0] * (size_t)c;
    return 0;
}

static int concat_alloc(dt_layer *l, dt_backend *be, int max_rows)
{
    concat_state *s = calloc(1, sizeof *s);
    int hw = l->out.n_dims == 3 ? l->out.d[1] * l->out.d[2] : 1, largest = 0;
    if (!s) return dt_fail("out of memory");
    l->state = s;
    s->direct = l->layout != DT_LAYOUT_NHWC || hw == 1;
    for (int i = 0; i < l->n_in; i++) {
        s->direct &= l->in[i]->layout == l->layout;
        if (l->in[i]->out.d[0] > largest) largest = l->in[i]->out.d[0];
    }
    if (s->direct) return 0;
    if (!(s->plain = be->alloc(be, sizeof(float) * (size_t)max_rows * l->out_size)) ||
        !(s->part = be->alloc(be, sizeof(float) * (size_t)max_rows * (size_t)largest * (size_t)hw)))
        return -1;
    return 0;
}

static void concat_destroy(dt_layer *l, dt_backend *be)
{
    concat_state *s = l->state;
    if (!s) return;
    be->free(be, s->plain);
    be->free(be, s->part);
}

/* the per-sample sizes (as laid out when direct, plain otherwise) */
static size_t sample_size(const dt_layer *l, dt_backend *be, int direct)
{
    if (direct) return layer_act_size(l, be, 1);
    return l->out_size;
}

/* copies the rows of in (n values per sample) to offset off of out's samples (m values each), or
 * back from there into in (gather: in = beta * in + slice) */
static int slices(dt_backend *be, float *out, size_t m, float *in, size_t n, size_t off, int rows, int gather,
                  float beta)
{
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)r * m + off, *x = in + (size_t)r * n;
        if (gather ? be->add(be, x, o, n, beta) : be->copy(be, o, x, n * sizeof(float))) return -1;
    }
    return 0;
}

static int concat_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    concat_state *s = l->state;
    size_t m = sample_size(l, be, s->direct), off = 0;
    float *out = s->direct ? l->y : s->plain;
    for (int i = 0; i < l->n_in; i++) {
        const dt_layer *in = l->in[i];
        size_t n = sample_size(in, be, s->direct);
        float *x = in->y;
        if (!s->direct) {
            const dt_shape *d = &in->out;
            if (be->to_plain(be, in->layout, in->y, s->part, p->rows, d->d[0], d->d[1], d->d[2]) != 0) return -1;
            x = s->part;
        }
        if (slices(be, out, m, x, n, off, p->rows, 0, 0.0f) != 0) return -1;
        off += n;
    }
    if (s->direct) return 0;
    return be->from_plain(be, l->layout, s->plain, l->y, p->rows, l->out.d[0], l->out.d[1], l->out.d[2], 0.0f);
}

static int concat_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    concat_state *s = l->state;
    size_t m = sample_size(l, be, s->direct), off = 0;
    const float *dy = l->dy;
    if (!s->direct) { /* only C x H x W activations have another layout than plain */
        if (be->to_plain(be, l->layout, l->dy, s->plain, p->rows, l->out.d[0], l->out.d[1], l->out.d[2]) != 0)
            return -1;
        dy = s->plain;
    }
    for (int i = 0; i < l->n_in; i++) {
        dt_layer *in = l->in[i];
        const dt_shape *d = &in->out;
        size_t n = sample_size(in, be, s->direct);
        float beta = l->in_accum[i] ? 1.0f : 0.0f; /* another consumer of in wrote its gradient first */
        if (in->requires_grad) {
            if (s->direct) {
                if (slices(be, (float *)dy, m, in->dy, n, off, p->rows, 1, beta) != 0) return -1;
            } else if (slices(be, (float *)dy, m, s->part, n, off, p->rows, 1, 0.0f) != 0 ||
                       be->from_plain(be, in->layout, s->part, in->dy, p->rows, d->d[0], d->d[1], d->d[2], beta) != 0) {
                return -1;
            }
        }
        off += n;
    }
    return 0;
}

const dt_layer_ops layer_concat_ops = {
    .type = "concat",
    .help = "its inputs (in=a,b,...) side by side along the channels; the same H x W (Inception's branches)",
    .keys = "",
    .min_in = 2,
    .max_in = DT_MAX_INPUTS,
    .configure = concat_configure,
    .infer = concat_infer,
    .alloc = concat_alloc,
    .forward = concat_forward,
    .backward = concat_backward,
    .destroy = concat_destroy,
};
