/* softmax_xent — softmax and cross-entropy loss against integer labels, fused.
 *   logits [rows][classes] → y = prob [rows][classes]
 *   loss = sum over rows of -log prob[label] (the pass reports the sum; the mean over the global
 *   batch is what is minimised, so backward scales by 1/global batch: dx = (prob - onehot)/B).
 * The input must be a vector per sample (classes = its size). No keys. */
#include "../util.h"
#include "layer.h"

static int sx_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    (void)l, (void)kv, (void)n_kv, (void)where;
    return 0;
}

static int sx_infer(dt_layer *l, const char *where)
{
    const dt_layer *in = l->in[0];
    if (in->out.n_dims != 1) {
        char buf[48];
        shape_format(&in->out, buf, sizeof buf);
        return dt_fail("%s: softmax_xent: expected a vector of class scores per sample from '%s', found shape %s "
                       "(add a dense layer)",
                       where, in->name, buf);
    }
    if (in->out_size < 2)
        return dt_fail("%s: softmax_xent: expected at least 2 classes, found %zu", where, in->out_size);
    l->out = in->out;
    l->out_size = in->out_size;
    return 0;
}

static int sx_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    if (!p->labels) return 0;
    return be->softmax_xent_fwd(be, l->y, l->in[0]->y, p->labels, p->rows, (int)l->out_size, &p->loss_sum,
                                &p->n_correct);
}

static int sx_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    if (!l->in[0]->requires_grad) return 0;
    return be->softmax_xent_bwd(be, l->in[0]->dy, l->y, p->labels, p->rows, (int)l->out_size, p->grad_scale,
                                l->in_accum[0] ? 1.0f : 0.0f);
}

const dt_layer_ops layer_softmax_xent_ops = {
    .type = "softmax_xent",
    .help = "softmax + cross-entropy loss on integer labels (the last layer)",
    .keys = "",
    .min_in = 1,
    .max_in = 1,
    .is_loss = 1,
    .configure = sx_configure,
    .infer = sx_infer,
    .forward = sx_forward,
    .backward = sx_backward,
};
