/* maxpool, avgpool — pooling over K x K windows.
 *   x [rows][C][H][W] -> y [rows][C][OH][OW]
 * Keys: k=K, stride=S (default K), pad=P, ceil=0|1 (ceil mode: a last window that hangs over the
 * end still counts, as Caffe and PyTorch's ceil_mode; each window starts inside the input or its
 * padding); avgpool also global=1 (one window over all of H x W). Averages divide by the number of
 * input values inside the window (padding excluded) — with pad=0 that is Caffe's and PyTorch's. */
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "layer.h"

typedef struct {
    int max, k, stride, pad, ceil, global;
    dt_pool_cfg cfg;
    void *plan;
} pool_state;

static int pool_configure_common(dt_layer *l, dt_kv *kv, int n_kv, const char *where, int max)
{
    pool_state *s = calloc(1, sizeof *s);
    const char *type = max ? "maxpool" : "avgpool";
    long k, st, pad, ceil_mode, global = 0;
    if (!s) return dt_fail("out of memory");
    l->state = s;
    s->max = max;
    if (!max && layer_kv_int(kv, n_kv, "global", 0, 1, 0, 0, where, type, &global) != 0) return -1;
    s->global = (int)global;
    if (layer_kv_int(kv, n_kv, "k", 1, 1 << 16, 0, !global, where, type, &k) != 0) return -1;
    if (layer_kv_int(kv, n_kv, "stride", 1, 1 << 16, k ? k : 1, 0, where, type, &st) != 0) return -1;
    if (layer_kv_int(kv, n_kv, "pad", 0, 1 << 16, 0, 0, where, type, &pad) != 0) return -1;
    if (layer_kv_int(kv, n_kv, "ceil", 0, 1, 0, 0, where, type, &ceil_mode) != 0) return -1;
    if (global && (layer_kv(kv, n_kv, "k") || pad || ceil_mode))
        return dt_fail("%s: %s: global=1 takes no k, pad or ceil", where, type);
    s->k = (int)k, s->stride = (int)st, s->pad = (int)pad, s->ceil = (int)ceil_mode;
    if (s->pad * 2 >= s->k && !global)
        return dt_fail("%s: %s: pad=%d must be less than half the window k=%d", where, type, s->pad, s->k);
    return 0;
}

static int max_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    return pool_configure_common(l, kv, n_kv, where, 1);
}

static int avg_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    return pool_configure_common(l, kv, n_kv, where, 0);
}

static int pool_infer(dt_layer *l, const char *where)
{
    pool_state *s = l->state;
    int c, h, w, oh, ow, pt, pb, pl, pr, kh = s->k, kw = s->k, sh = s->stride, sw = s->stride;
    char shape[48];
    shape_format(&l->in[0]->out, shape, sizeof shape);
    if (l->in[0]->out.n_dims != 3)
        return dt_fail("%s: %s: expected an input of C x H x W, found %s", where, l->ops->type, shape);
    shape_chw(&l->in[0]->out, &c, &h, &w);
    if (s->global) kh = h, kw = w, sh = sw = 1;
    if (window_geometry(h, kh, sh, s->pad, s->ceil, &oh, &pt, &pb) != 0 ||
        window_geometry(w, kw, sw, s->pad, s->ceil, &ow, &pl, &pr) != 0)
        return dt_fail("%s: %s: a %dx%d window does not fit the %s input", where, l->ops->type, kh, kw, shape);
    l->out.n_dims = 3;
    l->out.d[0] = c, l->out.d[1] = oh, l->out.d[2] = ow;
    l->out_size = (size_t)c * oh * ow;
    s->cfg = (dt_pool_cfg){s->max, c, h, w, oh, ow, kh, kw, sh, sw, pt, pb, pl, pr, DT_LAYOUT_PLAIN};
    return 0;
}

static int pool_alloc(dt_layer *l, dt_backend *be, int max_rows)
{
    pool_state *s = l->state;
    (void)max_rows;
    s->cfg.layout = l->layout; /* in and out share it: same channels */
    if (l->in[0]->layout != l->layout) return dt_fail("internal: pooling across layouts");
    return (s->plan = be->pool_plan(be, &s->cfg)) ? 0 : -1;
}

static int pool_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    pool_state *s = l->state;
    return be->pool_fwd(be, s->plan, p->rows, p->train, l->in[0]->y, l->y);
}

static int pool_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    pool_state *s = l->state;
    if (!l->in[0]->requires_grad) return 0;
    return be->pool_bwd(be, s->plan, p->rows, l->dy, l->in[0]->dy, l->in_accum[0] ? 1.0f : 0.0f);
}

static void pool_destroy(dt_layer *l, dt_backend *be)
{
    pool_state *s = l->state;
    if (s && s->plan) be->plan_free(be, s->plan);
}

const dt_layer_ops layer_maxpool_ops = {
    .type = "maxpool",
    .help = "max pooling; k=K stride=S pad=P ceil=0|1",
    .keys = "k stride pad ceil",
    .min_in = 1,
    .max_in = 1,
    .configure = max_configure,
    .infer = pool_infer,
    .alloc = pool_alloc,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};

const dt_layer_ops layer_avgpool_ops = {
    .type = "avgpool",
    .help = "average pooling (padding excluded); k=K stride=S pad=P ceil=0|1, or global=1",
    .keys = "k stride pad ceil global",
    .min_in = 1,
    .max_in = 1,
    .configure = avg_configure,
    .infer = pool_infer,
    .alloc = pool_alloc,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};
