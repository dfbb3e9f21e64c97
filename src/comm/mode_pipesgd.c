/* pipesgd — Pipe-SGD (Li et al. 2018, Alg. 1): a compute thread and a communication thread per
 * rank, with iteration dependency K (--pipeline-depth, default 2):
 *
 *   compute, iteration t: wait until the aggregated gradient of t-K is ready, apply it
 *                         (w[t] = w[t-1] - lr * gsum[t-K]), forward and backward on batch t,
 *                         hand g[t] to the communication thread
 *   communication:        ring-allreduce g[t] (compressed with --compress), mark gsum[t] ready
 *
 * so the update uses a gradient K-1 iterations stale and communication hides behind compute.
 * The aggregated gradients of the K iterations before the pipeline starts are zero: those
 * iterations apply no update. Warm-up (--warmup-epochs E): the first E epochs run as D-Sync
 * (allreduce, then update, within the iteration); the pipeline starts at the first iteration of
 * epoch E. After the last iteration, flush applies the gradients still in flight, in order, at
 * the last learning rate, so every computed gradient reaches the final weights.
 * The learning rate of an update (--stale-lr): the applying iteration's (apply, the default), or
 * the one of the iteration that computed the gradient (compute, as Pipe-SGD's Alg. 1 writes it:
 * w -= lr_t' g_t' for the stale t'), flush included; they differ only under a schedule.
 *
 * Gradient buffers: K slots of the arena's size; backward of iteration t writes slot t mod K,
 * which held gsum[t-K] until begin(t) applied it. Each slot is backend memory with a host view:
 * the compute thread copies the gradient to the host before handing it over (a no-op on the
 * CPU), the communication thread allreduces the host copy, and the sum goes back before the
 * update. On a device that codes itself (the CUDA backend's codecs) the communication thread
 * allreduces the slot where it is instead, on a queue of its own (a CUDA stream), and only encoded
 * segments cross to the host (ring_create_on).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "mode.h"
#include "ring.h"
#include "worker.h"

typedef struct {
    int k;
    long start;         /* first pipelined iteration (after warm-up) */
    dt_hostbuf *slot;   /* k gradient buffers (backend memory) and their host views */
    int *pending;       /* the slot holds a gradient not applied yet */
    int *on_host;       /* the slot's sum is in its host view (allreduced, or restored), not on the device */
    float *pending_f;   /* the same as 0/1 floats, for checkpoints */
    int lr_computed;    /* --stale-lr compute */
    float *slot_lr;     /* the learning rate of the iteration whose gradient the slot holds */
    long *job;          /* job id of its allreduce on the communication thread, -1: none (1 rank) */
    long *job_it;       /* the iteration it belongs to */
    dt_comm *cc;
    dt_ring *ring;
    dt_worker *worker;
    int on_dev;    /* the ring runs on the slots in the backend's memory (ring_create_on) */
    dt_backend *q; /* then: the communication thread's queue */
    void *net;     /* --transport nccl: the device communicator of the communication thread's ring */
    struct job {
        dt_ring *ring;
        float *x;
        size_t n;
    } *jobs; /* one per slot */
} pipe_state;

static int job_run(void *arg, dt_times *t)
{
    struct job *j = arg;
    return ring_allreduce(j->ring, j->x, j->n, t);
}

static int pipe_init(void **state, dt_mode_env *env)
{
    pipe_state *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    env->overlapped = 1;
    s->k = env->opts.pipeline_depth;
    s->start = (long)ceil(env->opts.warmup_epochs * (double)env->iters_per_epoch);
    if (!comm_thread_multiple(env->comm))
        return dt_fail("--mode pipesgd needs an MPI library with MPI_THREAD_MULTIPLE");
    s->slot = calloc((size_t)s->k, sizeof *s->slot);
    s->job = malloc(sizeof *s->job * (size_t)s->k);
    s->pending = calloc((size_t)s->k, sizeof *s->pending);
    s->on_host = calloc((size_t)s->k, sizeof *s->on_host);
    s->job_it = malloc(sizeof *s->job_it * (size_t)s->k);
    s->jobs = calloc((size_t)s->k, sizeof *s->jobs);
    s->pending_f = calloc((size_t)s->k, sizeof *s->pending_f);
    s->slot_lr = calloc((size_t)s->k, sizeof *s->slot_lr);
    s->lr_computed = env->opts.stale_lr && !strcmp(env->opts.stale_lr, "compute");
    if (!s->slot || !s->job || !s->pending || !s->on_host || !s->job_it || !s->jobs || !s->pending_f || !s->slot_lr)
        return dt_fail("out of memory");
    for (int i = 0; i < s->k; i++) {
        s->job[i] = -1;
        if (hostbuf_alloc(&s->slot[i], env->be, env->arena.n) != 0) return -1;
    }
    if (mode_comm_thread(env, &s->cc, &s->worker) != 0) return -1;
    /* on a device that codes itself the ring runs on the slots: only encoded segments leave it */
    s->on_dev = ring_can_run_on(env->be, &env->codec);
    if (!s->on_dev) return ring_create(&s->ring, s->cc, env->codec, env->arena.n);
    ring_note_on(env->be, &env->codec, env->transport, env->note, sizeof env->note);
    if (backend_queue(env->be, &s->q) != 0) return -1;
    if (env->transport == DT_TRANSPORT_NCCL && devnet_open(s->cc, env->be, &s->net) != 0) return -1;
    return ring_create_on(&s->ring, s->cc, env->codec, env->arena.n, env->be, s->q, s->net);
}

