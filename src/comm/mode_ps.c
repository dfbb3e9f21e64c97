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
 * one that has arrived. s = 0 is bulk-synchronous: the weights equal D-Sync's.
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
#include "mode.h"
#include "placement.h"
#include "ring.h"
#include "worker.h"

#define TAG_BASE 1000
#define TAG_MOD 8192
static int tag_push(long t) { return TAG_BASE + 3 * (int)(t % TAG_MOD); }
static int tag_pull(long v) { return TAG_BASE + 3 * (int)(v % TAG_MOD) + 1; }
static int tag_ack(long v) { return TAG_BASE + 3 * (int)(v % TAG_MOD) + 2; }

typedef struct ps_state {
    dt_placement *place;
    int n_servers, n_workers, me, server; /* server: index among servers, -1 on a worker */
    /* the messages of server k: m_count[k] of them, message j covering floats [m_off, m_off + m_n)
     * of its packed part and bytes [m_enc, m_enc + codec_bytes(m_n)) of its encoded part; requests
     * of (server k, message j) at index m_base[k] + j, m_total in all */
    int *m_count, *m_base, m_total;
    size_t **m_off, **m_n, **m_enc, *enc_total;
    size_t **m_end;                       /* the arena end of the gradient message (k, j) carries */
    int slots;                            /* staleness + 1 versions in flight */
    int in_turn;                          /* BSP: weights go to one worker after the other */
    /* worker */
    float **pack;          /* per server: packed gradient */
    unsigned char ***enc;  /* [slot][server]: encoded push */
    int **push_req;        /* [slot][server], -1: none */
    float ***wbuf;         /* [slot][server]: pulled weights */
    int **pull_req;        /* [slot][server] */
    long latest, posted;   /* newest version applied / posted */
    long unsent;           /* server, in turn: the version packed but not sent yet (0: none) */
    /* --ps-apply each (SSP) */
    int each;
    long *clock;           /* server: per worker, the pushes applied (the next push's iteration) */
    char *pending;         /* server: per worker, its answer waits for the slowest clock */
    char *posted_rx;       /* server: per worker, the receive of its next push is posted */
    float **reply;         /* server: per worker, the weights sent as its answer */
    int *reply_req;        /* server: [worker * messages] */
    int started;
    /* --ps-wait-free: pushes go on cc, a worker's from its communication thread */
    int wait_free;
    dt_comm *cc;
    dt_worker *thread;
    struct push_job {
        dt_comm *cc;
        const void *buf;
        size_t bytes;
        int dst, tag;
    } **jobs;              /* worker: [slot][message] */
    long **job_id;         /* worker: [slot][message], -1: none */
    double thread_bytes;   /* worker: pushes handed to the thread since the last count */
    long cur_it;           /* the iteration between begin and end */
    char *early;           /* [m_total]: message posted during this iteration's backward */
    int early_failed;      /* a post in grad_ready failed: end() reports it */
    double early_bytes;
    int *srv_req;          /* server: receives of this iteration's pushes, posted in begin */
    long push_it;          /* the iteration they are for, -1: none posted */
    /* server */
    unsigned char **rbuf;  /* per worker: encoded push */
    float *acc;
    float **send;          /* [slot]: packed weights */
    int **send_req;        /* [slot][worker] */
    double sent0, recv0;
    /* --transport nccl: the device's communicator and buffers in its memory */
    void *net;
    void *bg_net;          /* with cc: the communicator a worker's thread pushes on (and pulls, but under each) */
    dt_backend *q;         /* worker with a thread: the queue it sends on (a stream of its own) */
    int kind;              /* the codec on the device (ring_wire_kind) */
    float *d_part;         /* worker: a server's part of the gradient, packed; server: the workers' sum */
    void **d_msg;          /* worker: per server, its encoded push; server: per worker, the push received */
    float **d_w;           /* worker: per server, the weights received; server: [0] its weights packed */
    struct net_job {
        dt_comm *cc;
        dt_backend *be;
        void *net, *buf;
        size_t bytes;
        int dst;
    } *net_jobs;           /* worker with a thread: [slot * m_total + message], pushes it sends */
    long last_net_job;     /* the newest of them, -1: none */
    double net_bytes, net_bytes_recv; /* server, each over nccl: bytes its transfers moved since the last count */
    /* --staleness or --ps-apply each over nccl: a worker's thread pushes and then receives version
     * t + 1 (a job of its own) while the worker computes; the weights of version v land in
     * d_wv[v % slots]. Under each, a byte over MPI (cc) tells a server that a worker's push follows. */
    int thread_pulls;
    int noticed;           /* worker, each: this iteration's notice is with the thread */
    struct notice_job {
        struct ps_state *s;
        long it;
    } notice;
    float ***d_wv;         /* worker: [slot][server] */
    long *pull_job;        /* worker: [slot], the job receiving the version of that slot */
    struct pull_job {
        struct ps_state *s;
        long v;
    } *pulls;              /* worker: [slot] */
    /* --ps-apply each over nccl: a server's answers go from a thread of its own over a third
     * communicator (ac), so that its loop goes on taking pushes while a worker has yet to receive */
    dt_comm *ac;
    void *ans_net;
    dt_worker *answerer;   /* server */
    float **d_reply;       /* server: per worker, the weights its answer carries */
    struct answer_job {
        struct ps_state *s;
        int w;
    } *answers;            /* server: per worker */
    long *answer_id;       /* server: per worker, the job of its last answer, -1: none */
    long last_answer;      /* server: the newest of them, -1: none */
    /* checkpoints: a server's part of the optimizer's momentum and (each) of the weights, packed in
     * host memory (the optimizer steps on the servers only; the workers' momentum stays unused) */
    float *ck;
} ps_state;

