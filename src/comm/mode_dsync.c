/* dsync — decentralised synchronous SGD (Pipe-SGD §2, "D-Sync"): every rank allreduces the sum
 * of all gradients, then every rank applies the same optimizer step, so the weights stay
 * identical without a parameter server. The local gradients are already scaled by
 * 1/(global batch), so the sum is the mean over the global batch even when ranks hold
 * different numbers of samples (an uneven split). */
#include "../util.h"
#include "mode.h"

static int dsync_init(void **state, dt_mode_env *env)
{
    (void)env;
    *state = NULL;
    return 0;
}

static int dsync_step(void *state, dt_mode_env *env, float lr, dt_times *t)
{
    (void)state;
    double t0 = dt_now();
    size_t n = env->arena.n;
    int p = comm_size(env->comm);
    if (p > 1) {
        if (comm_allreduce_sum_f32(env->comm, env->arena.g, n) != 0) return -1;
        /* what a ring allreduce moves per rank, the usual accounting (Pipe-SGD eq. 2) */
        t->bytes_sent += 2.0 * (p - 1) / p * (double)n * sizeof(float);
        t->bytes_recv += 2.0 * (p - 1) / p * (double)n * sizeof(float);
    }
    double t1 = dt_now();
    optim_step(env->optim, env->arena.w, env->arena.g, lr, 0, n);
    t->comm += t1 - t0;
    t->update += dt_now() - t1;
    return 0;
}

static void dsync_finalize(void *state, dt_mode_env *env) { (void)state, (void)env; }

const dt_mode_desc mode_dsync = {
    .name = "dsync",
    .help = "decentralised synchronous SGD: allreduce of the gradient arena, same update on every rank",
    .init = dsync_init,
    .step = dsync_step,
    .finalize = dsync_finalize,
};
