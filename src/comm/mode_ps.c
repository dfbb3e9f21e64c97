/* ps — synchronous parameter server, the baseline of Pipe-SGD ("PS-Sync"), with the thesis's
 * placements and stale-synchronous consistency (Wu 2018, §2.3.1-2.3.2).
 *
 * The last S ranks (--ps-servers) are servers, the others workers. Each server owns parts of the
 * arena (--placement). Every iteration each worker pushes its gradient for each server's part,
 * encoded with --compress; each server sums the workers' parts in worker order, applies the
 * optimizer to its part and sends the new weights (fp32) back to every worker. A server's own
 * link carries all workers' pushes and pulls: the bottleneck this mode exists to show.
 *
 * Consistency (--ps-apply sum): version v of the weights is the result of the updates of iterations
 * < v. Before iteration t a worker needs a version >= t - s (--staleness s); it uses the freshest
 * one that has arrived. s = 0 is bulk-synchronous: the weights equal D-Sync's. Under --ps-apply
 * each a server steps at every push instead (stale-synchronous parallel: mode_ps_ssp.c).
 *
 * Sending the new weights: under BSP a server sends them to one worker after the other, each
 * confirming receipt with one byte, so its link carries one flow at a time and the first workers
 * compute and push while the last still receive: one iteration takes
 *   W b_pull beta + l_comp + b_push beta + serve + 2 W alpha
 * (W workers; b_pull, b_push the bytes per worker of one server's part). Server k begins with
 * worker k W/S, and a worker confirms each server's part as soon as it is in: when every server
 * began with worker 0 and a worker confirmed in server order, the servers went in lockstep, each
 * turn waiting for a worker's whole arena over its one link (4 workers, 2 servers on 1 Gbit/s
 * hosts, the MLP: 98 ms an iteration with q8, 70 ms now). Sent to all at once, TCP
 * shares the link unfairly and the time depends on which flow wins (measured: workers received
 * their weights anywhere from 35 to 87 ms into an 87 ms transfer). With staleness a worker is
 * often computing when its weights arrive, so waiting for its receipt would stall the server:
 * then the weights go to all workers at once.
 *
 * Messages (--ps-messages): one per server and direction (part: the server's ranges packed), or
 * one per range of the placement (range, as the thesis measures its uniform placement: each
 * layer's slice travels alone, paying alpha per layer). Sends and receives of a server are posted
 * in range order with one tag per iteration; MPI keeps their order between two ranks. With a
 * codec that encodes each value alone (none, t16, fp16) both give the same weights bit for bit;
 * q8's scales then cover one range each.
 *
 * Wait-free backprop (--ps-wait-free; the thesis §2.3.2, after Poseidon): a worker packs and encodes
 * each message as soon as backward has made every gradient value it carries (grad_ready) and
 * hands it to its communication thread, which sends the pushes in order on a communicator of
 * their own (Open MPI's TCP moves data only inside MPI calls, so a push posted from the compute
 * thread would wait for its next call); the rest go after backward, through the same thread.
 * The bytes are the same, so are the weights, bit for bit; the log's bytes_early counts what was
 * handed over during backward. With --ps-messages part a server's message waits for the earliest
 * layer it holds (with uniform placement, all of them); range cuts the placement at layer
 * boundaries, which gives wait-free its layer-by-layer pushes. Packing counts as backward.
 *
 * --precision fp16: the servers take part in the train loop's collective decision on an overflow
 * (after the workers' backward) and, where a step is skipped, receive the pushes and drop them: the
 * weights they send back are those of the step before, the optimizer's state is untouched.
 *
 * Over a device's transport (--transport nccl) nothing crosses to the host: mode_ps_nccl.c.
 *
 * Checkpoints (any variant, either transport): between iterations what is in flight lands first
 * (a worker takes every version it has posted a receive for, a server's sends and answers are
 * taken), so rank 0 holds the servers' latest weights under BSP; each server adds its part of the
 * optimizer's momentum, and under --ps-apply each of its weights, newer than a worker's last
 * answer. Bulk-synchronous, a checkpoint changes nothing: the same weights bit for bit.
 *
 * Gradients and weights pass through the arena's host views (env->gh, env->wh): a worker pulls
 * its gradient before packing and pushes the weights it unpacked; a server pushes its summed
 * part before its update and pulls its new weights before sending them.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "devnet.h"
#include "mode_ps.h"
#include "ring.h"

static int server_send_in_turn(ps_state *s, dt_mode_env *env, dt_times *t);

void ps_pack(const ps_state *s, int k, const float *arena, float *out)
{
    for (int i = 0; i < s->place->n_ranges[k]; i++) {
        memcpy(out, arena + s->place->ranges[k][i].off, s->place->ranges[k][i].n * sizeof(float));
        out += s->place->ranges[k][i].n;
    }
}

void ps_unpack(const ps_state *s, int k, const float *in, float *arena)
{
    for (int i = 0; i < s->place->n_ranges[k]; i++) {
        memcpy(arena + s->place->ranges[k][i].off, in, s->place->ranges[k][i].n * sizeof(float));
        in += s->place->ranges[k][i].n;
    }
}

void **ps_grid(int rows, int cols, size_t each)
{
    void **g = calloc((size_t)rows, sizeof *g);
    for (int r = 0; g && r < rows; r++)
        if (!(g[r] = calloc((size_t)cols, each))) return NULL;
    return g;
}

static int ps_roles(dt_mode_env *env)
{
    int p = mode_ranks(env), s = env->opts.ps_servers, me = comm_rank(env->comm);
    if (p < 2 || s >= p)
        return dt_fail("--mode ps with --ps-servers %d needs at least %d ranks (the servers and at least one worker), "
                       "found %d",
                       s, s + 1, p);
    env->n_workers = p - s;
    env->is_worker = me < env->n_workers;
    env->worker_rank = env->is_worker ? me : -1;
    return 0;
}

static int build_messages(ps_state *s, const dt_codec *codec, int per_range)
{
    int k_n = s->n_servers;
    s->m_count = calloc((size_t)k_n, sizeof(int));
    s->m_base = calloc((size_t)k_n, sizeof(int));
    s->m_off = calloc((size_t)k_n, sizeof(size_t *));
    s->m_n = calloc((size_t)k_n, sizeof(size_t *));
    s->m_enc = calloc((size_t)k_n, sizeof(size_t *));
    s->enc_total = calloc((size_t)k_n, sizeof(size_t));
    s->m_end = calloc((size_t)k_n, sizeof(size_t *));
    if (!s->m_count || !s->m_base || !s->m_off || !s->m_n || !s->m_enc || !s->enc_total || !s->m_end)
        return dt_fail("out of memory");
    for (int k = 0; k < k_n; k++) {
        int c = per_range ? DT_MAX(s->place->n_ranges[k], 1) : 1;
        s->m_count[k] = c;
        s->m_base[k] = s->m_total;
        s->m_total += c;
        s->m_off[k] = calloc((size_t)c, sizeof(size_t));
        s->m_n[k] = calloc((size_t)c, sizeof(size_t));
        s->m_enc[k] = calloc((size_t)c, sizeof(size_t));
        s->m_end[k] = calloc((size_t)c, sizeof(size_t));
        if (!s->m_off[k] || !s->m_n[k] || !s->m_enc[k] || !s->m_end[k]) return dt_fail("out of memory");
        size_t off = 0, enc = 0;
        int nr = s->place->n_ranges[k];
        for (int j = 0; j < c; j++) {
            size_t n = per_range && nr > 0 ? s->place->ranges[k][j].n : s->place->total[k];
            const dt_range *last = nr == 0 ? NULL : per_range ? &s->place->ranges[k][j] : &s->place->ranges[k][nr - 1];
            s->m_end[k][j] = last ? last->off + last->n : 0;
            s->m_off[k][j] = off, s->m_n[k][j] = n, s->m_enc[k][j] = enc;
            off += n, enc += codec_bytes(codec, n);
        }
        s->enc_total[k] = enc;
    }
    return 0;
}

static int ps_init(void **state, dt_mode_env *env)
{
    ps_state *s = calloc(1, sizeof *s);
    if (!s) return dt_fail("out of memory");
    *state = s;
    if (mode_env_views(env) != 0) return -1;
    s->n_servers = env->opts.ps_servers;
    s->n_workers = env->n_workers;
    s->me = comm_rank(env->comm);
    s->server = env->is_worker ? -1 : s->me - s->n_workers;
    s->slots = env->opts.staleness + 1;
    s->each = env->opts.ps_apply && strcmp(env->opts.ps_apply, "each") == 0;
    s->in_turn = env->opts.staleness == 0 && !s->each;
    int per_range = strcmp(env->opts.ps_messages, "range") == 0;
    if (placement_build(env->opts.placement, &env->arena, s->n_servers, per_range, &s->place) != 0) return -1;
    if (build_messages(s, &env->codec, per_range) != 0) return -1;
    /* over nccl with staleness or SSP a worker's thread sends and receives while it computes */
    s->thread_pulls = env->transport == DT_TRANSPORT_NCCL && (env->opts.staleness > 0 || s->each);
    if (env->opts.ps_wait_free || s->thread_pulls) { /* every rank: cc is made collectively */
        if (!comm_thread_multiple(env->comm))
            return dt_fail("%s needs an MPI library with MPI_THREAD_MULTIPLE",
                           env->opts.ps_wait_free ? "--ps-wait-free"
                                                  : "ps over --transport nccl with staleness or SSP");
        if (env->is_worker ? mode_comm_thread(env, &s->cc, &s->thread) : comm_dup(env->comm, &s->cc)) return -1;
    }
    if (env->transport == DT_TRANSPORT_NCCL && s->each) { /* the answers' communicator, and their thread */
        if (comm_dup(env->comm, &s->ac) != 0) return -1;
        if (!env->is_worker && worker_create(&s->answerer) != 0) return -1;
    }

    if (env->is_worker) {
        s->wait_free = env->opts.ps_wait_free;
        if (!(s->early = calloc((size_t)s->m_total, 1))) return dt_fail("out of memory");
        if (s->wait_free) {
            s->jobs = (struct push_job **)ps_grid(s->slots, s->m_total, sizeof(struct push_job));
            s->job_id = (long **)ps_grid(s->slots, s->m_total, sizeof(long));
            if (!s->jobs || !s->job_id) return dt_fail("out of memory");
            for (int sl = 0; sl < s->slots; sl++)
                for (int q = 0; q < s->m_total; q++) s->job_id[sl][q] = -1;
        }
        s->pack = calloc((size_t)s->n_servers, sizeof *s->pack);
        s->enc = calloc((size_t)s->slots, sizeof *s->enc);
        s->wbuf = calloc((size_t)s->slots, sizeof *s->wbuf);
        s->push_req = (int **)ps_grid(s->slots, s->m_total, sizeof(int));
        s->pull_req = (int **)ps_grid(s->slots, s->m_total, sizeof(int));
        if (!s->pack || !s->enc || !s->wbuf || !s->push_req || !s->pull_req) return dt_fail("out of memory");
        for (int k = 0; k < s->n_servers; k++)
            if (!(s->pack[k] = dt_alloc(DT_MAX(s->place->total[k], 1) * sizeof(float)))) return -1;
        for (int sl = 0; sl < s->slots; sl++) {
            s->enc[sl] = calloc((size_t)s->n_servers, sizeof(unsigned char *));
            s->wbuf[sl] = calloc((size_t)s->n_servers, sizeof(float *));
            if (!s->enc[sl] || !s->wbuf[sl]) return dt_fail("out of memory");
            for (int j = 0; j < s->m_total; j++) s->push_req[sl][j] = s->pull_req[sl][j] = -1;
            for (int k = 0; k < s->n_servers; k++) {
                if (!(s->enc[sl][k] = dt_alloc(s->enc_total[k] + 1)) ||
                    !(s->wbuf[sl][k] = dt_alloc(DT_MAX(s->place->total[k], 1) * sizeof(float))))
                    return -1;
            }
        }
    } else {
        size_t n = s->place->total[s->server];
        s->rbuf = calloc((size_t)s->n_workers, sizeof *s->rbuf);
        s->srv_req = malloc(sizeof *s->srv_req * (size_t)s->n_workers * (size_t)s->m_count[s->server]);
        s->push_it = -1;
        if (!s->srv_req) return dt_fail("out of memory");
        for (int q = 0; q < s->n_workers * s->m_count[s->server]; q++) s->srv_req[q] = -1;
        s->send = calloc((size_t)s->slots, sizeof *s->send);
        s->send_req = (int **)ps_grid(s->slots, s->n_workers * s->m_count[s->server], sizeof(int));
        if (!s->rbuf || !s->send || !s->send_req || !(s->acc = dt_alloc(DT_MAX(n, 1) * sizeof(float))))
            return dt_fail("out of memory");
        for (int w = 0; w < s->n_workers; w++)
            if (!(s->rbuf[w] = dt_alloc(s->enc_total[s->server] + 1))) return -1;
        if (s->each) {
            int c = s->m_count[s->server];
            s->clock = calloc((size_t)s->n_workers, sizeof *s->clock);
            s->pending = calloc((size_t)s->n_workers, 1);
            s->posted_rx = calloc((size_t)s->n_workers, 1);
            s->reply = calloc((size_t)s->n_workers, sizeof *s->reply);
            s->reply_req = malloc(sizeof *s->reply_req * (size_t)s->n_workers * (size_t)c);
            if (!s->clock || !s->pending || !s->posted_rx || !s->reply || !s->reply_req)
                return dt_fail("out of memory");
            for (int w = 0; w < s->n_workers; w++)
                if (!(s->reply[w] = dt_alloc(DT_MAX(n, 1) * sizeof(float)))) return -1;
            for (int q = 0; q < s->n_workers * c; q++) s->reply_req[q] = -1;
        }
        for (int sl = 0; sl < s->slots; sl++) {
            if (!(s->send[sl] = dt_alloc(DT_MAX(n, 1) * sizeof(float)))) return -1;
            for (int w = 0; w < s->n_workers * s->m_count[s->server]; w++) s->send_req[sl][w] = -1;
        }
    }
    s->sent0 = comm_bytes_sent(env->comm);
    s->recv0 = comm_bytes_recv(env->comm);
    if (env->transport == DT_TRANSPORT_NCCL && ps_net_open(s, env) != 0) return -1;
    if (s->net)
        snprintf(env->note, sizeof env->note, "pushes, sums and weights on %s memory: device to device",
                 env->be->name);
    return 0;
}