/* Waits for the allreduce in slot i, if one is pending there, and applies it at learning rate lr
 * (or, with --stale-lr compute, at the rate of the iteration that computed it). */
static int apply_slot(pipe_state *s, dt_mode_env *env, int i, float lr, dt_times *t)
{
    if (!s->pending[i]) return 0;
    if (s->lr_computed) lr = s->slot_lr[i];
    double t0 = dt_now();
    if (s->job[i] >= 0 && worker_wait(s->worker, s->job[i]) != 0) return -1;
    double t1 = dt_now();
    t->wait += t1 - t0;
    if (s->on_host[i] && mode_push(&s->slot[i], 0, env->arena.n, &t->decode) != 0) return -1;
    s->on_host[i] = 0;
    t1 = dt_now();
    if (optim_step(env->optim, env->arena.w, s->slot[i].dev, lr, 0, env->arena.n) != 0) return -1;
    s->pending[i] = 0;
    t->update += dt_now() - t1;
    return 0;
}

static int pipe_begin(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    pipe_state *s = state;
    int i = (int)(it->it % s->k);
    /* this iteration's slot holds gsum[it-K]; nothing in the first K pipelined iterations */
    if (it->it >= s->start && apply_slot(s, env, i, it->lr, t) != 0) return -1;
    env->arena.g = s->slot[i].dev;
    return 0;
}

static int pipe_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    pipe_state *s = state;
    int i = (int)(it->it % s->k);
    struct job *j = &s->jobs[i];
    if (it->skip) { /* overflowed (fp16): this gradient goes nowhere; its slot stays free */
        s->pending[i] = 0;
        s->job[i] = -1;
        return 0;
    }
    s->pending[i] = 1;
    s->job_it[i] = it->it;
    s->slot_lr[i] = it->lr;
    s->job[i] = -1; /* one rank: the sum is the gradient itself */
    s->on_host[i] = 0;
    if (mode_ranks(env) > 1) {
        if (s->on_dev) { /* backward's gradient final on the device for the communication queue */
            double t0 = dt_now();
            if (env->be->sync(env->be) != 0) return -1;
            t->encode += dt_now() - t0;
        } else {
            if (mode_pull(&s->slot[i], 0, env->arena.n, &t->encode) != 0) return -1;
            s->on_host[i] = 1;
        }
        j->ring = s->ring;
        j->x = s->on_dev ? s->slot[i].dev : s->slot[i].host;
        j->n = env->arena.n;
        if ((s->job[i] = worker_submit(s->worker, job_run, j)) < 0) return -1;
    }
    if (it->it < s->start && apply_slot(s, env, i, it->lr, t) != 0) return -1; /* warm-up: D-Sync */
    worker_take_times(s->worker, t);
    return 0;
}

static int pipe_flush(void *state, dt_mode_env *env, float lr, dt_times *t)
{
    pipe_state *s = state;
    for (;;) { /* what is in flight, oldest first */
        int oldest = -1;
        for (int i = 0; i < s->k; i++)
            if (s->pending[i] && (oldest < 0 || s->job_it[i] < s->job_it[oldest])) oldest = i;
        if (oldest < 0) break;
        if (apply_slot(s, env, oldest, lr, t) != 0) return -1;
    }
    worker_take_times(s->worker, t);
    return 0;
}

/* the slots (aggregated gradients in flight, their allreduces finished) and which are pending */
static int pipe_list_state(void *state, dt_mode_env *env, dt_state_tensor *out, int max)
{
    pipe_state *s = state;
    int n = 0;
    for (int i = 0; i < s->k; i++) {
        if (s->pending[i] && s->job[i] >= 0 && worker_wait(s->worker, s->job[i]) != 0) return -1;
        if (s->pending[i] && !s->on_host[i]) { /* one rank: the gradient is still on the device only */
            if (hostbuf_pull(&s->slot[i], 0, env->arena.n) != 0) return -1;
            s->on_host[i] = 1;
        }
        s->pending_f[i] = (float)s->pending[i];
    }
    for (int i = 0; i < s->k && n < max; i++, n++) {
        snprintf(out[n].name, sizeof out[n].name, "slot%d", i);
        out[n].data = s->slot[i].host;
        out[n].n = env->arena.n;
    }
    if (n < max) {
        snprintf(out[n].name, sizeof out[n].name, "pending");
        out[n].data = s->pending_f;
        out[n++].n = (size_t)s->k;
    }
    if (s->lr_computed && n < max) { /* the rates the slots will be applied at */
        snprintf(out[n].name, sizeof out[n].name, "slot_lr");
        out[n].data = s->slot_lr;
        out[n++].n = (size_t)s->k;
    }
    return n;
}