static int server_rank(const ps_state *s, int k) { return s->n_workers + k; }
static int server_send_in_turn(ps_state *s, dt_mode_env *env, dt_times *t);
static int net_open(ps_state *s, dt_mode_env *env);
static void net_close(ps_state *s, dt_mode_env *env);

static void pack(const ps_state *s, int k, const float *arena, float *out)
{
    for (int i = 0; i < s->place->n_ranges[k]; i++) {
        memcpy(out, arena + s->place->ranges[k][i].off, s->place->ranges[k][i].n * sizeof(float));
        out += s->place->ranges[k][i].n;
    }
}

static void unpack(const ps_state *s, int k, const float *in, float *arena)
{
    for (int i = 0; i < s->place->n_ranges[k]; i++) {
        memcpy(arena + s->place->ranges[k][i].off, in, s->place->ranges[k][i].n * sizeof(float));
        in += s->place->ranges[k][i].n;
    }
}

static void **grid(int rows, int cols, size_t each)
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
                           env->opts.ps_wait_free ? "--ps-wait-free" : "ps over --transport nccl with staleness or SSP");
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
            s->jobs = (struct push_job **)grid(s->slots, s->m_total, sizeof(struct push_job));
            s->job_id = (long **)grid(s->slots, s->m_total, sizeof(long));
            if (!s->jobs || !s->job_id) return dt_fail("out of memory");
            for (int sl = 0; sl < s->slots; sl++)
                for (int q = 0; q < s->m_total; q++) s->job_id[sl][q] = -1;
        }
        s->pack = calloc((size_t)s->n_servers, sizeof *s->pack);
        s->enc = calloc((size_t)s->slots, sizeof *s->enc);
        s->wbuf = calloc((size_t)s->slots, sizeof *s->wbuf);
        s->push_req = (int **)grid(s->slots, s->m_total, sizeof(int));
        s->pull_req = (int **)grid(s->slots, s->m_total, sizeof(int));
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
        s->send = calloc((size_t)s->slots, sizeof *s->send);
        s->send_req = (int **)grid(s->slots, s->n_workers * s->m_count[s->server], sizeof(int));
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
            if (!s->clock || !s->pending || !s->posted_rx || !s->reply || !s->reply_req) return dt_fail("out of memory");
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
    if (env->transport == DT_TRANSPORT_NCCL && net_open(s, env) != 0) return -1;
    if (s->net)
        snprintf(env->note, sizeof env->note, "pushes, sums and weights on %s memory: device to device",
                 env->be->name);
    return 0;
}

/* copies the server k's ranges of a host view to the backend (push) or from it */
static int stage_part(const ps_state *s, int k, const dt_hostbuf *h, int push)
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
    return s->in_turn ? comm_send(env->comm, &ack, 1, server_rank(s, k), tag_ack(v)) : 0;
}

