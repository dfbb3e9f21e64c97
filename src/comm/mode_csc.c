/* csc — coarse-grained sparse communication (GradientFlow, Sun et al. 2019, §V-B).
 *
 * The gradient arena (in the order backward fills it) is cut into chunks of --chunk values. In
 * each iteration every rank allreduces the same "important" chunks, packed into one dense
 * buffer, through dtrain's ring and the codec (fp16 unless --compress says otherwise, as
 * GradientFlow); no indices travel. The other chunks stay local and are kept:
 *   without --momentum-correction: added to the next iteration's gradient (a residual, nothing
 *     lost); the optimizer (momentum, weight decay) then updates with the allreduced chunks and
 *     zeros elsewhere.
 *   with --momentum-correction, GradientFlow Alg. 1 exactly: before the allreduce g = g + hg;
 *     for an important chunk hg = 0, u = hu = m hu + lr g and w = w - u; for another hg = m g and
 *     hu is kept (its weights do not move). Weight decay enters g before all this.
 * Selection for the next iteration (Fig. 18): every rank takes the L1 norm of each chunk of its
 * corrected gradient (for chunks just allreduced, divided by P), the norms are allreduced, and
 * the fraction of chunks with the largest norms (ties to the lower chunk) is important next.
 * The first iteration has no norms and is dense. Warm-up (--sparsity-warmup F): the fraction
 * ramps linearly from 1 to --chunk-ratio over the first F of all iterations.
 * Lazy allreduce (--fusion-bytes θ): important chunks are packed as backward finishes them and
 * allreduced on the communication thread whenever θ bytes are packed.
 * Bytes per rank: the ring over the packed chunks (ratio d values, encoded) and over n_c norms.
 * The gradient and weights are read and written through their host views (env->gh, env->wh):
 * ranges are pulled as chunks are corrected, the result pushed back before the update.
 * On a device that keeps csc's state in its memory (backend.h's csc_pack and csc_fold: the CUDA
 * backend) the residuals, the packing and the fold stay there: the packed buffer is allreduced by
 * the ring on the device (ring_create_on; with --transport nccl from device to device), and only the
 * chunks' norms cross to the host, where they are allreduced by the host's ring and ranked as on the
 * CPU. The arithmetic is chunks.h's, so the bits are the CPU's.
 * Loss scaling (--loss-scale S | dynamic), for fp16 on the wire as GradientFlow's mixed precision:
 * packed values are multiplied by S before the allreduce and the sum divided by S after, so small
 * gradients do not flush to zero in fp16. dynamic: S starts at 65536; a sum that is not finite
 * (the same on every rank) skips the update, keeps every corrected gradient as residual (hg) and
 * halves S; 2000 finite steps in a row double it (PyTorch's GradScaler). Skipped steps are counted
 * in the log (skipped_steps). A fixed S whose sum is not finite (or could saturate fp16) stops
 * the run on every rank with the iteration and the scale.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"
#include "chunks.h"
#include "devnet.h"
#include "mode.h"
#include "ring.h"
#include "schedule.h"
#include "worker.h"

#define MAX_JOBS 64

typedef struct {
    size_t chunk, n_chunks;
    unsigned char *important; /* this iteration's selection */
    int32_t *slot;            /* an important chunk's place among the packed ones (at slot chunk), -1 */
    size_t packed_n;          /* values in the packed buffer */
    size_t next_chunk;        /* chunks before it have been corrected (and packed) */
    size_t sent;              /* packed values handed to an allreduce */
    float *h;                 /* residual (plain) or hg (momentum correction) */
    float *hu;                /* momentum correction: historical update */
    float *pack;
    /* on_dev: h, hu and the packed buffer in the backend's memory (h and hu above: their host views,
     * for checkpoints), the selection there as slot */
    int on_dev;
    dt_backend *be;
    dt_hostbuf hb, hub;
    int32_t *d_slot, *d_flag;
    float *d_norms;
    dt_backend *q;      /* the communication thread's queue (--fusion-bytes) */
    void *net, *bg_net; /* --transport nccl: the device's communicators of ring and bg */
    float *norms;             /* n_chunks */
    float *important_f;       /* the selection as 0/1 floats, for the state */
    int *order;               /* n_chunks, for the selection */
    int dynamic;              /* --loss-scale dynamic */
    float scale;              /* the current loss scale (1: none) */
    float scale_f[2];         /* scale and good steps, as floats for checkpoints */
    float limit;              /* scaled: a value above it could saturate fp16 in the sum of P */
    long good;                /* finite steps since the scale last changed */
    dt_ring *ring, *norm_ring;
    /* lazy allreduce */
    size_t fusion;
    dt_comm *cc;
    dt_ring *bg;
    dt_worker *worker;
    long last_job, n_jobs;
    struct job {
        dt_ring *ring;
        float *x;
        size_t n;
    } jobs[MAX_JOBS];
} csc_state;

