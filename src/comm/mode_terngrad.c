/* terngrad — ternary gradients (Wen et al. 2017), decentralised (parameter localisation: every
 * rank keeps the weights and receives the others' codes instead of weights).
 *
 * Per tensor ("layer-wise"): the gradient is clipped at c sigma (--clip), its scaler s is the
 * maximum over ranks of each rank's max |clipped g| (scaler sharing, one float per tensor), and
 * each value becomes s t with t in {-1, 0, +1} drawn with P(t != 0) = |clipped g| / s from the
 * rank's own random stream (codec_tern.h). The aggregate of a value is s sum_r t_r — the local
 * gradients are already scaled by 1/(global batch), so the sum is an unbiased estimate of the
 * mean gradient within the clip. No residual. The optimizer (momentum, decay) runs afterwards.
 *
 * Aggregation moves whichever is fewer bytes for the P at hand (the banner says which):
 *   allgather of the 2-bit codes: (P-1) d/4 bytes per rank (smaller for P <= 8)
 *   ring allreduce of int8 sums (|sum| <= P <= 127): 2 (P-1)/P d bytes per rank
 * plus (P-1) 4 L bytes of scalers. --tern-skip-last keeps the last layer's tensors (the first in
 * the arena) in fp32, and --tern-min-size N every tensor of fewer than N values; those go through
 * a plain fp32 ring allreduce.
 * On a device that codes itself (the CUDA backend's tern_* ops), the scalers' sums, the ternarizing
 * and the packing run in its memory and only the codes cross to the host; the int8 sums come back
 * and are scaled there. The same bits as on the host: one order of sums, the same coins. Over the
 * device's transport (--transport nccl) the codes (or int8 values) do not cross to the host at all:
 * they are allgathered (allreduced) from device to device and summed there; the scalers (a float per
 * tensor) and the fp32 tensors still travel over MPI.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"
#include "codec_tern.h"
#include "mode.h"
#include "ring.h"

typedef struct {
    int n_tensors, n_tern;
    unsigned char *tern;  /* per arena tensor: ternarised */
    size_t *tern_at;      /* per arena tensor: offset in the ternary stream */
    size_t d_tern, d_fp32, code_bytes;
    int use_allgather;
    int8_t *t8, *acc, *tmp;
    uint8_t *codes, *all_codes;
    float *scal, *all_scal, *fp32;
    dt_ring *ring;
    /* on a device that codes itself (tern_dev): the ternary tensors' ranges, their sums there, and the
     * device's stream of ternary values, its codes and the sums that come back */
    int on_dev;
    size_t *st_off, *st_n;
    double *st_sum, *st_sq;
    float *st_mx;
    int8_t *d_t8, *d_acc;
    uint8_t *d_codes;
    void *net;            /* --transport nccl: the device's communicator */
    uint8_t *d_all_codes; /* its allgather's codes of every rank */
} tern_state;

/* the backend codes TernGrad on its own memory */
static int tern_dev(const dt_backend *be)
{
    return be && !be->host_memory && be->tern_stats && be->tern_encode && be->tern_pack && be->tern_decode;
}

/* Which tensors travel ternary (s->tern, s->tern_at: where each starts; either may be NULL) and the
 * sizes that follow: all but the last layer's with --tern-skip-last and those under --tern-min-size */
static void plan(tern_state *s, const dt_mode_env *env)
{
    const dt_arena *a = &env->arena;
    int p = mode_ranks(env);
    /* the last layer of the net is the first group of tensors in the arena (backward order) */
    const char *first = a->n_tensors ? a->tensors[0]->name : "";
    size_t first_len = tensor_layer_len(first);
    for (int i = 0; i < a->n_tensors; i++) {
        const dt_param *t = a->tensors[i];
        int last_layer = tensor_layer_len(t->name) == first_len && strncmp(t->name, first, first_len) == 0;
        int tern = !(env->opts.tern_skip_last && last_layer) && t->n >= (size_t)env->opts.tern_min_size;
        if (s->tern) s->tern[i] = (unsigned char)tern;
        if (s->tern_at && tern) s->tern_at[i] = s->d_tern;
        if (tern) s->d_tern += t->n, s->n_tern++;
        else s->d_fp32 += t->n;
    }
    s->code_bytes = (s->d_tern + 3) / 4;
    s->use_allgather = (double)(p - 1) * (double)s->code_bytes <= 2.0 * (p - 1) / p * (double)s->d_tern;
}