/* worker: version v has arrived from every server (wait for it if `block`); apply it */
static int take_version(ps_state *s, dt_mode_env *env, long v, int block, int *taken)
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
    for (int k = 0; k < s->n_servers; k++) unpack(s, k, s->wbuf[sl][k], env->wh.host);
    if (hostbuf_push(&env->wh, 0, env->arena.n) != 0) return -1;
    s->latest = v;
    *taken = 1;
    return 0;
}

static void count_bytes(ps_state *s, dt_mode_env *env, dt_times *t)
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

/* Server: the pushes of iteration t may come as soon as a worker has its weights: receive them
 * from now on (a large message only moves once its receive is posted), then send the weights. */
static int ssp_receive(ps_state *s, dt_mode_env *env, long t);

static int server_begin(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    int k = s->server, c = s->m_count[k];
    if (s->each) {
        if (!s->started)
            for (int w = 0; w < s->n_workers; w++) s->clock[w] = it->it;
        s->started = 1;
        return ssp_receive(s, env, it->it);
    }
    for (int w = 0; w < s->n_workers; w++)
        for (int j = 0; j < c; j++)
            if (comm_irecv(s->cc ? s->cc : env->comm, s->rbuf[w] + s->m_enc[k][j], codec_bytes(&env->codec, s->m_n[k][j]),
                           w, tag_push(it->it), &s->srv_req[w * c + j]) != 0)
                return -1;
    s->push_it = it->it;
    return server_send_in_turn(s, env, t);
}

/* ---- --transport nccl: bulk-synchronous on the device's memory ---------------------------------- */

static int net_open(ps_state *s, dt_mode_env *env)
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
        s->d_wv = (float ***)grid(s->slots, s->n_servers, sizeof(float *));
        s->pull_job = calloc((size_t)s->slots, sizeof *s->pull_job);
        s->pulls = calloc((size_t)s->slots, sizeof *s->pulls);
        if (!s->d_wv || !s->pull_job || !s->pulls) return dt_fail("out of memory");
        for (int sl = 0; sl < s->slots; sl++)
            for (int k = 0; k < s->n_servers; k++)
                if (!(s->d_wv[sl][k] = be->alloc(be, DT_MAX(s->place->total[k], 1) * sizeof(float)))) return -1;
    }
    return 0;
}

static void net_close(ps_state *s, dt_mode_env *env)
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
static int net_pack(const ps_state *s, dt_backend *be, int k, int j, const float *arena, float *out, int back)
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
        if (comm_send(n->s->cc, &one, 1, server_rank(n->s, k), tag_push(n->it)) != 0) return -1;
    return 0;
}

/* Worker: packs and encodes message j of server k of iteration `it` on the device and sends it (with a
 * communication thread: hands it over). Seconds of packing and encoding go to *enc. */
static int net_post(ps_state *s, dt_mode_env *env, long it, int k, int j, double *enc, dt_times *t)
{
    dt_backend *be = env->be;
    size_t n = s->m_n[k][j], bytes = codec_bytes(&env->codec, n);
    float *part = s->d_part + s->m_off[k][j];
    int sl = s->thread_pulls ? (int)(it % s->slots) : 0;
    unsigned char *out = (unsigned char *)s->d_msg[sl * s->n_servers + k] + s->m_enc[k][j];
    double t0 = dt_now();
    int rc = net_pack(s, be, k, j, env->arena.g, part, 0);
    if (rc == 0)
        rc = s->kind ? be->wire_encode(be, s->kind, env->codec.block, part, n, out)
                     : be->copy(be, out, part, n * sizeof(float));
    if (rc != 0 || be->sync(be) != 0) return -1;
    *enc += dt_now() - t0;
    if (!s->thread) return net_move(s, env, out, bytes, server_rank(s, k), 1, t);
    if (s->each && !s->noticed) { /* before the iteration's first push */
        s->notice = (struct notice_job){s, it};
        if (worker_submit(s->thread, net_notice_run, &s->notice) < 0) return -1;
        s->noticed = 1;
    }
    int q = s->m_base[k] + j;
    struct net_job *job = &s->net_jobs[sl * s->m_total + q];
    *job = (struct net_job){s->cc, s->q, s->bg_net, out, bytes, server_rank(s, k)};
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
                            s->d_wv[sl][k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), server_rank(s, k), 0,
                            t) != 0)
                return -1;
    return 0;
}