/* copies the server k's ranges of a host view to the backend (push) or from it */
int ps_stage_part(const ps_state *s, int k, const dt_hostbuf *h, int push)
{
    for (int i = 0; i < s->place->n_ranges[k]; i++) {
        const dt_range *r = &s->place->ranges[k][i];
        if ((push ? hostbuf_push(h, r->off, r->n) : hostbuf_pull(h, r->off, r->n)) != 0) return -1;
    }
    return 0;
}

/* worker, bulk-synchronous: server k's part of version v is in; the server sends the next worker
 * its weights once it has this receipt */
static int confirm_part(ps_state *s, dt_mode_env *env, int k, long v)
{
    char ack = 1;
    return s->in_turn ? comm_send(env->comm, &ack, 1, ps_server_rank(s, k), ps_tag_ack(v)) : 0;
}

/* worker: version v has arrived from every server (wait for it if `block`); apply it */
int ps_take_version(ps_state *s, dt_mode_env *env, long v, int block, int *taken)
{
    int sl = (int)(v % s->slots), *all = s->pull_req[sl];
    *taken = 0;
    if (block) { /* whichever message comes next: each server's part confirmed as soon as it is in */
        int left = 0, j, k;
        for (int q = 0; q < s->m_total; q++) left += all[q] >= 0;
        for (; left > 0; left--) {
            if (comm_wait_any(env->comm, all, s->m_total, &j) != 0) return -1;
            all[j] = -1;
            for (k = 0; k + 1 < s->n_servers && s->m_base[k + 1] <= j; k++) {}
            int rest = 0;
            for (int q = 0; q < s->m_count[k]; q++) rest += all[s->m_base[k] + q] >= 0;
            if (rest == 0 && confirm_part(s, env, k, v) != 0) return -1;
        }
    } else
        for (int k = 0; k < s->n_servers; k++) {
            int *req = all + s->m_base[k], posted = 0;
            for (int j = 0; j < s->m_count[k]; j++) {
                if (req[j] < 0) continue;
                posted = 1;
                int done;
                if (comm_test(env->comm, req[j], &done) != 0) return -1;
                if (!done) return 0; /* what arrived is released; the rest is tested again later */
                req[j] = -1;
            }
            if (posted && confirm_part(s, env, k, v) != 0) return -1;
        }
    for (int k = 0; k < s->n_servers; k++) ps_unpack(s, k, s->wbuf[sl][k], env->wh.host);
    if (hostbuf_push(&env->wh, 0, env->arena.n) != 0) return -1;
    s->latest = v;
    *taken = 1;
    return 0;
}

