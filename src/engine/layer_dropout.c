/* dropout — inverted dropout: in training y = x * mask / (1-p), mask ~ Bernoulli(1-p);
 * in evaluation y = x. The mask is a hash of (iteration key, layer, global sample index, element),
 * so it is the same however the global batch is split over ranks. Keys: p=0.5. */
#include <string.h>

#include "../rng.h"
#include "../util.h"
#include "layer.h"

typedef struct {
    float p;
    uint64_t id; /* per-layer stream, from the layer name */
} dropout_state;

static int dropout_configure(dt_layer *l, dt_kv *kv, int n_kv, const char *where)
{
    double p;
    dropout_state *s = dt_malloc(sizeof *s);
    if (!s) return -1;
    l->state = s;
    if (layer_kv_float(kv, n_kv, "p", 0.0, 0.99, 0.5, where, "dropout", &p) != 0) return -1;
    s->p = (float)p;
    s->id = rng_stream_id(l->name);
    return 0;
}

static int dropout_infer(dt_layer *l, const char *where)
{
    (void)where;
    l->out = l->in[0]->out;
    l->out_size = l->in[0]->out_size;
    return 0;
}

static int dropout_forward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    dropout_state *s = l->state;
    size_t n = layer_act_size(l, be, p->rows);
    if (!p->train) return be->copy(be, l->y, l->in[0]->y, n * sizeof(float));
    return be->dropout_fwd(be, l->y, l->in[0]->y, p->rows, (int)(n / (size_t)p->rows), s->p,
                           rng_hash(p->rng_key, s->id), p->row0);
}

static int dropout_backward(dt_layer *l, dt_backend *be, dt_pass *p)
{
    dropout_state *s = l->state;
    if (!l->in[0]->requires_grad) return 0;
    size_t n = layer_act_size(l, be, p->rows);
    return be->dropout_bwd(be, l->in[0]->dy, l->dy, p->rows, (int)(n / (size_t)p->rows), s->p,
                           rng_hash(p->rng_key, s->id), p->row0, l->in_accum[0] ? 1.0f : 0.0f);
}

const dt_layer_ops layer_dropout_ops = {
    .type = "dropout",
    .help = "inverted dropout in training, identity in evaluation; p=0.5",
    .keys = "p",
    .min_in = 1,
    .max_in = 1,
    .configure = dropout_configure,
    .infer = dropout_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