/* thread_pulls: takes version v (block: waits for it; else only if it has arrived) */
static int net_take(ps_state *s, dt_mode_env *env, long v, int block, int *taken)
{
    int sl = (int)(v % s->slots), done = 1;
    *taken = 0;
    if (block ? worker_wait(s->thread, s->pull_job[sl]) : worker_test(s->thread, s->pull_job[sl], &done)) return -1;
    if (!done) return 0;
    for (int k = 0; k < s->n_servers; k++)
        if (net_pack(s, env->be, k, -1, env->arena.w, s->d_wv[sl][k], 1) != 0) return -1;
    s->latest = v;
    *taken = 1;
    return 0;
}

/* a worker with thread_pulls: its thread receives version v once its pushes have gone */
static int net_pull(ps_state *s, long v)
{
    struct pull_job *p = &s->pulls[v % s->slots];
    *p = (struct pull_job){s, v};
    if ((s->pull_job[v % s->slots] = worker_submit(s->thread, net_pull_run, p)) < 0) return -1;
    s->posted = v;
    return 0;
}

static int net_worker_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    dt_backend *be = env->be;
    if (s->early_failed) return dt_fail_prefix("ps: a wait-free push during backward");
    for (int k = 0; k < s->n_servers; k++)
        for (int j = 0; j < s->m_count[k]; j++)
            if (!s->early[s->m_base[k] + j] && net_post(s, env, it->it, k, j, &t->encode, t) != 0) return -1;
    if (s->thread_pulls) { /* the thread receives version it + 1 after the pushes; begin() takes it */
        if (net_pull(s, it->it + 1) != 0) return -1;
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
            if (net_move(s, env, s->d_w[k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), server_rank(s, k), 0,
                         t) != 0)
                return -1;
        double t0 = dt_now();
        if (net_pack(s, be, k, -1, env->arena.w, s->d_w[k], 1) != 0) return -1;
        t->update += dt_now() - t0;
    }
    return 0;
}

/* server: worker w's push, message by message, device to device (on the pushes' communicator where
 * there is one) */
static int net_recv_push(ps_state *s, dt_mode_env *env, int w, dt_times *t)
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
static int net_decode_push(ps_state *s, dt_mode_env *env, int w, int add)
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
static int net_step(ps_state *s, dt_mode_env *env, float lr)
{
    int k = s->server;
    if (net_pack(s, env->be, k, -1, env->arena.g, s->d_part, 1) != 0) return -1;
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

static int net_server_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    dt_backend *be = env->be;
    int k = s->server;
    size_t n = s->place->total[k];
    for (int w = 0; w < s->n_workers; w++) /* a worker's messages in order, as it sends them */
        if (net_recv_push(s, env, w, t) != 0) return -1;
    double t0 = dt_now();
    if (be->scale(be, s->d_part, 0.0f, n) != 0) return -1;
    for (int w = 0; w < s->n_workers; w++) /* in worker order: the same sum as the host's */
        if (net_decode_push(s, env, w, 1) != 0) return -1;
    if (be->sync(be) != 0) return -1;
    double t1 = dt_now();
    t->decode += t1 - t0;
    /* skipped (fp16 overflowed on a worker): the pushes dropped, the weights as they were */
    if (!it->skip && net_step(s, env, it->lr) != 0) return -1;
    if (net_pack(s, be, k, -1, env->arena.w, s->d_w[0], 0) != 0 || be->sync(be) != 0) return -1;
    t->update += dt_now() - t1;
    for (int w = 0; w < s->n_workers; w++)
        if (net_send_weights(s, env, w, t) != 0) return -1;
    return 0;
}

static int ps_begin(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    ps_state *s = state;
    int taken;
    int (*take)(ps_state *, dt_mode_env *, long, int, int *) = s->net ? net_take : take_version;
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
    else count_bytes(s, env, t);
    return 0;
}

