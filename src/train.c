/* The training driver. train_run reads top-down: epochs of iterations (train_epoch), an
 * evaluation after each, the checkpoint policy, the summary, the weights. Every log record is
 * filled by one helper (fill) from a span: the sums of a log window, an epoch or the run. */
#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "util.h"

/* Sums over a span of iterations (a log window, an epoch, the run). */
typedef struct span {
    double loss, correct, rows; /* this rank's while a window is open; all ranks' once reduced */
    dt_times t;                 /* this rank's time split */
    long n;                     /* iterations */
    double t0;                  /* start, moved forward by checkpoint time (not training) */
    double train, eval;         /* seconds of training and evaluation */
    double *comp;               /* a log window: this rank's compute (data, forward, backward) per iteration */
    long cap;                   /* ... room for so many (log_every) */
    double comp_max;            /* sum over iterations of the slowest rank's compute, once reduced */
    long n_max;                 /* iterations comp_max covers */
} span;

static void span_start(span *s)
{
    double *comp = s->comp;
    long cap = s->cap;
    memset(s, 0, sizeof *s);
    s->comp = comp, s->cap = cap; /* a window keeps its buffer */
    s->t0 = dt_now();
}

/* Predicted seconds per iteration for the mean phases of a span. */
static double predict(dt_run *r, const span *s)
{
    dt_times m = {0};
    if (s->n <= 0) return 0.0;
    m.data = s->t.data / (double)s->n;
    m.forward = s->t.forward / (double)s->n;
    m.backward = s->t.backward / (double)s->n;
    m.update = s->t.update / (double)s->n;
    m.encode = s->t.encode / (double)s->n; /* the sparse modes' selection and merges */
    m.decode = s->t.decode / (double)s->n;
    m.cpu = s->t.cpu / (double)s->n;
    m.cpu_comm = s->t.cpu_comm / (double)s->n;
    if (s->n_max > 0)
        m.sync = DT_MAX(0.0, s->comp_max / (double)s->n_max - (m.data + m.forward + m.backward +
                                                               (r->mode->encode_first ? m.encode : 0.0)));
    return r->mode->predict(r->mode_state, &r->env, &m);
}

/* The one place a log record is filled: what every type shares, from span s. */
static void fill(dt_run *r, dt_record *rec, const char *type, int epoch, long it, const span *s, float lr)
{
    long ipe = r->env.iters_per_epoch;
    memset(rec, 0, sizeof *rec);
    rec->type = type;
    rec->epoch = epoch;
    rec->epochs = (int)((r->env.total_iters + ipe - 1) / ipe);
    rec->iter = it;
    rec->iter_in_epoch = it - (long)(epoch - 1) * ipe;
    rec->iters_per_epoch = DT_MIN(ipe, r->env.total_iters - (long)(epoch - 1) * ipe); /* --iters: this epoch's */
    rec->time = dt_now() - r->t_start;
    rec->overlapped = r->env.overlapped;
    rec->loss = s->rows > 0 ? s->loss / s->rows : 0.0;
    rec->train_acc = s->rows > 0 ? s->correct / s->rows : 0.0;
    rec->test_loss = rec->test_acc = -1.0;
    rec->lr = lr;
    rec->train_time = s->train;
    rec->eval_time = s->eval;
    rec->samples_per_s = s->train > 0 ? s->rows / s->train : 0.0;
    rec->n_iters = s->n;
    rec->t = s->t;
    rec->t_model = predict(r, s);
    rec->loss_scale = r->scaler.on ? r->scaler.scale : 0.0;
    rec->may_skip = r->scaler.on || (r->env.opts.loss_scale && !strcmp(r->env.opts.loss_scale, "dynamic"));
    rec->may_early = r->env.opts.ps_wait_free;
}

