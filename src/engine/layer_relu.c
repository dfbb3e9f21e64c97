/* relu — y = max(x, 0), any shape and layout; backward dx = dy where y > 0. No keys. */
#include "layer.h"

static int relu_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    (void)l, (void)kv, (void)n_kv, (void)where;
    return 0;
}

static int relu_infer(dt_layer *l, const char *where)
{
    (void)where;
    l->out = l->in[0]->out;
    l->out_size = l->in[0]->out_size;
    return 0;
}

static int relu_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    return be->relu_fwd(be, l->y, l->in[0]->y, layer_act_size(l, be, p->rows));
}

static int relu_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    if (!l->in[0]->requires_grad) return 0;
    return be->relu_bwd(be, l->in[0]->dy, l->dy, l->y, layer_act_size(l, be, p->rows), l->in_accum[0] ? 1.0f : 0.0f);
}

const dt_layer_ops layer_relu_ops = {
    .type = "relu",
    .help = "rectified linear unit y = max(x, 0)",
    .keys = "",
    .min_in = 1,
    .max_in = 1,
    .configure = relu_configure,
    .infer = relu_infer,
    .forward = relu_forward,
    .backward = relu_backward,
};
