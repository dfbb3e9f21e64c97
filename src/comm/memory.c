#include "memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../cpu.h"
#include "../util.h"

int memory_create(dt_memory **out, size_t n, int momentum_correction, float momentum, float wd)
{
    dt_memory *mem = calloc(1, sizeof *mem);
    if (!mem) return dt_fail("out of memory");
    mem->n = n;
    mem->m = momentum;
    mem->wd = wd;
    if (!(mem->r = dt_zalloc(DT_MAX(n, 1) * sizeof(float))) ||
        (momentum_correction && !(mem->u = dt_zalloc(DT_MAX(n, 1) * sizeof(float))))) {
        memory_destroy(mem);
        return -1;
    }
    *out = mem;
    return 0;
}

int memory_can_run_on(const dt_backend *be)
{
    return be && !be->host_memory && be->residual_add && be->topk && be->pairs_apply && be->topk_sample &&
           be->topk_above;
}

int memory_sampled(dt_memory *mem)
{
    mem->sampled = 1;
    if (mem->be && !mem->sample && !(mem->sample = dt_alloc(sizeof(float) * DT_TOPK_MAX_SAMPLE))) return -1;
    return 0;
}

/* the backend's selection of the k largest (or, sampled, topk_select_sampled's) of x[0..n) into pairs */
static int select_on(dt_memory *mem, const float *x, size_t n, size_t k, void *pairs)
{
    dt_backend *be = mem->be;
    size_t m = mem->sampled ? topk_sample_size(n, k) : 0;
    if (!m) return be->topk(be, x, n, k, pairs);
    if (m > DT_TOPK_MAX_SAMPLE) return dt_fail("internal: a sample of %zu values", m);
    if (be->topk_sample(be, x, n, m, mem->sample) != 0) return -1;
    return be->topk_above(be, x, n, k, topk_sample_threshold(mem->sample, m, n, k), pairs);
}

int memory_create_on(dt_memory **out, dt_backend *be, size_t n, int momentum_correction, float momentum, float wd,
                     size_t max_pairs)
{
    dt_memory *mem = calloc(1, sizeof *mem);
    if (!mem) return dt_fail("out of memory");
    *out = mem;
    mem->n = n;
    mem->m = momentum;
    mem->wd = wd;
    mem->be = be;
    mem->max_pairs = DT_MAX(max_pairs, 1);
    if (!memory_can_run_on(be)) return dt_fail("internal: the %s backend cannot keep the residuals", be->name);
    if (hostbuf_alloc(&mem->rh, be, DT_MAX(n, 1)) != 0 ||
        (momentum_correction && hostbuf_alloc(&mem->uh, be, DT_MAX(n, 1)) != 0) ||
        !(mem->pairs = be->alloc(be, mem->max_pairs * sizeof(dt_pair))))
        return -1;
    mem->r = mem->rh.host;
    mem->u = momentum_correction ? mem->uh.host : NULL;
    return 0;
}

void memory_destroy(dt_memory *mem)
{
    if (!mem) return;
    if (mem->be) {
        hostbuf_free(&mem->rh);
        hostbuf_free(&mem->uh);
        if (mem->pairs) mem->be->free(mem->be, mem->pairs);
        dt_free(mem->sample);
    } else {
        dt_free(mem->r);
        dt_free(mem->u);
    }
    free(mem);
}

/* pairs (host) into the backend's pair buffer */
static int pairs_in(dt_memory *mem, const dt_pair *p, size_t k)
{
    if (k > mem->max_pairs) return dt_fail("internal: %zu pairs exceed the memory's %zu", k, mem->max_pairs);
    return mem->be->to_device(mem->be, mem->pairs, p, k * sizeof *p);
}