/* Loss and accuracy on this worker's share of the test set, averaged over ranks into test[0..1]. */
static int evaluate(dt_run *r, double *test)
{
    const dt_split *s = &r->ds->test;
    size_t first = 0, count = 0;
    double v[3] = {0, 0, 0};
    if (r->ds->synthetic) return 0; /* accuracy on random data means nothing: test stays -1 (not measured) */
    if (run_average_state(r) != 0) return -1;
    if (r->env.is_worker) split_range(s->n, r->env.worker_rank, r->env.n_workers, &first, &count);
    for (size_t done = 0; done < count;) {
        int rows = (int)DT_MIN((size_t)r->local_batch, count - done);
        for (int i = 0; i < rows; i++) r->eval_idx[i] = (uint32_t)(first + done + (size_t)i);
        dt_view view = {r->view_h, r->view_w, NULL, 0, r->be->host_memory ? 1 : r->threads};
        if (dataset_fill_view(r->ds, s, &view, r->eval_idx, rows, r->x_host, r->y_host) != 0) return -1;
        if (net_set_input(r->net, r->x_host, rows) != 0 || net_set_labels(r->net, r->y_host, rows) != 0) return -1;
        dt_pass pass = {.rows = rows, .train = 0, .labels = r->net->labels, .grad_scale = 1.0f};
        if (net_forward(r->net, &pass) != 0) return -1;
        v[0] += pass.loss_sum;
        v[1] += (double)pass.n_correct;
        done += (size_t)rows;
    }
    v[2] = (double)count;
    if (comm_allreduce_sum_f64(r->comm, v, 3) != 0) return -1;
    test[0] = v[2] > 0 ? v[0] / v[2] : 0.0;
    test[1] = v[2] > 0 ? v[1] / v[2] : 0.0;
    return 0;
}

/* --precision fp16: divides the gradient's values [unscaled, n) by the loss scale (grad_unscale
 * notes a value that is not finite on the device) */
static int unscale_upto(dt_run *r, size_t n)
{
    dt_loss_scaler *s = &r->scaler;
    if (n <= s->unscaled) return 0;
    int rc = r->be->grad_unscale(r->be, r->net->g + s->unscaled, n - s->unscaled, (float)(1.0 / s->scale), s->flag);
    s->unscaled = n;
    return rc;
}

/* backward made the first n_ready values of the gradient final: unscaled, the mode may send them */
static void ready_cb(void *arg, size_t n_ready)
{
    dt_run *r = arg;
    if (r->scaler.on && unscale_upto(r, n_ready) != 0) r->scaler.failed = 1; /* reported after backward */
    if (r->mode->grad_ready) r->mode->grad_ready(r->mode_state, &r->env, n_ready);
}

/* --precision fp16, after backward: unscales the rest of the gradient and decides with every rank
 * whether the step is skipped (a gradient or loss that is not finite anywhere). A rank that does
 * not compute (a parameter server) takes part at the same point, with nothing to add: it learns
 * whether to skip the update. */
static int overflowed(dt_run *r, double loss_sum, int *skip)
{
    dt_loss_scaler *s = &r->scaler;
    int32_t flag = 0, zero = 0;
    if (r->env.is_worker &&
        (unscale_upto(r, r->env.arena.n) != 0 || s->failed || r->be->to_host(r->be, &flag, s->flag, sizeof flag) != 0 ||
         (flag && r->be->to_device(r->be, s->flag, &zero, sizeof zero) != 0)))
        return -1;
    double any = flag || !isfinite(loss_sum);
    if (comm_allreduce_max_f64(r->comm, &any, 1) != 0) return -1;
    *skip = any > 0;
    return 0;
}

/* The loss scale after a step (GradScaler's rule): halved after an overflow, doubled after window
 * good steps in a row. Overflowing whatever the scale is an error. */
static int update_scale(dt_run *r, long it, int skip, dt_times *t)
{
    dt_loss_scaler *s = &r->scaler;
    if (!skip) {
        s->in_row = 0;
        if (++s->good >= s->window) s->scale *= 2.0, s->good = 0;
        return 0;
    }
    t->skipped += 1;
    s->scale *= 0.5, s->good = 0;
    if (++s->in_row >= 64 && s->scale < 1.0) { /* every rank decides the same: all stop, one message */
        r->failed_rank = 0;
        return dt_fail(
            "training diverged: %ld steps in a row up to iteration %ld overflowed in fp16, with the loss scale "
            "down to %g (its values do not fit fp16 however the loss is scaled; try --precision bf16 or "
            "fp32, or a smaller --lr)",
            s->in_row, it + 1, s->scale);
    }
    return 0;
}

