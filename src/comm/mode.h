/* mode — how the ranks turn their local gradients into the next weights (--mode).
 *
 * One file per mode (mode_dsync.c, mode_ps.c, mode_pipesgd.c), one descriptor each, listed in
 * one table (mode.c): unknown names are an error listing the valid ones; `dtrain --list-modes`
 * prints the table. A mode sees the arenas and their tensor table (engine/tensor.h), the
 * optimizer, the codec and the transport; it never sees layers or files.
 *
 * Each iteration the train loop calls, on every rank:
 *   begin(it)        before forward: the weights the forward pass uses must be in place when it
 *                    returns (Pipe-SGD applies the aggregated gradient of it-K here, a PS worker
 *                    waits for fresh enough weights). It may point env->arena.g at another
 *                    buffer: backward then writes this iteration's gradient there.
 *   grad_ready(n)    during backward: the first n arena values of the gradient are final (lazy
 *                    allreduce starts communicating them).
 *   end(it)          after backward: hand over this iteration's gradient; synchronous modes
 *                    leave the next weights in place.
 * and flush() once after the last iteration, so every worker holds the final weights.
 * Ranks whose role is not to compute (parameter servers: env->is_worker = 0) get begin/end
 * calls at the same points and no forward or backward.
 */
#ifndef DT_MODE_H
#define DT_MODE_H

#include <stdint.h>

#include "../engine/engine.h"
#include "../opt.h"
#include "../stats.h"
#include "codec.h"
#include "devnet.h"
#include "transport.h"

/* The communication options (CLI.md). The modes declare them (dt_optdef tables: the flags one
 * mode reads in its file, the ones several read in mode.c); the CLI parses them into here. */
typedef struct dt_comm_opts {
    char *compress; /* NULL: the mode's default */
    long compress_block;
    long ps_servers; /* ps */
    char *placement;
    char *ps_messages; /* "part" (one message per server and direction) or "range" (one per placed range) */
    long staleness;
    int ps_wait_free;    /* ps: a worker pushes each message as soon as backward has made its gradient */
    char *ps_apply;      /* ps: "sum" (an iteration's pushes summed, then one step) or "each" (a step per push: SSP) */
    long pipeline_depth; /* pipesgd */
    char *stale_lr;      /* pipesgd: "apply" (the applying iteration's lr) or "compute" (the computing one's) */
    double warmup_epochs;
    double fusion_bytes; /* dsync, csc; INFINITY: one allreduce after backward */
    char *allreduce;     /* dsync: "ring" (dtrain's, with the codec) or "mpi" (MPI_Allreduce of fp32) */
    double model_alpha, model_beta, model_gamma; /* < 0: measure at start-up */
    double model_cores;                          /* < 0: this machine's cores over its ranks */
    double model_compute; /* --mode auto: seconds of compute per iteration; < 0: measured at start-up */
    double density;                              /* topk, gtopk */
    char *density_warmup;
    int momentum_correction; /* topk, gtopk, csc */
    char *topk_scope;        /* topk: "global" (one top-k of the arena) or "layer" (DGC: per tensor) */
    double clip_norm;        /* topk, gtopk: DGC's local clipping of each rank's gradient (0: none) */
    char *topk_select;       /* topk, gtopk: "exact" (the k largest) or "sampled" (DGC's sampled threshold) */
    long chunk;              /* csc */
    char *loss_scale;        /* csc: "none", a number, or "dynamic" (fp16 transfers scaled as GradScaler does) */
    double chunk_ratio, sparsity_warmup;
    double clip; /* terngrad */
    int tern_skip_last;
    long tern_min_size;
    char *auto_allow;  /* --mode auto: the candidates, "MODE[+CODEC],..." */
    char *comm_wait;   /* "auto" (communication threads sleep-poll, the rest spin), "spin" or "sleep" */
    long compute_nice; /* niceness of the compute threads while a communication thread runs beside them */
} dt_comm_opts;

#define DT_NETMODEL_STEPS 4
/* The timing model of PAPERS.md §3: alpha latency (s), beta seconds per byte on the wire,
 * gamma seconds per value to decode, add and re-encode in a reduce step (codec included). */
