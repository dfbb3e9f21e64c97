/* topk — Top-k sparsification with residuals, aggregated by allgather (the baseline of gTop-k,
 * "TopKAllReduce", Shi et al. §II-C): each rank adds its gradient to its residual, sends the
 * k = floor(density * d) (at least 1) entries of largest |value| over the whole arena, and receives every
 * other rank's k (index, value) pairs with a ring allgather: (P-1) k pairs of 8 bytes per rank.
 * Every rank sums all P k pairs in rank order (the same sum everywhere) and updates the weights
 * with it; the entries it sent leave its residual. Density warm-up and momentum correction as
 * in memory.h and schedule.h.
 * DGC's variants (Lin et al. §3): --topk-scope layer selects floor(density * n_t) (at least 1)
 * entries of each parameter tensor t instead of the arena's k, and --clip-norm X scales each
 * rank's gradient to norm X/sqrt(P) at most before it joins the residual.
 * Over a device's transport (--transport nccl; residuals and selection on the device) the pairs
 * never cross to the host: the device's allgather gathers them, and each rank's list, in rank
 * order, is added into an arena-sized zero vector on the device (pairs_apply's add: within a list
 * indices are distinct): the same sums as the host's fold, bit for bit, and the update runs on
 * that vector. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "devnet.h"
#include "memory.h"
#include "mode.h"
#include "ring.h"
#include "schedule.h"
#include "sparse.h"

typedef struct {
    size_t off, n; /* a parameter tensor's range of the arena */
} range;

typedef struct {
    dt_memory *mem;
    dt_topk *sel;
    range *ranges; /* --topk-scope layer: the tensors' ranges by offset; else NULL */
    int n_ranges;
    dt_density_sched sched;
    size_t kmax;
    dt_pair *mine, *all, *agg, *tmp, *tmp2;
    dt_hostbuf dense; /* the aggregate as a dense arena-sized vector, for the optimizer */
    dt_times cost; /* the timing model's selection (encode) and merges (decode): topk_calibrate's */
    void *net;     /* --transport nccl: the device's communicator */
    void *d_all;   /* and every rank's pairs gathered on the device */
} topk_state;