/* One iteration on this rank; fills t and pass. */
static int iteration(dt_run *r, long it, int epoch, float lr, dt_times *t, dt_pass *pass)
{
    dt_mode_env *env = &r->env;
    dt_iter info = {it, epoch, lr, 0};
    double t_begin = dt_now(), c_begin = dt_cpu_process();
    comm_set_iteration(r->comm, it);

    if (r->mode->begin && r->mode->begin(r->mode_state, env, &info, t) != 0) return -1;
    if (env->arena.g != r->net->g) net_set_grad_arena(r->net, env->arena.g);
    memset(pass, 0, sizeof *pass);
    if (env->is_worker) {
        dt_batch b;
        double t0 = dt_now(), t1, t2, t3;
        if (r->once.x) { /* --synthetic-once */
            b = r->once;
            if (net_copy_batch(r->net, b.x, b.y, b.rows) != 0) return -1;
        } else if (r->upload ? upload_next(r->upload, r->net, it, &b) != 0
                             : loader_next(r->loader, it, &b) != 0 || net_set_input(r->net, b.x, b.rows) != 0 ||
                                   net_set_labels(r->net, b.y, b.rows) != 0)
            return -1;
        t1 = dt_now();
        pass->rows = b.rows;
        pass->train = 1;
        pass->labels = r->net->labels;
        pass->rng_key = rng_hash((uint64_t)r->opts->seed, (uint64_t)it);
        pass->row0 = b.row0;
        pass->grad_scale = (float)((r->scaler.on ? r->scaler.scale : 1.0) / (double)b.global_rows);
        if (r->graphs) { /* one graph: forward's time holds backward's */
            if (graphs_pass(r->graphs, r->net, pass) != 0 || r->be->sync(r->be) != 0) return -1;
            const char *note = graphs_note(r->graphs);
            if (note[0]) log_text(r->log, "%s\n", note);
        } else if (net_forward(r->net, pass) != 0 || r->be->sync(r->be) != 0) {
            return -1;
        }
        t2 = dt_now();
        r->scaler.unscaled = 0, r->scaler.failed = 0;
        if (!r->graphs && (net_backward(r->net, pass, r->mode->grad_ready || r->scaler.on ? ready_cb : NULL, r) != 0 ||
                           r->be->sync(r->be) != 0))
            return -1;
        if (r->scaler.on && overflowed(r, pass->loss_sum, &info.skip) != 0) return -1;
        t3 = dt_now();
        t->data += t1 - t0;
        t->forward += t2 - t1;
        t->backward += t3 - t2;
    } else if (r->scaler.on && overflowed(r, 0.0, &info.skip) != 0) {
        return -1;
    }
    if (r->mode->end(r->mode_state, env, &info, t) != 0) return -1;
    if (r->scaler.on && update_scale(r, it, info.skip, t) != 0) return -1;
    r->scaler.skipped = info.skip;
    t->iter += dt_now() - t_begin;
    t->cpu += dt_cpu_process() - c_begin;
    return 0;
}

/* The name of the first tensor in arena order (the order backward computes them: the last layer's
 * first) whose values in the host copy `a` of an arena are not finite, or NULL. */
static const char *first_nonfinite(const dt_net *net, const float *a)
{
    for (int i = 0; i < net->n_tensors; i++) {
        const dt_param *p = net->tensors[i];
        for (size_t k = 0; k < p->n; k++)
            if (!isfinite(a[p->offset + k])) return p->name;
    }
    return NULL;
}

/* This worker's loss of iteration `it` (0-based) is not finite: the error names the iteration and
 * where it shows first, in the gradients and in the weights. Only this rank may know yet: main
 * aborts the job, so no other rank goes on to write a checkpoint of it. */
