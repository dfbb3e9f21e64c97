/* flatten — C x H x W to one vector of C*H*W values in C, H, W order (as PyTorch's flatten), so
 * that what follows sees the same order whatever layout the backend keeps. No keys. */
#include "../util.h"
#include "layer.h"

static int flatten_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    (void)l, (void)kv, (void)n_kv, (void)where;
    return 0;
}

static int flatten_infer(dt_layer *l, const char *where)
{
    (void)where;
    l->out.n_dims = 1;
    l->out.d[0] = (int)l->in[0]->out_size;
    l->out_size = l->in[0]->out_size;
    return 0;
}

static int flatten_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    const dt_layer *in = l->in[0];
    int c, h, w;
    shape_chw(&in->out, &c, &h, &w);
    return be->to_plain(be, in->layout, in->y, l->y, p->rows, c, h, w);
}

static int flatten_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    dt_layer *in = l->in[0];
    int c, h, w;
    if (!in->requires_grad) return 0;
    shape_chw(&in->out, &c, &h, &w);
    return be->from_plain(be, in->layout, l->dy, in->dy, p->rows, c, h, w, l->in_accum[0] ? 1.0f : 0.0f);
}

const dt_layer_ops layer_flatten_ops = {
    .type = "flatten",
    .help = "C x H x W to a vector in C, H, W order",
    .keys = "",
    .min_in = 1,
    .max_in = 1,
    .configure = flatten_configure,
    .infer = flatten_infer,
    .forward = flatten_forward,
    .backward = flatten_backward,
};