static int cmp_range(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int make_ranges(topk_state *s, const dt_arena *a)
{
    if (!(s->ranges = calloc((size_t)a->n_tensors + 1, sizeof *s->ranges))) return dt_fail("out of memory");
    for (int i = 0; i < a->n_tensors; i++) s->ranges[i] = (range){a->tensors[i]->offset, a->tensors[i]->n};
    s->n_ranges = a->n_tensors;
    qsort(s->ranges, (size_t)s->n_ranges, sizeof *s->ranges, cmp_range);
    return 0;
}

static int per_tensor(const dt_mode_env *env)
{
    return env->opts.topk_scope && strcmp(env->opts.topk_scope, "layer") == 0;
}

/* entries sent at this density: the arena's k, or the sum of the tensors' */
static size_t k_at(const dt_mode_env *env, double density)
{
    const dt_arena *a = &env->arena;
    size_t k = 0;
    if (!per_tensor(env)) return density_k(density, a->n);
    for (int i = 0; i < a->n_tensors; i++) k += density_k(density, a->tensors[i]->n);
    return k;
}

/* the timing model's costs at the target density: the selection of k (timed as one selection over
 * the arena, also per tensor) and the rank-order fold of the P lists (merges of 2k, 3k, ..., Pk pairs) */
static int topk_calibrate(const dt_mode_env *env, dt_times *cost)
{
    int p = mode_ranks(env);
    double k = (double)k_at(env, env->opts.density), pair;
    if (sparse_costs(env->arena.n, (size_t)k, mode_topk_sampled(&env->opts), &cost->encode, &pair) != 0) return -1;
    cost->decode = p > 1 ? k * pair * ((double)p * (p + 1) / 2.0 - 1.0) : 0.0;
    return 0;
}

/* the selection: the k largest of the residual, or of each tensor's range (sorted by index either way) */
static int select_top(topk_state *s, double density, size_t n, size_t k)
{
    size_t at = 0;
    if (!s->ranges) return memory_select(s->mem, s->sel, 0, n, k, s->mine);
    for (int i = 0; i < s->n_ranges; i++) {
        const range *g = &s->ranges[i];
        size_t kt = density_k(density, g->n);
        if (kt > g->n) kt = g->n;
        if (memory_select(s->mem, s->sel, g->off, g->n, kt, s->mine + at) != 0) return -1;
        for (size_t j = 0; j < kt; j++) s->mine[at + j].i += (uint32_t)g->off;
        at += kt;
    }
    return 0;
}

static int topk_init(void **state, dt_mode_env *env)
{
    topk_state *s = calloc(1, sizeof *s);
    int p = mode_ranks(env);
    size_t n = env->arena.n;
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    if (density_sched_parse(env->opts.density_warmup, env->opts.density, &s->sched) != 0)
        return dt_fail_prefix("--density-warmup");
    if (per_tensor(env) && make_ranges(s, &env->arena) != 0) return -1;
    s->kmax = k_at(env, density_max(&s->sched));
    /* on a device that can keep the residuals they stay there: only pairs cross to the host */
    if ((memory_can_run_on(env->be)
             ? memory_create_on(&s->mem, env->be, n, env->opts.momentum_correction, env->optim->momentum,
                                env->optim->wd, s->kmax * (size_t)p)
             : memory_create(&s->mem, n, env->opts.momentum_correction, env->optim->momentum, env->optim->wd)) != 0 ||
        topk_create(&s->sel, n, s->kmax) != 0 || topk_calibrate(env, &s->cost) != 0 ||
        (mode_topk_sampled(&env->opts) && memory_sampled(s->mem) != 0))
        return -1;
    if (env->transport == DT_TRANSPORT_NCCL &&
        (devnet_open(env->comm, env->be, &s->net) != 0 ||
         !(s->d_all = env->be->alloc(env->be, sizeof(dt_pair) * s->kmax * (size_t)p))))
        return -1;
    if (s->mem->be)
        snprintf(env->note, sizeof env->note, "residuals and selection on %s memory: %s", env->be->name,
                 s->net ? "the pairs go device to device and are summed there" : "only pairs cross to the host");
    s->mine = dt_alloc(sizeof(dt_pair) * s->kmax);
    s->all = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)p);
    s->agg = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)p);
    s->tmp = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)(p + 1));
    s->tmp2 = dt_alloc(sizeof(dt_pair) * s->kmax * (size_t)p);
    if (!s->mine || !s->all || !s->agg || !s->tmp || !s->tmp2) return -1;
    if (hostbuf_alloc(&s->dense, env->be, n) != 0) return -1;
    return 0;
}

/* topk_end over the device's transport, after the selection: the k pairs at *mine (device memory)
 * gathered, summed in rank order into s->dense, the update */
static int topk_end_net(topk_state *s, dt_mode_env *env, const void *mine, size_t k, const dt_iter *it,
                        dt_times *t)
{
    dt_backend *be = env->be;
    int p = mode_ranks(env);
    size_t bytes = k * sizeof(dt_pair);
    double t0 = dt_now();
    if (be->net_allgather(be, s->net, mine, bytes, s->d_all) != 0 ||
        be->net_wait(be, s->net, comm_timeout(env->comm)) != 0)
        return -1;
    double t1 = dt_now();
    t->comm += t1 - t0;
    t->bytes_sent += (double)(p - 1) * (double)bytes; /* as the host's ring allgather sends them */
    t->bytes_recv += (double)(p - 1) * (double)bytes;
    for (int r = 0; r < p; r++)
        if (be->pairs_apply(be, s->dense.dev, (const char *)s->d_all + (size_t)r * bytes, k, DT_PAIRS_ADD, 1.0f) != 0)
            return -1;
    if (be->sync(be) != 0) return -1;
    double t2 = dt_now();
    t->decode += t2 - t1;
    if (memory_used_keep(s->mem, k) != 0 || memory_update_dense(s->mem, env->optim, &env->wh, &s->dense, it->lr) != 0)
        return -1;
    t->update += dt_now() - t2;
    return 0;
}