static int diverged(dt_run *r, long it, double loss)
{
    dt_net *net = r->net;
    size_t bytes = net->n_params * sizeof(float);
    float *g = dt_alloc(bytes + sizeof(float)), *w = dt_alloc(bytes + sizeof(float));
    const char *gname = NULL, *wname = NULL;
    if (g && w && r->be->to_host(r->be, g, net->g, bytes) == 0 && r->be->to_host(r->be, w, net->w, bytes) == 0) {
        gname = first_nonfinite(net, g);
        wname = first_nonfinite(net, w);
    }
    dt_free(g);
    dt_free(w);
    return dt_fail("training diverged: the loss is %s in iteration %ld; the first non-finite gradient (in backward "
                   "order) is %s%s%s, the first non-finite weight %s%s%s (try a smaller --lr, or --lr-warmup-epochs)",
                   isnan(loss) ? "nan" : "infinite", it + 1, gname ? "'" : "", gname ? gname : "none", gname ? "'" : "",
                   wname ? "'" : "", wname ? wname : "none", wname ? "'" : "");
}

/* Writes --checkpoint after `done` iterations (collective) and logs it; *seconds: how long it took.
 * Inside an epoch, ep and win are its spans: what their records have summed so far goes in too (the
 * open window's over all ranks), so a resumed epoch's records are the straight run's. */
static int checkpoint(dt_run *r, long done, double *seconds, const span *ep, const span *win)
{
    double t0 = dt_now(), *c = r->ckpt.epoch_sums;
    memset(r->ckpt.epoch_sums, 0, sizeof r->ckpt.epoch_sums);
    if (ep && win && done % r->env.iters_per_epoch != 0) {
        double open[3] = {win->loss, win->correct, win->rows};
        if (comm_allreduce_sum_f64(r->comm, open, 3) != 0) return -1;
        c[0] = ep->loss, c[1] = ep->correct, c[2] = ep->rows, c[3] = open[0], c[4] = open[1], c[5] = open[2];
        c[6] = t0 - ep->t0, c[7] = t0 - win->t0;
        if (done % r->opts->log_every == 0) { /* the window ends here (finish() comes before its record): */
            for (int k = 0; k < 3; k++) c[k] += c[3 + k], c[3 + k] = 0.0; /* the log keeps that record */
            c[7] = 0.0;
        }
    }
    if (ckpt_save(&r->ckpt, done, r->opts->checkpoint) != 0) {
        r->failed_rank = r->ckpt.failed_rank;
        return dt_fail_prefix("--checkpoint");
    }
    *seconds = dt_now() - t0;
    log_text(r->log, "checkpoint %s: %ld iterations (%.1f s)\n", r->opts->checkpoint, done, *seconds);
    return 0;
}

/* Is a checkpoint due after `done` iterations? (At an epoch's end: after its evaluation.) */
static int checkpoint_due(const dt_run *r, long done, int epoch_end)
{
    long ipe = r->env.iters_per_epoch;
    if (!r->opts->checkpoint || done >= r->env.total_iters) return 0;
    if (!epoch_end && done % ipe == 0) return 0; /* taken after the evaluation */
    if (r->opts->ckpt_in_epochs) return epoch_end && (done / ipe) % r->opts->ckpt_every == 0;
    return done % r->opts->ckpt_every == 0;
}

/* After the last iteration: the final checkpoint, before what is in flight lands (land_in_flight),
 * so that a longer run can continue from it as if it had never stopped (Pipe-SGD's gradients in
 * flight included). Inside an epoch it comes before the epoch's record; at an epoch's end after the
 * epoch's evaluation, as every epoch's checkpoint (ps's lands the servers' weights on the workers:
 * the evaluation sees the weights a longer run evaluates there). */
static int finish(dt_run *r, double *ckpt_seconds, const span *ep, const span *win)
{
    return r->opts->checkpoint ? checkpoint(r, r->env.total_iters, ckpt_seconds, ep, win) : 0;
}

/* After the last epoch's evaluation (of the weights at its end, as a longer run evaluates them, so
 * that a resumed run's log has the straight run's record): every computed gradient lands (the
 * mode's flush), its time in the run's, and the final weights are evaluated for the summary. */