void ps_count_bytes(ps_state *s, dt_mode_env *env, dt_times *t)
{
    double a = comm_bytes_sent(env->comm), b = comm_bytes_recv(env->comm);
    if (s->thread) { /* a worker's pushes under --ps-wait-free: counted as handed to its thread */
        t->bytes_sent += s->thread_bytes;
        s->thread_bytes = 0;
    } else if (s->cc) { /* a server's: received on cc, by this thread */
        a += comm_bytes_sent(s->cc), b += comm_bytes_recv(s->cc);
    }
    t->bytes_sent += a - s->sent0 + s->net_bytes;
    t->bytes_recv += b - s->recv0 + s->net_bytes_recv;
    s->net_bytes = s->net_bytes_recv = 0;
    s->sent0 = a;
    s->recv0 = b;
}

static int server_begin(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    int k = s->server, c = s->m_count[k];
    if (s->each) {
        if (!s->started)
            for (int w = 0; w < s->n_workers; w++) s->clock[w] = it->it;
        s->started = 1;
        return ps_ssp_receive(s, env, it->it);
    }
    for (int w = 0; w < s->n_workers; w++)
        for (int j = 0; j < c; j++)
            if (comm_irecv(s->cc ? s->cc : env->comm, s->rbuf[w] + s->m_enc[k][j],
                           codec_bytes(&env->codec, s->m_n[k][j]), w, ps_tag_push(it->it), &s->srv_req[w * c + j]) != 0)
                return -1;
    s->push_it = it->it;
    return server_send_in_turn(s, env, t);
}