static int job_run(void *arg, dt_times *t)
{
    struct job *j = arg;
    return ring_allreduce(j->ring, j->x, j->n, t);
}

static size_t chunk_len(const csc_state *s, size_t n, size_t c)
{
    size_t a = c * s->chunk;
    return a + s->chunk <= n ? s->chunk : n - a;
}

/* lays out the packed buffer for the current selection: chunks in order, so that an important
 * chunk's values start at slot chunk (only the arena's last chunk can be shorter) */
static int layout(csc_state *s, size_t n)
{
    int32_t j = 0;
    s->packed_n = 0;
    for (size_t c = 0; c < s->n_chunks; c++)
        if (s->important[c]) {
            s->slot[c] = j++;
            s->packed_n += chunk_len(s, n, c);
        } else {
            s->slot[c] = -1;
        }
    s->next_chunk = 0;
    s->sent = 0;
    return s->on_dev ? s->be->to_device(s->be, s->d_slot, s->slot, s->n_chunks * sizeof *s->slot) : 0;
}

/* 1 where be keeps csc's state in its memory and its ring runs there with the codec */
static int on_device(const dt_backend *be, const dt_codec *codec)
{
    return !be->host_memory && be->csc_pack && be->csc_fold && be->grad_unscale && ring_can_run_on(be, codec);
}

/* on_dev: the state in the backend's memory, the rings on it (over the device's transport with nccl) */
static int init_on_device(csc_state *s, dt_mode_env *env)
{
    dt_backend *be = env->be;
    size_t n = env->arena.n, nc = s->n_chunks;
    int nccl = env->transport == DT_TRANSPORT_NCCL;
    s->be = be;
    if (hostbuf_alloc(&s->hb, be, DT_MAX(n, 1)) != 0 ||
        (env->opts.momentum_correction && hostbuf_alloc(&s->hub, be, DT_MAX(n, 1)) != 0))
        return -1;
    s->h = s->hb.host, s->hu = env->opts.momentum_correction ? s->hub.host : NULL;
    if (!(s->pack = be->alloc(be, sizeof(float) * DT_MAX(n, 1))) ||
        !(s->d_slot = be->alloc(be, sizeof(int32_t) * nc)) || !(s->d_norms = be->alloc(be, sizeof(float) * nc)) ||
        !(s->d_flag = be->alloc(be, sizeof(int32_t))))
        return -1;
    /* with --fusion-bytes every bucket goes over bg: no ring (and communicator) of the main thread */
    if (!s->fusion && ((nccl && devnet_open(env->comm, be, &s->net) != 0) ||
                       ring_create_on(&s->ring, env->comm, env->codec, n, be, NULL, s->net) != 0))
        return -1;
    if (s->fusion && (backend_queue(be, &s->q) != 0 || (nccl && devnet_open(s->cc, be, &s->bg_net) != 0) ||
                      ring_create_on(&s->bg, s->cc, env->codec, n, be, s->q, s->bg_net) != 0))
        return -1;
    return 0;
}

