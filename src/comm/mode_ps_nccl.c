/* ps over a device's transport: the parameter server's pushes, sums and weights on the device's memory
 * (mode_ps.c is the mode; mode_ps.h what its files share).
 *
 * Over a device's transport (--transport nccl; bulk-synchronous) nothing crosses to the host: a
 * worker packs and encodes each message on the device and sends it; the server receives every
 * worker's, adds them in worker order on the device (the codec's decode-add: the same sums),
 * updates and sends its part's weights to each worker, message by message, which receives them at
 * once. The weights equal the host path's bit for bit; no receipts travel (NCCL orders the
 * transfers between two ranks). --ps-messages range sends a message per range there too; with
 * --ps-wait-free a worker packs and encodes a message on the device as soon as backward has made
 * it and its communication thread sends it over a communicator of its own (made over cc) from a
 * queue of its own (a stream beside compute's; the encoding was synced before), which
 * the server receives the pushes on; a worker's pushes have all gone before its weights come, so
 * one communicator carries traffic at a time. With --staleness above 0 a worker's communication
 * thread sends its pushes and then receives the next version into a slot of its own (one job per
 * iteration, in order, on that communicator), while the worker goes on computing; begin() takes the
 * freshest version that has arrived, waiting only for one the bound needs, as over MPI. The server
 * receives and sends on the same communicator, in worker order (every worker's thread is waiting for
 * its version by the time the server has all pushes, so no send waits for long). Under --ps-apply
 * each a server takes pushes in the order they come, which NCCL, whose receives name their peer and
 * cannot be tested one by one, cannot tell it: the worker's thread first sends every server a byte
 * over MPI (cc, the push's tag), the server waits for those as it waits for pushes over MPI, and
 * receives the push of the worker whose byte came, applies it and answers it as over MPI (the
 * worker's thread waits for the answer after its push). The answers go from a thread of the
 * server's own over a third communicator (ac): a send over NCCL waits for its receive, and a
 * worker receives its servers' answers one after the other once all its pushes have gone, so a
 * server that answered from its loop could wait for a worker that waits to push to another server
 * that waits for its own answer to be taken (two servers deadlocked so). The thread's sends wait
 * only for workers whose pushes have gone; the loop waits only for pushes whose byte has come,
 * which the worker sends next.
 */
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "devnet.h"
#include "mode_ps.h"
#include "ring.h"

