/* add — the sum of 2 or more inputs of the same shape (residual connections): y = x1 + x2 + ...
 * backward: every input's gradient gets dy. Inputs by name: in=a,b. No keys. With fuse_relu
 * (net.c; two inputs, a backend with add2) y is max(y, 0) and dy that relu's output gradient. Two
 * inputs under --precision bf16 (a backend with add2_bf16): either may come in bf16, and y be bf16
 * where every consumer takes it so (net.c's mark_bf16_edges: the residual stream). */
#include <string.h>

#include "../util.h"
#include "layer.h"

static int add_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    (void)l, (void)kv, (void)n_kv, (void)where;
    return 0;
}

static int add_infer(dt_layer *l, const char *where)
{
    for (int i = 1; i < l->n_in; i++) {
        const dt_shape *a = &l->in[0]->out, *b = &l->in[i]->out;
        if (a->n_dims != b->n_dims || memcmp(a->d, b->d, sizeof(int) * (size_t)a->n_dims) != 0) {
            char x[48], y[48];
            shape_format(a, x, sizeof x);
            shape_format(b, y, sizeof y);
            return dt_fail("%s: add: inputs '%s' (%s) and '%s' (%s) differ in shape (expected the same)", where,
                           l->in[0]->name, x, l->in[i]->name, y);
        }
    }
    l->out = l->in[0]->out;
    l->out_size = l->in[0]->out_size;
    return 0;
}

static int add_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    size_t n = layer_act_size(l, be, p->rows);
    int bf16 = (l->n_in == 2 && l->in[0]->y_bf16 ? DT_ADD2_A_BF16 : 0) |
               (l->n_in == 2 && l->in[1]->y_bf16 ? DT_ADD2_B_BF16 : 0) | (l->y_bf16 ? DT_ADD2_Y_BF16 : 0);
    if (bf16) /* the residual stream in bf16 (net.c's mark, where add_takes_bf16 said yes) */
        return be->add2_bf16(be, l->y, l->in[0]->y, l->in[1]->y, n, bf16 | (l->fuse_relu ? DT_ADD2_RELU : 0));
    int i = be->add2 ? 2 : 1; /* the inputs summed so far */
    if ((be->add2 ? be->add2(be, l->y, l->in[0]->y, l->in[1]->y, n, l->fuse_relu)
                  : be->copy(be, l->y, l->in[0]->y, n * sizeof(float))) != 0)
        return -1;
    for (; i < l->n_in; i++)
        if (be->add(be, l->y, l->in[i]->y, n, 1.0f) != 0) return -1;
    return 0;
}

/* fused with the relu after it: each input's gradient gets dy where y > 0, as that relu's backward
 * and this one's would give it */
static int add_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    size_t n = layer_act_size(l, be, p->rows);
    for (int i = 0; i < l->n_in; i++) {
        if (!l->in[i]->requires_grad) continue;
        float beta = l->in_accum[i] ? 1.0f : 0.0f;
        int rc = !l->fuse_relu ? be->add(be, l->in[i]->dy, l->dy, n, beta)
                 : l->y_bf16   ? be->relu_bwd_bf16(be, l->in[i]->dy, l->dy, l->y, n, beta)
                               : be->relu_bwd(be, l->in[i]->dy, l->dy, l->y, n, beta);
        if (rc != 0) return -1;
    }
    return 0;
}

/* the residual stream in bf16 (net.c): two inputs, a backend with add2_bf16 */
static int add_takes_bf16(dt_layer *l, dt_backend *be) { return l->n_in == 2 && be->add2_bf16 != NULL; }

const dt_layer_ops layer_add_ops = {
    .type = "add",
    .help = "sum of its inputs (in=a,b), which must have the same shape",
    .keys = "",
    .min_in = 2,
    .max_in = DT_MAX_INPUTS,
    .configure = add_configure,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_backward,
    .takes_bf16 = add_takes_bf16,
};
