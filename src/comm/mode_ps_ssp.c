/* ps --ps-apply each: stale-synchronous parallel, a server's optimizer step per push (mode_ps.c is the
 * mode; mode_ps.h what its files share).
 *
 * Stale-synchronous parallel as the thesis builds it (--ps-apply each, after Ho et al. 2013): a
 * server keeps a clock per worker (the pushes it has applied) and applies each push as it arrives,
 * an optimizer step of its own with the server's current learning rate. It answers worker w's
 * push of iteration c with the weights as they are once the slowest clock is >= c + 1 - s: a
 * worker runs at most s iterations ahead of the slowest, and reads every update the server has.
 * The server checks that bound at every push (an internal error if broken). It takes pushes of
 * iterations up to t + s while it waits for the slowest of iteration t. At the end every worker
 * gets the final weights once more, so all hold the same. With s = 0, plain SGD and one worker per
 * step in worker order, the weights equal sum's to rounding; momentum then steps once per push.
 */
#include <stdlib.h>

#include "../util.h"
#include "mode_ps.h"

static long ssp_min_clock(const ps_state *s)
{
    long m = s->clock[0];
    for (int w = 1; w < s->n_workers; w++) m = DT_MIN(m, s->clock[w]);
    return m;
}

/* Posts the receive of each worker's next push, for iterations up to t + s of the run. */
int ps_ssp_receive(ps_state *s, dt_mode_env *env, long t)
{
    int k = s->server, c = s->m_count[k];
    for (int w = 0; w < s->n_workers; w++) {
        long next = s->clock[w];
        if (s->posted_rx[w] || next >= env->total_iters || next > t + env->opts.staleness) continue;
        if (s->net) { /* over nccl: the byte that says the push follows (it is received once this came) */
            for (int j = 1; j < c; j++) s->srv_req[w * c + j] = -1;
            if (comm_irecv(s->cc, s->rbuf[w], 1, w, ps_tag_push(next), &s->srv_req[w * c]) != 0) return -1;
            s->posted_rx[w] = 1;
            continue;
        }
        for (int j = 0; j < c; j++)
            if (comm_irecv(s->cc ? s->cc : env->comm, s->rbuf[w] + s->m_enc[k][j],
                           codec_bytes(&env->codec, s->m_n[k][j]), w, ps_tag_push(next), &s->srv_req[w * c + j]) != 0)
                return -1;
        s->posted_rx[w] = 1;
    }
    return 0;
}

/* Sends worker w the weights as they are now, tagged as the version for its next iteration v. */
static int ssp_answer(ps_state *s, dt_mode_env *env, int w, long v)
{
    int k = s->server, c = s->m_count[k];
    if (s->net) return ps_net_answer(s, env, w);
    for (int j = 0; j < c; j++) {
        int *r = &s->reply_req[w * c + j];
        if (*r >= 0 && comm_wait(env->comm, *r, NULL, NULL) != 0) return -1;
        *r = -1;
    }
    ps_pack(s, k, env->wh.host, s->reply[w]);
    for (int j = 0; j < c; j++)
        if (comm_isend(env->comm, s->reply[w] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), w, ps_tag_pull(v),
                       &s->reply_req[w * c + j]) != 0)
            return -1;
    return 0;
}

/* Applies the push of worker w that has arrived (iteration clock[w]): one optimizer step; none where
 * the step is skipped (fp16: with the train loop's collective on the overflow every iteration, the
 * pushes applied in the server's iteration t are all of iteration t, and skip is t's). */
static int ssp_apply(ps_state *s, dt_mode_env *env, int w, const dt_iter *it, double *td, double *tu)
{
    int k = s->server, c = s->m_count[k];
    long lead = s->clock[w] - ssp_min_clock(s);
    if (lead > env->opts.staleness)
        return dt_fail("internal: ps --ps-apply each: worker %d pushed iteration %ld, %ld ahead of the slowest "
                       "(--staleness %ld)",
                       w, s->clock[w], lead, env->opts.staleness);
    if (it->skip && s->clock[w] != it->it)
        return dt_fail("internal: ps --ps-apply each: a push of iteration %ld in the server's skipped iteration %ld",
                       s->clock[w], it->it);
    if (s->net) { /* the push itself, from device to device, now that its notice came */
        dt_times t = {0};
        if (ps_net_recv_push(s, env, w, &t) != 0) return -1;
        s->net_bytes_recv += t.bytes_recv;
    }
    double t0 = dt_now();
    if (it->skip) {
        s->clock[w]++;
        s->pending[w] = 1;
        return 0;
    }
    if (s->net) {
        if (ps_net_decode_push(s, env, w, 0) != 0) return -1;
        double t1 = dt_now();
        if (ps_net_step(s, env, it->lr) != 0 || env->be->sync(env->be) != 0) return -1;
        *td += t1 - t0;
        *tu += dt_now() - t1;
        s->clock[w]++;
        s->pending[w] = 1;
        return 0;
    }
    for (int j = 0; j < c; j++)
        codec_decode(&env->codec, s->rbuf[w] + s->m_enc[k][j], s->m_n[k][j], s->acc + s->m_off[k][j]);
    double t1 = dt_now();
    ps_unpack(s, k, s->acc, env->gh.host);
    if (ps_stage_part(s, k, &env->gh, 1) != 0) return -1;
    for (int i = 0; i < s->place->n_ranges[k]; i++)
        if (optim_step(env->optim, env->arena.w, env->arena.g, it->lr, s->place->ranges[k][i].off,
                       s->place->ranges[k][i].n) != 0)
            return -1;
    if (ps_stage_part(s, k, &env->wh, 0) != 0) return -1;
    *td += t1 - t0;
    *tu += dt_now() - t1;
    s->clock[w]++;
    s->pending[w] = 1;
    return 0;
}