int ps_net_open(ps_state *s, dt_mode_env *env)
{
    dt_backend *be = env->be;
    size_t most = 0;
    /* a worker's pushes: per slot under staleness (its thread may still send one while it encodes the next) */
    int n_msg = env->is_worker ? s->n_servers * (s->thread_pulls ? s->slots : 1) : s->n_workers;
    int n_w = env->is_worker ? s->n_servers : 1;
    for (int k = 0; k < s->n_servers; k++) most = DT_MAX(most, s->place->total[k]);
    s->kind = ring_wire_kind(&env->codec);
    if (devnet_open(env->comm, be, &s->net) != 0) return -1;
    if (s->cc && devnet_open(s->cc, be, &s->bg_net) != 0) return -1; /* every rank: it is collective */
    if (s->ac && devnet_open(s->ac, be, &s->ans_net) != 0) return -1;
    s->last_net_job = s->last_answer = -1;
    /* a push job per slot: under staleness the thread may still hold the last iteration's */
    if (s->thread && !(s->net_jobs = calloc((size_t)(s->m_total * s->slots), sizeof *s->net_jobs)))
        return dt_fail("out of memory");
    if ((s->thread || s->answerer) && backend_queue(be, &s->q) != 0) return -1;
    if (s->answerer) {
        s->d_reply = calloc((size_t)s->n_workers, sizeof *s->d_reply);
        s->answers = calloc((size_t)s->n_workers, sizeof *s->answers);
        s->answer_id = malloc((size_t)s->n_workers * sizeof *s->answer_id);
        if (!s->d_reply || !s->answers || !s->answer_id) return dt_fail("out of memory");
        for (int w = 0; w < s->n_workers; w++) {
            s->answer_id[w] = -1;
            if (!(s->d_reply[w] = be->alloc(be, DT_MAX(s->place->total[s->server], 1) * sizeof(float)))) return -1;
        }
    }
    s->d_msg = calloc((size_t)n_msg, sizeof *s->d_msg);
    s->d_w = calloc((size_t)n_w, sizeof *s->d_w);
    if (!s->d_msg || !s->d_w) return dt_fail("out of memory");
    if (!(s->d_part = be->alloc(be, DT_MAX(most, 1) * sizeof(float)))) return -1;
    for (int q = 0; q < n_msg; q++)
        if (!(s->d_msg[q] = be->alloc(be, s->enc_total[env->is_worker ? q % s->n_servers : s->server] + 1))) return -1;
    for (int k = 0; k < n_w; k++)
        if (!(s->d_w[k] = be->alloc(be, DT_MAX(s->place->total[env->is_worker ? k : s->server], 1) * sizeof(float))))
            return -1;
    if (s->thread_pulls && env->is_worker) {
        s->d_wv = (float ***)ps_grid(s->slots, s->n_servers, sizeof(float *));
        s->pull_job = calloc((size_t)s->slots, sizeof *s->pull_job);
        s->pulls = calloc((size_t)s->slots, sizeof *s->pulls);
        if (!s->d_wv || !s->pull_job || !s->pulls) return dt_fail("out of memory");
        for (int sl = 0; sl < s->slots; sl++)
            for (int k = 0; k < s->n_servers; k++)
                if (!(s->d_wv[sl][k] = be->alloc(be, DT_MAX(s->place->total[k], 1) * sizeof(float)))) return -1;
    }
    return 0;
}

void ps_net_close(ps_state *s, dt_mode_env *env)
{
    dt_backend *be = env->be;
    int n_msg = env->is_worker ? s->n_servers * (s->thread_pulls ? s->slots : 1) : s->n_workers;
    int n_w = env->is_worker ? s->n_servers : 1;
    for (int sl = 0; s->d_wv && sl < s->slots; sl++) {
        for (int k = 0; s->d_wv[sl] && k < s->n_servers; k++)
            if (s->d_wv[sl][k]) be->free(be, s->d_wv[sl][k]);
        free(s->d_wv[sl]);
    }
    free(s->d_wv), free(s->pull_job), free(s->pulls);
    for (int q = 0; s->d_msg && q < n_msg; q++)
        if (s->d_msg[q]) be->free(be, s->d_msg[q]);
    for (int k = 0; s->d_w && k < n_w; k++)
        if (s->d_w[k]) be->free(be, s->d_w[k]);
    if (s->d_part) be->free(be, s->d_part);
    for (int w = 0; s->d_reply && w < s->n_workers; w++)
        if (s->d_reply[w]) be->free(be, s->d_reply[w]);
    free(s->d_msg), free(s->d_w), free(s->net_jobs), free(s->d_reply), free(s->answers), free(s->answer_id);
    backend_queue_free(be, s->q);
    devnet_close(be, s->ans_net);
    devnet_close(be, s->bg_net);
    devnet_close(be, s->net);
}

/* the ranges message j of server k carries, packed into out in the device's memory (or back from in):
 * all of the server's ranges (--ps-messages part) or the j-th; j < 0: all */
int ps_net_pack(const ps_state *s, dt_backend *be, int k, int j, const float *arena, float *out, int back)
{
    int all = j < 0 || s->m_count[k] == 1, first = all ? 0 : j, end = all ? s->place->n_ranges[k] : j + 1;
    for (int i = first; i < end; i++) {
        const dt_range *r = &s->place->ranges[k][i];
        if (be->copy(be, back ? (void *)(arena + r->off) : out, back ? out : arena + r->off, r->n * sizeof(float)) != 0)
            return -1;
        out += r->n;
    }
    return 0;
}

