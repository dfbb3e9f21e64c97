/* batchnorm — batch normalisation (Ioffe & Szegedy), per channel over rows x H x W.
 *   training:   y = (x - mean_batch) / sqrt(var_batch + eps) * weight + bias, and
 *               running = (1 - momentum) running + momentum batch (variance unbiased: n/(n-1))
 *   evaluation: the running statistics instead of the batch's
 * Parameters weight (1), bias (0); state running_mean (0), running_var (1): PyTorch's names and
 * meaning. Running statistics are a rank's own (its local batch) and are averaged over ranks
 * before each evaluation and save. Keys: eps=1e-5 momentum=0.1. A vector input (after dense)
 * counts as C x 1 x 1. With fuse_relu (net.c) y is max(y, 0) and dy that relu's output gradient. */
#include <stdlib.h>

#include "../util.h"
#include "layer.h"

typedef struct {
    double eps, momentum;
    dt_bn_cfg cfg;
    void *plan;
    float *mean, *var; /* this iteration's batch statistics */
} bn_state;

static int bn_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    bn_state *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    l->state = s;
    if (layer_kv_float(kv, n_kv, "eps", 1e-12, 1.0, 1e-5, where, "batchnorm", &s->eps) != 0) return -1;
    if (layer_kv_float(kv, n_kv, "momentum", 0.0, 1.0, 0.1, where, "batchnorm", &s->momentum) != 0) return -1;
    return 0;
}

static int bn_infer(dt_layer *l, const char *where)
{
    bn_state *s = l->state;
    int c, h, w;
    (void)where;
    l->out = l->in[0]->out;
    l->out_size = l->in[0]->out_size;
    shape_chw(&l->out, &c, &h, &w);
    s->cfg = (dt_bn_cfg){c, h, w, (float)s->eps, DT_LAYOUT_PLAIN, 0, 0, 0};
    l->n_params = 0;
    layer_param(l, "weight", 1, &c, (dt_init){DT_INIT_CONST, 1.0f}, c, c);
    layer_param(l, "bias", 1, &c, (dt_init){DT_INIT_CONST, 0.0f}, c, c);
    layer_state(l, "running_mean", c, (dt_init){DT_INIT_CONST, 0.0f}, 1);
    layer_state(l, "running_var", c, (dt_init){DT_INIT_CONST, 1.0f}, 1);
    return 0;
}

static int bn_alloc(dt_layer *l, dt_backend *be, int max_rows)
{
    bn_state *s = l->state;
    (void)max_rows;
    s->cfg.layout = l->layout;
    s->cfg.relu = l->fuse_relu;
    s->cfg.in_bf16 = l->in[0]->y_bf16; /* its input's alloc ran before */
    s->cfg.out_bf16 = l->y_bf16;       /* net.c's mark: its consumers all take bf16 */
    if (!(s->mean = be->alloc(be, sizeof(float) * (size_t)s->cfg.c)) ||
        !(s->var = be->alloc(be, sizeof(float) * (size_t)s->cfg.c)))
        return -1;
    return (s->plan = be->bn_plan(be, &s->cfg)) ? 0 : -1;
}

static int bn_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    bn_state *s = l->state;
    float *rmean = l->params[2].w, *rvar = l->params[3].w;
    if (!p->train)
        return be->bn_fwd(be, s->plan, p->rows, 0, l->in[0]->y, l->params[0].w, l->params[1].w, rmean, rvar, l->y);
    if (be->bn_fwd(be, s->plan, p->rows, 1, l->in[0]->y, l->params[0].w, l->params[1].w, s->mean, s->var, l->y) != 0)
        return -1;
    /* running statistics, as PyTorch: the unbiased batch variance; on the backend's memory, so that
     * a GPU's recorded pass (--gpu-graph) holds them too */
    double n = (double)p->rows * s->cfg.h * s->cfg.w, unbias = n > 1 ? n / (n - 1) : 1.0;
    return be->bn_running(be, rmean, rvar, s->mean, s->var, (size_t)s->cfg.c, (float)s->momentum, unbias);
}

static int bn_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    bn_state *s = l->state;
    dt_layer *in = l->in[0];
    int train = l->params[0].kind == DT_PARAM_TRAIN;
    if (!train && !in->requires_grad) return 0;
    return be->bn_bwd(be, s->plan, p->rows, in->y, l->params[0].w, s->mean, s->var, l->dy, l->fuse_relu ? l->y : NULL,
                      in->requires_grad ? in->dy : NULL, l->in_accum[0] ? 1.0f : 0.0f,
                      train ? l->params[0].g : NULL, train ? l->params[1].g : NULL);
}

static void bn_destroy(dt_layer *l, dt_backend *be)
{
    bn_state *s = l->state;
    if (!s) return;
    if (s->plan) be->plan_free(be, s->plan);
    be->free(be, s->mean);
    be->free(be, s->var);
}

const dt_layer_ops layer_batchnorm_ops = {
    .type = "batchnorm",
    .help = "batch normalisation per channel, running statistics for evaluation; eps=1e-5 momentum=0.1",
    .keys = "eps momentum",
    .min_in = 1,
    .max_in = 1,
    .configure = bn_configure,
    .infer = bn_infer,
    .alloc = bn_alloc,
    .forward = bn_forward,
    .backward = bn_backward,
    .destroy = bn_destroy,
};