static int topk_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    topk_state *s = state;
    int p = mode_ranks(env);
    if (it->skip) return 0; /* overflowed (fp16): residuals as they were */
    double rho, t0 = dt_now(), density = density_at(&s->sched, it->epoch);
    size_t k = k_at(env, density), n_agg;
    rho = (double)k / (double)env->arena.n;

    if (env->opts.clip_norm > 0 && memory_clip(&env->gh, env->arena.n, env->opts.clip_norm, p) < 0) return -1;
    if (memory_accumulate(s->mem, &env->gh, &env->wh) != 0) return -1;
    if (s->net) {
        const void *mine;
        if (memory_select_keep(s->mem, env->arena.n, k, &mine) != 0 || env->be->sync(env->be) != 0) return -1;
        t->encode += dt_now() - t0;
        t->density += rho;
        return topk_end_net(s, env, mine, k, it, t);
    }
    if (select_top(s, density, env->arena.n, k) != 0) return -1;
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
    if (memory_used(s->mem, s->mine, k) != 0) return -1;
    if (memory_update(s->mem, env->optim, &env->wh, s->agg, n_agg, &s->dense, it->lr) != 0) return -1;
    t->update += dt_now() - t2;
    t->density += rho;
    return 0;
}

static double topk_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    topk_state *s = state;
    int p = mode_ranks(env);
    double k = (double)k_at(env, env->opts.density); /* the model takes the target density */
    /* gTop-k Table I: TopKAllReduce = log2(P) alpha + 2 (P-1) k beta (words), as a ring allgather; plus the
     * selection and the merges: measured in the run like compute (t_encode, t_decode), or
     * topk_calibrate's before there is one (state NULL: --mode auto's, in m) */
    double sel = m->encode > 0 || !s ? m->encode : s->cost.encode;
    double merge = m->decode > 0 || !s ? m->decode : s->cost.decode;
    return m->data + m->forward + m->backward + m->sync + sel + (p - 1) * env->model.alpha +
           (p - 1) * k * sizeof(dt_pair) * env->model.beta + merge + m->update;
}

static int topk_list_state(void *state, dt_mode_env *env, dt_state_tensor *out, int max)
{
    (void)env;
    return memory_state(((topk_state *)state)->mem, out, max);
}

static int topk_restored(void *state, dt_mode_env *env, long it0)
{
    (void)env, (void)it0;
    return memory_restored(((topk_state *)state)->mem);
}

static void topk_finalize(void *state, dt_mode_env *env)
{
    topk_state *s = state;
    if (!s) return;
    mode_env_release(env);
    if (s->d_all) env->be->free(env->be, s->d_all);
    devnet_close(env->be, s->net);
    memory_destroy(s->mem);
    topk_destroy(s->sel);
    free(s->ranges);
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
    char clip[48] = "";
    if (o->clip_norm > 0) snprintf(clip, sizeof clip, ", local clipping at %g/sqrt(P)", o->clip_norm);
    snprintf(buf, n, " (density %g%s%s, warm-up %s%s%s)", o->density,
             o->topk_scope && !strcmp(o->topk_scope, "layer") ? " per tensor" : "",
             mode_topk_sampled(o) ? ", sampled threshold" : "", o->density_warmup,
             o->momentum_correction ? ", momentum correction" : "", clip);
}

static const dt_optdef topk_flags[] = {
    {"Communication", "topk-scope", OPT_CHOICE, "global|layer", offsetof(dt_comm_opts, topk_scope), 0, 0,
     "global|layer", "global", 0, 0,
     "topk: the k largest of the whole arena (gTop-k's baseline) or of each parameter tensor (DGC)", NULL},
};

/* --transport nccl where the residuals and the selection live on the device and it has an allgather;
 * --topk-scope layer selects per tensor through the host */
static int topk_device_net(const dt_mode_env *env, char *why, size_t n)
{
    if (per_tensor(env)) {
        snprintf(why, n, "--topk-scope layer selects through the host");
        return 0;
    }
    if (memory_can_run_on(env->arena.be) && env->arena.be->net_allgather) return 1;
    snprintf(why, n, "the %s backend does not keep top-k's residuals on its memory", env->arena.be->name);
    return 0;
}

const dt_mode_desc mode_topk = {
    .name = "topk",
    .help = "Top-k sparsification with residuals; every rank's k largest entries gathered by allgather",
    .options = "density density-warmup momentum-correction topk-scope topk-select clip-norm",
    .flags = topk_flags,
    .n_flags = (int)DT_ARRAY_LEN(topk_flags),
    .describe = topk_describe,
    .init = topk_init,
    .end = topk_end,
    .encode_first = 1,
    .predict = topk_predict,
    .calibrate = topk_calibrate,
    .state = topk_list_state,
    .restored = topk_restored,
    .finalize = topk_finalize,
    .device_net = topk_device_net,
};