typedef struct dt_netmodel {
    double alpha, beta, gamma;
    double beta_stream; /* seconds per byte of one long transfer (a PS push or pull), which runs
                           faster than the ring's chained steps; = beta when beta is given */
    double beta_busy; /* seconds per byte of ring steps chained back to back (a link that never idles):
                         >= beta; = beta when beta is given */
    double cpu_byte; /* CPU seconds a rank spends per byte it sends or receives (MPI and the kernel's
                        network stack), measured with sleeping waits: what communication takes from
                        compute when they share cores */
    double cores;    /* cores per rank: this machine's cores over the ranks on it (--model-cores) */
    int measured; /* 1: from the start-up probe, 0: given by flags */
    /* the probe's chained steps: seconds per step of step_bytes[i] (increasing), and the beta of its
     * line (the ring's per-byte excess over them is beta - step_beta); n_steps = 0 where alpha and
     * beta were given: then a step of m bytes costs alpha + m beta */
    int n_steps;
    double step_bytes[DT_NETMODEL_STEPS], step_t[DT_NETMODEL_STEPS], step_beta;
    char note[200]; /* what the probe could not measure and assumed instead ("": nothing) */
} dt_netmodel;

typedef struct dt_mode_env {
    dt_comm *comm;
    int threads;    /* compute threads per rank (--threads) */
    dt_arena arena; /* backend memory (optim->be's): modes reach it only through the host views */
    dt_hostbuf gh, wh; /* host views of arena.g and arena.w: made by mode_env_views in a mode's init */
    dt_backend *be;    /* arena.be, set by mode_env_views */
    dt_optim *optim;
    dt_comm_opts opts;
    dt_codec codec;
    dt_netmodel model;
    long iters_per_epoch, total_iters;
    uint64_t seed; /* --seed: for a mode's own random streams */
    int n_ranks;   /* the ranks roles are given for (0: the job's; --dry-run: --ranks) */
    /* set by the mode's init */
    char note[256]; /* one line for the banner (what the mode chose), or empty */
    int is_worker;   /* computes gradients */
    int n_workers;   /* ranks that compute */
    int worker_rank; /* this rank among them (-1 on a server) */
    int overlapped;  /* encode/comm/decode run on a communication thread beside the compute */
    int transport;   /* --transport: DT_TRANSPORT_* (devnet.h), chosen before init */
} dt_mode_env;

/* The ranks the mode runs on: the job's, or under --dry-run the ones --ranks names. */
static inline int mode_ranks(const dt_mode_env *env) { return env->n_ranks > 0 ? env->n_ranks : comm_size(env->comm); }

typedef struct dt_iter {
    long it;    /* global iteration, from 0 */
    int epoch;  /* from 0 */
    float lr;   /* learning rate of this iteration */
    /* end(): 1 when this iteration's gradient overflowed on some rank (--precision fp16's loss
     * scaling; the same on every rank): the step is skipped. end() lets what grad_ready started land
     * and changes nothing: no update, residuals, selections and buffers as they were, nothing of
     * this gradient left in flight (the train loop counts the skip). */
    int skip;
} dt_iter;

/* A named buffer of a mode's state (residuals, momentum-correction buffers, ...): what a
 * checkpoint must carry to resume a run exactly, and what tests inspect. */
typedef struct dt_state_tensor {
    char name[48];
    float *data; /* host memory */
    size_t n;
} dt_state_tensor;

typedef struct dt_mode_desc {
    const char *name;
    const char *help; /* one line */
    const char *options; /* the mode-specific flags it reads, space separated */
    const char *default_compress; /* --compress when not given (NULL: none) */
    /* the flags only this mode reads: their names, ranges, defaults, help (offsets into
     * dt_comm_opts); the CLI lists and parses them with its own */
    const dt_optdef *flags;
    int n_flags;
    /* the banner's words on this mode's settings (" (K = 2, ...)"); NULL: none */
    void (*describe)(const dt_mode_env *env, char *buf, size_t n);
    /* Which ranks compute: sets is_worker, n_workers, worker_rank from the options alone (pure,
     * before anything is allocated); NULL: every rank is a worker. */
    int (*roles)(dt_mode_env *env);
    /* Collective: buffers, threads, the mode's own checks. */
    int (*init)(void **state, dt_mode_env *env);
    int (*begin)(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t); /* may be NULL */
    void (*grad_ready)(void *state, dt_mode_env *env, size_t n_ready);            /* may be NULL */
    int (*end)(void *state, dt_mode_env *env, const dt_iter *it, dt_times *t);
    int (*flush)(void *state, dt_mode_env *env, float lr, dt_times *t); /* may be NULL */
    /* 1: all of the mode's t_encode (topk's and gtopk's selection) runs before its exchange starts,
     * so every rank waits for the slowest one's as for its compute: the timing model's
     * synchronisation time S counts it (train.c) */
    int encode_first;
    /* Predicted seconds per iteration from the timing model, given the measured mean compute
     * phases of an iteration (data, forward, backward, update as this rank saw them). */
    double (*predict)(void *state, const dt_mode_env *env, const dt_times *mean);
    /* --mode auto, before any mode is set up: times this mode's own work of an iteration beyond
     * compute and the wire (selection, merging, packing, ternarizing) on scratch data of the arena's
     * size, into cost->encode and cost->decode; not collective. A mode that has it predicts with
     * state NULL from env and those costs; NULL hook: its prediction needs neither. */
    int (*calibrate)(const dt_mode_env *env, dt_times *cost);
    /* Checkpoints: lists up to max state buffers (host memory) and returns how many, or -1 with
     * an error; NULL hook: none. Called between iterations by every rank at the same point (it
     * may communicate: ps's ranks exchange what is in flight), it first lets anything in flight
     * land (without applying it), so the buffers are complete: a checkpoint reads them, a resume
     * writes them and then calls restored(it0) — it0 the first iteration to run — so the mode can
     * rebuild what it derives from them. */
    int (*state)(void *state, dt_mode_env *env, dt_state_tensor *out, int max);
    int (*restored)(void *state, dt_mode_env *env, long it0); /* may be NULL */
    /* --transport: 1 if the mode can send over the device backend's transport (NCCL) with env's
     * options, else 0 and why not; NULL: it sends over MPI only. */
    int (*device_net)(const dt_mode_env *env, char *why, size_t n);
    void (*finalize)(void *state, dt_mode_env *env);
} dt_mode_desc;