/* one transfer to (send) or from rank `peer`, done when it returns */
static int net_move(ps_state *s, dt_mode_env *env, void *buf, size_t bytes, int peer, int send, dt_times *t)
{
    return devnet_move(env->comm, env->be, s->net, buf, bytes, peer, send, t);
}

/* --ps-wait-free, on the communication thread: one push over the pushes' communicator */
static int net_push_run(void *arg, dt_times *t)
{
    struct net_job *j = arg;
    return devnet_move(j->cc, j->be, j->net, j->buf, j->bytes, j->dst, 1, t);
}

/* --ps-apply each over nccl, on the communication thread: tells every server that this worker's push
 * of iteration it follows (a server applies pushes in the order they come, which NCCL cannot tell it) */
static int net_notice_run(void *arg, dt_times *t)
{
    struct notice_job *n = arg;
    char one = 1;
    (void)t;
    for (int k = 0; k < n->s->n_servers; k++)
        if (comm_send(n->s->cc, &one, 1, ps_server_rank(n->s, k), ps_tag_push(n->it)) != 0) return -1;
    return 0;
}

/* Worker: packs and encodes message j of server k of iteration `it` on the device and sends it (with a
 * communication thread: hands it over). Seconds of packing and encoding go to *enc. */
int ps_net_post(ps_state *s, dt_mode_env *env, long it, int k, int j, double *enc, dt_times *t)
{
    dt_backend *be = env->be;
    size_t n = s->m_n[k][j], bytes = codec_bytes(&env->codec, n);
    float *part = s->d_part + s->m_off[k][j];
    int sl = s->thread_pulls ? (int)(it % s->slots) : 0;
    unsigned char *out = (unsigned char *)s->d_msg[sl * s->n_servers + k] + s->m_enc[k][j];
    double t0 = dt_now();
    int rc = ps_net_pack(s, be, k, j, env->arena.g, part, 0);
    if (rc == 0)
        rc = s->kind ? be->wire_encode(be, s->kind, env->codec.block, part, n, out)
                     : be->copy(be, out, part, n * sizeof(float));
    if (rc != 0 || be->sync(be) != 0) return -1;
    *enc += dt_now() - t0;
    if (!s->thread) return net_move(s, env, out, bytes, ps_server_rank(s, k), 1, t);
    if (s->each && !s->noticed) { /* before the iteration's first push */
        s->notice = (struct notice_job){s, it};
        if (worker_submit(s->thread, net_notice_run, &s->notice) < 0) return -1;
        s->noticed = 1;
    }
    int q = s->m_base[k] + j;
    struct net_job *job = &s->net_jobs[sl * s->m_total + q];
    *job = (struct net_job){s->cc, s->q, s->bg_net, out, bytes, ps_server_rank(s, k)};
    return (s->last_net_job = worker_submit(s->thread, net_push_run, job)) < 0 ? -1 : 0;
}

/* thread_pulls, on the communication thread: version v of every server's part into its slot (under
 * each: the answers, on their own communicator) */
static int net_pull_run(void *arg, dt_times *t)
{
    struct pull_job *p = arg;
    ps_state *s = p->s;
    int sl = (int)(p->v % s->slots);
    for (int k = 0; k < s->n_servers; k++)
        for (int j = 0; j < s->m_count[k]; j++)
            if (devnet_move(s->ac ? s->ac : s->cc, s->q, s->ac ? s->ans_net : s->bg_net,
                            s->d_wv[sl][k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), ps_server_rank(s, k), 0,
                            t) != 0)
                return -1;
    return 0;
}

