/* dense — fully connected: y = x W^T + b (PyTorch Linear layout).
 *   x  [rows][in]   (the input's per-sample tensor, flattened in C, H, W order; an input in a
 *                    blocked layout is reordered into NCHW scratch first, and dx back)
 *   W  [out][in]    b [out]
 *   y  [rows][out]
 * backward: dW = dy^T x, db = sum_rows dy, dx = dy W (skipped when the input needs no gradient,
 * as for the first layer, whose input is data).
 * Keys: out=N, bias=1|0, init=torch|he|xavier|normal:STD|const:VALUE (weight; bias is U(±1/sqrt(in)) for
 * torch, else 0). */
#include <stdlib.h>

#include "../util.h"
#include "layer.h"

typedef struct {
    int n_in, n_out, bias;
    int reorder;      /* the input is blocked with H W > 1 */
    float *xp, *dxp;  /* its NCHW copy and gradient */
} dense_state;

static dense_state *st(dt_layer *l) { return l->state; }

static int dense_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    long out, bias;
    dt_init init;
    dense_state *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    l->state = s;
    if (layer_kv_int(kv, n_kv, "out", 1, 1L << 24, 0, 1, where, "dense", &out) != 0) return -1;
    if (layer_kv_int(kv, n_kv, "bias", 0, 1, 1, 0, where, "dense", &bias) != 0) return -1;
    if (layer_kv_init(kv, n_kv, "init", (dt_init){DT_INIT_TORCH, 0}, where, "dense", &init) != 0) return -1;
    s->n_out = (int)out;
    s->bias = (int)bias;
    l->params[0].init = init; /* kept until infer declares the params */
    return 0;
}

static int dense_infer(dt_layer *l, const char *where)
{
    dense_state *s = st(l);
    dt_init winit = l->params[0].init;
    size_t n_in = l->in[0]->out_size;
    if (n_in > (1u << 30)) return dt_fail("%s: dense: input of %zu values is too large", where, n_in);
    s->n_in = (int)n_in;
    l->out.n_dims = 1;
    l->out.d[0] = s->n_out;
    l->out_size = (size_t)s->n_out;
    l->n_params = 0;
    int wd[2] = {s->n_out, s->n_in};
    layer_param(l, "weight", 2, wd, winit, s->n_in, s->n_out);
    if (s->bias) {
        dt_init binit = winit.kind == DT_INIT_TORCH ? winit : (dt_init){DT_INIT_CONST, 0.0f};
        layer_param(l, "bias", 1, &s->n_out, binit, s->n_in, s->n_out);
    }
    return 0;
}

static int dense_alloc(dt_layer *l, dt_backend *be, int max_rows)
{
    dense_state *s = st(l);
    const dt_layer *in = l->in[0];
    s->reorder = in->layout != DT_LAYOUT_PLAIN && in->out.n_dims == 3 && in->out.d[1] * in->out.d[2] > 1;
    if (!s->reorder) return 0;
    if (!(s->xp = be->alloc(be, sizeof(float) * (size_t)max_rows * (size_t)s->n_in))) return -1;
    if (in->requires_grad && !(s->dxp = be->alloc(be, sizeof(float) * (size_t)max_rows * (size_t)s->n_in))) return -1;
    return 0;
}

static void dense_destroy(dt_layer *l, dt_backend *be)
{
    dense_state *s = st(l);
    if (!s) return;
    be->free(be, s->xp);
    be->free(be, s->dxp);
}

static const float *dense_x(dt_layer *l) { return st(l)->reorder ? st(l)->xp : l->in[0]->y; }

static int dense_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    dense_state *s = st(l);
    const dt_layer *in = l->in[0];
    if (s->reorder &&
        be->to_plain(be, in->layout, in->y, s->xp, p->rows, in->out.d[0], in->out.d[1], in->out.d[2]) != 0)
        return -1;
    if (be->gemm(be, 0, 1, p->rows, s->n_out, s->n_in, 1.0f, dense_x(l), s->n_in, l->params[0].w, s->n_in, 0.0f, l->y,
                 s->n_out) != 0)
        return -1;
    return s->bias ? be->bias_add(be, l->y, l->params[1].w, p->rows, s->n_out) : 0;
}

static int dense_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    dense_state *s = st(l);
    dt_layer *in = l->in[0];
    if (!l->frozen) {
        if (be->gemm(be, 1, 0, s->n_out, s->n_in, p->rows, 1.0f, l->dy, s->n_out, dense_x(l), s->n_in, 0.0f,
                     l->params[0].g, s->n_in) != 0)
            return -1;
        if (s->bias && be->bias_grad(be, l->params[1].g, l->dy, p->rows, s->n_out, 0.0f) != 0) return -1;
    }
    if (!in->requires_grad) return 0;
    if (s->reorder) {
        if (be->gemm(be, 0, 0, p->rows, s->n_in, s->n_out, 1.0f, l->dy, s->n_out, l->params[0].w, s->n_in, 0.0f,
                     s->dxp, s->n_in) != 0)
            return -1;
        return be->from_plain(be, in->layout, s->dxp, in->dy, p->rows, in->out.d[0], in->out.d[1], in->out.d[2],
                              l->in_accum[0] ? 1.0f : 0.0f);
    }
    return be->gemm(be, 0, 0, p->rows, s->n_in, s->n_out, 1.0f, l->dy, s->n_out, l->params[0].w, s->n_in,
                    l->in_accum[0] ? 1.0f : 0.0f, in->dy, s->n_in);
}

const dt_layer_ops layer_dense_ops = {
    .type = "dense",
    .help = "fully connected y = xW^T + b; out=N bias=1|0 init=torch|he|xavier|normal:STD|const:VALUE",
    .keys = "out bias init",
    .min_in = 1,
    .max_in = 1,
    .configure = dense_configure,
    .infer = dense_infer,
    .alloc = dense_alloc,
    .forward = dense_forward,
    .backward = dense_backward,
    .destroy = dense_destroy,
};