static int land_in_flight(dt_run *r, float lr, span *run, double *test)
{
    dt_times t = {0};
    double f0 = dt_now();
    if (r->mode->flush(r->mode_state, &r->env, lr, &t) != 0) return -1;
    t.iter += dt_now() - f0;
    times_add(&run->t, &t);
    run->train += t.iter;
    double e0 = dt_now();
    if (evaluate(r, test) != 0) return -1;
    run->eval += dt_now() - e0;
    return 0;
}

/* How many iterations a stop request takes to reach every rank: an allreduce of the signals seen
 * starts every STOP_LAG iterations and is read STOP_LAG iterations later, in the background
 * meanwhile, so no iteration waits for it. */
#define STOP_LAG 4

/* After `done` iterations: sets r->stopped when the run is to stop here, the same `done` on every
 * rank (a signal on any rank stops all). */
static int stop_poll(dt_run *r, long done)
{
    if (!r->ctl) { /* one rank: at once */
        r->stopped = dt_stop_signal();
        return 0;
    }
    if (done % STOP_LAG != 0) return 0;
    if (r->stop_req >= 0) {
        if (comm_wait(r->ctl, r->stop_req, NULL, NULL) != 0) return -1;
        r->stop_req = -1;
        if ((r->stopped = r->stop_buf) != 0) return 0;
    }
    r->stop_buf = dt_stop_signal();
    return comm_iallreduce_max_int(r->ctl, &r->stop_buf, 1, &r->stop_req);
}

/* The run stops after `done` iterations, asked by signal r->stopped: a checkpoint if there is to
 * be one, and one line that says where it stopped. */
static int stop_here(dt_run *r, long done, const span *ep, const span *win)
{
    double seconds;
    const char *sig = r->stopped == SIGINT ? "SIGINT" : r->stopped == SIGTERM ? "SIGTERM" : "SIGUSR1";
    if (r->opts->checkpoint && checkpoint(r, done, &seconds, ep, win) != 0) return -1;
    if (r->opts->checkpoint)
        log_text(r->log, "stopped by %s after iteration %ld of %ld: continue with --resume %s\n", sig, done,
                 r->env.total_iters, r->opts->checkpoint);
    else
        log_text(r->log,
                 "stopped by %s after iteration %ld of %ld; nothing saved (with --checkpoint FILE a stopped run "
                 "can be resumed)\n",
                 sig, done, r->env.total_iters);
    return 0;
}

/* Closes a log window: its sums over all ranks go to the log and into the epoch. */
static int close_window(dt_run *r, span *win, span *ep, int epoch, long it, float lr)
{
    unsigned long long sat = codec_fp16_saturated();
    double sums[4] = {win->loss, win->correct, win->rows, (double)(sat - r->sat_seen)};
    dt_record rec;
    r->sat_seen = sat;
    if (comm_allreduce_sum_f64(r->comm, sums, 4) != 0) return -1;
    if (sums[3] > 0 && r->saturated == 0) /* once: the summary counts them all */
        log_text(r->log,
                 "warning: by iteration %ld, %.0f gradient value%s on the wire lay beyond fp16's range and went as "
                 "+-65504 (saturated): the gradients outgrow fp16 (a diverging run? a smaller --lr, or --compress t16, "
                 "which keeps fp32's range); the summary's fp16_saturated counts them\n",
                 it, sums[3], sums[3] == 1 ? "" : "s");
    r->saturated += sums[3];
    /* the slowest rank's compute (and encode_first), iteration by iteration: what synchronous modes wait for */
    if (win->comp && win->n <= win->cap && win->n > 0) {
        if (comm_allreduce_max_f64(r->comm, win->comp, (size_t)win->n) != 0) return -1;
        for (long i = 0; i < win->n; i++) win->comp_max += win->comp[i];
        win->n_max = win->n;
        ep->comp_max += win->comp_max, ep->n_max += win->n_max;
    }
    if (!isfinite(sums[0])) { /* every rank sees the same sum and stops with the others */
        r->failed_rank = 0;
        return dt_fail("training diverged: the loss is %s by iteration %ld (try a smaller --lr, or --lr-warmup-epochs)",
                       isnan(sums[0]) ? "nan" : "infinite", it);
    }
    win->loss = sums[0], win->correct = sums[1], win->rows = sums[2];
    win->train = dt_now() - win->t0;
    fill(r, &rec, "iter", epoch + 1, it, win, lr);
    if (log_record(r->log, &rec) != 0) return -1;
    ep->loss += sums[0], ep->correct += sums[1], ep->rows += sums[2];
    span_start(win);
    return 0;
}

