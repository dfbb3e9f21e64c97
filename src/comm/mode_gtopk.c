/* gtopk — global Top-k sparsification (Shi et al. 2019, Alg. 3 and 4).
 *
 * Each rank adds its gradient to its residual and selects its k largest entries (I, local
 * values) as topk does. gTopKAllReduce then finds the k largest entries of the sum of all ranks'
 * sparse vectors by a binary tree of merges: in round j, rank r with r mod 2^(j+1) = 2^j sends its
 * k pairs to r - 2^j, which keeps the k largest of their sum (sparse_merge_topk). When P is not a
 * power of two, the ranks above the largest power of two P2 fold their pairs into rank r - P2
 * first. After log2(P2) rounds rank 0 holds the global top-k (J, V) and broadcasts it down a
 * binomial tree (and on to the folded ranks). Every rank updates with V at J; the entries it sent
 * that did not survive (I \ J) stay in its residual ("put back", Alg. 4 line 10), so
 * sent + residual = accumulated gradient, exactly.
 * Bytes per rank: at most k pairs per round it takes part in, 2 k log2(P) words for rank 0.
 * Over a device's transport (--transport nccl; residuals and selection on the device) the pairs
 * never cross to the host: the tree's sends and receives go device to device and the device merges
 * (pairs_merge: sparse_merge_topk's result) and puts back (pairs_zero_common). Every message is
 * k pairs: a merge of k distinct indices with k more keeps k.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "devnet.h"
#include "memory.h"
#include "mode.h"
#include "schedule.h"
#include "sparse.h"

#define TAG_MERGE 301
#define TAG_BCAST 302

typedef struct {
    dt_memory *mem;
    dt_topk *sel;
    dt_density_sched sched;
    size_t kmax;
    dt_pair *mine, *cur, *in, *tmp, *used;
    dt_hostbuf dense; /* the aggregate as a dense arena-sized vector, for the optimizer */
    dt_times cost; /* the timing model's selection (encode) and merges (decode): gtopk_calibrate's */
    void *net;     /* --transport nccl: the device's communicator */
    void *d_cur, *d_in, *d_out; /* and kmax pairs each on the device: the running result, a received list, a merge's */
} gtopk_state;

/* the timing model's costs at the target density: the selection of k over the arena and log2(P)
 * merges of 2k pairs on the tree's root, the critical path */
static int gtopk_calibrate(const dt_mode_env *env, dt_times *cost)
{
    int p = mode_ranks(env);
    double k = (double)density_k(env->opts.density, env->arena.n), pair;
    if (sparse_costs(env->arena.n, (size_t)k, mode_topk_sampled(&env->opts), &cost->encode, &pair) != 0) return -1;
    cost->decode = p > 1 ? ceil(log2((double)p)) * 2 * k * pair : 0.0;
    return 0;
}

static int gtopk_init(void **state, dt_mode_env *env)
{
    gtopk_state *s = calloc(1, sizeof *s);
    size_t n = env->arena.n;
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    if (density_sched_parse(env->opts.density_warmup, env->opts.density, &s->sched) != 0)
        return dt_fail_prefix("--density-warmup");
    s->kmax = density_k(density_max(&s->sched), n);
    /* on a device that can keep the residuals they stay there: only pairs cross to the host */
    if ((memory_can_run_on(env->be)
             ? memory_create_on(&s->mem, env->be, n, env->opts.momentum_correction, env->optim->momentum,
                                env->optim->wd, s->kmax)
             : memory_create(&s->mem, n, env->opts.momentum_correction, env->optim->momentum, env->optim->wd)) != 0 ||
        topk_create(&s->sel, n, s->kmax) != 0 || gtopk_calibrate(env, &s->cost) != 0 ||
        (mode_topk_sampled(&env->opts) && memory_sampled(s->mem) != 0))
        return -1;
    if (env->transport == DT_TRANSPORT_NCCL) {
        dt_backend *be = env->be;
        size_t bytes = sizeof(dt_pair) * s->kmax;
        if (devnet_open(env->comm, be, &s->net) != 0 || !(s->d_cur = be->alloc(be, bytes)) ||
            !(s->d_in = be->alloc(be, bytes)) || !(s->d_out = be->alloc(be, bytes)))
            return -1;
    }
    if (s->mem->be)
        snprintf(env->note, sizeof env->note, "residuals and selection on %s memory: %s", env->be->name,
                 s->net ? "the pairs go device to device and are merged there" : "only pairs cross to the host");
    s->mine = dt_alloc(sizeof(dt_pair) * s->kmax);
    s->cur = dt_alloc(sizeof(dt_pair) * s->kmax);
    s->in = dt_alloc(sizeof(dt_pair) * s->kmax);
    s->used = dt_alloc(sizeof(dt_pair) * s->kmax);
    s->tmp = dt_alloc(sizeof(dt_pair) * s->kmax * 2);
    if (!s->mine || !s->cur || !s->in || !s->used || !s->tmp) return -1;
    if (hostbuf_alloc(&s->dense, env->be, n) != 0) return -1;
    return 0;
}

