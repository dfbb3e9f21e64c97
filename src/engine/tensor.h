/* tensor — shapes, named parameter tensors, and the arena view the comm subsystem works on.
 *
 * The comm subsystem sees only this header of the engine: a flat weight arena, a flat gradient
 * arena of the same layout, and the table of named tensors that are views into them. It never
 * sees layers.
 */
#ifndef DT_TENSOR_H
#define DT_TENSOR_H

#include <stddef.h>

#define DT_NAME_MAX 64

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

/* A named tensor in the flat arenas: "fc1.weight", shape in PyTorch's layout. */
typedef struct dt_param {
    char name[2 * DT_NAME_MAX];
    int n_dims;
    int dims[4];
    size_t n;
    size_t offset; /* elements from the arena start */
    float *w, *g;  /* views into the weight / gradient arenas (device memory) */
    dt_init init;
    int fan_in, fan_out;
} dt_param;

/* The arenas and their tensor table, in arena order (the order backward fills them). */
typedef struct dt_arena {
    float *w, *g; /* device memory */
    size_t n;     /* elements in each */
    int n_tensors;
    dt_param *const *tensors;
} dt_arena;

#endif
