/* layer — one table of layer types (name → configure / infer / forward / backward).
 *
 * A layer reads the outputs of its input layers and writes its own output `y`; in backward it
 * reads its output gradient `dy` and writes its parameters' gradients and, where an input needs
 * it, the input's `dy` (overwriting, or adding when another consumer already wrote it:
 * in_accum). Parameters are views into the net's flat arenas (params[i].w / .g); layers never
 * allocate device memory themselves. Layers know the backend table only, never MPI or files.
 *
 * Shapes: per-sample shapes are (C, H, W) with 1..3 dims; a tensor in memory is
 * [rows][per-sample size] where rows is the local batch of this pass.
 */
#ifndef DT_LAYER_H
#define DT_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "tensor.h"

#define DT_MAX_INPUTS 4
#define DT_MAX_PARAMS 4

/* One key=value of a net-file line. */
typedef struct dt_kv {
    char key[32];
    char val[96]; /* as written; the typed getters rewrite it as the value they read (016 -> 16) */
    int used;
    int is_default; /* a typed getter read the key's default: the same layer as one without it */
} dt_kv;

/* What one forward/backward pass needs beyond the layers. */
typedef struct dt_pass {
    int rows;              /* local batch of this pass */
    int train;             /* training: dropout active */
    const int32_t *labels; /* rows labels, device memory; NULL: no loss */
    uint64_t rng_key;      /* per-iteration key for stochastic layers */
    int64_t row0;          /* global index of this rank's first row in the global batch */
    float grad_scale;      /* loss gradient scale: 1 / global batch */
    double loss_sum;       /* out: sum of per-sample losses over this pass */
    int64_t n_correct;     /* out: rows whose argmax is the label */
} dt_pass;

typedef struct dt_layer dt_layer;
typedef struct dt_layer_ops dt_layer_ops;

struct dt_layer {
    const dt_layer_ops *ops;
    char name[DT_NAME_MAX];
    int line; /* net-file line, for messages */
    int n_in;
    dt_layer *in[DT_MAX_INPUTS];
    int in_accum[DT_MAX_INPUTS]; /* backward adds into in[i]->dy (another consumer wrote first) */
    int requires_grad;           /* this layer's output needs a gradient (params upstream) */
    dt_shape out;
    size_t out_size;
    float *y, *dy; /* [max_batch][out_size], device memory; dy NULL when !requires_grad */
    int n_params;
    dt_param params[DT_MAX_PARAMS];
    int frozen; /* parameters are not trained */
    dt_layout layout; /* of y and dy (set by net_alloc from the backend) */
    /* set by net_alloc where the backend fuses them (fuses_bn_relu; add2): fuse_relu, a batchnorm or a
     * two-input add that also computes the relu after it, its only consumer; fused, that relu, which
     * then runs no forward or backward of its own and whose y and dy are its input's */
    int fuse_relu, fused;
    /* Activations in bf16 (net.c, mark_bf16_edges). A convolution: y and dy (dt_conv_cfg's out_bf16),
     * marked where its only consumer is a batchnorm of its layout and kept by its alloc where the
     * backend's conv_bf16_out agrees; that batchnorm's alloc then reads its input so (dt_bn_cfg's
     * in_bf16). A batchnorm or a two-input add (and the relu fused into it): y only (dt_bn_cfg's
     * out_bf16; add2_bf16's), where every consumer's takes_bf16 says yes; they read it so. */
    int y_bf16;
    void *state;
};

struct dt_layer_ops {
    const char *type;
    const char *help; /* one line: what it computes and its keys */
    const char *keys; /* valid keys besides name/in/frozen, space separated */
    int min_in, max_in;
    int is_loss;
    /* reads its keys from kv (marking them used); `where` is "file:line" for messages */
    int (*configure)(dt_layer *l, dt_kv *kv, int n_kv, const char *where);
    /* from the inputs' shapes: sets out and declares params (name suffix, dims, init) */
    int (*infer)(dt_layer *l, const char *where);
    /* optional: backend plans and scratch for up to max_rows rows, once layouts are known */
    int (*alloc)(dt_layer *l, dt_backend *be, int max_rows);
    int (*forward)(dt_layer *l, dt_backend *be, dt_pass *p);
    int (*backward)(dt_layer *l, dt_backend *be, dt_pass *p);
    /* optional: whether its inputs may come in bf16 (conv: dt_conv_cfg's in_bf16; add, shortcut:
     * the residual stream), layouts known */
    int (*takes_bf16)(dt_layer *l, dt_backend *be);
    /* optional: frees what alloc made (the layer's state struct is freed by the net) */
    void (*destroy)(dt_layer *l, dt_backend *be);
};

const dt_layer_ops *layer_find(const char *type);
/* "input dense relu dropout softmax_xent" for error messages and --help */
const char *layer_type_list(void);
int layer_n_types(void);
const dt_layer_ops *layer_type_at(int i);

/* Key helpers for configure: find key (marks used); typed getters with range checks. */
dt_kv *layer_kv(dt_kv *kv, int n_kv, const char *key);
int layer_kv_int(dt_kv *kv, int n_kv, const char *key, long lo, long hi, long dflt, int required, const char *where,
                 const char *type, long *out);
int layer_kv_float(dt_kv *kv, int n_kv, const char *key, double lo, double hi, double dflt, const char *where,
                   const char *type, double *out);
int layer_kv_init(dt_kv *kv, int n_kv, const char *key, dt_init dflt, const char *where, const char *type,
                  dt_init *out);

/* Declares parameter i of l ("weight", dims...). */
void layer_param(dt_layer *l, const char *suffix, int n_dims, const int *dims, dt_init init, int fan_in,
                 int fan_out);
/* Declares a state tensor (not trained): running statistics. */
void layer_state(dt_layer *l, const char *suffix, int n, dt_init init, int average);

/* Geometry helpers shared by conv and pooling. The per-sample shape as (C, H, W): a vector of n
 * values counts as (n, 1, 1). */
void shape_chw(const dt_shape *s, int *c, int *h, int *w);
/* Output size and padding of a window op along one axis. pad < 0 means SAME (out = ceil(in /
 * stride), the extra padding at the end); ceil: ceil mode (windows may hang over the end, but
 * each starts inside the input or its padding). Fails if no window fits. */
int window_geometry(int in, int k, int stride, int pad, int ceil_mode, int *out, int *pad_begin, int *pad_end);
/* Elements of a layer's activation for rows rows, as laid out */
size_t layer_act_size(const dt_layer *l, dt_backend *be, int rows);

#endif