static size_t n_chunks(const dt_mode_env *env)
{
    size_t c = ((size_t)env->arena.n + (size_t)env->opts.chunk - 1) / (size_t)env->opts.chunk;
    return c ? c : 1;
}

static int csc_init(void **state, dt_mode_env *env)
{
    csc_state *s = calloc(1, sizeof *s);
    size_t n = env->arena.n;
    dt_codec none;
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    s->chunk = (size_t)env->opts.chunk;
    s->n_chunks = n_chunks(env);
    s->important = malloc(s->n_chunks);
    s->slot = malloc(sizeof *s->slot * s->n_chunks);
    s->order = malloc(sizeof *s->order * s->n_chunks);
    s->norms = dt_alloc(sizeof(float) * s->n_chunks);
    if (!s->important || !s->slot || !s->order || !s->norms) return dt_fail("out of memory");
    memset(s->important, 1, s->n_chunks); /* the first iteration has no norms yet: dense */
    s->on_dev = on_device(env->be, &env->codec);
    if (!s->on_dev) {
        s->h = dt_zalloc(sizeof(float) * DT_MAX(n, 1));
        s->pack = dt_alloc(sizeof(float) * DT_MAX(n, 1));
        if (env->opts.momentum_correction) s->hu = dt_zalloc(sizeof(float) * DT_MAX(n, 1));
        if (!s->h || !s->pack || (env->opts.momentum_correction && !s->hu)) return dt_fail("out of memory");
    }
    s->scale = 1.0f;
    /* fp16 on the wire saturates at 65504 instead of overflowing: a value that could take a sum of P
     * there becomes NaN, which every rank's sum then holds, so all of them skip the step together */
    s->limit = env->codec.desc && !strcmp(env->codec.desc->name, "fp16") ? 65504.0f / (float)mode_ranks(env)
                                                                          : INFINITY;
    if (env->opts.loss_scale && !strcmp(env->opts.loss_scale, "dynamic")) s->dynamic = 1, s->scale = 65536.0f;
    else if (env->opts.loss_scale && strcmp(env->opts.loss_scale, "none") != 0)
        s->scale = (float)atof(env->opts.loss_scale);
    codec_create("none", 0, &none); /* the norms: the host's ring (MPI), the CPU's order of sums */
    if (ring_create(&s->norm_ring, env->comm, none, s->n_chunks) != 0) return -1;
    s->last_job = -1;
    if (isfinite(env->opts.fusion_bytes)) {
        s->fusion = DT_MAX((size_t)(env->opts.fusion_bytes / sizeof(float)), 1);
        if (!comm_thread_multiple(env->comm))
            return dt_fail("--fusion-bytes needs an MPI library with MPI_THREAD_MULTIPLE");
        if (mode_comm_thread(env, &s->cc, &s->worker) != 0) return -1;
        env->overlapped = 1;
    }
    if (s->on_dev ? init_on_device(s, env) != 0
                  : s->fusion ? ring_create(&s->bg, s->cc, env->codec, n) != 0
                              : ring_create(&s->ring, env->comm, env->codec, n) != 0)
        return -1;
    if (layout(s, n) != 0) return -1;
    int at = snprintf(env->note, sizeof env->note,
                      "%zu chunks of %zu values, %g of them allreduced (after a %g warm-up)", s->n_chunks, s->chunk,
                      env->opts.chunk_ratio, env->opts.sparsity_warmup);
    if (s->on_dev && at > 0 && (size_t)at + 2 < sizeof env->note) {
        snprintf(env->note + at, sizeof env->note - (size_t)at, "; residuals on %s memory, ", env->be->name);
        at = (int)strlen(env->note);
        ring_note_on(env->be, &env->codec, env->transport, env->note + at, sizeof env->note - (size_t)at);
    }
    return 0;
}

