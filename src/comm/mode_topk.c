/* topk — Top-k sparsification with residuals, aggregated by allgather (the baseline of gTop-k,
 * "TopKAllReduce", Shi et al. §II-C): each rank adds its gradient to its residual, sends the
 * k = floor(density * d) entries of largest |value| over the whole arena, and receives every
 * other rank's k (index, value) pairs with a ring allgather: (P-1) k pairs of 8 bytes per rank.
 * Every rank sums all P k pairs in rank order (the same sum everywhere) and updates the weights
 * with it; the entries it sent leave its residual. Density warm-up and momentum correction as
 * in memory.h and schedule.h. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "memory.h"
#include "mode.h"
#include "ring.h"
#include "schedule.h"
#include "sparse.h"

typedef struct {
    dt_memory *mem;
    dt_topk *sel;
    dt_density_sched sched;
    size_t kmax;
    dt_pair *mine, *all, *agg, *tmp, *tmp2;
    dt_hostbuf dense; /* the aggregate as a dense arena-sized vector, for the optimizer */
} topk_state;

static int topk_init(void **state, dt_mode_env *env)
{
    topk_state *s = calloc(1, sizeof *s);
    int p = comm_size(env->comm);
    size_t n = env->arena.n;
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    if (density_sched_parse(env->opts.density_warmup, env->opts.density, &s->sched) != 0)
        return dt_fail_prefix("--density-warmup");
    s->kmax = density_k(density_max(&s->sched), n);
    if (memory_create(&s->mem, n, env->opts.momentum_correction, env->optim->momentum, env->optim->wd) != 0 ||
        topk_create(&s->sel, n, s->kmax) != 0)
        return -1;
    s->mine = dt_alloc(sizeof(dt_pair) * s->kmax);
    s->all = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)p);
    s->agg = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)p);
    s->tmp = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)(p + 1));
    s->tmp2 = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)p);
    if (!s->mine || !s->all || !s->agg || !s->tmp || !s->tmp2) return -1;
    if (hostbuf_alloc(&s->dense, env->be, n) != 0) return -1;
    return 0;
}

static int topk_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    topk_state *s = state;
    int p = comm_size(env->comm);
    double rho, t0 = dt_now();
    size_t k = density_k(density_at(&s->sched, it->epoch), env->arena.n), n_agg;
    rho = (double)k / (double)env->arena.n;

    if (memory_accumulate(s->mem, &env->gh, &env->wh) != 0) return -1;
    if (topk_select(s->sel, s->mem->r, env->arena.n, k, s->mine) != 0) return -1;
    t->encode += dt_now() - t0;

    if (ring_allgather(env->comm, s->mine, k * sizeof(dt_pair), s->all, t) != 0) return -1;

    double t1 = dt_now(); /* the sum of all ranks' pairs, folded in rank order */
    memcpy(s->agg, s->all, k * sizeof(dt_pair));
    n_agg = k;
    for (int r = 1; r < p; r++) {
        n_agg = sparse_merge_topk(s->agg, n_agg, s->all + (size_t)r * k, k, (size_t)-1, s->tmp2, s->tmp);
        memcpy(s->agg, s->tmp2, n_agg * sizeof(dt_pair));
    }
    t->decode += dt_now() - t1;

    double t2 = dt_now();
    memory_used(s->mem, s->mine, k);
    if (memory_update(s->mem, env->optim, &env->wh, s->agg, n_agg, &s->dense, it->lr) != 0) return -1;
    t->update += dt_now() - t2;
    t->density += rho;
    return 0;
}

static double topk_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    topk_state *s = state;
    int p = comm_size(env->comm);
    double k = (double)density_k(s->sched.target, env->arena.n); /* the model takes the target density */
    /* gTop-k Table I: TopKAllReduce = log2(P) alpha + 2 (P-1) k beta (words), as a ring allgather */
    return m->data + m->forward + m->backward + m->update + (p - 1) * env->model.alpha +
           (p - 1) * k * sizeof(dt_pair) * env->model.beta;
}

static int topk_list_state(void *state, const dt_mode_env *env, dt_state_tensor *out, int max)
{
    (void)env;
    return memory_state(((topk_state *)state)->mem, out, max);
}

static void topk_finalize(void *state, dt_mode_env *env)
{
    topk_state *s = state;
    if (!s) return;
    mode_env_release(env);
    memory_destroy(s->mem);
    topk_destroy(s->sel);
    dt_free(s->mine);
    dt_free(s->all);
    dt_free(s->agg);
    dt_free(s->tmp);
    dt_free(s->tmp2);
    hostbuf_free(&s->dense);
    free(s);
}

static void topk_describe(const dt_mode_env *env, char *buf, size_t n)
{
    const dt_comm_opts *o = &env->opts;
    snprintf(buf, n, " (density %g, warm-up %s%s)", o->density, o->density_warmup,
             o->momentum_correction ? ", momentum correction" : "");
}

const dt_mode_desc mode_topk = {
    .name = "topk",
    .help = "Top-k sparsification with residuals; every rank's k largest entries gathered by allgather",
    .options = "density density-warmup momentum-correction",
    .describe = topk_describe,
    .init = topk_init,
    .end = topk_end,
    .predict = topk_predict,
    .state = topk_list_state,
    .finalize = topk_finalize,
};
