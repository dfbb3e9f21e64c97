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

void memory_destroy(dt_memory *mem)
{
    if (!mem) return;
    dt_free(mem->r);
    dt_free(mem->u);
    free(mem);
}

DT_CLONES static void accumulate_plain(float *restrict r, const float *restrict g, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) r[i] += g[i];
}

DT_CLONES static void accumulate_corrected(float *restrict r, float *restrict u, const float *restrict g,
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
    if (hostbuf_pull(g, 0, mem->n) != 0) return -1;
    if (mem->u) {
        if (hostbuf_pull(w, 0, mem->n) != 0) return -1;
        accumulate_corrected(mem->r, mem->u, g->host, w->host, mem->n, mem->m, mem->wd);
    } else {
        accumulate_plain(mem->r, g->host, mem->n);
    }
    return 0;
}

void memory_used(dt_memory *mem, const dt_pair *used, size_t k)
{
    for (size_t j = 0; j < k; j++) {
        mem->r[used[j].i] = 0.0f;
        if (mem->u) mem->u[used[j].i] = 0.0f;
    }
}

int memory_update(dt_memory *mem, dt_optim *opt, const dt_hostbuf *w, const dt_pair *agg, size_t k,
                  const dt_hostbuf *dense, float lr)
{
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