/* corrects (and packs) chunks [next_chunk, c_end): g += h (and wd w with momentum correction) */
static int correct_upto(csc_state *s, dt_mode_env *env, size_t c_end)
{
    float *g = env->gh.host, *w = env->wh.host;
    const float wd = env->opts.momentum_correction ? env->optim->wd : 0.0f;
    const float limit = s->scale != 1.0f ? s->limit : INFINITY; /* a static scale's saturation stops the run */
    size_t a0 = s->next_chunk * s->chunk, a1 = DT_MIN(c_end * s->chunk, env->arena.n);
    if (s->on_dev) {
        if (a1 > a0 && s->be->csc_pack(s->be, env->arena.g, s->hb.dev, env->arena.w, wd, a0, a1, s->chunk, s->d_slot,
                                       s->scale, limit, s->pack) != 0)
            return -1;
        s->next_chunk = c_end;
        return 0;
    }
    if (a1 > a0 &&
        (hostbuf_pull(&env->gh, a0, a1 - a0) != 0 || (wd != 0.0f && hostbuf_pull(&env->wh, a0, a1 - a0) != 0)))
        return -1;
    for (size_t c = s->next_chunk; c < c_end; c++) {
        size_t a = c * s->chunk, len = chunk_len(s, env->arena.n, c);
        chunks_correct(g + a, s->h + a, w + a, wd, len);
        if (s->slot[c] >= 0) chunks_pack(s->pack + (size_t)s->slot[c] * s->chunk, g + a, len, s->scale, limit);
    }
    s->next_chunk = c_end;
    return 0;
}

static int submit(csc_state *s, size_t upto)
{
    struct job *j = &s->jobs[s->n_jobs % MAX_JOBS];
    if (s->n_jobs >= MAX_JOBS && worker_wait(s->worker, s->n_jobs - MAX_JOBS) != 0) return -1;
    if (s->on_dev && s->be->sync(s->be) != 0) return -1; /* packed on be's queue, sent on the thread's */
    j->ring = s->bg;
    j->x = s->pack + s->sent;
    j->n = upto - s->sent;
    s->last_job = worker_submit(s->worker, job_run, j);
    s->n_jobs++;
    s->sent = upto;
    return s->last_job < 0 ? -1 : 0;
}

/* packed values that are final: those of important chunks before next_chunk */
static size_t packed_ready(const csc_state *s, size_t n)
{
    for (size_t c = s->next_chunk; c-- > 0;)
        if (s->slot[c] >= 0) return (size_t)s->slot[c] * s->chunk + chunk_len(s, n, c);
    return 0;
}

static void csc_ready(void *state, dt_mode_env *env, size_t n_ready)
{
    csc_state *s = state;
    if (!s->fusion || mode_ranks(env) == 1) return;
    size_t c_end = n_ready == env->arena.n ? s->n_chunks : n_ready / s->chunk;
    if (c_end <= s->next_chunk || correct_upto(s, env, c_end) != 0) return; /* an error surfaces again in end() */
    size_t r = packed_ready(s, env->arena.n);
    if (r - s->sent >= s->fusion) submit(s, r); /* an error surfaces at the wait in end() */
}