static int ps_begin(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    ps_state *s = state;
    int taken;
    int (*take)(ps_state *, dt_mode_env *, long, int, int *) = s->net ? ps_net_take : ps_take_version;
    if (!env->is_worker) return s->net ? 0 : server_begin(s, env, it, t);
    s->cur_it = it->it;
    memset(s->early, 0, (size_t)s->m_total);
    s->early_failed = 0;
    s->noticed = 0;
    if (s->net && !s->thread_pulls) return 0; /* the weights came at the end of the last iteration */
    double t0 = dt_now();
    /* too stale: wait for the next version (SSP: for the answer to the last push; the server holds
     * it back while this worker is too far ahead) */
    while (s->latest < it->it - (s->each ? 0 : env->opts.staleness))
        if (take(s, env, s->latest + 1, 1, &taken) != 0) return -1;
    double t1 = dt_now();
    while (s->latest < s->posted) { /* anything fresher that has already arrived */
        if (take(s, env, s->latest + 1, 0, &taken) != 0) return -1;
        if (!taken) break;
    }
    t->comm += t1 - t0;
    t->update += dt_now() - t1;
    if (s->net) worker_take_times(s->thread, t); /* its thread's transfers */
    else {
        ps_count_bytes(s, env, t);
        if (s->thread) { /* --ps-wait-free: its thread's CPU (its sends overlap backward: not in the split) */
            dt_times th = {0};
            worker_take_times(s->thread, &th);
            t->cpu_comm += th.cpu_comm;
        }
    }
    return 0;
}

/* message j of server k: the gradient values it carries, packed as the server unpacks them */
static void pack_msg(const ps_state *s, int k, int j, const float *arena, float *out)
{
    if (s->m_count[k] == 1) ps_pack(s, k, arena, out);
    else memcpy(out, arena + s->place->ranges[k][j].off, s->m_n[k][j] * sizeof(float));
}

/* copies what message j of server k carries from the backend into the host view */
static int stage_msg(const ps_state *s, int k, int j, const dt_hostbuf *h)
{
    if (s->m_count[k] == 1) return ps_stage_part(s, k, h, 0);
    return hostbuf_pull(h, s->place->ranges[k][j].off, s->place->ranges[k][j].n);
}

/* --ps-wait-free, on the communication thread: one push */
static int push_run(void *arg, dt_times *t)
{
    struct push_job *j = arg;
    double t0 = dt_now();
    if (comm_send(j->cc, j->buf, j->bytes, j->dst, j->tag) != 0) return -1;
    t->comm += dt_now() - t0;
    return 0;
}

/* Worker: packs, encodes and posts message j of server k for iteration `it`, and the receive of
 * its weights for version it + 1. `stage`: copy its values to the host view first (when the
 * whole gradient was not). Seconds spent go to *enc and *comm. */
