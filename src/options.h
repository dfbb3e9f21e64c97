/* options — the effective options of a run: what the command line and config files asked for,
 * with defaults filled in and every value checked (cli.c fills it; run.c and train.c read it).
 * Knows nothing of parsing: the set-up and the train loop see values, not text.
 */
#ifndef DT_OPTIONS_H
#define DT_OPTIONS_H

#include "comm/comm.h"

typedef enum {
    DT_ACT_TRAIN,
    DT_ACT_HELP,
    DT_ACT_VERSION,
    DT_ACT_LIST_MODES,
    DT_ACT_LIST_NETS,
    DT_ACT_LIST_DATASETS,
    DT_ACT_LIST_LAYERS,
    DT_ACT_LIST_DEVICES,
} dt_action;

typedef struct dt_opts {
    dt_action action;
    /* run */
    char *net, *dataset, *data_dir, *device, *precision, *transport, *config, *augment, *on_bad_image, *rerun;
    long epochs, iters, batch, seed, threads, image_size, prefetch, synthetic_samples, ranks, classes;
    int ranks_of_rerun; /* --ranks is the record's (--rerun), not given */
    char rerun_git[64]; /* --rerun: the git commit of the dtrain that made the record ("": not recorded) */
    /* --rerun: digests the run recorded, checked where this run takes the record's net, data and
     * --load ("": not recorded, or overridden on the command line) */
    char rerun_net[17], rerun_data[17], rerun_load[17];
    int rerun_synth_given; /* ... and options that change synthetic data were given (no data check there) */
    int no_shuffle, dry_run, pack_only, synthetic_once;
    long gpu, gpu_workspace; /* --gpu (-1: by local rank), --gpu-workspace MB */
    int tf32, gpu_exact, gpu_graph;
    char gpu_given[96];      /* the GPU options given, "--gpu, --tf32" (cli's; a backend on the CPU ignores them) */
    double fp16_scale;       /* --precision fp16: the initial loss scale */
    long fp16_scale_window;  /* ... steps without an overflow before it doubles */
    /* optimizer */
    double lr, momentum, wd, lr_warmup_epochs;
    int nesterov;
    char *lr_schedule;
    /* communication: the mode, and the flags the comm modes declare (comm/mode.h) */
    char *mode;
    dt_comm_opts comm;
    double comm_timeout;
    /* output */
    char *log, *save, *load, *progress;
    int allow_nonfinite;
    long log_every;
    /* checkpoints */
    char *checkpoint, *checkpoint_every, *resume;
    long ckpt_every;    /* --checkpoint-every parsed: N ... */
    int ckpt_in_epochs; /* ... epochs (else iterations) */
    unsigned char given[128]; /* per option: set on the command line or in a config */
} dt_opts;

#endif