/* thread_pulls: takes version v (block: waits for it; else only if it has arrived) */
int ps_net_take(ps_state *s, dt_mode_env *env, long v, int block, int *taken)
{
    int sl = (int)(v % s->slots), done = 1;
    *taken = 0;
    if (block ? worker_wait(s->thread, s->pull_job[sl]) : worker_test(s->thread, s->pull_job[sl], &done)) return -1;
    if (!done) return 0;
    for (int k = 0; k < s->n_servers; k++)
        if (ps_net_pack(s, env->be, k, -1, env->arena.w, s->d_wv[sl][k], 1) != 0) return -1;
    s->latest = v;
    *taken = 1;
    return 0;
}

/* a worker with thread_pulls: its thread receives version v once its pushes have gone */
int ps_net_pull(ps_state *s, long v)
{
    struct pull_job *p = &s->pulls[v % s->slots];
    *p = (struct pull_job){s, v};
    if ((s->pull_job[v % s->slots] = worker_submit(s->thread, net_pull_run, p)) < 0) return -1;
    s->posted = v;
    return 0;
}

int ps_net_worker_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    dt_backend *be = env->be;
    if (s->early_failed) return dt_fail_prefix("ps: a wait-free push during backward");
    for (int k = 0; k < s->n_servers; k++)
        for (int j = 0; j < s->m_count[k]; j++)
            if (!s->early[s->m_base[k] + j] && ps_net_post(s, env, it->it, k, j, &t->encode, t) != 0) return -1;
    if (s->thread_pulls) { /* the thread receives version it + 1 after the pushes; begin() takes it */
        if (ps_net_pull(s, it->it + 1) != 0) return -1;
        worker_take_times(s->thread, t);
        t->early += s->early_bytes;
        s->early_bytes = 0;
        return 0;
    }
    if (s->thread) { /* every push has gone before the weights come (one communicator busy at a time) */
        double t0 = dt_now();
        if (s->last_net_job >= 0 && worker_wait(s->thread, s->last_net_job) != 0) return -1;
        t->wait += dt_now() - t0;
        worker_take_times(s->thread, t);
        t->early += s->early_bytes;
        s->early_bytes = 0;
    }
    for (int k = 0; k < s->n_servers; k++) {
        for (int j = 0; j < s->m_count[k]; j++)
            if (net_move(s, env, s->d_w[k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), ps_server_rank(s, k), 0,
                         t) != 0)
                return -1;
        double t0 = dt_now();
        if (ps_net_pack(s, be, k, -1, env->arena.w, s->d_w[k], 1) != 0) return -1;
        t->update += dt_now() - t0;
    }
    return 0;
}

/* server: worker w's push, message by message, device to device (on the pushes' communicator where
 * there is one) */
int ps_net_recv_push(ps_state *s, dt_mode_env *env, int w, dt_times *t)
{
    int k = s->server;
    for (int j = 0; j < s->m_count[k]; j++)
        if (devnet_move(s->bg_net ? s->cc : env->comm, env->be, s->bg_net ? s->bg_net : s->net,
                        (unsigned char *)s->d_msg[w] + s->m_enc[k][j], codec_bytes(&env->codec, s->m_n[k][j]), w, 0,
                        t) != 0)
            return -1;
    return 0;
}

/* server: worker w's push decoded into the packed part d_part (add: added to it) */
int ps_net_decode_push(ps_state *s, dt_mode_env *env, int w, int add)
{
    dt_backend *be = env->be;
    int k = s->server;
    for (int j = 0; j < s->m_count[k]; j++) {
        const unsigned char *msg = (const unsigned char *)s->d_msg[w] + s->m_enc[k][j];
        float *x = s->d_part + s->m_off[k][j];
        size_t n = s->m_n[k][j];
        int rc = s->kind ? be->wire_decode(be, s->kind, env->codec.block, msg, n, x, add)
                 : add   ? be->add(be, x, (const float *)msg, n, 1.0f)
                         : be->copy(be, x, msg, n * sizeof(float));
        if (rc != 0) return -1;
    }
    return 0;
}