static int post_msg(ps_state *s, dt_mode_env *env, long it, int k, int j, int stage, double *enc, double *comm)
{
    int sl = (int)(it % s->slots), vs = (int)((it + 1) % s->slots), q = s->m_base[k] + j;
    int *push = &s->push_req[sl][q], *pull = &s->pull_req[vs][q];
    float *packed = s->pack[k] + s->m_off[k][j];
    unsigned char *out = s->enc[sl][k] + s->m_enc[k][j];
    double t0 = dt_now();
    if (*push >= 0 && comm_wait(env->comm, *push, NULL, NULL) != 0) return -1; /* the slot's last push */
    *push = -1;
    if (s->wait_free && s->job_id[sl][q] >= 0 && worker_wait(s->thread, s->job_id[sl][q]) != 0) return -1;
    double t1 = dt_now();
    if (stage && stage_msg(s, k, j, &env->gh) != 0) return -1;
    pack_msg(s, k, j, env->gh.host, packed);
    codec_encode(&env->codec, packed, s->m_n[k][j], out);
    double t2 = dt_now();
    size_t bytes = codec_bytes(&env->codec, s->m_n[k][j]);
    if (s->wait_free) {
        s->jobs[sl][q] = (struct push_job){s->cc, out, bytes, ps_server_rank(s, k), ps_tag_push(it)};
        if ((s->job_id[sl][q] = worker_submit(s->thread, push_run, &s->jobs[sl][q])) < 0) return -1;
        s->thread_bytes += (double)bytes;
    } else if (comm_isend(env->comm, out, bytes, ps_server_rank(s, k), ps_tag_push(it), push) != 0) {
        return -1;
    }
    if (comm_irecv(env->comm, s->wbuf[vs][k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), ps_server_rank(s, k),
                   ps_tag_pull(it + 1), pull) != 0)
        return -1;
    *comm += (t1 - t0) + (dt_now() - t2);
    *enc += t2 - t1;
    return 0;
}

/* --ps-wait-free: during backward, the first n_ready gradient values are final. Hands over every
 * message they complete (a server's messages in order: their ends increase). An error waits for
 * end(). Over NCCL under --ps-apply each, in (server, message) order only: there a server takes
 * one worker's pushes at a time and a send blocks until it is received, so a worker that went to
 * server 1 before its last message to server 0 could wait on server 1 while server 1 waits for
 * another worker that waits on server 0; the same order on every worker makes no such cycle. */
static void ps_ready(void *state, dt_mode_env *env, size_t n_ready)
{
    ps_state *s = state;
    double enc = 0, comm = 0;
    /* the last layer's call comes as backward ends: end() posts the rest */
    if (!env->is_worker || !s->wait_free || s->early_failed || n_ready >= env->arena.n) return;
    for (int k = 0; k < s->n_servers; k++)
        for (int j = 0; j < s->m_count[k]; j++) {
            int q = s->m_base[k] + j;
            if (s->early[q]) continue;
            if (s->m_end[k][j] > n_ready) {
                if (s->net && s->each) return;
                break;
            }
            int rc = s->net ? ps_net_post(s, env, s->cur_it, k, j, &enc, NULL)
                            : post_msg(s, env, s->cur_it, k, j, 1, &enc, &comm);
            if (rc != 0) {
                s->early_failed = 1;
                return;
            }
            s->early[q] = 1;
            s->early_bytes += (double)codec_bytes(&env->codec, s->m_n[k][j]);
        }
}

static int worker_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    int any_early = 0;
    if (s->early_failed) return dt_fail_prefix("ps: a wait-free push during backward");
    for (int q = 0; q < s->m_total; q++) any_early |= s->early[q];
    /* what went out during backward is in flight; the rest goes now, staged at once if all of it */
    if (!any_early && mode_pull(&env->gh, 0, env->arena.n, &t->encode) != 0) return -1;
    for (int k = 0; k < s->n_servers; k++)
        for (int j = 0; j < s->m_count[k]; j++)
            if (!s->early[s->m_base[k] + j] && post_msg(s, env, it->it, k, j, any_early, &t->encode, &t->comm) != 0)
                return -1;
    t->early += s->early_bytes;
    s->early_bytes = 0;
    s->posted = it->it + 1;
    ps_count_bytes(s, env, t);
    return 0;
}

/* Server under BSP: the version packed at the end of the last iteration goes to one worker after
 * the other. Done at the start of the next iteration rather than at the end of the last, so every
 * rank has left the train loop's collectives in between (a worker confirms receipt only once it
 * waits for its weights). */
static int server_send_in_turn(ps_state *s, dt_mode_env *env, dt_times *t)
{
    int k = s->server;
    long v = s->unsent;
    if (!s->in_turn || v == 0) return 0;
    double t0 = dt_now();
    for (int i = 0; i < s->n_workers; i++) {
        /* server k begins with the k-th S-th of the workers: each worker's link then carries one
         * server's flow at a time (all starting with worker 0 they go in lockstep, each turn
         * waiting for the worker's whole arena over its link) */
        int w = (i + k * s->n_workers / s->n_servers) % s->n_workers;
        char ack;
        for (int j = 0; j < s->m_count[k]; j++)
            if (comm_send(env->comm, s->send[v % s->slots] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), w,
                          ps_tag_pull(v)) != 0)
                return -1;
        if (comm_recv(env->comm, &ack, 1, w, ps_tag_ack(v), NULL, NULL) != 0) return -1;
    }
    s->unsent = 0;
    t->comm += dt_now() - t0;
    return 0;
}