static int tern_init(void **state, dt_mode_env *env)
{
    tern_state *s = calloc(1, sizeof *s);
    int p = mode_ranks(env);
    const dt_arena *a = &env->arena;
    dt_codec none;
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    if (p > 127) return dt_fail("--mode terngrad supports at most 127 ranks (sums of ternary values travel as int8)");
    s->n_tensors = a->n_tensors;
    s->tern = calloc((size_t)a->n_tensors + 1, 1);
    s->tern_at = calloc((size_t)a->n_tensors + 1, sizeof *s->tern_at);
    if (!s->tern || !s->tern_at) return dt_fail("out of memory");
    plan(s, env);
    double ag = (double)(p - 1) * (double)s->code_bytes, i8 = 2.0 * (p - 1) / p * (double)s->d_tern;
    s->t8 = dt_alloc(DT_MAX(s->d_tern, 1));
    s->acc = dt_alloc(DT_MAX(s->d_tern, 1));
    s->tmp = dt_alloc(DT_MAX(s->d_tern / (size_t)p + 2, 1));
    s->codes = dt_alloc(DT_MAX(s->code_bytes, 1));
    s->all_codes = dt_alloc(DT_MAX(s->code_bytes, 1) * (size_t)p);
    s->scal = dt_alloc(sizeof(float) * (size_t)DT_MAX(s->n_tern, 1));
    s->all_scal = dt_alloc(sizeof(float) * (size_t)DT_MAX(s->n_tern, 1) * (size_t)p);
    s->fp32 = dt_alloc(sizeof(float) * DT_MAX(s->d_fp32, 1));
    if (!s->t8 || !s->acc || !s->tmp || !s->codes || !s->all_codes || !s->scal || !s->all_scal || !s->fp32) return -1;
    codec_create("none", 0, &none);
    if (ring_create(&s->ring, env->comm, none, DT_MAX(s->d_fp32, 1)) != 0) return -1;
    int off = snprintf(env->note, sizeof env->note,
                       "%d of %d tensors ternary (%zu values), %zu fp32 values; aggregation: %s (%.0f bytes per "
                       "iteration; the other way %.0f)",
                       s->n_tern, a->n_tensors, s->d_tern, s->d_fp32,
                       s->use_allgather ? "allgather of 2-bit codes" : "int8 ring allreduce",
                       s->use_allgather ? ag : i8, s->use_allgather ? i8 : ag);
    if ((s->on_dev = tern_dev(env->be))) {
        dt_backend *be = env->be;
        size_t nt = (size_t)DT_MAX(s->n_tern, 1);
        s->st_off = calloc(nt, sizeof *s->st_off), s->st_n = calloc(nt, sizeof *s->st_n);
        s->st_sum = calloc(nt, sizeof *s->st_sum), s->st_sq = calloc(nt, sizeof *s->st_sq);
        s->st_mx = calloc(nt, sizeof *s->st_mx);
        if (!s->st_off || !s->st_n || !s->st_sum || !s->st_sq || !s->st_mx) return dt_fail("out of memory");
        for (int i = 0, k = 0; i < a->n_tensors; i++)
            if (s->tern[i]) s->st_off[k] = a->tensors[i]->offset, s->st_n[k++] = a->tensors[i]->n;
        if (!(s->d_t8 = be->alloc(be, DT_MAX(s->d_tern, 1))) || !(s->d_acc = be->alloc(be, DT_MAX(s->d_tern, 1))) ||
            !(s->d_codes = be->alloc(be, DT_MAX(s->code_bytes, 1))))
            return -1;
        if (env->transport == DT_TRANSPORT_NCCL &&
            (devnet_open(env->comm, be, &s->net) != 0 ||
             (s->use_allgather && !(s->d_all_codes = be->alloc(be, DT_MAX(s->code_bytes, 1) * (size_t)p)))))
            return -1;
        snprintf(env->note + off, sizeof env->note - (size_t)off,
                 "; clipping, ternarizing and packing on %s memory: %s %s %s", be->name, s->net ? "the" : "only the",
                 s->use_allgather ? "codes" : "ternary values", s->net ? "go device to device" : "cross to the host");
    }
    return 0;
}