static int largest_pow2(int p)
{
    int q = 1;
    while (q * 2 <= p) q *= 2;
    return q;
}

/* receives up to k pairs from src and merges them into cur (ncur pairs) */
static int recv_merge(gtopk_state *s, dt_comm *c, int src, size_t k, size_t *ncur, double *tc, double *td)
{
    size_t got;
    double t0 = dt_now();
    if (comm_recv(c, s->in, k * sizeof(dt_pair), src, TAG_MERGE, NULL, &got) != 0) return -1;
    double t1 = dt_now();
    size_t nin = got / sizeof(dt_pair);
    dt_pair *out = s->used; /* scratch until the end */
    *ncur = sparse_merge_topk(s->cur, *ncur, s->in, nin, k, out, s->tmp);
    memcpy(s->cur, out, *ncur * sizeof(dt_pair));
    *tc += t1 - t0;
    *td += dt_now() - t1;
    return 0;
}

/* gTopKAllReduce: on return every rank holds the global top-k in cur[0..*ncur) */
static int gtopk_allreduce(gtopk_state *s, dt_comm *c, size_t k, size_t *ncur, dt_times *t)
{
    int p = comm_size(c), me = comm_rank(c), p2 = largest_pow2(p);
    double tc = 0, td = 0, t0;
    size_t got;
    /* fold the ranks beyond the largest power of two into the first ones */
    if (me >= p2) {
        t0 = dt_now();
        if (comm_send(c, s->cur, *ncur * sizeof(dt_pair), me - p2, TAG_MERGE) != 0) return -1;
        tc += dt_now() - t0;
    } else {
        if (me + p2 < p && recv_merge(s, c, me + p2, k, ncur, &tc, &td) != 0) return -1;
        /* the binary tree among the first p2 ranks */
        for (int step = 1; step < p2; step *= 2) {
            if (me % (2 * step) == 0) {
                if (recv_merge(s, c, me + step, k, ncur, &tc, &td) != 0) return -1;
            } else {
                t0 = dt_now();
                if (comm_send(c, s->cur, *ncur * sizeof(dt_pair), me - step, TAG_MERGE) != 0) return -1;
                tc += dt_now() - t0;
                break;
            }
        }
    }
    /* broadcast rank 0's result: binomial tree over p2, then to the folded ranks */
    t0 = dt_now();
    if (me < p2) {
        int mask = 1;
        while (mask < p2) {
            if (me & mask) {
                if (comm_recv(c, s->cur, k * sizeof(dt_pair), me - mask, TAG_BCAST, NULL, &got) != 0) return -1;
                *ncur = got / sizeof(dt_pair);
                break;
            }
            mask <<= 1;
        }
        for (mask >>= 1; mask > 0; mask >>= 1)
            if (me + mask < p2 && comm_send(c, s->cur, *ncur * sizeof(dt_pair), me + mask, TAG_BCAST) != 0) return -1;
        if (me + p2 < p && comm_send(c, s->cur, *ncur * sizeof(dt_pair), me + p2, TAG_BCAST) != 0) return -1;
    } else {
        if (comm_recv(c, s->cur, k * sizeof(dt_pair), me - p2, TAG_BCAST, NULL, &got) != 0) return -1;
        *ncur = got / sizeof(dt_pair);
    }
    tc += dt_now() - t0;
    t->comm += tc;
    t->decode += td; /* the merges: sums and selections on received pairs */
    return 0;
}

/* ---- over the device's transport: gtopk_allreduce's tree on device memory ---- */

static int net_send(gtopk_state *s, dt_mode_env *env, void *buf, size_t bytes, int dst, dt_times *t)
{
    return devnet_move(env->comm, env->be, s->net, buf, bytes, dst, 1, t);
}

static int net_recv(gtopk_state *s, dt_mode_env *env, void *buf, size_t bytes, int src, dt_times *t)
{
    return devnet_move(env->comm, env->be, s->net, buf, bytes, src, 0, t);
}