static int server_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    size_t n = s->place->total[s->server];
    int sl = (int)((it->it + 1) % s->slots), k = s->server, c = s->m_count[k];
    double tc = 0, td = 0;
    if (s->push_it != it->it) return dt_fail("internal: ps server has no receives posted for iteration %ld", it->it);
    memset(s->acc, 0, n * sizeof(float));
    for (int w = 0; w < s->n_workers; w++) { /* in worker order: the same sum every run */
        for (int j = 0; j < c; j++) {
            double a = dt_now();
            if (comm_wait(s->cc ? s->cc : env->comm, s->srv_req[w * c + j], NULL, NULL) != 0) return -1;
            double b = dt_now();
            codec_decode_add(&env->codec, s->rbuf[w] + s->m_enc[k][j], s->m_n[k][j], s->acc + s->m_off[k][j]);
            tc += b - a;
            td += dt_now() - b;
        }
    }
    double t1 = dt_now();
    if (!it->skip) { /* skipped (fp16 overflowed on a worker): the pushes consumed, the weights as they were */
        ps_unpack(s, s->server, s->acc, env->gh.host);
        if (ps_stage_part(s, s->server, &env->gh, 1) != 0) return -1;
        for (int i = 0; i < s->place->n_ranges[s->server]; i++)
            if (optim_step(env->optim, env->arena.w, env->arena.g, it->lr, s->place->ranges[s->server][i].off,
                           s->place->ranges[s->server][i].n) != 0)
                return -1;
    }
    if (ps_stage_part(s, s->server, &env->wh, 0) != 0) return -1;
    double t2 = dt_now();
    for (int w = 0; w < s->n_workers * c; w++)
        if (s->send_req[sl][w] >= 0 && comm_wait(env->comm, s->send_req[sl][w], NULL, NULL) != 0) return -1;
    ps_pack(s, s->server, env->wh.host, s->send[sl]);
    s->unsent = it->it + 1;
    if (!s->in_turn) /* to every worker at once; in turn, it happens in the next begin (or flush) */
        for (int w = 0; w < s->n_workers; w++)
            for (int j = 0; j < c; j++)
                if (comm_isend(env->comm, s->send[sl] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), w,
                               ps_tag_pull(it->it + 1), &s->send_req[sl][w * c + j]) != 0)
                    return -1;
    t->comm += tc + (dt_now() - t2);
    t->decode += td;
    t->update += t2 - t1;
    s->push_it = -1;
    ps_count_bytes(s, env, t);
    return 0;
}

static int ps_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    ps_state *s = state;
    if (!env->is_worker && s->each) return ps_ssp_server_end(s, env, it, t); /* over either transport */
    if (s->net) return env->is_worker ? ps_net_worker_end(s, env, it, t) : ps_net_server_end(s, env, it, t);
    return env->is_worker ? worker_end(s, env, it, t) : server_end(s, env, it, t);
}

/* Lets everything in flight land: a worker takes every version it has posted a pull for and sees
 * its pushes gone; a server sends the version it has yet to send and sees its sends gone. At the
 * end (final: then, under --ps-apply each, every worker receives the final weights alike) and
 * before a checkpoint, after which the run goes on as if nothing had happened (bulk-synchronous:
 * the same weights bit for bit; with staleness the workers merely waited). */
static int settle(ps_state *s, dt_mode_env *env, int final, dt_times *t)
{
    int taken;
    if (env->is_worker) {
        while (s->latest < s->posted)
            if ((s->net ? ps_net_take : ps_take_version)(s, env, s->latest + 1, 1, &taken) != 0) return -1;
        if (final && s->each &&
            (s->net ? ps_net_pull(s, s->posted + 1) != 0 || ps_net_take(s, env, s->posted, 1, &taken) != 0
                    : ps_ssp_worker_flush(s, env) != 0))
            return -1;
        if (s->net) return 0; /* a push over nccl has gone when its job has */
        for (int sl = 0; sl < s->slots; sl++)
            for (int j = 0; j < s->m_total; j++) {
                if (s->push_req[sl][j] >= 0 && comm_wait(env->comm, s->push_req[sl][j], NULL, NULL) != 0) return -1;
                if (s->job_id && s->job_id[sl][j] >= 0 && worker_wait(s->thread, s->job_id[sl][j]) != 0) return -1;
            }
        for (int sl = 0; sl < s->slots; sl++)
            for (int j = 0; j < s->m_total; j++) s->push_req[sl][j] = -1;
        return 0;
    }
    if (s->net && !s->each) return 0; /* every iteration ended with its weights sent */
    if (server_send_in_turn(s, env, t) != 0) return -1;
    if (s->each && (final ? ps_ssp_server_flush(s, env) : ps_ssp_answers_sent(s, env)) != 0) return -1;
    for (int sl = 0; sl < s->slots; sl++)
        for (int w = 0; w < s->n_workers * s->m_count[s->server]; w++) {
            if (s->send_req[sl][w] >= 0 && comm_wait(env->comm, s->send_req[sl][w], NULL, NULL) != 0) return -1;
            s->send_req[sl][w] = -1;
        }
    return 0;
}

static int ps_flush(void *state, dt_mode_env *env, float lr, dt_times *t)
{
    ps_state *s = state;
    double t0 = dt_now();
    (void)lr;
    if (settle(s, env, 1, t) != 0) return -1;
    if (s->net && env->is_worker) {
        if (s->thread_pulls) {
            t->comm += dt_now() - t0;
            worker_take_times(s->thread, t);
        }
        return 0;
    }
    if (s->net && !s->each) return 0;
    t->comm += dt_now() - t0;
    ps_count_bytes(s, env, t);
    return 0;
}

