/* tensor — shapes, named parameter tensors, and the arena view the comm subsystem works on.
 *
 * The comm subsystem sees only this header of the engine: a flat weight arena, a flat gradient
 * arena of the same layout, and the table of named tensors that are views into them. It never
 * sees layers.
 */
#ifndef DT_TENSOR_H
#define DT_TENSOR_H

#include <stddef.h>

#define DT_NAME_MAX 96

typedef struct dt_shape {
    int n_dims;
    int d[3];
} dt_shape;

size_t shape_size(const dt_shape *s);
/* "1x28x28" */
void shape_format(const dt_shape *s, char *buf, size_t n);

/* How a parameter tensor is initialised (net_init_params). */
typedef enum {
    DT_INIT_TORCH, /* U(±1/sqrt(fan_in)): PyTorch's default for Linear/Conv weight and bias */
    DT_INIT_HE,    /* N(0, 2/fan_in) */
    DT_INIT_XAVIER, /* U(±sqrt(6/(fan_in+fan_out))) */
    DT_INIT_NORMAL, /* N(0, value^2) */
    DT_INIT_CONST,  /* value */
} dt_init_kind;

typedef struct dt_init {
    dt_init_kind kind;
    float value;
} dt_init;

/* Trainable tensors live in the weight and gradient arenas (what ranks exchange); state tensors
 * (batch norm's running statistics, the weights of frozen layers) in the state arena: saved and
 * loaded with the weights, never sent as gradients. */
typedef enum { DT_PARAM_TRAIN = 0, DT_PARAM_STATE = 1 } dt_param_kind;

/* A named tensor in the flat arenas: "fc1.weight", shape in PyTorch's layout. */
typedef struct dt_param {
    char name[2 * DT_NAME_MAX];
    int n_dims;
    int dims[4];
    size_t n;
    size_t offset; /* elements from the start of its arena */
    float *w, *g;  /* views into the weight (or state) and gradient arenas; g NULL for state */
    dt_init init;
    int fan_in, fan_out;
    dt_param_kind kind;
    int average; /* state that differs between ranks (running statistics): averaged before use */
} dt_param;

/* Length of the layer part of a tensor name: "layer1.0.conv1.weight" -> "layer1.0.conv1". */
static inline size_t tensor_layer_len(const char *name)
{
    size_t n = 0, last = 0;
    for (; name[n]; n++)
        if (name[n] == '.') last = n;
    return last ? last : n;
}

typedef struct dt_backend dt_backend;

/* The arenas and their tensor table, in arena order (the order backward fills them). */
typedef struct dt_arena {
    float *w, *g; /* backend memory: host code reaches it only through host views (hostbuf.h) */
    size_t n;     /* elements in each */
    int n_tensors;
    dt_param *const *tensors;
    dt_backend *be; /* the backend whose memory w and g are */
} dt_arena;

#endif