/* --transport nccl: the ternary values of every rank summed into s->d_acc (allgather of the codes,
 * added on the device) or, on the int8 ring's side of P, into s->d_t8 in place (the device's int8
 * allreduce); which one is returned */
static const int8_t *sum_ternary_dev(tern_state *s, dt_mode_env *env, int p, dt_times *t)
{
    dt_backend *be = env->be;
    double t0 = dt_now();
    if (s->use_allgather ? be->net_allgather(be, s->net, s->d_codes, s->code_bytes, s->d_all_codes) != 0
                         : be->net_allreduce_i8(be, s->net, s->d_t8, s->d_tern) != 0)
        return NULL;
    if (be->net_wait(be, s->net, comm_timeout(env->comm)) != 0) return NULL;
    double t1 = dt_now(), sent = (double)(p - 1) * (double)s->code_bytes, recv = sent;
    t->comm += t1 - t0;
    /* as the host's allgather or int8 ring would send them: NCCL does not say */
    if (!s->use_allgather) ring_i8_bytes(s->d_tern, p, comm_rank(env->comm), &sent, &recv);
    t->bytes_sent += sent;
    t->bytes_recv += recv;
    if (!s->use_allgather) return s->d_t8;
    if (be->tern_sum(be, s->d_all_codes, p, s->code_bytes, s->d_tern, s->d_acc) != 0) return NULL;
    t->decode += dt_now() - t1;
    return s->d_acc;
}

/* the key of this rank's coins at iteration it (each tensor's: rng_hash(key, its index)) */
static uint64_t coin_key(const dt_mode_env *env, long it, int rank)
{
    return rng_hash(rng_hash(env->seed, 0x7e49), (uint64_t)it * 65537u + (uint64_t)rank);
}

/* scaler sharing: every rank's scalers (s->scal) gathered, the maximum of each into s->all_scal's
 * first row */
static int share_scalers(tern_state *s, dt_mode_env *env, int p, dt_times *t)
{
    if (ring_allgather(env->comm, s->scal, sizeof(float) * (size_t)s->n_tern, s->all_scal, t) != 0) return -1;
    for (int j = 0; j < s->n_tern; j++) {
        float m = s->all_scal[j];
        for (int r = 1; r < p; r++) m = fmaxf(m, s->all_scal[(size_t)r * (size_t)s->n_tern + (size_t)j]);
        s->all_scal[j] = m;
    }
    return 0;
}

/* the ternary values summed over ranks into s->acc: from this rank's codes in s->codes (allgather),
 * or its values already in s->acc (int8 ring) */
static int sum_ternary(tern_state *s, dt_mode_env *env, int p, dt_times *t)
{
    if (!s->use_allgather) return ring_allreduce_i8(env->comm, s->acc, s->d_tern, s->tmp, t);
    if (ring_allgather(env->comm, s->codes, s->code_bytes, s->all_codes, t) != 0) return -1;
    double t0 = dt_now();
    memset(s->acc, 0, s->d_tern);
    for (int r = 0; r < p; r++) tern_unpack_add(s->all_codes + (size_t)r * s->code_bytes, s->d_tern, s->acc);
    t->decode += dt_now() - t0;
    return 0;
}

/* tern_end on a device that codes itself: the scalers' sums, the ternary values and their codes are
 * made in the device's memory, only the codes (or the int8 values) cross to the host, and the int8
 * sums come back (a quarter of the fp32 gradient); fp32 tensors travel as on the host */
