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
    /* memory_create_on: r and u live in be's memory (rh.dev, uh.dev; r and u are their host views,
     * filled by memory_state), and so do the selection and the updates: only pairs cross */
    dt_backend *be;
    dt_hostbuf rh, uh;
    void *pairs; /* be's memory: up to max_pairs pairs on their way in or out */
    size_t max_pairs;
    int sampled;   /* --topk-select sampled: topk_select_sampled's selection (memory_sampled) */
    float *sample; /* and, where the memory lives on a backend, its sample on the host */
} dt_memory;

int memory_create(dt_memory **out, size_t n, int momentum_correction, float momentum, float wd);
/* 1 if be's memory is a device's and be has the ops to keep the memory there (residual_add, topk,
 * pairs_apply, topk_sample, topk_above) */
int memory_can_run_on(const dt_backend *be);
/* The memory in be's memory, for aggregates of up to max_pairs pairs. */
int memory_create_on(dt_memory **out, dt_backend *be, size_t n, int momentum_correction, float momentum, float wd,
                     size_t max_pairs);
/* The k largest |r| of r[off .. off + n) as pairs sorted by index (indices from off), into out (host
 * memory): topk_select with sel on the host, the backend's top-k where the memory lives there. */
int memory_select(dt_memory *mem, dt_topk *sel, size_t off, size_t n, size_t k, dt_pair *out);
/* --topk-select sampled: memory_select and memory_select_keep select as topk_select_sampled does (on a
 * backend: its topk_sample, the threshold on the host, its topk_above) */
int memory_sampled(dt_memory *mem);
void memory_destroy(dt_memory *mem);
/* Where the memory lives on a backend (--transport nccl): the k largest |r| of r[0..n) as pairs
 * sorted by index, left in the backend's memory at *pairs (mem->pairs, until the next call). */
int memory_select_keep(dt_memory *mem, size_t n, size_t k, const void **pairs);
/* Its buffers as state tensors ("residual", and "velocity" with momentum correction), in host
 * memory (copied there from a backend's); after a resume wrote them, memory_restored. */
int memory_state(dt_memory *mem, dt_state_tensor *out, int max);
int memory_restored(dt_memory *mem);
/* r += g (or the corrected velocity, from g and the weights w): the arena's gradient and weights
 * through their host views (pulled here). */
int memory_accumulate(dt_memory *mem, const dt_hostbuf *g, const dt_hostbuf *w);
/* DGC's local gradient clipping (Lin et al. §3.2): scales the gradient (through its host view,
 * pulled and pushed back here) so its L2 norm is at most max_norm / sqrt(p); the norm summed in double in index order,
 * so the result is a function of the gradient alone. Returns the factor applied (1: none) or -1. */
double memory_clip(const dt_hostbuf *g, size_t n, double max_norm, int p);
/* The entries the aggregate used leave the memory: r[i] = 0 (and u[i] = 0). used: host memory. */
int memory_used(dt_memory *mem, const dt_pair *used, size_t k);
/* The same for the k pairs memory_select_keep left in the backend's memory. */
int memory_used_keep(dt_memory *mem, size_t k);
/* gTop-k's put-back on a backend: of the k pairs memory_select_keep left, those whose index the
 * aggregate agg (n_agg pairs sorted by index, the backend's memory) holds leave the memory. */
int memory_survived_keep(dt_memory *mem, size_t k, const void *agg, size_t n_agg);
/* Applies a sparse aggregate (pairs sorted by index, host memory) to the weights (w: the arena's
 * host view). Without correction the optimizer runs on the backend with the dense vector `dense`
 * (an arena-sized buffer, zero except at the pairs, left zero again afterwards: its host view, or
 * its backend memory where the memory lives there). */
int memory_update(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const dt_pair *agg, size_t k,
                  const dt_hostbuf *dense, float lr);
/* The same where the memory lives on a backend and the aggregate is there already as the dense
 * vector dense->dev (zero but at the aggregate's indices; all zero again afterwards); the weights
 * equal memory_update's with the aggregate's pairs bit for bit (signs of zero aside). */
int memory_update_dense(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const dt_hostbuf *dense, float lr);
/* memory_update where the memory lives on a backend and the aggregate's pairs are in its memory. */
int memory_update_keep(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const void *agg, size_t k,
                       const dt_hostbuf *dense, float lr);

#endif