/* Whether the epoch that starts at iteration it goes on with a checkpoint's sums (resumed inside it;
 * a checkpoint from before they were kept has none) */
static int carries(const dt_run *r, long it)
{
    const double *c = r->ckpt.epoch_sums;
    return r->opts->resume && it == r->it0 && it % r->env.iters_per_epoch != 0 && c[2] + c[5] > 0;
}

/* The iterations of epoch e from *it on (to its end, or the last iteration of the run); ep gets
 * their sums; win is the log window, with its buffer. Resumed inside the epoch, both go on from the
 * checkpoint's sums (the open window's on rank 0: windows are summed over the ranks). */
static int epoch_iterations(dt_run *r, int e, long *it, span *ep, float *lr, span win)
{
    long ipe = r->env.iters_per_epoch, total = r->env.total_iters, i0 = *it % ipe, first = i0;
    span_start(ep);
    span_start(&win);
    if (carries(r, *it)) {
        const double *c = r->ckpt.epoch_sums;
        ep->loss = c[0], ep->correct = c[1], ep->rows = c[2], ep->t0 -= c[6], win.t0 -= c[7];
        if (comm_rank(r->comm) == 0) win.loss = c[3], win.correct = c[4], win.rows = c[5];
        first = 0; /* the progress line's rate: the epoch's samples over its seconds */
    }
    for (long i = i0; i < ipe && *it < total; i++) {
        dt_times t = {0};
        dt_pass pass;
        double paused = 0.0; /* checkpoint seconds: not training */
        *lr = (float)lr_at(&r->lr, *it, ipe);
        if (iteration(r, *it, e, *lr, &t, &pass) != 0) return -1;
        if (r->scaler.skipped && !isfinite(pass.loss_sum)) /* fp16 overflowed in forward: a step that was not */
            pass.loss_sum = 0.0, pass.n_correct = 0, pass.rows = 0;
        if (!isfinite(pass.loss_sum)) return diverged(r, *it, pass.loss_sum);
        ++*it;
        win.loss += pass.loss_sum, win.correct += (double)pass.n_correct, win.rows += pass.rows;
        if (*it == total && *it % ipe != 0 && finish(r, &paused, ep, &win) != 0) return -1;
        if (win.comp && win.n < win.cap) /* what a rank does before the exchange */
            win.comp[win.n] = t.data + t.forward + t.backward + (r->mode->encode_first ? t.encode : 0.0);
        times_add(&win.t, &t);
        times_add(&ep->t, &t);
        win.n++, ep->n++;
        if (log_enabled(r->log)) { /* the progress line: this rank's running values */
            dt_record rec;
            fill(r, &rec, "iter", e + 1, *it, &win, *lr);
            rec.train_time = dt_now() - ep->t0;
            rec.samples_per_s = (double)(i + 1 - first) * (double)r->opts->batch / rec.train_time;
            log_tick(r->log, &rec);
        }
        if ((*it % r->opts->log_every == 0 || i + 1 == ipe || *it == total) &&
            close_window(r, &win, ep, e, *it, *lr) != 0)
            return -1;
        if (*it < total && stop_poll(r, *it) != 0) return -1;
        if (r->stopped) return stop_here(r, *it, ep, &win);
        if (checkpoint_due(r, *it, 0) && checkpoint(r, *it, &paused, ep, &win) != 0) return -1;
        ep->t0 += paused, win.t0 += paused;
    }
    ep->train = dt_now() - ep->t0;
    return 0;
}

static int train_epoch(dt_run *r, int e, long *it, span *ep, float *lr)
{
    span win = {.cap = r->opts->log_every};
    if (!(win.comp = calloc((size_t)win.cap, sizeof *win.comp))) return dt_fail("out of memory");
    int rc = epoch_iterations(r, e, it, ep, lr, win);
    free(win.comp);
    return rc;
}