static int tern_end_dev(tern_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    const dt_arena *a = &env->arena;
    dt_backend *be = env->be;
    int p = mode_ranks(env), me = comm_rank(env->comm), k;
    double t0 = dt_now();
    if (s->n_tern && be->tern_stats(be, a->g, s->st_off, s->st_n, s->n_tern, s->st_sum, s->st_sq, s->st_mx) != 0)
        return -1;
    for (k = 0; k < s->n_tern; k++)
        s->scal[k] = tern_scaler_of(s->st_sum[k], s->st_sq[k], s->st_mx[k], s->st_n[k], env->opts.clip);
    t->encode += dt_now() - t0;
    if (share_scalers(s, env, p, t) != 0) return -1;
    double t1 = dt_now();
    uint64_t key = coin_key(env, it->it, me);
    k = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        if (!s->tern[i]) continue;
        const dt_param *tp = a->tensors[i];
        if (be->tern_encode(be, a->g + tp->offset, tp->n, s->scal[k], s->all_scal[k], rng_hash(key, (uint64_t)i),
                            s->d_t8 + s->tern_at[i]) != 0)
            return -1;
        k++;
    }
    const int8_t *sums = s->d_acc; /* the ternary sums on the device, once they are there */
    if (s->use_allgather && be->tern_pack(be, s->d_t8, s->d_tern, s->d_codes) != 0) return -1;
    if (s->net) {
        if (be->sync(be) != 0) return -1;
        t->encode += dt_now() - t1;
        if (s->d_tern && !(sums = sum_ternary_dev(s, env, p, t))) return -1;
    } else {
        if (s->use_allgather ? be->to_host(be, s->codes, s->d_codes, s->code_bytes) != 0
                             : be->to_host(be, s->acc, s->d_t8, s->d_tern) != 0)
            return -1;
        t->encode += dt_now() - t1;
        if (sum_ternary(s, env, p, t) != 0) return -1;
    }
    /* fp32 tensors: their ranges pulled, a plain allreduce, pushed back */
    size_t off = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (!s->tern[i]) {
            const dt_param *tp = a->tensors[i];
            if (mode_pull(&env->gh, tp->offset, tp->n, &t->encode) != 0) return -1;
            memcpy(s->fp32 + off, env->gh.host + tp->offset, tp->n * sizeof(float));
            off += tp->n;
        }
    if (s->d_fp32 && ring_allreduce(s->ring, s->fp32, s->d_fp32, t) != 0) return -1;
    double t3 = dt_now();
    if (!s->net && s->d_tern && be->to_device(be, s->d_acc, s->acc, s->d_tern) != 0) return -1;
    k = 0, off = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const dt_param *tp = a->tensors[i];
        if (s->tern[i]) {
            if (be->tern_decode(be, sums + s->tern_at[i], tp->n, s->all_scal[k++], a->g + tp->offset) != 0)
                return -1;
        } else {
            memcpy(env->gh.host + tp->offset, s->fp32 + off, tp->n * sizeof(float));
            off += tp->n;
            if (mode_push(&env->gh, tp->offset, tp->n, &t->decode) != 0) return -1;
        }
    }
    t->decode += dt_now() - t3;
    double t4 = dt_now();
    if (optim_step(env->optim, a->w, a->g, it->lr, 0, a->n) != 0) return -1;
    t->update += dt_now() - t4;
    return 0;
}