/* receives k pairs from src and merges them into d_cur */
static int net_recv_merge(gtopk_state *s, dt_mode_env *env, int src, size_t k, dt_times *t)
{
    dt_backend *be = env->be;
    size_t got;
    if (net_recv(s, env, s->d_in, k * sizeof(dt_pair), src, t) != 0) return -1;
    double t0 = dt_now();
    if (be->pairs_merge(be, s->d_cur, k, s->d_in, k, k, s->d_out, &got) != 0) return -1;
    if (got != k) return dt_fail("internal: gtopk: a merge of %zu and %zu pairs kept %zu", k, k, got);
    void *x = s->d_cur;
    s->d_cur = s->d_out, s->d_out = x;
    t->decode += dt_now() - t0;
    return 0;
}

/* gtopk_allreduce on device memory: on return every rank holds the global top-k in d_cur */
static int gtopk_allreduce_net(gtopk_state *s, dt_mode_env *env, size_t k, dt_times *t)
{
    int p = comm_size(env->comm), me = comm_rank(env->comm), p2 = largest_pow2(p);
    size_t bytes = k * sizeof(dt_pair);
    if (me >= p2) {
        if (net_send(s, env, s->d_cur, bytes, me - p2, t) != 0) return -1;
    } else {
        if (me + p2 < p && net_recv_merge(s, env, me + p2, k, t) != 0) return -1;
        for (int step = 1; step < p2; step *= 2) {
            if (me % (2 * step) == 0) {
                if (net_recv_merge(s, env, me + step, k, t) != 0) return -1;
            } else {
                if (net_send(s, env, s->d_cur, bytes, me - step, t) != 0) return -1;
                break;
            }
        }
    }
    if (me < p2) {
        int mask = 1;
        while (mask < p2) {
            if (me & mask) {
                if (net_recv(s, env, s->d_cur, bytes, me - mask, t) != 0) return -1;
                break;
            }
            mask <<= 1;
        }
        for (mask >>= 1; mask > 0; mask >>= 1)
            if (me + mask < p2 && net_send(s, env, s->d_cur, bytes, me + mask, t) != 0) return -1;
        if (me + p2 < p && net_send(s, env, s->d_cur, bytes, me + p2, t) != 0) return -1;
    } else if (net_recv(s, env, s->d_cur, bytes, me - p2, t) != 0) {
        return -1;
    }
    return 0;
}

/* gtopk_end over the device's transport, after the selection (k pairs at mine, device memory) */
static int gtopk_end_net(gtopk_state *s, dt_mode_env *env, const void *mine, size_t k, const dt_iter *it,
                         dt_times *t)
{
    dt_backend *be = env->be;
    if (be->copy(be, s->d_cur, mine, k * sizeof(dt_pair)) != 0) return -1;
    if (mode_ranks(env) > 1 && gtopk_allreduce_net(s, env, k, t) != 0) return -1;
    double t1 = dt_now(); /* what survived of what this rank sent leaves the residual; the rest stays */
    if (memory_survived_keep(s->mem, k, s->d_cur, k) != 0 ||
        memory_update_keep(s->mem, env->optim, &env->wh, s->d_cur, k, &s->dense, it->lr) != 0)
        return -1;
    t->update += dt_now() - t1;
    return 0;
}

static int gtopk_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    gtopk_state *s = state;
    if (it->skip) return 0; /* overflowed (fp16): residuals as they were */
    size_t n = env->arena.n, k = density_k(density_at(&s->sched, it->epoch), n), ncur = k, nused = 0;
    double s0 = comm_bytes_sent(env->comm), r0 = comm_bytes_recv(env->comm), t0 = dt_now();

    if (env->opts.clip_norm > 0 && memory_clip(&env->gh, n, env->opts.clip_norm, mode_ranks(env)) < 0) return -1;
    if (memory_accumulate(s->mem, &env->gh, &env->wh) != 0) return -1;
    if (s->net) {
        const void *mine;
        if (memory_select_keep(s->mem, n, k, &mine) != 0 || env->be->sync(env->be) != 0) return -1;
        t->encode += dt_now() - t0;
        t->density += (double)k / (double)n;
        return gtopk_end_net(s, env, mine, k, it, t);
    }
    if (memory_select(s->mem, s->sel, 0, n, k, s->mine) != 0) return -1;
    memcpy(s->cur, s->mine, k * sizeof(dt_pair));
    t->encode += dt_now() - t0;

    if (mode_ranks(env) > 1 && gtopk_allreduce(s, env->comm, k, &ncur, t) != 0) return -1;

    double t1 = dt_now(); /* what survived of what this rank sent leaves the residual; the rest stays */
    for (size_t a = 0, b = 0; a < k && b < ncur;) {
        if (s->mine[a].i < s->cur[b].i) a++;
        else if (s->cur[b].i < s->mine[a].i) b++;
        else {
            s->used[nused++] = s->mine[a];
            a++, b++;
        }
    }
    if (memory_used(s->mem, s->used, nused) != 0) return -1;
    if (memory_update(s->mem, env->optim, &env->wh, s->cur, ncur, &s->dense, it->lr) != 0) return -1;
    t->update += dt_now() - t1;
    t->bytes_sent += comm_bytes_sent(env->comm) - s0;
    t->bytes_recv += comm_bytes_recv(env->comm) - r0;
    t->density += (double)k / (double)n;
    return 0;
}

