/* dsync — decentralised synchronous SGD (Pipe-SGD §2, "D-Sync"): every rank allreduces the
 * gradient arena (dtrain's ring, compressed with --compress), then every rank applies the same
 * optimizer step, so the weights stay identical without a parameter server. Local gradients are
 * already scaled by 1/(global batch), so the sum is the mean over the global batch even when
 * ranks hold different numbers of samples.
 *
 * Lazy allreduce (GradientFlow §3.1, --fusion-bytes θ): backward fills the arena from its start
 * (the last layer's gradients first); whenever θ bytes beyond what was sent are final, they are
 * allreduced on the communication thread while backward goes on. After backward the rest goes,
 * and the compute thread waits (t_wait) before the update. θ = inf: one allreduce after
 * backward, in the compute thread.
 * The gradient goes through its host view (env->gh): with a device backend each range is copied
 * to the host before it is sent and the sum back before the update (counted as encode and decode).
 * Except where the device codes itself (the CUDA backend's codecs): then the ring runs on the
 * device's arena and only encoded segments cross to the host (ring_create_on); the communication
 * thread's allreduces run on a queue of their own (a CUDA stream), beside backward's kernels.
 * With --transport nccl nothing crosses to the host: the ring's encoded segments go from device to
 * device, and without a codec the sum is NCCL's allreduce (lazily, per --fusion-bytes bucket).
 *
 * --allreduce mpi: the same sums by the MPI library's own MPI_Allreduce (fp32, no codec), the
 * baseline the papers compare against; its bytes are counted as a ring allreduce of fp32 would
 * send them (the library does not report its own).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu.h"
#include "../util.h"
#include "mode.h"
#include "ring.h"
#include "worker.h"

#define MAX_JOBS 64

typedef struct {
    dt_ring *ring;
    int mpi;       /* --allreduce mpi */
    int on_dev;    /* the ring runs on the backend's memory (ring_create_on): no staging of the arena */
    size_t fusion; /* values per fused allreduce; 0: no fusion */
    /* fusion */
    dt_comm *cc;
    dt_backend *q; /* on_dev: the communication thread's queue */
    void *net, *bg_net; /* --transport nccl: the device communicators of ring and bg */
    dt_ring *bg;
    dt_worker *worker;
    size_t sent;
    long last_job;
    struct job {
        dt_ring *ring;
        dt_comm *c; /* --allreduce mpi: MPI_Allreduce on c instead of the ring */
        float *x;
        size_t n;
    } jobs[MAX_JOBS];
    long n_jobs;
} dsync_state;

/* The sum of x over all ranks by the MPI library; bytes as the ring (fp32) would send them. */
static int mpi_allreduce(dt_comm *c, dt_ring *as, float *x, size_t n, dt_times *t)
{
    double t0 = dt_now();
    if (comm_allreduce_sum_f32(c, x, n) != 0) return -1;
    if (t) {
        t->comm += dt_now() - t0;
        t->bytes_sent += ring_bytes_sent(as, n);
        t->bytes_recv += ring_bytes_sent(as, n);
    }
    return 0;
}

static int job_run(void *arg, dt_times *t)
{
    struct job *j = arg;
    return j->c ? mpi_allreduce(j->c, j->ring, j->x, j->n, t) : ring_allreduce(j->ring, j->x, j->n, t);
}

static int dsync_init(void **state, dt_mode_env *env)
{
    dsync_state *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    s->last_job = -1;
    s->mpi = env->opts.allreduce && strcmp(env->opts.allreduce, "mpi") == 0;
    /* on a device that codes itself the ring runs on the arena: only encoded segments leave it */
    s->on_dev = !s->mpi && ring_can_run_on(env->be, &env->codec);
    int nccl = env->transport == DT_TRANSPORT_NCCL;
    if (isfinite(env->opts.fusion_bytes)) {
        s->fusion = (size_t)(env->opts.fusion_bytes / sizeof(float));
        if (s->fusion == 0) s->fusion = 1;
        if (!comm_thread_multiple(env->comm))
            return dt_fail("--fusion-bytes needs an MPI library with MPI_THREAD_MULTIPLE");
        if (mode_comm_thread(env, &s->cc, &s->worker) != 0) return -1;
        if (s->on_dev ? backend_queue(env->be, &s->q) != 0 || (nccl && devnet_open(s->cc, env->be, &s->bg_net) != 0) ||
                            ring_create_on(&s->bg, s->cc, env->codec, env->arena.n, env->be, s->q, s->bg_net) != 0
                      : ring_create(&s->bg, s->cc, env->codec, env->arena.n) != 0)
            return -1;
        env->overlapped = 1;
    }
    if (s->on_dev) ring_note_on(env->be, &env->codec, env->transport, env->note, sizeof env->note);
    if (s->fusion) return 0; /* every bucket goes over bg: no ring (and communicator) of the main thread */
    if (s->on_dev) {
        if (nccl && devnet_open(env->comm, env->be, &s->net) != 0) return -1;
        return ring_create_on(&s->ring, env->comm, env->codec, env->arena.n, env->be, NULL, s->net);
    }
    return ring_create(&s->ring, env->comm, env->codec, env->arena.n);
}

static int submit(dsync_state *s, dt_mode_env *env, size_t upto)
{
    struct job *j = &s->jobs[s->n_jobs % MAX_JOBS];
    if (s->n_jobs >= MAX_JOBS && worker_wait(s->worker, s->n_jobs - MAX_JOBS) != 0) return -1; /* slot free */
    /* the range must be final where the communication thread reads it: on the host, or on the device
     * for its own queue */
    if ((s->on_dev ? env->be->sync(env->be) : hostbuf_pull(&env->gh, s->sent, upto - s->sent)) != 0) return -1;
    j->ring = s->bg;
    j->c = s->mpi ? s->cc : NULL;
    j->x = (s->on_dev ? env->arena.g : env->gh.host) + s->sent;
    j->n = upto - s->sent;
    s->last_job = worker_submit(s->worker, job_run, j);
    s->n_jobs++;
    s->sent = upto;
    return s->last_job < 0 ? -1 : 0;
}

