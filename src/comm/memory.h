/* memory — what a sparse mode keeps on each rank between iterations (DESIGN.md: "memory").
 *
 * The residual (error feedback): the gradient not sent yet, added to the next one, so nothing
 * computed is lost (gTop-k Alg. 4 lines 4, 8, 10). With momentum correction (--momentum-
 * correction, Lin et al. DGC §3.2) the rank keeps its own velocity u, and the residual
 * accumulates velocities instead of gradients:
 *     u = m u + (g + wd w);  r = r + u;  send the top of r;  r[sent] = 0, u[sent] = 0
 * and the aggregate updates the weights with plain SGD (momentum and decay already applied).
 * Without it, r = r + g, and momentum and weight decay are applied after aggregation by the
 * optimizer, as the gTop-k code does.
 */
#ifndef DT_MEMORY_H
#define DT_MEMORY_H

#include <stddef.h>

#include "../engine/engine.h"
#include "mode.h"
#include "sparse.h"

typedef struct dt_memory {
    size_t n;
    float *r; /* residual: the accumulated gradient (or velocity) not sent yet */
    float *u; /* velocity, with momentum correction; else NULL */
    float m, wd;
} dt_memory;

int memory_create(dt_memory **out, size_t n, int momentum_correction, float momentum, float wd);
void memory_destroy(dt_memory *mem);
/* Its buffers as state tensors ("residual", and "velocity" with momentum correction). */
int memory_state(dt_memory *mem, dt_state_tensor *out, int max);
/* r += g (or the corrected velocity, from g and the weights w): the arena's gradient and weights
 * through their host views (pulled here). */
int memory_accumulate(dt_memory *mem, const dt_hostbuf *g, const dt_hostbuf *w);
/* DGC's local gradient clipping (Lin et al. §3.2): scales the gradient (through its host view,
 * pulled and pushed back here) so its L2 norm is at most max_norm / sqrt(p); the norm summed in double in index order, so the
 * result is a function of the gradient alone. Returns the factor applied (1: none) or -1. */
double memory_clip(const dt_hostbuf *g, size_t n, double max_norm, int p);
/* The entries the aggregate used leave the memory: r[i] = 0 (and u[i] = 0). */
void memory_used(dt_memory *mem, const dt_pair *used, size_t k);
/* Applies a sparse aggregate (pairs sorted by index) to the weights (w: the arena's host view).
 * Without correction the optimizer runs on the backend with the dense vector `dense` (an
 * arena-sized buffer whose host view is zero except at the pairs, left zero again afterwards). */
int memory_update(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const dt_pair *agg, size_t k,
                  const dt_hostbuf *dense, float lr);

#endif