const dt_mode_desc *mode_find(const char *name);
int mode_count(void);
const dt_mode_desc *mode_at(int i);
/* "dsync, ps, pipesgd" */
const char *mode_list(void);
/* Every mode's init starts with this: env->be, and env->gh and env->wh, the host views of the
 * arena; its finalize ends with mode_env_release. */
int mode_env_views(dt_mode_env *env);
/* For a mode with a communication thread (pipesgd; dsync and csc with --fusion-bytes): a
 * duplicate of env->comm for it, waiting as --comm-wait says, the thread itself, and the compute
 * threads lowered to --compute-nice so that the communication thread gets the core when it wakes. */
struct dt_worker;
int mode_comm_thread(dt_mode_env *env, dt_comm **cc, struct dt_worker **worker);
void mode_env_release(dt_mode_env *env);
/* hostbuf_pull / hostbuf_push that add the seconds a real copy took to *seconds (staging time of
 * a device backend: counted as encode when pulled, decode when pushed); free for the CPU. */
int mode_pull(const dt_hostbuf *h, size_t off, size_t n, double *seconds);
int mode_push(const dt_hostbuf *h, size_t off, size_t n, double *seconds);
/* device_net for modes whose exchange is the ring (dsync, pipesgd): 1 where the ring can run on the
 * arena's backend memory with env's codec. */
int mode_ring_device_net(const dt_mode_env *env, char *why, size_t n);
/* Why mode m under options o acts while backward runs (its grad_ready sends or encodes), or NULL:
 * such a backward cannot be recorded as a graph (--gpu-graph). A mode whose grad_ready acts under
 * a new option says so here. */
const char *mode_in_backward(const dt_mode_desc *m, const dt_comm_opts *o);
/* topk, gtopk: 1 with --topk-select sampled */
int mode_topk_sampled(const dt_comm_opts *o);
/* Fills env's roles with m->roles, or makes every rank a worker. */
int mode_roles(const dt_mode_desc *m, dt_mode_env *env);
/* 1 if the mode reads flag NAME (e.g. "staleness"); shared flags (compress, model-*) read by all. */
int mode_reads(const dt_mode_desc *m, const char *flag);
/* 1 if flag NAME is read by some modes and not others (--chunk, --staleness, --compress), or only
 * by --mode auto (--auto-allow, --model-compute). */
int mode_flag_specific(const char *flag);

/* Every flag of the comm subsystem, in --help order: the codec's, each mode's own, the ones
 * several modes read, the timing model's. */
int mode_optdef_count(void);
const dt_optdef *mode_optdef_at(int i);
/* After parsing: a flag the chosen mode does not read, or a codec flag without its codec, is an
 * error (given(arg, name): the user set it). */
int mode_check_opts(const dt_mode_desc *m, const dt_comm_opts *o, int (*given)(const void *arg, const char *name),
                    const void *arg);
/* The options a run hands the mode: o, with the mode's default codec where none was given. */
dt_comm_opts mode_opts_for(const dt_mode_desc *m, const dt_comm_opts *o);
/* The codec of options o (mode_opts_for's): --compress with --compress-block (0: one scale per vector). */
int mode_codec_create(const dt_comm_opts *o, dt_codec *out);
/* For the banner: "mode dsync (lazy allreduce every 4096 bytes), compress q8, block 256". */
void mode_describe(const dt_mode_desc *m, const dt_mode_env *env, char *buf, size_t n);

/* Timing model (netmodel.c): measures alpha and beta with a neighbour exchange over the
 * ring and gamma with the codec on this CPU, unless given; collective. */
