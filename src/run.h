/* run — the context of one run and its set-up from the options (run.c).
 *
 * Owns (no global state): the options, the ranks, the backend, the net, the data, the
 * optimizer, the comm mode and the log. Set-up is collective and fails cleanly on every rank
 * together: failed_rank says which rank holds the message. The training driver is train.h's.
 */
#ifndef DT_RUN_H
#define DT_RUN_H

#include "ckpt.h"
#include "options.h"
#include "comm/comm.h"
#include "data/data.h"
#include "engine/engine.h"
#include "log.h"
#include "upload.h"

/* --precision fp16: dynamic loss scaling, as PyTorch's GradScaler. The loss gradient is multiplied
 * by scale; backward's gradients are divided by it as they become final, and a non-finite one makes
 * every rank skip the step and halve the scale; window good steps in a row double it. */
typedef struct dt_loss_scaler {
    int on;
    double scale;   /* the same on every rank */
    long good;      /* steps since the last overflow or growth */
    long window;    /* --fp16-scale-window */
    long in_row;    /* steps skipped in a row */
    int32_t *flag;  /* backend memory: set by grad_unscale when a gradient is not finite */
    size_t unscaled; /* values of this iteration's gradient already divided */
    int failed;      /* grad_unscale failed during backward (its message stands) */
    int skipped;     /* the last iteration's step was skipped */
} dt_loss_scaler;

typedef struct dt_run {
    dt_opts *opts;
    dt_comm *comm;
    int launched;    /* started by mpirun (or another launcher) */
    int failed_rank; /* after a failure: the lowest rank that failed when all ranks know of it
                        (a collective step), -1 when only this rank does (then main ends the job) */
    int threads;
    dt_backend *be;
    char auto_why[256]; /* --device auto chose cpu: why not cuda */
    char transport[512]; /* the banner's words on --transport's choice (devnet_choose) */
    int auto_mode;             /* --mode auto: set up as dsync until choose_mode */
    char auto_ranking[512];    /* its ranking: "pipesgd+q8 12.300 ms, dsync ..." */
    char auto_codec[16];       /* its codec: env.opts.compress points here */
    size_t n_train;      /* training samples (of the whole split, before ranks take their share) */
    int auto_cpu;        /* --device auto took the cpu (the GPU options given, opts->gpu_given, do nothing) */
    int64_t bn_batches; /* --load: the batch-norm counter the file holds (PyTorch's num_batches_tracked) */
    char load_digest[17];   /* --load: a digest of the weights read (rank 0), for the run record */
    char classes_note[160]; /* a built-in net sized to the data's classes: the banner says so */
    dt_net *net;
    dt_dataset *ds;
    const char *dataset; /* --dataset, or the one the net's input belongs to */
    int usage_error;     /* the set-up failed on what the user asked for (exit 2): every rank knows */
    dt_augment aug;
    int view_h, view_w; /* the samples as the net takes them (cropped for ImageNet-style data) */
    dt_loader *loader;  /* this worker's training batches */
    dt_upload *upload;  /* and their copies to the device ahead of time (NULL: copied in the loop) */
    dt_batch once;      /* --synthetic-once: the one batch, in backend memory (x NULL: none) */
    dt_graphs *graphs;  /* --gpu-graph: forward and backward recorded (NULL: op by op) */
    char graph_why[160]; /* --gpu-graph given, graphs NULL: why */
    dt_optim *optim;
    dt_lr_schedule lr;
    const dt_mode_desc *mode;
    void *mode_state;
    int mode_ready; /* init succeeded: finalize on teardown */
    dt_mode_env env;
    dt_log *log;
    int local_batch; /* the largest slice of a global batch this rank gets */
    float *x_host;
    int32_t *y_host;
    uint32_t *eval_idx;
    double t_start;
    long it0;             /* the first iteration to run (after --resume) */
    const char *options;   /* the canonical options: what identifies the run (from main) */
    const char *agreement; /* the options every rank must agree on (from main) */
    const char *given;     /* the canonical lines of the options that were given (from main): --rerun's */
    char comm_label[64];   /* what a timed-out wait says the job was doing */
    dt_comm *ctl;          /* a duplicate for the stop protocol (train.c): apart from the modes' traffic */
    int stop_req, stop_buf; /* its request in flight (-1: none) and the value it reduces */
    int stopped;            /* the signal the run stopped for (all ranks after the same iteration), 0 */
    dt_ckpt_state ckpt;   /* what checkpoints hold: views of the parts above */
    dt_loss_scaler scaler; /* --precision fp16 */
    unsigned long long sat_seen; /* codec_fp16_saturated() when the last log window closed */
    double saturated;            /* values the fp16 codec saturated, all ranks, since the run (re)started */
} dt_run;

/* Collective. 0 on every rank, or -1 on every rank (failed_rank holds the message). */
int run_setup(dt_run *r);
void run_teardown(dt_run *r);
/* Collective, instead of run_setup (--dry-run): checks what the set-up checks before training
 * (options, --ranks or the job's rank count against the mode, the net and its memory, the data or,
 * when it is not here, what the run would look for) and prints what the run would be on rank 0.
 * 0 on every rank, or -1 on every rank. */
int run_dry(dt_run *r);
/* --pack-only: packs the image tree the run would train on, then returns (0, or -1 on every rank). */
int run_pack(dt_run *r);
/* Ends a collective step: every rank learns whether any rank failed (rc != 0). 0 when none did;
 * else -1 on every rank, failed_rank the lowest that failed (it holds the message). */
int run_agree(dt_run *r, int rc);
/* Collective: running statistics are each worker's own (its local batches); before evaluating
 * or saving, every rank takes the workers' mean. */
int run_average_state(dt_run *r);

#endif