static double gtopk_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    gtopk_state *s = state;
    int p = mode_ranks(env);
    double k = (double)density_k(env->opts.density, env->arena.n), lg = ceil(log2((double)p));
    /* gTop-k Table I: 2 log2(P) alpha + 4 k log2(P) beta (words: 2 k log2 P pairs of 8 bytes); plus the
     * selection and the merges: measured in the run like compute (t_encode, t_decode), or
     * gtopk_calibrate's before there is one (state NULL: --mode auto's, in m) */
    double sel = m->encode > 0 || !s ? m->encode : s->cost.encode;
    double merge = m->decode > 0 || !s ? m->decode : s->cost.decode;
    double comm = p > 1 ? 2 * lg * env->model.alpha + 2 * k * lg * 8 * env->model.beta + merge : 0;
    return m->data + m->forward + m->backward + m->sync + sel + comm + m->update;
}

static int gtopk_list_state(void *state, dt_mode_env *env, dt_state_tensor *out, int max)
{
    (void)env;
    return memory_state(((gtopk_state *)state)->mem, out, max);
}

static int gtopk_restored(void *state, dt_mode_env *env, long it0)
{
    (void)env, (void)it0;
    return memory_restored(((gtopk_state *)state)->mem);
}

static void gtopk_finalize(void *state, dt_mode_env *env)
{
    gtopk_state *s = state;
    if (!s) return;
    mode_env_release(env);
    for (void **d = (void *[]){s->d_cur, s->d_in, s->d_out}, **e = d + 3; d < e; d++)
        if (*d) env->be->free(env->be, *d);
    devnet_close(env->be, s->net);
    memory_destroy(s->mem);
    topk_destroy(s->sel);
    dt_free(s->mine);
    dt_free(s->cur);
    dt_free(s->in);
    dt_free(s->used);
    dt_free(s->tmp);
    hostbuf_free(&s->dense);
    free(s);
}

/* --transport nccl where the residuals and the selection live on the device and it merges there */
static int gtopk_device_net(const dt_mode_env *env, char *why, size_t n)
{
    const dt_backend *be = env->arena.be;
    if (memory_can_run_on(be) && be->net_sendrecv && be->pairs_merge && be->pairs_zero_common) return 1;
    snprintf(why, n, "the %s backend does not keep gTop-k's residuals and merges on its memory", be->name);
    return 0;
}

static void gtopk_describe(const dt_mode_env *env, char *buf, size_t n)
{
    const dt_comm_opts *o = &env->opts;
    char clip[48] = "";
    if (o->clip_norm > 0) snprintf(clip, sizeof clip, ", local clipping at %g/sqrt(P)", o->clip_norm);
    snprintf(buf, n, " (density %g%s, warm-up %s%s%s)", o->density, mode_topk_sampled(o) ? ", sampled threshold" : "",
             o->density_warmup, o->momentum_correction ? ", momentum correction" : "", clip);
}

const dt_mode_desc mode_gtopk = {
    .name = "gtopk",
    .help = "global Top-k: the k largest of the sum of all ranks' top-k, by a tree of merges and a broadcast",
    .options = "density density-warmup momentum-correction topk-select clip-norm",
    .describe = gtopk_describe,
    .init = gtopk_init,
    .end = gtopk_end,
    .encode_first = 1,
    .predict = gtopk_predict,
    .calibrate = gtopk_calibrate,
    .state = gtopk_list_state,
    .restored = gtopk_restored,
    .finalize = gtopk_finalize,
    .device_net = gtopk_device_net,
};