static void summary_fields(dt_run *r)
{
    const dt_mode_env *env = &r->env;
    char num[64];
    if (!log_enabled(r->log)) return;
    log_summary_field(r->log, "net", r->net->name, 0);
    log_summary_field(r->log, "dataset", r->dataset, 0);
    if (r->ds->synthetic) log_summary_field(r->log, "synthetic", "true", 1);
    if (r->ds->train.skipped || r->ds->test.skipped) {
        snprintf(num, sizeof num, "%zu", r->ds->train.skipped + r->ds->test.skipped);
        log_summary_field(r->log, "skipped_images", num, 1);
    }
    log_summary_field(r->log, "mode", r->mode->name, 0);
    log_summary_field(r->log, "compress", !strcmp(r->mode->name, "terngrad") ? "tern" : env->opts.compress, 0);
    if (env->codec.desc && !strcmp(env->codec.desc->name, "fp16") && !strcmp(r->be->name, "cpu") &&
        comm_size(r->comm) > 1) {
        snprintf(num, sizeof num, "%.0f", r->saturated); /* counted where the CPU encodes */
        log_summary_field(r->log, "fp16_saturated", num, 1);
    }
    if (r->auto_mode) log_summary_field(r->log, "auto_ranking", r->auto_ranking, 0);
    const struct {
        const char *key;
        double v;
    } nums[] = {{"workers", env->n_workers},
                {"threads", r->threads},
                {"batch", (double)r->opts->batch},
                {"params", (double)r->net->n_params},
                {"model_alpha", env->model.alpha},
                {"model_beta", env->model.beta},
                {"model_beta_stream", env->model.beta_stream},
                {"model_gamma", env->model.gamma},
                {"model_cpu_byte", env->model.cpu_byte},
                {"model_beta_busy", env->model.beta_busy},
                {"model_cores", env->model.cores}};
    for (size_t i = 0; i < DT_ARRAY_LEN(nums); i++) {
        snprintf(num, sizeof num, "%.6g", nums[i].v);
        log_summary_field(r->log, nums[i].key, num, 1);
    }
    size_t peak = backend_peak_memory(r->be);
    if (peak) {
        snprintf(num, sizeof num, "%.1f", (double)peak / 1e6);
        log_summary_field(r->log, "device_peak_mb", num, 1);
    }
}

static int save_weights(dt_run *r)
{
    int rc = 0;
    dt_net *net = r->net;
    if (!r->opts->save) return 0;
    if (run_average_state(r) != 0) return -1;
    if (comm_rank(r->comm) == 0) { /* always a worker: it holds the whole, final weights */
        float *host = dt_alloc((net->n_params + net->n_state + 1) * sizeof(float));
        if (!host) rc = -1;
        if (rc == 0) rc = r->be->to_host(r->be, host, net->w, net->n_params * sizeof(float));
        if (rc == 0) rc = r->be->to_host(r->be, host + net->n_params, net->state, net->n_state * sizeof(float));
        if (rc == 0) rc = weights_check_finite(net, host, host + net->n_params, "the trained weights (not written)");
        if (rc == 0) /* PyTorch counts the training batches each batch-norm layer saw: those loaded and ours */
            rc = weights_save(net, host, host + net->n_params, r->opts->save, r->dataset,
                              r->bn_batches > INT64_MAX - r->env.total_iters ? INT64_MAX /* saturated */
                                                                             : r->bn_batches + r->env.total_iters);
        if (rc != 0) dt_fail_prefix("--save");
        dt_free(host);
        if (rc == 0) log_text(r->log, "weights saved to %s\n", r->opts->save);
    }
    return run_agree(r, rc);
}

/* Evaluates after epoch `epoch` (1-based) whose iterations span s holds (none: `trained` 0) and
 * logs the "epoch" record; s->eval gets the seconds. */
static int evaluate_epoch(dt_run *r, int epoch, long it, span *s, int trained, float lr, double *test)
{
    dt_record rec;
    double ev0 = dt_now();
    if (evaluate(r, test) != 0) return -1;
    s->eval = dt_now() - ev0;
    fill(r, &rec, "epoch", epoch, it, s, lr);
    if (!trained) rec.loss = rec.train_acc = -1.0; /* --epochs 0, or a finished run resumed */
    rec.test_loss = test[0], rec.test_acc = test[1];
    return log_record(r->log, &rec);
}

