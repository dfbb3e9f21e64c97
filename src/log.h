/* log — what rank 0 tells people and programs while and after it trains.
 *
 * People: a progress line (redrawn in place on a terminal, plain lines otherwise), one line per
 * epoch, and a summary table of where the time went. Programs: JSON lines (--log FILE), one
 * object per window of iterations ("iter"), per epoch ("epoch") and one "summary", with the
 * keys of CLI.md. Only rank 0 writes; other ranks hold a log that does nothing.
 */
#ifndef DT_LOG_H
#define DT_LOG_H

#include <stdio.h>

#include "stats.h"

typedef enum { PROGRESS_NONE, PROGRESS_LINES, PROGRESS_BAR } dt_progress;

typedef struct dt_log dt_log;

/* A record: what the train loop measured (sums over ranks where it says so). */
typedef struct dt_record {
    const char *type; /* "iter", "epoch", "summary" */
    int epoch;        /* 1-based */
    int epochs;
    long iter;        /* global iterations done */
    long iter_in_epoch, iters_per_epoch;
    double time;      /* seconds since start */
    double loss, train_acc; /* means over the window / epoch, all ranks */
    double test_loss, test_acc; /* < 0: not measured */
    double lr;
    double samples_per_s;
    double train_time, eval_time; /* epoch/summary: seconds */
    long n_iters;     /* iterations the time split averages over */
    dt_times t;       /* sums over n_iters iterations (rank 0) */
    int overlapped;   /* encode/comm/decode ran on a communication thread beside the compute */
    double t_model;   /* the timing model's prediction of seconds per iteration (0: none) */
    double loss_scale; /* --precision fp16: the loss scale after the last iteration (0: none) */
    int may_skip;      /* the run skips steps that overflow (fp16, csc's dynamic loss scale): skipped_steps */
    int may_early;     /* ps --ps-wait-free: bytes_early, 0 too */
} dt_record;

/* `enabled` is 1 on rank 0. json_path may be NULL. `launched`: started by mpirun (known before
 * MPI_Init, which sets launcher variables even in a singleton). `keep` (--resume): a log file that
 * exists is not emptied; log_resume then trims it to where the run resumes. */
int log_open(dt_log **out, int enabled, const char *json_path, const char *progress, int log_every, int launched,
             int keep);
/* --resume at iteration it0 (epochs of ipe iterations; goes_on: iterations are left to train) onto a
 * log kept by log_open: its records after it0, its summaries, the records of an epoch or a log
 * window that a run's end cut short, and a line cut off go; its start records stay; the records
 * written next go after the kept ones, their time going on from the last kept record's. */
int log_resume(dt_log *l, long it0, long ipe, int goes_on);
int log_enabled(const dt_log *l);
/* Plain text to stdout on rank 0 (banners, notes). */
void log_text(dt_log *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Called every iteration on rank 0 with its local running values; redraws at most ~10 times/s. */
void log_tick(dt_log *l, const dt_record *r);
/* Writes a record (JSON line and/or text); fails when the JSON log cannot be written (a full disk). */
int log_record(dt_log *l, const dt_record *r);
/* Extra key/value pairs for the next summary record's JSON ("net", "mode", ...). */
void log_summary_field(dt_log *l, const char *key, const char *value, int is_number);
/* Writes a "start" record of the summary fields given so far (the run's record: what --rerun reads). */
int log_start(dt_log *l);
void log_close(dt_log *l);

/* How a progress=auto request resolves here: a terminal gets a bar. */
dt_progress log_progress_auto(int launched);

#endif