/* message j of server k: the gradient values it carries, packed as the server unpacks them */
static void pack_msg(const ps_state *s, int k, int j, const float *arena, float *out)
{
    if (s->m_count[k] == 1) pack(s, k, arena, out);
    else memcpy(out, arena + s->place->ranges[k][j].off, s->m_n[k][j] * sizeof(float));
}

/* copies what message j of server k carries from the backend into the host view */
static int stage_msg(const ps_state *s, int k, int j, const dt_hostbuf *h)
{
    if (s->m_count[k] == 1) return stage_part(s, k, h, 0);
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
        s->jobs[sl][q] = (struct push_job){s->cc, out, bytes, server_rank(s, k), tag_push(it)};
        if ((s->job_id[sl][q] = worker_submit(s->thread, push_run, &s->jobs[sl][q])) < 0) return -1;
        s->thread_bytes += (double)bytes;
    } else if (comm_isend(env->comm, out, bytes, server_rank(s, k), tag_push(it), push) != 0) {
        return -1;
    }
    if (comm_irecv(env->comm, s->wbuf[vs][k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), server_rank(s, k),
                   tag_pull(it + 1), pull) != 0)
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
            int rc = s->net ? net_post(s, env, s->cur_it, k, j, &enc, NULL)
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
    count_bytes(s, env, t);
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
                          tag_pull(v)) != 0)
                return -1;
        if (comm_recv(env->comm, &ack, 1, w, tag_ack(v), NULL, NULL) != 0) return -1;
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
        unpack(s, s->server, s->acc, env->gh.host);
        if (stage_part(s, s->server, &env->gh, 1) != 0) return -1;
        for (int i = 0; i < s->place->n_ranges[s->server]; i++)
            if (optim_step(env->optim, env->arena.w, env->arena.g, it->lr, s->place->ranges[s->server][i].off,
                           s->place->ranges[s->server][i].n) != 0)
                return -1;
    }
    if (stage_part(s, s->server, &env->wh, 0) != 0) return -1;
    double t2 = dt_now();
    for (int w = 0; w < s->n_workers * c; w++)
        if (s->send_req[sl][w] >= 0 && comm_wait(env->comm, s->send_req[sl][w], NULL, NULL) != 0) return -1;
    pack(s, s->server, env->wh.host, s->send[sl]);
    s->unsent = it->it + 1;
    if (!s->in_turn) /* to every worker at once; in turn, it happens in the next begin (or flush) */
        for (int w = 0; w < s->n_workers; w++)
            for (int j = 0; j < c; j++)
                if (comm_isend(env->comm, s->send[sl] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), w,
                               tag_pull(it->it + 1), &s->send_req[sl][w * c + j]) != 0)
                    return -1;
    t->comm += tc + (dt_now() - t2);
    t->decode += td;
    t->update += t2 - t1;
    s->push_it = -1;
    count_bytes(s, env, t);
    return 0;
}

/* ---- --ps-apply each: stale-synchronous parallel ----------------------------------------------- */

static long ssp_min_clock(const ps_state *s)
{
    long m = s->clock[0];
    for (int w = 1; w < s->n_workers; w++) m = DT_MIN(m, s->clock[w]);
    return m;
}