static int tern_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    tern_state *s = state;
    const dt_arena *a = &env->arena;
    int p = mode_ranks(env), me = comm_rank(env->comm), k;
    float *g = env->gh.host;
    if (it->skip) return 0; /* overflowed (fp16): nothing sent, nothing applied */
    if (s->on_dev) return tern_end_dev(s, env, it, t);
    double t0 = dt_now();

    if (hostbuf_pull(&env->gh, 0, a->n) != 0) return -1;
    /* local scalers (clipped maxima) */
    k = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (s->tern[i]) s->scal[k++] = tern_scaler(g + a->tensors[i]->offset, a->tensors[i]->n, env->opts.clip);
    t->encode += dt_now() - t0;
    if (share_scalers(s, env, p, t) != 0) return -1;
    double t1 = dt_now();
    k = 0;
    uint64_t key = coin_key(env, it->it, me);
    for (int i = 0; i < a->n_tensors; i++) {
        if (!s->tern[i]) continue;
        const dt_param *tp = a->tensors[i];
        /* clip at this rank's c sigma (its own max |clipped g| is scal[k]); coins over the shared scaler */
        tern_ternarize(g + tp->offset, tp->n, s->scal[k], s->all_scal[k], rng_hash(key, (uint64_t)i),
                       s->t8 + s->tern_at[i]);
        k++;
    }
    if (s->use_allgather) tern_pack(s->t8, s->d_tern, s->codes);
    else memcpy(s->acc, s->t8, s->d_tern);
    t->encode += dt_now() - t1;
    if (sum_ternary(s, env, p, t) != 0) return -1;

    /* fp32 tensors: a plain allreduce */
    size_t off = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (!s->tern[i]) {
            memcpy(s->fp32 + off, g + a->tensors[i]->offset, a->tensors[i]->n * sizeof(float));
            off += a->tensors[i]->n;
        }
    if (s->d_fp32 && ring_allreduce(s->ring, s->fp32, s->d_fp32, t) != 0) return -1;

    double t3 = dt_now();
    k = 0;
    off = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const dt_param *tp = a->tensors[i];
        float *gi = g + tp->offset;
        if (s->tern[i]) {
            const int8_t *acc = s->acc + s->tern_at[i];
            const float sc = s->all_scal[k++];
            for (size_t j = 0; j < tp->n; j++) gi[j] = sc * (float)acc[j];
        } else {
            memcpy(gi, s->fp32 + off, tp->n * sizeof(float));
            off += tp->n;
        }
    }
    t->decode += dt_now() - t3;
    if (mode_push(&env->gh, 0, a->n, &t->decode) != 0) return -1;
    double t4 = dt_now();
    if (optim_step(env->optim, a->w, a->g, it->lr, 0, a->n) != 0) return -1;
    t->update += dt_now() - t4;
    return 0;
}

static double tern_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    tern_state *s = state, before = {0}; /* state NULL (--mode auto): the plan alone */
    if (!s) plan(s = &before, env);
    int p = mode_ranks(env);
    dt_codec none;
    codec_create("none", 0, &none);
    double bytes = s->use_allgather ? (double)(p - 1) * (double)s->code_bytes : 2.0 * (p - 1) / p * (double)s->d_tern;
    double steps = s->use_allgather ? (p - 1) : 2.0 * (p - 1);
    /* the scalers' allgather, the codes' allgather (or the int8 ring), the fp32 tensors' ring; plus what
     * the run measures of clipping, ternarizing and packing (t_encode) and unpacking (t_decode) */
    return m->data + m->forward + m->backward + m->sync + m->update + m->encode + m->decode +
           (p - 1) * env->model.alpha + (p - 1) * 4.0 * s->n_tern * env->model.beta + steps * env->model.alpha +
           bytes * env->model.beta + netmodel_ring(&env->model, p, s->d_fp32, &none);
}

/* --mode auto: tern_end's work on scratch data (the best of 3): the scalers, the ternarizing and the
 * packing (encode); the P ranks' codes unpacked (or the int8 sum) and turned back into floats (decode) */