static int by_norm(const void *x, const void *y, void *arg)
{
    const float *nrm = arg;
    int a = *(const int *)x, b = *(const int *)y;
    if (nrm[a] != nrm[b]) return nrm[a] > nrm[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* A scaled sum overflowed: no update this iteration; every corrected gradient (g + h) stays as the
 * residual, the selection stays, the scale halves. The same on every rank (they saw the same sum). */
static int skip_step(csc_state *s, dt_mode_env *env, dt_times *t)
{
    if (s->on_dev ? s->be->copy(s->be, s->hb.dev, env->arena.g, env->arena.n * sizeof(float)) != 0
                  : (memcpy(s->h, env->gh.host, env->arena.n * sizeof(float)), 0))
        return -1;
    s->scale *= 0.5f;
    s->good = 0;
    t->skipped += 1;
    return layout(s, env->arena.n);
}

/* the packed sum unscaled (times inv); *finite: 1 if every value is */
static int unscale(csc_state *s, float inv, int *finite)
{
    if (!s->on_dev) {
        *finite = 1;
        for (size_t i = 0; i < s->packed_n; i++) *finite &= isfinite(s->pack[i] *= inv);
        return 0;
    }
    int32_t flag = 0;
    if (s->be->to_device(s->be, s->d_flag, &flag, sizeof flag) != 0 ||
        s->be->grad_unscale(s->be, s->pack, s->packed_n, inv, s->d_flag) != 0 ||
        s->be->to_host(s->be, &flag, s->d_flag, sizeof flag) != 0)
        return -1;
    *finite = !flag;
    return 0;
}

/* the allreduced chunks back into the gradient, what stays local kept, the norms for next time; with
 * momentum correction the important chunks' update (chunks_fold) */
static int fold(csc_state *s, dt_mode_env *env, float lr)
{
    size_t n = env->arena.n;
    const int mc = env->opts.momentum_correction, p = mode_ranks(env);
    const float m = env->optim->momentum;
    if (s->on_dev)
        return s->be->csc_fold(s->be, env->arena.g, s->hb.dev, mc ? s->hub.dev : NULL, env->arena.w, s->pack,
                               s->d_slot, n, s->chunk, p, m, lr, s->d_norms) != 0 ||
               s->be->to_host(s->be, s->norms, s->d_norms, s->n_chunks * sizeof(float)) != 0
                   ? -1
                   : 0;
    float *g = env->gh.host, *w = env->wh.host;
    if (mc && hostbuf_pull(&env->wh, 0, n) != 0) return -1;
    for (size_t c = 0; c < s->n_chunks; c++) {
        size_t a = c * s->chunk;
        const float *sum = s->slot[c] >= 0 ? s->pack + (size_t)s->slot[c] * s->chunk : NULL;
        s->norms[c] = chunks_fold(g + a, s->h + a, mc ? s->hu + a : NULL, mc ? w + a : NULL, sum, chunk_len(s, n, c), p,
                                  m, lr);
    }
    return mc ? hostbuf_push(&env->wh, 0, n) : hostbuf_push(&env->gh, 0, n);
}

static int csc_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    csc_state *s = state;
    size_t n = env->arena.n;
    int p = mode_ranks(env);
    double t0 = dt_now();

    if (it->skip) { /* overflowed (fp16): what backward sent lands; residuals, selection and scale as they were */
        if (s->fusion && s->last_job >= 0 && worker_wait(s->worker, s->last_job) != 0) return -1;
        if (s->fusion) worker_take_times(s->worker, t);
        return layout(s, n); /* nothing corrected or sent yet for the next iteration */
    }
    if (correct_upto(s, env, s->n_chunks) != 0) return -1;
    t->encode += dt_now() - t0;
    if (p > 1) {
        if (s->fusion) {
            double tw = dt_now();
            if (s->sent < s->packed_n && submit(s, s->packed_n) != 0) return -1;
            if (s->last_job >= 0 && worker_wait(s->worker, s->last_job) != 0) return -1;
            t->wait += dt_now() - tw;
            worker_take_times(s->worker, t);
        } else if (ring_allreduce(s->ring, s->pack, s->packed_n, t) != 0) {
            return -1;
        }
    }

    double t1 = dt_now();
    if (s->scale != 1.0f) { /* unscale; a sum that is not finite skips the update (dynamic scaling) */
        int finite;
        if (unscale(s, 1.0f / s->scale, &finite) != 0) return -1;
        if (!finite && s->dynamic) return skip_step(s, env, t);
        if (!finite) /* the same sum on every rank: all of them stop here */
            return dt_fail("csc: iteration %ld: the sum of the gradients scaled by --loss-scale %s does not fit %s "
                           "(expected a smaller scale, or --loss-scale dynamic, which halves it and skips the step)",
                           it->it, env->opts.loss_scale, env->codec.desc ? env->codec.desc->name : "fp32");
        if (s->dynamic && ++s->good >= 2000) s->scale *= 2.0f, s->good = 0;
    }
    if (fold(s, env, it->lr) != 0) return -1;
    t->decode += dt_now() - t1;

    /* Alg. 1 with momentum correction: the important chunks moved in the fold, through their
     * historical update; else the optimizer, with zeros where the chunks stayed local */
    double t2 = dt_now();
    if (!env->opts.momentum_correction && optim_step(env->optim, env->arena.w, env->arena.g, it->lr, 0, n) != 0)
        return -1;
    t->update += dt_now() - t2;

    /* the next iteration's important chunks: the same on every rank */
    double t3 = dt_now();
    if (p > 1 && ring_allreduce(s->norm_ring, s->norms, s->n_chunks, t) != 0) return -1;
    double t_norms = dt_now() - t3; /* in t_comm (the ring's), not in the selection's t_encode */
    double ratio = chunk_ratio_at(env->opts.chunk_ratio, env->opts.sparsity_warmup, it->it + 1, env->total_iters);
    size_t n_sel = (size_t)llround(ratio * (double)s->n_chunks);
    if (n_sel < 1) n_sel = 1;
    for (size_t c = 0; c < s->n_chunks; c++) s->order[c] = (int)c;
    if (n_sel < s->n_chunks) qsort_r(s->order, s->n_chunks, sizeof *s->order, by_norm, s->norms);
    memset(s->important, 0, s->n_chunks);
    for (size_t j = 0; j < n_sel; j++) s->important[s->order[j]] = 1;
    if (layout(s, n) != 0) return -1;
    t->encode += dt_now() - t3 - t_norms;
    t->density += (double)s->packed_n / (double)n; /* of the next iteration, close enough for a log */
    return 0;
}

/* on_dev: the residuals (and historical updates) from the device to their host views, or back (push) */
static int state_views(const csc_state *s, size_t n, int push)
{
    int (*move)(const dt_hostbuf *, size_t, size_t) = push ? hostbuf_push : hostbuf_pull;
    return move(&s->hb, 0, n) != 0 || (s->hu && move(&s->hub, 0, n) != 0) ? -1 : 0;
}

/* the selection for the first resumed iteration, from the checkpoint */
static int csc_restored(void *state, dt_mode_env *env, long it0)
{
    csc_state *s = state;
    (void)it0;
    for (size_t c = 0; c < s->n_chunks; c++) s->important[c] = s->important_f[c] != 0.0f;
    if (s->dynamic) {
        if (!(s->scale_f[0] > 0.0f) || !isfinite(s->scale_f[0]) || !(s->scale_f[1] >= 0.0f))
            return dt_fail("the checkpoint's loss scale %g is not a positive number", (double)s->scale_f[0]);
        s->scale = s->scale_f[0], s->good = (long)s->scale_f[1];
    }
    if (s->on_dev && state_views(s, env->arena.n, 1) != 0) return -1;
    return layout(s, env->arena.n);
}

static double csc_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    (void)state;
    int p = mode_ranks(env);
    dt_codec none;
    codec_create("none", 0, &none);
    size_t sel = (size_t)(env->opts.chunk_ratio * (double)env->arena.n);
    /* GradientFlow §3.2: compute, the chunk norms' allreduce, the selected chunks' allreduce, plus
     * what the run measures of the correction, the selection and the packing (t_encode) and the
     * unpacking and the norms (t_decode); before a run (--mode auto) csc_calibrate's */
    return m->data + m->forward + m->backward + m->sync + m->update + m->encode + m->decode +
           netmodel_ring(&env->model, p, sel, &env->codec) + netmodel_ring(&env->model, p, n_chunks(env), &none);
}