/* The "summary" record of the run, and the time split table people read. */
static int summary(dt_run *r, int epochs, long it, const span *run, float lr, const double *test)
{
    dt_record rec;
    summary_fields(r);
    fill(r, &rec, "summary", epochs, it, run, lr);
    rec.loss = rec.train_acc = -1.0;
    rec.test_loss = test[0], rec.test_acc = test[1];
    if (log_record(r->log, &rec) != 0) return -1;
    if (r->graphs) {
        long recorded, launched;
        graphs_counts(r->graphs, &recorded, &launched);
        log_text(r->log, "gpu graph: %ld pass%s launched from %ld recording%s (rank 0)\n", launched,
                 launched == 1 ? "" : "es", recorded, recorded == 1 ? "" : "s");
    }
    if (r->ds->synthetic)
        log_text(r->log,
                 "synthetic data: random samples, so no accuracy was measured; samples/s and the time split are "
                 "%s\n",
                 r->opts->synthetic_once ? "those of compute and communication alone (--synthetic-once: one batch, "
                                           "no loader)"
                                         : "those of a real run without its file reads");
    return 0;
}

static void span_add(span *a, const span *b)
{
    times_add(&a->t, &b->t);
    a->comp_max += b->comp_max, a->n_max += b->n_max;
    a->n += b->n, a->rows += b->rows, a->train += b->train, a->eval += b->eval;
}

int train_run(dt_run *r)
{
    long ipe = r->env.iters_per_epoch, total = r->env.total_iters, it = r->it0;
    int epochs = (int)((total + ipe - 1) / ipe);
    float lr = (float)lr_at(&r->lr, it, ipe);
    double test[2] = {-1.0, -1.0}, paused = 0.0; /* test loss and accuracy; checkpoint seconds */
    span run = {0}, ep;

    if (it > 0 && it < total)
        log_text(r->log, "resumed from %s at iteration %ld of %ld (epoch %ld, %ld of its iterations done)\n",
                 r->opts->resume, it, total, it / ipe + 1, it % ipe);
    else if (it > 0)
        log_text(r->log,
                 "resumed from %s at iteration %ld, the last of this run: nothing left to train (raise --epochs "
                 "or --iters to go on); evaluating\n",
                 r->opts->resume, it);
    for (int e = (int)(it / ipe); e < epochs && it < total; e++) {
        int carried = carries(r, it);
        if (train_epoch(r, e, &it, &ep, &lr) != 0) return -1;
        if (r->stopped) return 0;
        if (evaluate_epoch(r, e + 1, it, &ep, 1, lr, test) != 0) return -1;
        span_add(&run, &ep);
        if (carried) /* the run's own: what this process trained */
            run.rows -= r->ckpt.epoch_sums[2] + r->ckpt.epoch_sums[5], run.train -= r->ckpt.epoch_sums[6];
        if (checkpoint_due(r, it, 1) && checkpoint(r, it, &paused, NULL, NULL) != 0) return -1;
        if (it == total && it % ipe == 0 && finish(r, &paused, NULL, NULL) != 0) return -1;
    }
    if (it > r->it0 && r->mode->flush && land_in_flight(r, lr, &run, test) != 0) return -1;
    if (r->it0 >= total) { /* nothing to train: what the checkpoint holds in flight lands, as it did in the run that
                            * wrote it (Pipe-SGD's gradients, ps's latest weights), then the evaluation */
        dt_times t = {0};
        if (r->mode->flush && r->mode->flush(r->mode_state, &r->env, lr, &t) != 0) return -1;
        if (evaluate_epoch(r, epochs, it, &run, 0, lr, test) != 0) return -1;
    }
    /* the weights before the summary: a log with a summary is of a run that ended with all it was asked
     * to write (a --save that fails leaves none, and exit 1) */
    if (save_weights(r) != 0) return -1;
    return summary(r, epochs, it, &run, lr, test);
}