int netmodel_init(dt_netmodel *m, dt_comm *c, const dt_codec *codec, const dt_comm_opts *o);
/* Seconds for one chained ring step of `bytes` each way: interpolated between the probe's steps
 * (beyond the largest, their line's slope), plus beta's excess over that slope where a caller
 * raised beta (netmodel_ring_paced); alpha + bytes beta where none were measured. */
double netmodel_step(const dt_netmodel *m, double bytes);
/* Seconds for one ring allreduce of n values over p ranks (Pipe-SGD eq. 5, communication term,
 * with n in encoded bytes on the wire): 2(p-1) steps of a p-th of them, and the codec. */
double netmodel_ring(const dt_netmodel *m, int p, size_t n, const dt_codec *codec);
/* CPU seconds one rank spends on that allreduce: bytes through MPI and the kernel, and the codec. */
double netmodel_ring_cpu(const dt_netmodel *m, int p, size_t n, const dt_codec *codec);
/* netmodel_ring, at the link's back-to-back rate (beta_busy) when it outlasts the comp seconds of
 * compute between allreduces: then the link hardly idles. */
double netmodel_ring_paced(const dt_netmodel *m, int p, size_t n, const dt_codec *codec, double comp);
/* Compute's CPU seconds per iteration: the rank's less its communication's where that was
 * measured, else comp (the compute phases' time). */
static inline double mode_comp_cpu(const dt_times *m, double comp)
{
    return m->cpu > m->cpu_comm && m->cpu_comm > 0 ? m->cpu - m->cpu_comm : comp;
}
/* Seconds per iteration when communication (comm seconds, comm_cpu of them on a CPU) runs on its
 * own thread beside compute (comp seconds on `threads` threads, comp_cpu CPU seconds in all):
 * the slower of the two while the rank has a core for the communication thread; with fewer, both
 * need their CPU from the same cores, and the iteration takes at least all of it over the cores. */
double netmodel_overlap(const dt_netmodel *m, int threads, double comp, double comp_cpu, double comm, double comm_cpu);

/* PS-Sync's iteration (mode_ps.c): workers, servers, the busiest server's part (n values, enc bytes
 * pushed by one worker, msgs messages per direction), the whole arena (all_n values, all_enc bytes
 * encoded); in_turn: bulk-synchronous, pulls served one worker after the other. */
typedef struct dt_ps_load {
    double workers, servers, n, enc, msgs, all_n, all_enc;
    int in_turn;
    const double *part_n; /* in_turn: each server's values (servers of them); NULL: each holds n */
} dt_ps_load;
/* Seconds per iteration for compute seconds comp per worker. */
double netmodel_ps(const dt_netmodel *m, const dt_ps_load *l, double comp);

/* --mode auto (mode_auto.c): candidates "MODE[+CODEC],..." of --auto-allow, ranked by the timing
 * model for compute seconds comp (comp_cpu of CPU) per iteration, each with its codec's gamma. */
typedef struct dt_auto_cand {
    const dt_mode_desc *mode;
    char codec[16], name[80]; /* name: "pipesgd+q8", "dsync" */
    double gamma;             /* the codec's (netmodel_codec_gamma), set by the caller */
    double encode, decode;    /* the mode's own work per iteration (its calibrate), set by the caller */
    double t;                 /* predicted seconds per iteration */
} dt_auto_cand;
#define DT_AUTO_MAX 32
int auto_parse(const char *list, dt_auto_cand *out, int max, int *n);
/* Sets each candidate's gamma (--model-gamma where given), encode and decode as measured on this rank (not
 * collective). */
int auto_calibrate(dt_auto_cand *c, int n, const dt_mode_env *env);
/* Fills each t; *chosen: the first candidate (in the list's order of preference) predicted within
 * 15% of the fastest; then sorts c by predicted time. */
int auto_rank(dt_auto_cand *c, int n, const dt_mode_env *env, double comp, double comp_cpu, dt_auto_cand *chosen);
/* "NAME T ms, NAME T ms, ..." of the n candidates, in their order. */
void auto_format(const dt_auto_cand *c, int n, char *buf, size_t size);
/* Seconds per value of a reduce step with the codec on this CPU (encode, decode-and-add, decode). */
double netmodel_codec_gamma(const dt_codec *codec);
/* netmodel_init's reading of its probe, in seconds: tt, ts, tb the steps of 64 bytes, 64 KiB and 1 MiB,
 * tl one 4 MiB exchange, tbusy a 1 MiB step back to back; sets v[0] alpha, v[1] beta, v[3] beta_stream,
 * v[6] beta_busy (before its floor at beta) and v[11], 1 where beta is the upper bound tb per byte */
void netmodel_fit(double tt, double ts, double tb, double tl, double tbusy, double v[12]);

#endif