/* --mode auto: csc_end's passes over the arena, timed on scratch data (the best of 3): the correction
 * g += h, the packing of the selected values and the sort of the chunks' norms (encode); the
 * unpacking, the chunks' L1 norms and the residual of the rest (decode) */
static int csc_calibrate(const dt_mode_env *env, dt_times *cost)
{
    size_t n = DT_MAX(env->arena.n, 1), nc = n_chunks(env), chunk = (size_t)env->opts.chunk;
    size_t sel = DT_MIN((size_t)(env->opts.chunk_ratio * (double)n), n);
    float *g = dt_zalloc(sizeof(float) * 3 * n), *norms = dt_zalloc(sizeof(float) * nc);
    int *order = malloc(sizeof *order * nc);
    if (!g || !norms || !order) {
        dt_free(g), dt_free(norms), free(order);
        return dt_fail("out of memory");
    }
    float *h = g + n, *pack = h + n;
    cost->encode = cost->decode = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = dt_now();
        for (size_t i = 0; i < n; i++) g[i] += h[i];
        memcpy(pack, g, sel * sizeof(float));
        for (size_t c = 0; c < nc; c++) norms[c] = (float)(rng_hash(0xc5c, c) >> 40), order[c] = (int)c;
        qsort_r(order, nc, sizeof *order, by_norm, norms);
        double t1 = dt_now();
        memcpy(g, pack, sel * sizeof(float));
        for (size_t c = 0; c < nc; c++) {
            size_t a = c * chunk;
            norms[c] = chunks_l1(g + a, DT_MIN(chunk, n - a));
        }
        memcpy(h + sel, g + sel, (n - sel) * sizeof(float));
        double t2 = dt_now();
        cost->encode = DT_MIN(cost->encode, t1 - t0), cost->decode = DT_MIN(cost->decode, t2 - t1);
    }
    dt_free(g), dt_free(norms), free(order);
    return 0;
}