int memory_select(dt_memory *mem, dt_topk *sel, size_t off, size_t n, size_t k, dt_pair *out)
{
    dt_backend *be = mem->be;
    if (!be) return (mem->sampled ? topk_select_sampled : topk_select)(sel, mem->r + off, n, k, out);
    if (k > mem->max_pairs) return dt_fail("internal: top-%zu exceeds the memory's %zu pairs", k, mem->max_pairs);
    if (select_on(mem, mem->rh.dev + off, n, k, mem->pairs) != 0) return -1;
    return be->to_host(be, out, mem->pairs, k * sizeof *out);
}

int memory_select_keep(dt_memory *mem, size_t n, size_t k, const void **pairs)
{
    dt_backend *be = mem->be;
    if (!be) return dt_fail("internal: memory_select_keep on host memory");
    if (k > mem->max_pairs) return dt_fail("internal: top-%zu exceeds the memory's %zu pairs", k, mem->max_pairs);
    *pairs = mem->pairs;
    return select_on(mem, mem->rh.dev, n, k, mem->pairs);
}

DT_CLONES static void accumulate_plain(float *restrict r, const float *restrict g, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) r[i] += g[i];
}

/* each product and sum rounded on its own (never fused: the vector clones would), so that every CPU
 * and a GPU (cuda/elementwise.h, ew_velocity) keep the same residuals */
DT_NO_CONTRACT DT_CLONES static void accumulate_corrected(float *restrict r, float *restrict u, const float *restrict g,
                                                          const float *restrict w, size_t n, float m, float wd)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = m * u[i] + g[i] + wd * w[i];
        u[i] = v;
        r[i] += v;
    }
}

double memory_clip(const dt_hostbuf *g, size_t n, double max_norm, int p)
{
    double sq = 0.0, limit = max_norm / sqrt((double)p);
    if (hostbuf_pull(g, 0, n) != 0) return -1.0;
    for (size_t i = 0; i < n; i++) sq += (double)g->host[i] * (double)g->host[i];
    if (sq <= limit * limit) return 1.0;
    float f = (float)(limit / sqrt(sq));
    for (size_t i = 0; i < n; i++) g->host[i] *= f;
    if (hostbuf_push(g, 0, n) != 0) return -1.0; /* the gradient itself is clipped, wherever it lives */
    return (double)f;
}

int memory_accumulate(dt_memory *mem, const dt_hostbuf *g, const dt_hostbuf *w)
{
    if (mem->be)
        return mem->be->residual_add(mem->be, mem->rh.dev, mem->u ? mem->uh.dev : NULL, g->dev, w->dev, mem->n, mem->m,
                                     mem->wd);
    if (hostbuf_pull(g, 0, mem->n) != 0) return -1;
    if (mem->u) {
        if (hostbuf_pull(w, 0, mem->n) != 0) return -1;
        accumulate_corrected(mem->r, mem->u, g->host, w->host, mem->n, mem->m, mem->wd);
    } else {
        accumulate_plain(mem->r, g->host, mem->n);
    }
    return 0;
}

int memory_used(dt_memory *mem, const dt_pair *used, size_t k)
{
    dt_backend *be = mem->be;
    if (be) {
        if (pairs_in(mem, used, k) != 0 || be->pairs_apply(be, mem->rh.dev, mem->pairs, k, DT_PAIRS_ZERO, 0.0f) != 0)
            return -1;
        return mem->u ? be->pairs_apply(be, mem->uh.dev, mem->pairs, k, DT_PAIRS_ZERO, 0.0f) : 0;
    }
    for (size_t j = 0; j < k; j++) {
        mem->r[used[j].i] = 0.0f;
        if (mem->u) mem->u[used[j].i] = 0.0f;
    }
    return 0;
}

int memory_used_keep(dt_memory *mem, size_t k)
{
    dt_backend *be = mem->be;
    if (be->pairs_apply(be, mem->rh.dev, mem->pairs, k, DT_PAIRS_ZERO, 0.0f) != 0) return -1;
    return mem->u ? be->pairs_apply(be, mem->uh.dev, mem->pairs, k, DT_PAIRS_ZERO, 0.0f) : 0;
}

