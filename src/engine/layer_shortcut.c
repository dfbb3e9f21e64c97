/* shortcut — the parameter-free shortcut of CIFAR ResNets ("option A", He et al. 2016 §4.2):
 * subsample by stride and pad the channels with zeros, half before and half after:
 *   y[n][o][i][j] = x[n][o - (O-C)/2][i*S][j*S] for channels that exist, else 0
 * Keys: out=O (at least the input's channels), stride=S. */
#include <stdlib.h>
#include <string.h>

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

/* element (n, c, h, w) of a [rows][C][H][W] tensor in layout l */
static size_t at(dt_layout l, int n, int c, int h, int w, int C, int H, int W)
{
    if (l == DT_LAYOUT_BLOCK16) {
        size_t cb = (size_t)(C + 15) / 16;
        return ((((size_t)n * cb + (size_t)c / 16) * H + h) * W + w) * 16 + (size_t)c % 16;
    }
    return (((size_t)n * C + c) * H + h) * W + w;
}

static int sc_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    sc_state *s = l->state;
    const float *x = l->in[0]->y;
    dt_layout li = l->in[0]->layout, lo = l->layout;
    memset(l->y, 0, layer_act_size(l, be, p->rows) * sizeof(float));
    for (int n = 0; n < p->rows; n++)
        for (int c = 0; c < s->c; c++)
            for (int i = 0; i < s->oh; i++)
                for (int j = 0; j < s->ow; j++)
                    l->y[at(lo, n, c + s->front, i, j, s->out, s->oh, s->ow)] =
                        x[at(li, n, c, i * s->stride, j * s->stride, s->c, s->h, s->w)];
    return 0;
}

static int sc_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    sc_state *s = l->state;
    dt_layer *in = l->in[0];
    dt_layout li = in->layout, lo = l->layout;
    if (!in->requires_grad) return 0;
    if (!l->in_accum[0]) memset(in->dy, 0, layer_act_size(in, be, p->rows) * sizeof(float));
    for (int n = 0; n < p->rows; n++)
        for (int c = 0; c < s->c; c++)
            for (int i = 0; i < s->oh; i++)
                for (int j = 0; j < s->ow; j++)
                    in->dy[at(li, n, c, i * s->stride, j * s->stride, s->c, s->h, s->w)] +=
                        l->dy[at(lo, n, c + s->front, i, j, s->out, s->oh, s->ow)];
    return 0;
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
};
