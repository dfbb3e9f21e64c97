/* net — a network built from a .net file: layers, shapes, the flat parameter arenas.
 *
 * Owns: the layers, their activations, one weight arena and one gradient arena (fp32, device
 * memory), and the table of named tensors that are views into them. The arenas are laid out
 * in the order backward fills them (last layer first), so "the first n_ready elements of the
 * gradient arena are final" is a prefix — what lazy allreduce and chunking need.
 * Does not own: the optimizer state, the data, anything about ranks or files beyond the .net text.
 *
 * Life cycle: net_load/net_parse (parse + infer shapes; nothing allocated, so a bad file costs
 * nothing) → net_alloc (arenas and activations for a maximum batch) → net_init_params →
 * net_forward/net_backward per batch → net_destroy.
 */
#ifndef DT_NET_H
#define DT_NET_H

#include <stdio.h>

#include "layer.h"

typedef struct dt_net {
    char name[DT_NAME_MAX];
    char origin[512]; /* the file, or "built-in NAME" */
    int n_layers;
    dt_layer **layers; /* file order, which is a topological order; layers[0] is the input */
    dt_layer *input, *loss;
    int n_tensors;
    dt_param **tensors; /* trainable tensors, arena order */
    size_t n_params;    /* elements in each arena */
    int n_states;
    dt_param **states;  /* state tensors (running statistics, frozen weights), in file order */
    size_t n_state;     /* elements in the state arena */
    dt_backend *be;
    float *w, *g; /* the arenas; g may be pointed elsewhere (net_set_grad_arena) */
    float *g_own; /* the gradient arena net_alloc made */
    float *state; /* the state arena */
    int32_t *labels;
    int max_batch;
    float **dy_bufs; /* the output-gradient buffers layers share (net_alloc); layers' dy point here */
    int n_dy_bufs;
    /* What the net computes, a line a layer: its type, name, inputs, keys as the file gives them
     * (sorted; blocks expanded, --classes applied) and output shape. Ranks compare it, checkpoints
     * and run records keep it (or its net_digest), so another net of the same tensors is told apart. */
    char *structure;
} dt_net;

/* Parses .net text (blocks expanded, man/dtrain-net.5); `origin` names it in messages. */
int net_parse(const char *text, const char *origin, const char *name, dt_net **out);
/* The same with the last dense layer's out= set to classes (> 0), as --classes asks. */
int net_parse_classes(const char *text, const char *origin, const char *name, int classes, dt_net **out);
/* Whether --net's value names a .net file (contains '/' or ends in .net) rather than a built-in net. */
int net_is_path(const char *name_or_path);
/* NAME of a built-in net, or a path to a .net file (net_is_path). */
int net_load(const char *name_or_path, dt_net **out);
/* The same, sized to classes (0: as the file says). */
int net_load_classes(const char *name_or_path, int classes, dt_net **out);
int net_alloc(dt_net *net, dt_backend *be, int max_batch);
/* What net_alloc checks first (and sets: backend, batch, layouts): the memory it needs for
 * max_batch samples (in *bytes when not NULL) is free on the backend. Allocates nothing. */
int net_check_memory(dt_net *net, dt_backend *be, int max_batch, double *bytes);
/* Initialises every parameter from (seed, tensor name): independent of layout and rank. */
int net_init_params(dt_net *net, uint64_t seed);
void net_destroy(dt_net *net);

/* Copies a host batch into the input layer / label buffer. */
int net_set_input(dt_net *net, const float *host, int rows);
int net_set_labels(dt_net *net, const int32_t *host, int rows);
/* The same from a batch already in the backend's memory (upload.h): a copy on the device. */
int net_copy_batch(dt_net *net, const float *x, const int32_t *y, int rows);

int net_forward(dt_net *net, dt_pass *p);
/* Called after each layer whose gradients are final: the first n_ready arena elements are done. */
typedef void (*net_ready_fn)(void *arg, size_t n_ready);
int net_backward(dt_net *net, dt_pass *p, net_ready_fn ready, void *arg);

int net_n_classes(const dt_net *net);
/* Parameters as frameworks count them: trained and frozen weights, not running statistics. */
size_t net_n_weights(const dt_net *net);
/* A trainable or state tensor by name. */
dt_param *net_find_tensor(const dt_net *net, const char *name);
dt_arena net_arena(const dt_net *net);
/* Makes backward write gradients into g (an arena-sized device buffer) from now on. */
void net_set_grad_arena(dt_net *net, float *g);
/* A digest of net->structure (16 hex digits and a NUL in out[17]). */
void net_digest(const dt_net *net, char out[17]);
/* Human-readable layer table (layer, type, output shape, parameters). */
void net_print(const dt_net *net, FILE *f);

/* Nets compiled into the program from the files in nets/ (nets_builtin.c is generated at build time). */
int net_builtin_count(void);
const char *net_builtin_name(int i);
const char *net_builtin_text(const char *name);
const char *net_builtin_list(void);

#endif