int memory_survived_keep(dt_memory *mem, size_t k, const void *agg, size_t n_agg)
{
    dt_backend *be = mem->be;
    if (be->pairs_zero_common(be, mem->rh.dev, mem->pairs, k, agg, n_agg) != 0) return -1;
    return mem->u ? be->pairs_zero_common(be, mem->uh.dev, mem->pairs, k, agg, n_agg) : 0;
}

/* With correction, w + (-lr v): rounded as memory_update's w - lr v (a negated product rounds to the
 * negated rounding; 1 y + x is exact before its one rounding, fused or not), and w + -0 = w where
 * the aggregate is zero. */
int memory_update_dense(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const dt_hostbuf *dense, float lr)
{
    dt_backend *be = mem->be;
    if (mem->u) {
        if (be->scale(be, dense->dev, -lr, mem->n) != 0 || be->add(be, w->dev, dense->dev, mem->n, 1.0f) != 0)
            return -1;
    } else if (optim_step(opt, w->dev, dense->dev, lr, 0, mem->n) != 0) {
        return -1;
    }
    return be->scale(be, dense->dev, 0.0f, mem->n);
}

/* the same sparse updates where the memory lives on a backend, the pairs in its memory */
int memory_update_keep(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const void *agg, size_t k,
                       const dt_hostbuf *dense, float lr)
{
    dt_backend *be = mem->be;
    if (mem->u) return be->pairs_apply(be, w->dev, agg, k, DT_PAIRS_SUB, lr);
    if (be->pairs_apply(be, dense->dev, agg, k, DT_PAIRS_SET, 0.0f) != 0 ||
        optim_step(opt, w->dev, dense->dev, lr, 0, mem->n) != 0)
        return -1;
    return be->pairs_apply(be, dense->dev, agg, k, DT_PAIRS_ZERO, 0.0f);
}

static int update_on(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const dt_pair *agg, size_t k,
                     const dt_hostbuf *dense, float lr)
{
    if (pairs_in(mem, agg, k) != 0) return -1;
    return memory_update_keep(mem, opt, w, mem->pairs, k, dense, lr);
}

/* w - lr v rounded twice, as on a GPU (ew_pair) */
DT_NO_CONTRACT int memory_update(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const dt_pair *agg, size_t k,
                                 const dt_hostbuf *dense, float lr)
{
    if (mem->be) return update_on(mem, opt, w, agg, k, dense, lr);
    if (mem->u) { /* momentum and decay are in the aggregate already: plain SGD, only where it is non-zero */
        if (hostbuf_pull(w, 0, mem->n) != 0) return -1;
        for (size_t j = 0; j < k; j++) w->host[agg[j].i] -= lr * agg[j].v;
        return hostbuf_push(w, 0, mem->n);
    }
    float *d = dense->host;
    for (size_t j = 0; j < k; j++) d[agg[j].i] = agg[j].v;
    int rc = hostbuf_push(dense, 0, mem->n);
    if (rc == 0) rc = optim_step(opt, w->dev, dense->dev, lr, 0, mem->n);
    for (size_t j = 0; j < k; j++) d[agg[j].i] = 0.0f;
    return rc;
}

int memory_state(dt_memory *mem, dt_state_tensor *out, int max)
{
    int n = 0;
    if (mem->be && (hostbuf_pull(&mem->rh, 0, mem->n) != 0 || (mem->u && hostbuf_pull(&mem->uh, 0, mem->n) != 0)))
        return -1;
    if (n < max) {
        snprintf(out[n].name, sizeof out[n].name, "residual");
        out[n].data = mem->r;
        out[n++].n = mem->n;
    }
    if (mem->u && n < max) {
        snprintf(out[n].name, sizeof out[n].name, "velocity");
        out[n].data = mem->u;
        out[n++].n = mem->n;
    }
    return n;
}

int memory_restored(dt_memory *mem)
{
    if (!mem->be) return 0;
    if (hostbuf_push(&mem->rh, 0, mem->n) != 0) return -1;
    return mem->u ? hostbuf_push(&mem->uh, 0, mem->n) : 0;
}