/* Server, iteration t: applies pushes as they arrive, from any worker and of iterations up to
 * t + s, answering each worker once the slowest is close enough, until every worker has pushed t.
 * Where a pass over the workers finds nothing new, it waits for the next message (comm_wait_any:
 * bounded by --comm-timeout, so a worker that stops ends the job instead of this loop spinning). */
int ps_ssp_server_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    int c = s->m_count[s->server];
    dt_comm *rx = s->cc ? s->cc : env->comm;
    double t0 = dt_now(), td = 0, tu = 0;
    while (ssp_min_clock(s) < it->it + 1) {
        int any = 0, which;
        if (ps_ssp_receive(s, env, it->it) != 0) return -1;
        for (int w = 0; w < s->n_workers; w++) {
            int arrived = s->posted_rx[w];
            for (int j = 0; j < c && arrived; j++) {
                int *r = &s->srv_req[w * c + j], done = 1;
                if (*r >= 0 && comm_test(rx, *r, &done) != 0) return -1;
                if (done) *r = -1;
                else arrived = 0;
            }
            if (!arrived) continue;
            any = 1;
            s->posted_rx[w] = 0;
            if (ssp_apply(s, env, w, it, &td, &tu) != 0) return -1;
            long slowest = ssp_min_clock(s);
            for (int v = 0; v < s->n_workers; v++)
                if (s->pending[v] && slowest >= s->clock[v] - env->opts.staleness) {
                    if (ssp_answer(s, env, v, s->clock[v]) != 0) return -1;
                    s->pending[v] = 0;
                }
        }
        if (any) continue;
        if (comm_wait_any(rx, s->srv_req, s->n_workers * c, &which) != 0) return -1;
        s->srv_req[which] = -1;
    }
    t->decode += td;
    t->update += tu;
    t->comm += dt_now() - t0 - td - tu;
    if (s->answerer) ps_net_answers_taken(s);
    ps_count_bytes(s, env, t);
    return 0;
}

/* Server: every answer sent has been taken (from its loop over MPI, its thread over nccl). */
int ps_ssp_answers_sent(ps_state *s, dt_mode_env *env)
{
    int c = s->m_count[s->server];
    for (int q = 0; q < s->n_workers * c; q++) {
        if (s->reply_req[q] >= 0 && comm_wait(env->comm, s->reply_req[q], NULL, NULL) != 0) return -1;
        s->reply_req[q] = -1;
    }
    if (s->answerer) {
        if (s->last_answer >= 0 && worker_wait(s->answerer, s->last_answer) != 0) return -1;
        ps_net_answers_taken(s);
    }
    return 0;
}

/* Server, at the end: answers still held back go, then every worker gets the final weights. */
int ps_ssp_server_flush(ps_state *s, dt_mode_env *env)
{
    for (int w = 0; w < s->n_workers; w++)
        if (s->pending[w] && ssp_answer(s, env, w, s->clock[w]) != 0) return -1;
    for (int w = 0; w < s->n_workers; w++) {
        s->pending[w] = 0;
        if (ssp_answer(s, env, w, s->clock[w] + 1) != 0) return -1;
    }
    return ps_ssp_answers_sent(s, env);
}

/* Worker, at the end under SSP: the final weights, which every worker receives alike. */
int ps_ssp_worker_flush(ps_state *s, dt_mode_env *env)
{
    long v = s->posted + 1;
    int sl = (int)(v % s->slots), taken;
    for (int k = 0; k < s->n_servers; k++)
        for (int j = 0; j < s->m_count[k]; j++)
            if (comm_irecv(env->comm, s->wbuf[sl][k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float),
                           ps_server_rank(s, k), ps_tag_pull(v), &s->pull_req[sl][s->m_base[k] + j]) != 0)
                return -1;
    s->posted = v;
    return ps_take_version(s, env, v, 1, &taken);
}