/* server: d_part as its ranges' gradient, and an optimizer step on them */
int ps_net_step(ps_state *s, dt_mode_env *env, float lr)
{
    int k = s->server;
    if (ps_net_pack(s, env->be, k, -1, env->arena.g, s->d_part, 1) != 0) return -1;
    for (int i = 0; i < s->place->n_ranges[k]; i++)
        if (optim_step(env->optim, env->arena.w, env->arena.g, lr, s->place->ranges[k][i].off,
                       s->place->ranges[k][i].n) != 0)
            return -1;
    return 0;
}

/* server: its part's weights as packed in d_w[0] to worker w, message by message (under thread_pulls to
 * the worker's thread, on the pushes' communicator) */
static int net_send_weights(ps_state *s, dt_mode_env *env, int w, dt_times *t)
{
    int k = s->server;
    for (int j = 0; j < s->m_count[k]; j++)
        if (devnet_move(s->thread_pulls ? s->cc : env->comm, env->be, s->thread_pulls ? s->bg_net : s->net,
                        s->d_w[0] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), w, 1, t) != 0)
            return -1;
    return 0;
}

int ps_net_server_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    dt_backend *be = env->be;
    int k = s->server;
    size_t n = s->place->total[k];
    for (int w = 0; w < s->n_workers; w++) /* a worker's messages in order, as it sends them */
        if (ps_net_recv_push(s, env, w, t) != 0) return -1;
    double t0 = dt_now();
    if (be->scale(be, s->d_part, 0.0f, n) != 0) return -1;
    for (int w = 0; w < s->n_workers; w++) /* in worker order: the same sum as the host's */
        if (ps_net_decode_push(s, env, w, 1) != 0) return -1;
    if (be->sync(be) != 0) return -1;
    double t1 = dt_now();
    t->decode += t1 - t0;
    /* skipped (fp16 overflowed on a worker): the pushes dropped, the weights as they were */
    if (!it->skip && ps_net_step(s, env, it->lr) != 0) return -1;
    if (ps_net_pack(s, be, k, -1, env->arena.w, s->d_w[0], 0) != 0 || be->sync(be) != 0) return -1;
    t->update += dt_now() - t1;
    for (int w = 0; w < s->n_workers; w++)
        if (net_send_weights(s, env, w, t) != 0) return -1;
    return 0;
}

/* over nccl, on the answers' thread: worker w's answer, message by message */
static int net_answer_run(void *arg, dt_times *t)
{
    struct answer_job *a = arg;
    ps_state *s = a->s;
    int k = s->server;
    for (int j = 0; j < s->m_count[k]; j++)
        if (devnet_move(s->ac, s->q, s->ans_net, s->d_reply[a->w] + s->m_off[k][j], s->m_n[k][j] * sizeof(float),
                        a->w, 1, t) != 0)
            return -1;
    return 0;
}

/* to the worker's thread, which waits for it after its push, from the answers' thread: its last answer
 * to w is in (w received it before its push that this answers) */
int ps_net_answer(ps_state *s, dt_mode_env *env, int w)
{
    if (s->answer_id[w] >= 0 && worker_wait(s->answerer, s->answer_id[w]) != 0) return -1;
    if (ps_net_pack(s, env->be, s->server, -1, env->arena.w, s->d_reply[w], 0) != 0 || env->be->sync(env->be) != 0)
        return -1;
    s->answers[w] = (struct answer_job){s, w};
    s->answer_id[w] = s->last_answer = worker_submit(s->answerer, net_answer_run, &s->answers[w]);
    return s->answer_id[w] < 0 ? -1 : 0;
}

/* over nccl: the bytes the answers' thread has sent, into the next count */
void ps_net_answers_taken(ps_state *s)
{
    dt_times t = {0};
    worker_take_times(s->answerer, &t);
    s->net_bytes += t.bytes_sent;
}
