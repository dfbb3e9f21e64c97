/* lrn — local response normalisation across channels (Krizhevsky et al.; Caffe's LRN):
 *   y = x / (k + alpha / size * sum over the size channels around c of x^2) ^ beta
 * Keys: size=5 alpha=1e-4 beta=0.75 k=1 (Caffe's defaults). Input C x H x W. */
#include <stdlib.h>

#include "../util.h"
#include "layer.h"

typedef struct {
    dt_lrn_cfg cfg;
    void *plan;
} lrn_state;

static int lrn_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    lrn_state *s = calloc(1, sizeof *s);
    long size;
    double alpha, beta, k;
    if (!s) return dt_fail("out of memory");
    l->state = s;
    if (layer_kv_int(kv, n_kv, "size", 1, 255, 5, 0, where, "lrn", &size) != 0) return -1;
    if (size % 2 == 0) return dt_fail("%s: lrn: size=%ld must be odd", where, size);
    if (layer_kv_float(kv, n_kv, "alpha", 0.0, 1e3, 1e-4, where, "lrn", &alpha) != 0 ||
        layer_kv_float(kv, n_kv, "beta", 0.0, 1e3, 0.75, where, "lrn", &beta) != 0 ||
        layer_kv_float(kv, n_kv, "k", 1e-6, 1e6, 1.0, where, "lrn", &k) != 0)
        return -1;
    s->cfg.size = (int)size;
    s->cfg.alpha = (float)alpha, s->cfg.beta = (float)beta, s->cfg.k = (float)k;
    return 0;
}

static int lrn_infer(dt_layer *l, const char *where)
{
    lrn_state *s = l->state;
    if (l->in[0]->out.n_dims != 3) return dt_fail("%s: lrn: expected an input of C x H x W", where);
    l->out = l->in[0]->out;
    l->out_size = l->in[0]->out_size;
    shape_chw(&l->out, &s->cfg.c, &s->cfg.h, &s->cfg.w);
    return 0;
}

static int lrn_alloc(dt_layer *l, dt_backend *be, int max_rows)
{
    lrn_state *s = l->state;
    (void)max_rows;
    s->cfg.layout = l->layout;
    return (s->plan = be->lrn_plan(be, &s->cfg)) ? 0 : -1;
}

static int lrn_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    lrn_state *s = l->state;
    return be->lrn_fwd(be, s->plan, p->rows, p->train, l->in[0]->y, l->y);
}

static int lrn_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    lrn_state *s = l->state;
    if (!l->in[0]->requires_grad) return 0;
    return be->lrn_bwd(be, s->plan, p->rows, l->in[0]->y, l->dy, l->in[0]->dy, l->in_accum[0] ? 1.0f : 0.0f);
}

static void lrn_destroy(dt_layer *l, dt_backend *be)
{
    lrn_state *s = l->state;
    if (s && s->plan) be->plan_free(be, s->plan);
}

const dt_layer_ops layer_lrn_ops = {
    .type = "lrn",
    .help = "local response normalisation across channels; size=5 alpha=1e-4 beta=0.75 k=1",
    .keys = "size alpha beta k",
    .min_in = 1,
    .max_in = 1,
    .configure = lrn_configure,
    .infer = lrn_infer,
    .alloc = lrn_alloc,
    .forward = lrn_forward,
    .backward = lrn_backward,
    .destroy = lrn_destroy,
};
