/* mode_ps.h — what the three files of the parameter server share (private to them): its state, its
 * tags and the functions one file calls in another.
 *   mode_ps.c       the mode: set-up, bulk-synchronous and stale pushes and pulls over MPI, checkpoints
 *   mode_ps_nccl.c  --transport nccl: the same on the device's memory
 *   mode_ps_ssp.c   --ps-apply each: stale-synchronous parallel, a server step per push
 */
#ifndef DT_MODE_PS_H
#define DT_MODE_PS_H

#include <stddef.h>

#include "mode.h"
#include "placement.h"
#include "worker.h"

#define TAG_BASE 1000
#define TAG_MOD 8192
static inline int ps_tag_push(long t) { return TAG_BASE + 3 * (int)(t % TAG_MOD); }
static inline int ps_tag_pull(long v) { return TAG_BASE + 3 * (int)(v % TAG_MOD) + 1; }
static inline int ps_tag_ack(long v) { return TAG_BASE + 3 * (int)(v % TAG_MOD) + 2; }

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

static inline int ps_server_rank(const ps_state *s, int k) { return s->n_workers + k; }

/* mode_ps.c */
void ps_pack(const ps_state *s, int k, const float *arena, float *out);
void ps_unpack(const ps_state *s, int k, const float *in, float *arena);
void **ps_grid(int rows, int cols, size_t each);
int ps_stage_part(const ps_state *s, int k, const dt_hostbuf *h, int push);
int ps_take_version(ps_state *s, dt_mode_env *env, long v, int block, int *taken);
void ps_count_bytes(ps_state *s, dt_mode_env *env, dt_times *t);

/* mode_ps_nccl.c */
int ps_net_open(ps_state *s, dt_mode_env *env);
void ps_net_close(ps_state *s, dt_mode_env *env);
int ps_net_pack(const ps_state *s, dt_backend *be, int k, int j, const float *arena, float *out, int back);
int ps_net_post(ps_state *s, dt_mode_env *env, long it, int k, int j, double *enc, dt_times *t);
int ps_net_take(ps_state *s, dt_mode_env *env, long v, int block, int *taken);
int ps_net_pull(ps_state *s, long v);
int ps_net_worker_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t);
int ps_net_recv_push(ps_state *s, dt_mode_env *env, int w, dt_times *t);
int ps_net_decode_push(ps_state *s, dt_mode_env *env, int w, int add);
int ps_net_step(ps_state *s, dt_mode_env *env, float lr);
int ps_net_server_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t);
int ps_net_answer(ps_state *s, dt_mode_env *env, int w);
void ps_net_answers_taken(ps_state *s);

/* mode_ps_ssp.c */
int ps_ssp_receive(ps_state *s, dt_mode_env *env, long t);
int ps_ssp_server_end(ps_state *s, dt_mode_env *env, const dt_iter *it, dt_times *t);
int ps_ssp_answers_sent(ps_state *s, dt_mode_env *env);
int ps_ssp_server_flush(ps_state *s, dt_mode_env *env);
int ps_ssp_worker_flush(ps_state *s, dt_mode_env *env);

#endif
