/* graph — a training pass's forward and backward as one recording of the backend's (CUDA graphs,
 * --gpu-graph), launched as a unit: nets of small kernels (the CIFAR ones) are bound by the time the
 * host takes to launch each kernel, and a recording is launched at once.
 *
 * A pass's key is what the recording names: its rows, the gradient arena it writes (a mode may point
 * it elsewhere each iteration) and the loss gradient's scale. The first pass of a key runs op by op
 * (buffers that ops grow on first use reach their size, convolution algorithms are chosen), the
 * second is recorded and launched, later ones launch the recording. Where the backend's buffers
 * moved since, the launch says so and the pass is recorded anew. A recording that fails (an op the
 * backend cannot record), or a launch the backend refuses before any of it ran, ends graphs for the
 * run: that pass and the rest run op by op, and the note says why, once.
 */
#ifndef DT_GRAPH_H
#define DT_GRAPH_H

#include "backend.h"
#include "layer.h"
#include "net.h"

typedef struct dt_graphs dt_graphs;

/* Why passes of net on be cannot be recorded (the backend records nothing; a dropout layer's mask
 * key changes every iteration), or NULL. */
const char *graphs_unsupported(const dt_backend *be, const dt_net *net);
int graphs_create(dt_graphs **out);
void graphs_destroy(dt_graphs *gs, dt_backend *be);
/* Forward and backward of training pass p on net (p->loss_sum and p->n_correct as net_forward
 * leaves them), recorded or launched as above. */
int graphs_pass(dt_graphs *gs, dt_net *net, dt_pass *p);
/* A line on what happened to graphs that the caller has not taken yet ("" when none), and the
 * counts of recordings made and launched. */
const char *graphs_note(dt_graphs *gs);
void graphs_counts(const dt_graphs *gs, long *recorded, long *launched);

#endif