static int tern_calibrate(const dt_mode_env *env, dt_times *cost)
{
    const dt_arena *a = &env->arena;
    tern_state s = {0};
    int p = mode_ranks(env);
    s.tern = calloc((size_t)a->n_tensors + 1, 1);
    s.tern_at = calloc((size_t)a->n_tensors + 1, sizeof *s.tern_at);
    if (!s.tern || !s.tern_at) {
        free(s.tern_at);
        free(s.tern);
        return dt_fail("out of memory");
    }
    plan(&s, env);
    float *g = dt_alloc(sizeof(float) * DT_MAX(a->n, 1));
    int8_t *t8 = dt_alloc(DT_MAX(s.d_tern, 1)), *acc = dt_zalloc(DT_MAX(s.d_tern, 1));
    uint8_t *codes = dt_alloc(DT_MAX(s.code_bytes, 1));
    int rc = g && t8 && acc && codes ? 0 : dt_fail("out of memory");
    for (size_t i = 0; !rc && i < a->n; i++) /* uniform in [-0.5, 0.5) */
        g[i] = (float)((double)(rng_hash(0x7e4, i) >> 11) / 9007199254740992.0 - 0.5);
    cost->encode = cost->decode = 1e30;
    for (int rep = 0; !rc && rep < 3; rep++) {
        double t0 = dt_now();
        for (int i = 0; i < a->n_tensors; i++) {
            const dt_param *tp = a->tensors[i];
            if (!s.tern[i]) continue;
            float sc = tern_scaler(g + tp->offset, tp->n, env->opts.clip);
            tern_ternarize(g + tp->offset, tp->n, sc, sc, rng_hash(0x7e4, (uint64_t)i), t8 + s.tern_at[i]);
        }
        if (s.use_allgather) tern_pack(t8, s.d_tern, codes);
        double t1 = dt_now();
        if (s.use_allgather)
            for (int r = 0; r < p; r++) tern_unpack_add(codes, s.d_tern, acc);
        for (int i = 0; i < a->n_tensors; i++) {
            const dt_param *tp = a->tensors[i];
            if (!s.tern[i]) continue;
            for (size_t j = 0; j < tp->n; j++) g[tp->offset + j] = 1e-3f * (float)acc[s.tern_at[i] + j];
        }
        double t2 = dt_now();
        cost->encode = DT_MIN(cost->encode, t1 - t0), cost->decode = DT_MIN(cost->decode, t2 - t1);
    }
    free(s.tern), free(s.tern_at), dt_free(g), dt_free(t8), dt_free(acc), dt_free(codes);
    return rc;
}

static void tern_finalize(void *state, dt_mode_env *env)
{
    tern_state *s = state;
    if (!s) return;
    if (s->d_t8) env->be->free(env->be, s->d_t8);
    if (s->d_acc) env->be->free(env->be, s->d_acc);
    if (s->d_codes) env->be->free(env->be, s->d_codes);
    if (s->d_all_codes) env->be->free(env->be, s->d_all_codes);
    devnet_close(env->be, s->net);
    free(s->st_off), free(s->st_n), free(s->st_sum), free(s->st_sq), free(s->st_mx);
    mode_env_release(env);
    ring_destroy(s->ring);
    free(s->tern);
    free(s->tern_at);
    dt_free(s->t8);
    dt_free(s->acc);
    dt_free(s->tmp);
    dt_free(s->codes);
    dt_free(s->all_codes);
    dt_free(s->scal);
    dt_free(s->all_scal);
    dt_free(s->fp32);
    free(s);
}

/* --transport nccl where the backend codes TernGrad on its memory and has the collectives for it */
static int tern_device_net(const dt_mode_env *env, char *why, size_t n)
{
    const dt_backend *be = env->arena.be;
    if (tern_dev(be) && be->tern_sum && be->net_allgather && be->net_allreduce_i8) return 1;
    snprintf(why, n, "the %s backend does not code TernGrad on its memory", be->name);
    return 0;
}

static const dt_optdef tern_flags[] = {
    {"Communication", "clip", OPT_DOUBLE, "C", offsetof(dt_comm_opts, clip), 0.01, 1e6, NULL, "2.5", 0, 0,
     "terngrad: clip gradients at C standard deviations of their tensor", NULL},
    {"Communication", "tern-skip-last", OPT_FLAG, NULL, offsetof(dt_comm_opts, tern_skip_last), 0, 0, NULL, NULL, 0, 0,
     "terngrad: send the last layer's gradients in fp32", NULL},
    {"Communication", "tern-min-size", OPT_INT, "N", offsetof(dt_comm_opts, tern_min_size), 0, 1L << 40, NULL, "0", 0,
     0, "terngrad: send tensors of fewer than N values in fp32", NULL},
};

const dt_mode_desc mode_terngrad = {
    .name = "terngrad",
    .help = "TernGrad: per-tensor clipped, stochastically ternarised gradients with shared scalers, 2-bit codes",
    .options = "clip tern-skip-last tern-min-size",
    .flags = tern_flags,
    .n_flags = (int)DT_ARRAY_LEN(tern_flags),
    .init = tern_init,
    .end = tern_end,
    .predict = tern_predict,
    .calibrate = tern_calibrate,
    .device_net = tern_device_net,
    .finalize = tern_finalize,
};