static int csc_list_state(void *state, dt_mode_env *env, dt_state_tensor *out, int max)
{
    csc_state *s = state;
    int n = 0;
    if (!s->important_f && !(s->important_f = dt_alloc(sizeof(float) * s->n_chunks))) return -1;
    if (s->on_dev && state_views(s, env->arena.n, 0) != 0) return -1;
    for (size_t c = 0; c < s->n_chunks; c++) s->important_f[c] = s->important[c];
    if (n < max) {
        snprintf(out[n].name, sizeof out[n].name, env->opts.momentum_correction ? "hg" : "residual");
        out[n].data = s->h;
        out[n++].n = env->arena.n;
    }
    if (s->hu && n < max) {
        snprintf(out[n].name, sizeof out[n].name, "hu");
        out[n].data = s->hu;
        out[n++].n = env->arena.n;
    }
    if (n < max) {
        snprintf(out[n].name, sizeof out[n].name, "important");
        out[n].data = s->important_f;
        out[n++].n = s->n_chunks;
    }
    if (s->dynamic && n < max) { /* the dynamic loss scale and its count of finite steps */
        s->scale_f[0] = s->scale, s->scale_f[1] = (float)s->good;
        snprintf(out[n].name, sizeof out[n].name, "loss_scale");
        out[n].data = s->scale_f;
        out[n++].n = 2;
    }
    return n;
}

static void csc_finalize(void *state, dt_mode_env *env)
{
    csc_state *s = state;
    if (!s) return;
    mode_env_release(env);
    worker_destroy(s->worker);
    ring_destroy(s->bg);
    ring_destroy(s->ring);
    ring_destroy(s->norm_ring);
    if (s->on_dev) {
        devnet_close(env->be, s->bg_net);
        devnet_close(env->be, s->net);
        backend_queue_free(env->be, s->q);
        hostbuf_free(&s->hb);
        hostbuf_free(&s->hub);
        for (void **b = (void *[]){s->pack, s->d_slot, s->d_norms, s->d_flag}, **e = b + 4; b < e; b++)
            if (*b) env->be->free(env->be, *b);
    } else {
        dt_free(s->h);
        dt_free(s->hu);
        dt_free(s->pack);
    }
    if (s->cc) comm_free(s->cc);
    free(s->important);
    free(s->slot);
    free(s->order);
    dt_free(s->norms);
    dt_free(s->important_f);
    free(s);
}