/* A server's part of backend memory base (the arena's layout) to or from host, packed. */
static int part_copy(const ps_state *s, dt_mode_env *env, float *base, float *host, int to_host)
{
    for (int i = 0; i < s->place->n_ranges[s->server]; i++) {
        const dt_range *r = &s->place->ranges[s->server][i];
        if ((to_host ? env->be->to_host(env->be, host, base + r->off, r->n * sizeof(float))
                     : env->be->to_device(env->be, base + r->off, host, r->n * sizeof(float))) != 0)
            return -1;
        host += r->n;
    }
    return 0;
}

/* Checkpoints: what is in flight lands first, so every worker holds the weights of the iterations
 * done (the checkpoint's, from rank 0); a server adds its part of the momentum. The time and bytes
 * of settling go to the next iteration's count. Under --ps-apply each every clock is at the
 * iterations done (the server's last iteration waited for every worker's push), every answer has
 * gone and been taken; but a worker's weights are those of its last answer, older than the
 * server's by up to --staleness iterations of the others' pushes: a server adds its part of the
 * weights too (a resumed worker starts from rank 0's, as valid a version under the bound). */
static int ps_list_state(void *state, dt_mode_env *env, dt_state_tensor *out, int max)
{
    ps_state *s = state;
    dt_times scratch = {0};
    int n = 0;
    if (settle(s, env, 0, &scratch) != 0) return -1;
    if (env->is_worker) return 0;
    size_t part = s->place->total[s->server];
    if (s->each)
        for (int w = 0; w < s->n_workers; w++)
            if (s->pending[w] || s->clock[w] != s->clock[0])
                return dt_fail("internal: ps --ps-apply each: at a checkpoint worker %d's clock is %ld%s, "
                               "worker 0's %ld",
                               w, s->clock[w], s->pending[w] ? " (its answer held back)" : "", s->clock[0]);
    if (!s->ck && !(s->ck = dt_alloc(2 * DT_MAX(part, 1) * sizeof(float)))) return -1;
    if (env->optim->v && n < max) {
        if (part_copy(s, env, env->optim->v, s->ck, 1) != 0) return -1;
        out[n++] = (dt_state_tensor){"momentum", s->ck, part};
    }
    if (s->each && n < max) {
        if (part_copy(s, env, env->arena.w, s->ck + part, 1) != 0) return -1;
        out[n++] = (dt_state_tensor){"weights", s->ck + part, part};
    }
    return n;
}

/* After a resume: version it0 is in place on every rank (each: the server's clocks start at it0); a
 * server's momentum (and under each its weights) go back. */
static int ps_restored(void *state, dt_mode_env *env, long it0)
{
    ps_state *s = state;
    size_t part;
    s->latest = s->posted = it0;
    if (s->each && !env->is_worker) { /* as the first begin would (a flush may come first: nothing left to train) */
        for (int w = 0; w < s->n_workers; w++) s->clock[w] = it0;
        s->started = 1;
    }
    if (env->is_worker || !s->ck) return 0;
    part = s->place->total[s->server];
    if (env->optim->v && part_copy(s, env, env->optim->v, s->ck, 0) != 0) return -1;
    if (s->each &&
        (part_copy(s, env, env->arena.w, s->ck + part, 0) != 0 || ps_stage_part(s, s->server, &env->wh, 0) != 0))
        return -1;
    return 0;
}

static double ps_predict(void *state, const dt_mode_env *env, const dt_times *m)
{
    ps_state *s = state;
    dt_ps_load l = {.workers = s->n_workers, .servers = s->n_servers, .in_turn = s->in_turn,
                    .all_n = (double)env->arena.n, .all_enc = (double)codec_bytes(&env->codec, env->arena.n)};
    double *part = calloc((size_t)s->n_servers, sizeof *part);
    for (int k = 0; k < s->n_servers; k++) { /* the busiest server: the largest part under the placement */
        double nk = 0.0, ek = 0.0;
        for (int j = 0; j < s->m_count[k]; j++) {
            nk += (double)s->m_n[k][j];
            ek += (double)codec_bytes(&env->codec, s->m_n[k][j]);
        }
        if (part) part[k] = nk;
        if (nk > l.n) l.n = nk, l.enc = ek, l.msgs = s->m_count[k];
    }
    l.part_n = part; /* out of memory: as if every part were the busiest's (an upper bound) */
    /* a worker's loop: its compute and the packing and encoding of its pushes */
    double t = netmodel_ps(&env->model, &l, m->data + m->forward + m->backward + m->encode);
    free(part);
    return t;
}

