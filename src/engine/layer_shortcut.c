/* shortcut — the parameter-free shortcut of CIFAR ResNets ("option A", He et al. 2016 §4.2):
 * subsample by stride and pad the channels with zeros, half before and half after:
 *   y[n][o][i][j] = x[n][o - (O-C)/2][i*S][j*S] for channels that exist, else 0
 * Keys: out=O (at least the input's channels), stride=S. */
#include <stdlib.h>

#include "../util.h"
#include "layer.h"

typedef struct {
    int out, stride, c, h, w, oh, ow, front;
} sc_state;

static int sc_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    sc_state *s = calloc(1, sizeof *s);
    long o, st;
    if (!s) return dt_fail("out of memory");
    l->state = s;
    if (layer_kv_int(kv, n_kv, "out", 1, 1 << 20, 0, 1, where, "shortcut", &o) != 0) return -1;
    if (layer_kv_int(kv, n_kv, "stride", 1, 1 << 16, 1, 0, where, "shortcut", &st) != 0) return -1;
    s->out = (int)o, s->stride = (int)st;
    return 0;
}

static int sc_infer(dt_layer *l, const char *where)
{
    sc_state *s = l->state;
    if (l->in[0]->out.n_dims != 3) return dt_fail("%s: shortcut: expected an input of C x H x W", where);
    shape_chw(&l->in[0]->out, &s->c, &s->h, &s->w);
    if (s->out < s->c || (s->out - s->c) % 2)
        return dt_fail("%s: shortcut: out=%d must be at least the %d input channels, by an even number", where, s->out,
                       s->c);
    s->front = (s->out - s->c) / 2;
    s->oh = (s->h + s->stride - 1) / s->stride;
    s->ow = (s->w + s->stride - 1) / s->stride;
    l->out.n_dims = 3;
    l->out.d[0] = s->out, l->out.d[1] = s->oh, l->out.d[2] = s->ow;
    l->out_size = (size_t)s->out * s->oh * s->ow;
    return 0;
}

static dt_shortcut_cfg cfg_of(const dt_layer *l)
{
    const sc_state *s = l->state;
    return (dt_shortcut_cfg){
        s->c, s->h, s->w, s->out, s->oh, s->ow, s->stride, s->front, l->in[0]->layout, l->layout, l->in[0]->y_bf16};
}

/* the residual stream in bf16 (net.c): a backend with add2_bf16 reads it so */
static int sc_takes_bf16(dt_layer *l, dt_backend *be)
{
    (void)l;
    return be->add2_bf16 != NULL;
}

static int sc_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    dt_shortcut_cfg c = cfg_of(l);
    return be->shortcut_fwd(be, &c, p->rows, l->in[0]->y, l->y);
}

static int sc_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    dt_shortcut_cfg c = cfg_of(l);
    if (!l->in[0]->requires_grad) return 0;
    return be->shortcut_bwd(be, &c, p->rows, l->dy, l->in[0]->dy, l->in_accum[0] ? 1.0f : 0.0f);
}

const dt_layer_ops layer_shortcut_ops = {
    .type = "shortcut",
    .help = "ResNet option-A shortcut: subsample by stride, zero-pad channels to out; out=O stride=S",
    .keys = "out stride",
    .min_in = 1,
    .max_in = 1,
    .configure = sc_configure,
    .infer = sc_infer,
    .forward = sc_forward,
    .backward = sc_backward,
    .takes_bf16 = sc_takes_bf16,
};