static int pipe_restored(void *state, dt_mode_env *env, long it0)
{
    pipe_state *s = state;
    (void)env;
    for (int i = 0; i < s->k; i++) {
        s->pending[i] = s->pending_f[i] != 0.0f;
        s->on_host[i] = s->pending[i]; /* the checkpoint wrote the host views */
        s->job[i] = -1; /* the sums are complete */
        /* the iteration slot i last held: the latest t < it0 with t = i (mod K) */
        long t = it0 - 1 - (((it0 - 1 - i) % s->k) + s->k) % s->k;
        s->job_it[i] = t;
        if (s->pending[i] && t < 0) return dt_fail("the checkpoint's Pipe-SGD slots do not fit iteration %ld", it0);
    }
    return 0;
}

static double pipe_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    (void)state;
    /* Pipe-SGD eq. 4/5: the slower of compute and communication (at the link's back-to-back rate when
     * communication is the slower, since then the link never idles), or the CPU both need where the
     * communication thread shares the compute threads' cores. The compute phases measured beside
     * the communication thread include the time it took from them, so compute is its threads' CPU
     * time (the rank's less the communication thread's) where that is known. */
    int p = mode_ranks(env);
    double comp = m->data + m->forward + m->backward + m->update;
    double comp_cpu = mode_comp_cpu(m, comp);
    double lanes = env->model.cores > 0 && env->model.cores < env->threads ? env->model.cores : env->threads;
    if (m->cpu_comm > 0 && lanes > 0 && comp_cpu / lanes < comp) comp = comp_cpu / lanes;
    double comm = netmodel_ring_paced(&env->model, p, env->arena.n, &env->codec, comp);
    return netmodel_overlap(&env->model, env->threads, comp, comp_cpu, comm,
                            netmodel_ring_cpu(&env->model, p, env->arena.n, &env->codec));
}

static void pipe_finalize(void *state, dt_mode_env *env)
{
    pipe_state *s = state;
    if (!s) return;
    mode_env_release(env);
    worker_destroy(s->worker);
    ring_destroy(s->ring);
    devnet_close(env->be, s->net);
    backend_queue_free(env->be, s->q);
    if (s->cc) comm_free(s->cc);
    for (int i = 0; s->slot && i < s->k; i++) hostbuf_free(&s->slot[i]);
    free(s->slot);
    free(s->job);
    free(s->pending);
    free(s->on_host);
    free(s->pending_f);
    free(s->slot_lr);
    free(s->job_it);
    free(s->jobs);
    free(s);
}

static void pipe_describe(const dt_mode_env *env, char *buf, size_t n)
{
    const dt_comm_opts *o = &env->opts;
    snprintf(buf, n, " (K = %ld, %g warm-up epoch%s as D-Sync%s)", o->pipeline_depth, o->warmup_epochs,
             o->warmup_epochs == 1 ? "" : "s",
             o->stale_lr && !strcmp(o->stale_lr, "compute") ? ", stale gradients at their own learning rate" : "");
}

static const dt_optdef pipe_flags[] = {
    {"Communication", "pipeline-depth", OPT_INT, "K", offsetof(dt_comm_opts, pipeline_depth), 1, 16, NULL, "2", 0, 0,
     "pipesgd: iteration t applies the aggregated gradient of t-K", NULL},
    {"Communication", "stale-lr", OPT_CHOICE, "apply|compute", offsetof(dt_comm_opts, stale_lr), 0, 0, "apply|compute",
     "apply", 0, 0,
     "pipesgd: a stale gradient's learning rate: the applying iteration's, or that of the iteration that computed it",
     NULL},
    {"Communication", "warmup-epochs", OPT_DOUBLE, "E", offsetof(dt_comm_opts, warmup_epochs), 0, 1e6, NULL, "0", 0,
     0, "pipesgd: run the first E epochs as D-Sync", NULL},
};

const dt_mode_desc mode_pipesgd = {
    .name = "pipesgd",
    .help = "Pipe-SGD: the allreduce of iteration t runs on a communication thread while t+1 computes; "
            "updates use the gradient of t-K",
    .options = "pipeline-depth stale-lr warmup-epochs compute-nice compress compress-block",
    .flags = pipe_flags,
    .n_flags = (int)DT_ARRAY_LEN(pipe_flags),
    .describe = pipe_describe,
    .init = pipe_init,
    .begin = pipe_begin,
    .end = pipe_end,
    .flush = pipe_flush,
    .predict = pipe_predict,
    .state = pipe_list_state,
    .restored = pipe_restored,
    .device_net = mode_ring_device_net,
    .finalize = pipe_finalize,
};