static void ps_finalize(void *state, dt_mode_env *env)
{
    ps_state *s = state;
    if (!s) return;
    worker_destroy(s->thread); /* its last pushes go before the buffers do */
    worker_destroy(s->answerer);
    if (s->net || s->d_msg) ps_net_close(s, env);
    mode_env_release(env);
    if (env->is_worker && s->enc) {
        for (int sl = 0; sl < s->slots; sl++) {
            for (int k = 0; k < s->n_servers; k++) {
                if (s->enc[sl]) dt_free(s->enc[sl][k]);
                if (s->wbuf[sl]) dt_free(s->wbuf[sl][k]);
            }
            free(s->enc[sl]);
            free(s->wbuf[sl]);
            free(s->push_req[sl]);
            free(s->pull_req[sl]);
        }
        for (int k = 0; s->pack && k < s->n_servers; k++) dt_free(s->pack[k]);
        free(s->pack);
        free(s->enc);
        free(s->wbuf);
        free(s->push_req);
        free(s->pull_req);
    } else if (!env->is_worker && s->rbuf) {
        for (int w = 0; w < s->n_workers; w++) dt_free(s->rbuf[w]);
        for (int sl = 0; sl < s->slots; sl++) {
            dt_free(s->send[sl]);
            free(s->send_req[sl]);
        }
        free(s->rbuf);
        free(s->srv_req);
        for (int w = 0; s->reply && w < s->n_workers; w++) dt_free(s->reply[w]);
        free(s->reply), free(s->reply_req), free(s->clock), free(s->pending), free(s->posted_rx);
        free(s->send);
        free(s->send_req);
        dt_free(s->acc);
        dt_free(s->ck);
    }
    for (int k = 0; k < s->n_servers; k++) {
        if (s->m_off) free(s->m_off[k]);
        if (s->m_n) free(s->m_n[k]);
        if (s->m_enc) free(s->m_enc[k]);
        if (s->m_end) free(s->m_end[k]);
    }
    free(s->m_count), free(s->m_base), free(s->m_off), free(s->m_n), free(s->m_enc), free(s->enc_total);
    free(s->m_end), free(s->early);
    for (int sl = 0; sl < s->slots; sl++) {
        if (s->jobs) free(s->jobs[sl]);
        if (s->job_id) free(s->job_id[sl]);
    }
    free(s->jobs), free(s->job_id);
    if (s->cc) comm_free(s->cc);
    if (s->ac) comm_free(s->ac);
    placement_destroy(s->place);
    free(s);
}

static int ps_device_net(const dt_mode_env *env, char *why, size_t n)
{
    if (!env->arena.be->net_sendrecv || !ring_can_run_on(env->arena.be, &env->codec)) {
        snprintf(why, n, "the %s backend does not run codec %s on its memory", env->arena.be->name,
                 env->codec.desc->name);
        return 0;
    }
    return 1;
}

static void ps_describe(const dt_mode_env *env, char *buf, size_t n)
{
    const dt_comm_opts *o = &env->opts;
    int each = o->ps_apply && strcmp(o->ps_apply, "each") == 0;
    int range = o->ps_messages && strcmp(o->ps_messages, "range") == 0;
    snprintf(buf, n, " (%d worker%s + %ld server%s, %s placement, staleness %ld%s%s%s)", env->n_workers,
             env->n_workers == 1 ? "" : "s", o->ps_servers, o->ps_servers == 1 ? "" : "s", o->placement, o->staleness,
             each ? ", a step per push (SSP)" : "", range ? ", a message per placed range" : "",
             o->ps_wait_free ? ", wait-free backprop" : "");
}

static const dt_optdef ps_flags[] = {
    {"Communication", "ps-servers", OPT_INT, "S", offsetof(dt_comm_opts, ps_servers), 1, 1024, NULL, "1", 0, 0,
     "ps: the last S ranks are parameter servers", NULL},
    {"Communication", "placement", OPT_CHOICE, "HOW", offsetof(dt_comm_opts, placement), 0, 0,
     "uniform|round-robin|greedy", "uniform", 0, 0,
     "ps: how layers are spread over servers: uniform, round-robin or greedy",
     NULL},
    {"Communication", "ps-messages", OPT_CHOICE, "part|range", offsetof(dt_comm_opts, ps_messages), 0, 0, "part|range",
     "part", 0, 0,
     "ps: one message per server and direction (part), or one per placed range, as the thesis measures its uniform "
     "placement (range)",
     NULL},
    {"Communication", "staleness", OPT_INT, "S", offsetof(dt_comm_opts, staleness), 0, 1000, NULL, "0", 0, 0,
     "ps: a worker may run S iterations ahead of the slowest (0: bulk-synchronous)", NULL},
    {"Communication", "ps-apply", OPT_CHOICE, "sum|each", offsetof(dt_comm_opts, ps_apply), 0, 0, "sum|each", "sum", 0,
     0,
     "ps: a server sums an iteration's pushes, then steps (sum), or steps at each push as it arrives, keeping a clock "
     "per worker: the thesis's stale-synchronous parallel with --staleness as its bound (each)",
     NULL},
    {"Communication", "ps-wait-free", OPT_FLAG, NULL, offsetof(dt_comm_opts, ps_wait_free), 0, 0, NULL, NULL, 0, 0,
     "ps: wait-free backprop: push each message as soon as backward has made its gradient (with --ps-messages "
     "range: layer by layer), not after backward",
     NULL},
};

const dt_mode_desc mode_ps = {
    .name = "ps",
    .help = "synchronous parameter server: the last --ps-servers ranks hold the weights, workers push gradients "
            "and pull weights",
    .options = "ps-servers placement ps-messages staleness ps-apply ps-wait-free compress compress-block",
    .flags = ps_flags,
    .n_flags = (int)DT_ARRAY_LEN(ps_flags),
    .describe = ps_describe,
    .roles = ps_roles,
    .init = ps_init,
    .begin = ps_begin,
    .grad_ready = ps_ready,
    .end = ps_end,
    .flush = ps_flush,
    .predict = ps_predict,
    .finalize = ps_finalize,
    .state = ps_list_state,
    .restored = ps_restored,
    .device_net = ps_device_net,
};
