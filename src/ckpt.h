/* ckpt — checkpoints: everything a run needs to continue exactly where it stopped.
 *
 * A checkpoint is a weight file (weights.h) with more tensors and metadata: the optimizer's
 * momentum, every rank's own state (running statistics, the comm mode's buffers), the
 * iteration and the options. What goes in is documented in ckpt.c. The order of the data,
 * dropout masks and augmentation draws are functions of (seed, epoch, iteration, sample), so the
 * iteration is all a resume needs of the RNG and the data position.
 *
 * ckpt knows what it saves through dt_ckpt_state alone, never the train loop's run.
 */
#ifndef DT_CKPT_H
#define DT_CKPT_H

#include "comm/comm.h"
#include "engine/engine.h"
#include "safetensors.h"
#include "weights.h"

#define DT_CKPT_EPOCH_SUMS 8

/* What a checkpoint holds, as views of the run's parts (nothing here is owned). */
typedef struct dt_ckpt_state {
    dt_comm *comm;
    dt_backend *be;
    dt_net *net;     /* the weight and state arenas and their tensor tables */
    float *momentum; /* the optimizer's momentum (backend memory, the arena's layout); NULL: none */
    const dt_mode_desc *mode; /* the comm mode's state: its state/restored hooks */
    void *mode_state;
    dt_mode_env *env;
    const char *dataset; /* what the run trains on: a resume must see the same */
    size_t train_samples;
    uint64_t data_fingerprint; /* of its samples and labels (dt_dataset's) */
    const char *options; /* the canonical options (cli_canonical); epochs and iters are left out */
    int failed_rank;     /* out: after a failure, the lowest rank that failed (it holds the message) */
    int usage_error;     /* out: the failure is the command line's (a rank count the checkpoint cannot take) */
    char precision_was[16]; /* out (rank 0, after a restore): the precision the checkpoint was
                             * written in (a resume may change it) */
    double *loss_scale; /* --precision fp16: the loss scale and its good steps (the same on every rank), */
    long *scale_good;   /* saved, and restored where the checkpoint has them; NULL: none */
    /* where the epoch the checkpoint falls in stands (the train loop's, all ranks' sums): loss,
     * correct and samples of its closed log windows, then of its open window, then the seconds of
     * training of each; written by ckpt_save, filled by ckpt_restore (zeros where the checkpoint
     * has none: at an epoch's end, or from before they were kept) */
    double epoch_sums[DT_CKPT_EPOCH_SUMS];
} dt_ckpt_state;

/* Collective: writes a checkpoint after `done` iterations to path (rank 0 writes, atomically).
 * 0 on every rank, or -1 on every rank. */
/* An options text ("key = value" lines) with the defaults that follow from the run spelled out, so that
 * an option given at the value it would take anyway is the same run as one left out: an empty dataset
 * (the net's: `dataset`), an empty compress (the mode's default codec; mode may be NULL or "auto") and
 * classes 0 (the net's count). For checkpoints and for the ranks' start-up agreement. Caller frees;
 * NULL: out of memory. */
char *ckpt_options_resolved(const char *text, const char *dataset, const char *mode, int classes);

int ckpt_save(dt_ckpt_state *s, long done, const char *path);
/* Rank 0's checks of a checkpoint's metadata before a resume reads a tensor: complete, of s's net,
 * made with s's options (but those a resume may change: --epochs, --iters, --precision with its
 * loss-scale settings, --transport), on s's data (train_samples 0: the data is not known here,
 * so neither its size nor its fingerprint is checked; data_fingerprint 0: not its fingerprint).
 * The iteration it ends at and the rank count that made it go to *it and *ranks; fills
 * s->precision_was. */
int ckpt_check_meta(dt_ckpt_state *s, const st_file *f, const char *path, long *it, long *ranks);
/* Opens path and makes those checks (what --dry-run checks of --resume), *it the iteration; and, as
 * ckpt_restore, refuses a checkpoint of another rank count than `ranks` that holds a mode's per-rank
 * state (s->mode names it). Not collective: no comm, backend or mode state is needed in s. */
int ckpt_peek(dt_ckpt_state *s, const char *path, int ranks, long *it);
/* Collective: restores weights, optimizer, running statistics and comm state from path;
 * *it0: the next iteration to run. */
int ckpt_restore(dt_ckpt_state *s, const char *path, long *it0);

/* The file level: F32 tensors with metadata, plus format, version and a checksum of the data.
 * Written atomically. */
int ckpt_write(const char *path, const st_tensor *t, int n, const char *const *mk, const char *const *mv, int n_meta);
/* Reads and checks format, version and checksum. */
int ckpt_open(const char *path, st_file **out);

#endif