/* Posts the receive of each worker's next push, for iterations up to t + s of the run. */
static int ssp_receive(ps_state *s, dt_mode_env *env, long t)
{
    int k = s->server, c = s->m_count[k];
    for (int w = 0; w < s->n_workers; w++) {
        long next = s->clock[w];
        if (s->posted_rx[w] || next >= env->total_iters || next > t + env->opts.staleness) continue;
        if (s->net) { /* over nccl: the byte that says the push follows (it is received once this came) */
            for (int j = 1; j < c; j++) s->srv_req[w * c + j] = -1;
            if (comm_irecv(s->cc, s->rbuf[w], 1, w, tag_push(next), &s->srv_req[w * c]) != 0) return -1;
            s->posted_rx[w] = 1;
            continue;
        }
        for (int j = 0; j < c; j++)
            if (comm_irecv(s->cc ? s->cc : env->comm, s->rbuf[w] + s->m_enc[k][j], codec_bytes(&env->codec, s->m_n[k][j]),
                           w, tag_push(next), &s->srv_req[w * c + j]) != 0)
                return -1;
        s->posted_rx[w] = 1;
    }
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

/* over nccl: the bytes the answers' thread has sent, into the next count */
static void net_answers_taken(ps_state *s)
{
    dt_times t = {0};
    worker_take_times(s->answerer, &t);
    s->net_bytes += t.bytes_sent;
}

/* Sends worker w the weights as they are now, tagged as the version for its next iteration v. */
static int ssp_answer(ps_state *s, dt_mode_env *env, int w, long v)
{
    int k = s->server, c = s->m_count[k];
    if (s->net) { /* to the worker's thread, which waits for it after its push, from the answers' thread: its
                   * last answer to w is in (w received it before its push that this answers) */
        if (s->answer_id[w] >= 0 && worker_wait(s->answerer, s->answer_id[w]) != 0) return -1;
        if (net_pack(s, env->be, k, -1, env->arena.w, s->d_reply[w], 0) != 0 || env->be->sync(env->be) != 0)
            return -1;
        s->answers[w] = (struct answer_job){s, w};
        return (s->answer_id[w] = s->last_answer = worker_submit(s->answerer, net_answer_run, &s->answers[w])) < 0
                   ? -1
                   : 0;
    }
    for (int j = 0; j < c; j++) {
        int *r = &s->reply_req[w * c + j];
        if (*r >= 0 && comm_wait(env->comm, *r, NULL, NULL) != 0) return -1;
        *r = -1;
    }
    pack(s, k, env->wh.host, s->reply[w]);
    for (int j = 0; j < c; j++)
        if (comm_isend(env->comm, s->reply[w] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), w, tag_pull(v),
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
        if (net_recv_push(s, env, w, &t) != 0) return -1;
        s->net_bytes_recv += t.bytes_recv;
    }
    double t0 = dt_now();
    if (it->skip) {
        s->clock[w]++;
        s->pending[w] = 1;
        return 0;
    }
    if (s->net) {
        if (net_decode_push(s, env, w, 0) != 0) return -1;
        double t1 = dt_now();
        if (net_step(s, env, it->lr) != 0 || env->be->sync(env->be) != 0) return -1;
        *td += t1 - t0;
        *tu += dt_now() - t1;
        s->clock[w]++;
        s->pending[w] = 1;
        return 0;
    }
    for (int j = 0; j < c; j++)
        codec_decode(&env->codec, s->rbuf[w] + s->m_enc[k][j], s->m_n[k][j], s->acc + s->m_off[k][j]);
    double t1 = dt_now();
    unpack(s, k, s->acc, env->gh.host);
    if (stage_part(s, k, &env->gh, 1) != 0) return -1;
    for (int i = 0; i < s->place->n_ranges[k]; i++)
        if (optim_step(env->optim, env->arena.w, env->arena.g, it->lr, s->place->ranges[k][i].off,
                       s->place->ranges[k][i].n) != 0)
            return -1;
    if (stage_part(s, k, &env->wh, 0) != 0) return -1;
    *td += t1 - t0;
    *tu += dt_now() - t1;
    s->clock[w]++;
    s->pending[w] = 1;
    return 0;
}

/* Server, iteration t: applies pushes as they arrive, from any worker and of iterations up to
 * t + s, answering each worker once the slowest is close enough, until every worker has pushed t. */
static int server_end_each(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    int c = s->m_count[s->server];
    double t0 = dt_now(), td = 0, tu = 0;
    while (ssp_min_clock(s) < it->it + 1) {
        if (ssp_receive(s, env, it->it) != 0) return -1;
        for (int w = 0; w < s->n_workers; w++) {
            int arrived = s->posted_rx[w];
            for (int j = 0; j < c && arrived; j++) {
                int *r = &s->srv_req[w * c + j], done = 1;
                if (*r >= 0 && comm_test(s->cc ? s->cc : env->comm, *r, &done) != 0) return -1;
                if (done) *r = -1;
                else arrived = 0;
            }
            if (!arrived) continue;
            s->posted_rx[w] = 0;
            if (ssp_apply(s, env, w, it, &td, &tu) != 0) return -1;
            long slowest = ssp_min_clock(s);
            for (int v = 0; v < s->n_workers; v++)
                if (s->pending[v] && slowest >= s->clock[v] - env->opts.staleness) {
                    if (ssp_answer(s, env, v, s->clock[v]) != 0) return -1;
                    s->pending[v] = 0;
                }
        }
    }
    t->decode += td;
    t->update += tu;
    t->comm += dt_now() - t0 - td - tu;
    if (s->answerer) net_answers_taken(s);
    count_bytes(s, env, t);
    return 0;
}

/* Server: every answer sent has been taken (from its loop over MPI, its thread over nccl). */
static int ssp_answers_sent(ps_state *s, dt_mode_env *env)
{
    int c = s->m_count[s->server];
    for (int q = 0; q < s->n_workers * c; q++) {
        if (s->reply_req[q] >= 0 && comm_wait(env->comm, s->reply_req[q], NULL, NULL) != 0) return -1;
        s->reply_req[q] = -1;
    }
    if (s->answerer) {
        if (s->last_answer >= 0 && worker_wait(s->answerer, s->last_answer) != 0) return -1;
        net_answers_taken(s);
    }
    return 0;
}

/* Server, at the end: answers still held back go, then every worker gets the final weights. */
static int server_flush_each(ps_state *s, dt_mode_env *env)
{
    for (int w = 0; w < s->n_workers; w++)
        if (s->pending[w] && ssp_answer(s, env, w, s->clock[w]) != 0) return -1;
    for (int w = 0; w < s->n_workers; w++) {
        s->pending[w] = 0;
        if (ssp_answer(s, env, w, s->clock[w] + 1) != 0) return -1;
    }
    return ssp_answers_sent(s, env);
}

/* Worker, at the end under SSP: the final weights, which every worker receives alike. */
static int worker_flush_each(ps_state *s, dt_mode_env *env)
{
    long v = s->posted + 1;
    int sl = (int)(v % s->slots), taken;
    for (int k = 0; k < s->n_servers; k++)
        for (int j = 0; j < s->m_count[k]; j++)
            if (comm_irecv(env->comm, s->wbuf[sl][k] + s->m_off[k][j], s->m_n[k][j] * sizeof(float), server_rank(s, k),
                           tag_pull(v), &s->pull_req[sl][s->m_base[k] + j]) != 0)
                return -1;
    s->posted = v;
    return take_version(s, env, v, 1, &taken);
}

static int ps_end(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t)
{
    ps_state *s = state;
    if (!env->is_worker && s->each) return server_end_each(s, env, it, t); /* over either transport */
    if (s->net) return env->is_worker ? net_worker_end(s, env, it, t) : net_server_end(s, env, it, t);
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
            if ((s->net ? net_take : take_version)(s, env, s->latest + 1, 1, &taken) != 0) return -1;
        if (final && s->each &&
            (s->net ? net_pull(s, s->posted + 1) != 0 || net_take(s, env, s->posted, 1, &taken) != 0
                    : worker_flush_each(s, env) != 0))
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
    if (s->each && (final ? server_flush_each(s, env) : ssp_answers_sent(s, env)) != 0) return -1;
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
    count_bytes(s, env, t);
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
                return dt_fail("internal: ps --ps-apply each: at a checkpoint worker %d's clock is %ld%s, worker 0's %ld",
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
    if (s->each && (part_copy(s, env, env->arena.w, s->ck + part, 0) != 0 || stage_part(s, s->server, &env->wh, 0) != 0))
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
    if (s->net || s->d_msg) net_close(s, env);
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
    snprintf(buf, n, " (%d worker%s + %ld server%s, %s placement, staleness %ld%s)", env->n_workers,
             env->n_workers == 1 ? "" : "s", o->ps_servers, o->ps_servers == 1 ? "" : "s", o->placement, o->staleness,
             each ? ", a step per push (SSP)" : "");
}

static const dt_optdef ps_flags[] = {
    {"Communication", "ps-servers", OPT_INT, "S", offsetof(dt_comm_opts, ps_servers), 1, 1024, NULL, "1", 0, 0,
     "ps: the last S ranks are parameter servers", NULL},
    {"Communication", "placement", OPT_CHOICE, "HOW", offsetof(dt_comm_opts, placement), 0, 0,
     "uniform|round-robin|greedy", "uniform", 0, 0, "ps: how layers are spread over servers: uniform, round-robin or greedy",
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