static void dsync_ready(void *state, dt_mode_env *env, size_t n_ready)
{
    dsync_state *s = state;
    if (!s->fusion || mode_ranks(env) == 1) return;
    if (n_ready - s->sent >= s->fusion) submit(s, env, n_ready); /* an error surfaces at the wait in end() */
}

static int dsync_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    dsync_state *s = state;
    size_t n = env->arena.n;
    if (it->skip) { /* overflowed (fp16): what backward sent lands, nothing is applied */
        if (s->fusion && s->last_job >= 0 && worker_wait(s->worker, s->last_job) != 0) return -1;
        if (s->fusion) worker_take_times(s->worker, t);
        s->sent = 0;
        return 0;
    }
    if (mode_ranks(env) > 1) {
        if (s->fusion) {
            double t0 = dt_now();
            if (s->sent < n && submit(s, env, n) != 0) return -1;
            if (s->last_job >= 0 && worker_wait(s->worker, s->last_job) != 0) return -1;
            t->wait += dt_now() - t0;
            worker_take_times(s->worker, t);
            s->sent = 0;
        } else {
            if (!s->on_dev && mode_pull(&env->gh, 0, n, &t->encode) != 0) return -1;
            double c0 = cpu_thread_seconds(); /* for the timing model: the allreduce's CPU */
            if ((s->mpi      ? mpi_allreduce(env->comm, s->ring, env->gh.host, n, t)
                 : s->on_dev ? ring_allreduce(s->ring, env->arena.g, n, t)
                             : ring_allreduce(s->ring, env->gh.host, n, t)) != 0)
                return -1;
            t->cpu_comm += cpu_thread_seconds() - c0;
        }
        if (!s->on_dev && mode_push(&env->gh, 0, n, &t->decode) != 0) return -1;
    }
    double t1 = dt_now();
    if (optim_step(env->optim, env->arena.w, env->arena.g, it->lr, 0, n) != 0) return -1;
    t->update += dt_now() - t1;
    return 0;
}

static double dsync_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    (void)state;
    /* Pipe-SGD eq. 2, with its synchronisation time S: what the slowest rank's compute adds. When
     * the allreduce outlasts compute the link idles only briefly between allreduces, and delivers
     * what it does back to back (beta_busy: 2 ranks on 1 Gbit/s, -17% with beta). */
    int p = mode_ranks(env);
    double comp = m->data + m->forward + m->backward + m->update;
    double t = comp + m->sync + netmodel_ring_paced(&env->model, p, env->arena.n, &env->codec, comp);
    /* Where ranks share cores (tools/netem's hosts), no faster than the CPU the rank needs for its
     * compute (measured: the rank's CPU less the allreduce's) and its allreduce (modelled) over its
     * share of the cores: 4 ranks on 2 cores without a codec, -10 to -22% without this term */
    if (env->model.cores > 0 && env->model.cores < env->threads) {
        double cpu = mode_comp_cpu(m, comp) + netmodel_ring_cpu(&env->model, p, env->arena.n, &env->codec);
        t = DT_MAX(t, cpu / env->model.cores);
    }
    return t;
}

static void dsync_finalize(void *state, dt_mode_env *env)
{
    dsync_state *s = state;
    if (!s) return;
    mode_env_release(env);
    worker_destroy(s->worker);
    ring_destroy(s->bg);
    ring_destroy(s->ring);
    devnet_close(env->be, s->bg_net);
    devnet_close(env->be, s->net);
    backend_queue_free(env->be, s->q);
    if (s->cc) comm_free(s->cc);
    free(s);
}

static int dsync_device_net(const dt_mode_env *env, char *why, size_t n)
{
    if (env->opts.allreduce && strcmp(env->opts.allreduce, "mpi") == 0) {
        snprintf(why, n, "--allreduce mpi sums with the MPI library");
        return 0;
    }
    return mode_ring_device_net(env, why, n);
}

static void dsync_describe(const dt_mode_env *env, char *buf, size_t n)
{
    int mpi = env->opts.allreduce && strcmp(env->opts.allreduce, "mpi") == 0;
    const char *how = mpi ? "MPI_Allreduce" : "allreduce";
    if (isfinite(env->opts.fusion_bytes)) snprintf(buf, n, " (lazy %s every %.0f bytes)", how, env->opts.fusion_bytes);
    else if (mpi) snprintf(buf, n, " (%s of %s)", how, comm_library());
}

static const dt_optdef dsync_flags[] = {
    {"Communication", "allreduce", OPT_CHOICE, "ring|mpi", offsetof(dt_comm_opts, allreduce), 0, 0, "ring|mpi", "ring",
     0, 0, "dsync: sum gradients on dtrain's ring (with --compress) or with the MPI library's own MPI_Allreduce (fp32)",
     NULL},
};

const dt_mode_desc mode_dsync = {
    .name = "dsync",
    .help = "decentralised synchronous SGD: ring allreduce of the gradients, the same update on every rank",
    .options = "allreduce fusion-bytes compute-nice compress compress-block",
    .flags = dsync_flags,
    .n_flags = (int)DT_ARRAY_LEN(dsync_flags),
    .init = dsync_init,
    .grad_ready = dsync_ready,
    .end = dsync_end,
    .describe = dsync_describe,
    .predict = dsync_predict,
    .device_net = dsync_device_net,
    .finalize = dsync_finalize,
};