static void csc_describe(const dt_mode_env *env, char *buf, size_t n)
{
    const char *ls = env->opts.loss_scale;
    int scaled = ls && strcmp(ls, "none") != 0, lazy = isfinite(env->opts.fusion_bytes);
    char parts[3][64] = {"", "", ""};
    const char *sep = " (";
    size_t at = 0;
    if (env->opts.momentum_correction) snprintf(parts[0], sizeof parts[0], "momentum correction");
    if (scaled) snprintf(parts[1], sizeof parts[1], "loss scale %s", ls);
    if (lazy) snprintf(parts[2], sizeof parts[2], "lazy allreduce every %.0f bytes", env->opts.fusion_bytes);
    buf[0] = 0;
    for (int i = 0; i < 3 && at < n; i++) {
        if (!parts[i][0]) continue;
        at += (size_t)snprintf(buf + at, n - at, "%s%s", sep, parts[i]);
        sep = ", ";
    }
    if (at && at < n) snprintf(buf + at, n - at, ")");
}

static int check_loss_scale(const char *v, const char *origin)
{
    if (!strcmp(v, "none") || !strcmp(v, "dynamic")) return 0;
    double x = strtod(v, NULL);
    if (dt_is_decimal(v, 0) && x >= 1 && x <= 16777216) return 0;
    return dt_fail("%s: expected none, dynamic or a scale in [1, 2^24] (a power of two keeps the sums exact), found "
                   "'%s'",
                   origin, v);
}

/* --transport nccl where csc's state can live on the device and its ring run there with the codec */
static int csc_device_net(const dt_mode_env *env, char *why, size_t n)
{
    if (on_device(env->arena.be, &env->codec)) return 1;
    snprintf(why, n, "the %s backend does not keep csc's chunks on its memory with codec %s", env->arena.be->name,
             env->codec.desc->name);
    return 0;
}

static const dt_optdef csc_flags[] = {
    {"Communication", "chunk", OPT_INT, "N", offsetof(dt_comm_opts, chunk), 1, 1 << 30, NULL, "32768", 0, 0,
     "csc: values per chunk", NULL},
    {"Communication", "chunk-ratio", OPT_DOUBLE, "R", offsetof(dt_comm_opts, chunk_ratio), 1e-6, 1, NULL, "0.1", 0, 0,
     "csc: fraction of chunks allreduced each iteration", NULL},
    {"Communication", "loss-scale", OPT_STRING, "S|dynamic", offsetof(dt_comm_opts, loss_scale), 0, 0, NULL, "none", 0,
     0, "csc: scale the packed gradients by S for their fp16 transfer (dynamic: as PyTorch's GradScaler)",
     check_loss_scale},
    {"Communication", "sparsity-warmup", OPT_DOUBLE, "F", offsetof(dt_comm_opts, sparsity_warmup), 0, 1, NULL, "0", 0,
     0, "csc: ramp from dense to --chunk-ratio over the first F of all iterations", NULL},
};

const dt_mode_desc mode_csc = {
    .name = "csc",
    .help = "coarse-grained sparse communication: the same important chunks, packed, allreduced densely",
    .options = "chunk chunk-ratio loss-scale sparsity-warmup momentum-correction fusion-bytes compute-nice compress "
               "compress-block",
    .default_compress = "fp16",
    .flags = csc_flags,
    .n_flags = (int)DT_ARRAY_LEN(csc_flags),
    .describe = csc_describe,
    .init = csc_init,
    .grad_ready = csc_ready,
    .end = csc_end,
    .predict = csc_predict,
    .calibrate = csc_calibrate,
    .state = csc_list_state,
    .restored = csc_restored,
    .finalize = csc_finalize,
    .device_net = csc_device_net,
};
