#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "rng.h"
#include "util.h"

/* Ends a collective set-up stage: every rank learns whether any rank failed. */
static int stage(dt_run *r, int rc)
{
    int who = comm_agree(r->comm, rc != 0);
    if (who < 0) return 0;
    r->failed_rank = who;
    if (rc == 0) dt_fail("rank %d failed", who);
    return -1;
}

static int choose_threads(const dt_run *r)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int aff = cpu_count(), local = comm_local_size(r->comm);
    if (r->opts->threads > 0) return (int)r->opts->threads;
    if (online > 0 && aff < online) return aff; /* the launcher bound us: use what we were given */
    return DT_MAX(1, aff / DT_MAX(1, local));
}

static void comm_opts_from(const dt_opts *o, const dt_mode_desc *m, dt_comm_opts *c)
{
    c->compress = o->compress ? o->compress : m->default_compress ? m->default_compress : "none";
    c->compress_block = (int)o->compress_block;
    c->ps_servers = (int)o->ps_servers;
    c->placement = o->placement;
    c->staleness = (int)o->staleness;
    c->pipeline_depth = (int)o->pipeline_depth;
    c->warmup_epochs = o->warmup_epochs;
    c->fusion_bytes = o->fusion_bytes;
    c->model_alpha = cli_given(o, "model-alpha") ? o->model_alpha : -1.0;
    c->model_beta = cli_given(o, "model-beta") ? o->model_beta : -1.0;
    c->model_gamma = cli_given(o, "model-gamma") ? o->model_gamma : -1.0;
    c->density = o->density;
    c->density_warmup = o->density_warmup;
    c->momentum_correction = o->momentum_correction;
    c->chunk = o->chunk;
    c->chunk_ratio = o->chunk_ratio;
    c->sparsity_warmup = o->sparsity_warmup;
    c->clip = (float)o->clip;
    c->tern_skip_last = o->tern_skip_last;
    c->tern_min_size = o->tern_min_size;
}

/* Packing progress (ImageNet-style folders), on the ranks that pack. */
static void pack_progress(void *arg, const char *what, size_t done, size_t total, double seconds)
{
    dt_run *r = arg;
    static double last_line;
    int tty = isatty(2);
    double rate = seconds > 0 ? (double)done / seconds : 0.0, left = rate > 0 ? (double)(total - done) / rate : 0.0;
    if (!tty && done < total && seconds - last_line < 30.0) return;
    last_line = seconds;
    fprintf(stderr, "%sdtrain: [rank %d] %s: %zu/%zu images (%.1f%%), %.0f images/s, %d:%02d left%s", tty ? "\r" : "",
            comm_rank(r->comm), what, done, total, total ? 100.0 * (double)done / (double)total : 100.0, rate,
            (int)(left / 60), (int)left % 60, tty && done < total ? "" : "\n");
    fflush(stderr);
}

/* Opens the dataset: ImageNet-style folders are packed once per host, by its first rank. */
static int open_data(dt_run *r, int may_pack)
{
    const dt_opts *o = r->opts;
    const dt_shape *in = &r->net->input->out;
    dt_data_opts d = {.channels = 3, .threads = r->threads, .may_pack = may_pack, .progress = pack_progress,
                      .progress_arg = r};
    if (dataset_crops(o->dataset)) {
        if (in->n_dims != 3 || in->d[1] < 8 || in->d[2] < 8)
            return dt_fail("%s: --dataset %s needs a net whose input is C x H x W images (at least 8 x 8)",
                           r->net->origin, o->dataset);
        d.channels = in->d[0];
        d.image_size = o->image_size ? (int)o->image_size : (DT_MAX(in->d[1], in->d[2]) * 8 + 6) / 7;
        if (d.image_size < in->d[1] || d.image_size < in->d[2])
            return dt_fail("--image-size %d is smaller than the net's %dx%d input (expected at least %d)", d.image_size,
                           in->d[1], in->d[2], DT_MAX(in->d[1], in->d[2]));
    }
    return dataset_open_opts(o->dataset, o->data_dir, &d, &r->ds);
}

/* What every rank needs before the data: threads, backend, net; the host's first rank opens the
 * data here (packing it if needed), so the others find it ready. */
static int setup_net(dt_run *r)
{
    const dt_opts *o = r->opts;
    r->threads = choose_threads(r);
    if (strcmp(o->device, "cpu") != 0 && strcmp(o->device, "auto") != 0)
        return dt_fail("--device %s: this build has only the cpu backend", o->device);
    if (backend_cpu_create(&r->be, r->threads) != 0) return -1;
    if (net_load(o->net, &r->net) != 0) return -1;
    if (comm_local_rank(r->comm) == 0) return open_data(r, 1);
    return 0;
}

/* Everything else that depends only on this rank's inputs. */
static int setup_local(dt_run *r)
{
    const dt_opts *o = r->opts;
    dt_mode_env *env = &r->env;
    char a[48], b[48];

    if (!r->ds && open_data(r, 0) != 0) return -1;
    const dt_shape *in = &r->net->input->out;
    dt_shape ds_shape = {3, {r->ds->c, r->ds->h, r->ds->w}};
    shape_format(in, a, sizeof a);
    shape_format(&ds_shape, b, sizeof b);
    if (r->ds->crop) {
        if (in->d[0] != r->ds->c || in->d[1] > r->ds->h || in->d[2] > r->ds->w)
            return dt_fail("%s: the input layer expects %s samples, but %s has %s (expected as many channels and no "
                           "larger sides)",
                           r->net->origin, a, o->dataset, b);
        r->view_h = in->d[1], r->view_w = in->d[2];
    } else {
        if (shape_size(in) != shape_size(&ds_shape) ||
            (in->n_dims == 3 && (in->d[0] != ds_shape.d[0] || in->d[1] != ds_shape.d[1] || in->d[2] != ds_shape.d[2])))
            return dt_fail("%s: the input layer expects %s samples, but %s has %s (expected matching shapes)",
                           r->net->origin, a, o->dataset, b);
        r->view_h = r->ds->h, r->view_w = r->ds->w;
    }
    if (net_n_classes(r->net) != r->ds->n_classes)
        return dt_fail("%s: the net ends in %d classes, but %s has %d (expected the last dense layer to have out=%d)",
                       r->net->origin, net_n_classes(r->net), o->dataset, r->ds->n_classes, r->ds->n_classes);
    if ((size_t)o->batch > r->ds->train.n)
        return dt_fail("--batch %ld is larger than the training set (%zu samples)", o->batch, r->ds->train.n);
    if (augment_parse(o->augment, o->dataset, &r->aug) != 0) return dt_fail_prefix("--augment");
    if (o->checkpoint && cli_every_parse(o->checkpoint_every, &r->ckpt_every, &r->ckpt_in_epochs) != 0)
        return dt_fail_prefix("--checkpoint-every");

    /* the mode decides which ranks compute; the batch is split over those */
    if (!(r->mode = mode_find(o->mode))) return dt_fail("--mode: unknown mode '%s' (expected one of %s)", o->mode, mode_list());
    env->comm = r->comm;
    comm_opts_from(o, r->mode, &env->opts);
    env->seed = (uint64_t)o->seed;
    if ((o->checkpoint || o->resume) && r->mode->no_checkpoint)
        return dt_fail("--%s: not available with --mode %s yet: its %s", o->checkpoint ? "checkpoint" : "resume",
                       r->mode->name, r->mode->no_checkpoint);
    if (codec_create(env->opts.compress, (int)o->compress_block, &env->codec) != 0) return -1;
    if (mode_roles(r->mode, env) != 0) return -1;
    if (o->batch < env->n_workers)
        return dt_fail("--batch %ld is smaller than the number of %s %d (expected at least one sample per rank)",
                       o->batch, env->n_workers == comm_size(r->comm) ? "ranks" : "workers", env->n_workers);
    env->iters_per_epoch = (long)((r->ds->train.n + (size_t)o->batch - 1) / (size_t)o->batch);
    env->total_iters = o->epochs * env->iters_per_epoch;
    if (o->iters > 0 && o->iters < env->total_iters) env->total_iters = o->iters;

    r->local_batch = (int)((o->batch + env->n_workers - 1) / env->n_workers);
    if (net_alloc(r->net, r->be, r->local_batch) != 0) return -1;
    size_t d = (size_t)r->ds->c * r->view_h * r->view_w;
    if (!(r->x_host = dt_alloc(sizeof(float) * d * (size_t)r->local_batch)) ||
        !(r->y_host = dt_alloc(sizeof(int32_t) * (size_t)r->local_batch)) ||
        !(r->eval_idx = dt_alloc(sizeof(uint32_t) * (size_t)r->local_batch)))
        return -1;
    if (optim_create(&r->optim, r->be, r->net->n_params, (float)o->momentum, (float)o->wd, o->nesterov) != 0) return -1;
    if (lr_schedule_parse(o->lr_schedule, o->lr, o->lr_warmup_epochs, (double)o->epochs, &r->lr) != 0) return -1;
    env->arena = net_arena(r->net);
    env->optim = r->optim;
    if (log_open(&r->log, comm_rank(r->comm) == 0, o->log, o->progress, (int)o->log_every, r->launched) != 0)
        return -1;
    return 0;
}

/* The training batches of this worker, from iteration it0 on. */
static int start_loader(dt_run *r, long it0)
{
    const dt_opts *o = r->opts;
    if (!r->env.is_worker || it0 >= r->env.total_iters) return 0;
    return loader_create(&r->loader, r->ds, &r->aug, r->view_h, r->view_w, (int)o->batch, r->env.worker_rank,
                         r->env.n_workers, (uint64_t)o->seed, (int)o->prefetch, it0, r->env.total_iters);
}

/* What every rank must agree on: the options that change the computation, and what they led to. */
static char *agreement_text(dt_run *r)
{
    char *opts = r->options = cli_canonical(r->opts), *text = NULL;
    if (!opts) return NULL;
    if (asprintf(&text, "%snet parameters = %zu + %zu state\ntraining samples = %zu\ntest samples = %zu\n", opts,
                 r->net->n_params, r->net->n_state, r->ds->train.n, r->ds->test.n) < 0) {
        dt_fail("out of memory");
        text = NULL;
    }
    return text;
}

/* Initial weights and state tensors: from --load (read on rank 0) or from the seed; then every
 * rank gets rank 0's. */
static int setup_weights(dt_run *r)
{
    dt_net *net = r->net;
    size_t n = net->n_params, ns = net->n_state;
    float *host = dt_alloc((n + ns + 1) * sizeof(float)), *state = host ? host + n : NULL;
    int rc = 0;
    if (!host) return stage(r, -1);
    if (comm_rank(r->comm) == 0) {
        if (r->opts->load) {
            rc = weights_read(net, r->opts->load, host, state);
            if (rc != 0) dt_fail_prefix("--load");
        } else {
            rc = net_init_params(net, (uint64_t)r->opts->seed);
            if (rc == 0) {
                r->be->to_host(r->be, host, net->w, n * sizeof(float));
                r->be->to_host(r->be, state, net->state, ns * sizeof(float));
            }
        }
    }
    if (stage(r, rc) != 0) {
        dt_free(host);
        return -1;
    }
    rc = comm_bcast(r->comm, host, (n + ns) * sizeof(float), 0);
    if (rc == 0) {
        r->be->to_device(r->be, net->w, host, n * sizeof(float));
        r->be->to_device(r->be, net->state, state, ns * sizeof(float));
    }
    dt_free(host);
    return stage(r, rc);
}

static void fatal(dt_run *r)
{
    fprintf(stderr, "dtrain: [rank %d] %s\n", comm_rank(r->comm), dt_errmsg());
    comm_abort(r->comm, 1);
}

/* Running statistics are each worker's own (its local batches): before evaluating or saving,
 * every rank takes the workers' mean. Collective. */
static int average_state(dt_run *r)
{
    dt_net *net = r->net;
    size_t n = 0;
    for (int t = 0; t < net->n_states; t++) n += net->states[t]->average ? net->states[t]->n : 0;
    if (n == 0 || comm_size(r->comm) == 1) return 0;
    float *buf = dt_alloc(n * sizeof(float));
    if (!buf) return -1;
    size_t o = 0;
    for (int t = 0; t < net->n_states; t++) {
        const dt_param *p = net->states[t];
        if (!p->average) continue;
        if (r->env.is_worker) r->be->to_host(r->be, buf + o, p->w, p->n * sizeof(float));
        o += p->n;
    }
    int rc = comm_allreduce_sum_f32(r->comm, buf, n);
    for (size_t i = 0; i < n; i++) buf[i] /= (float)r->env.n_workers;
    o = 0;
    for (int t = 0; rc == 0 && t < net->n_states; t++) {
        const dt_param *p = net->states[t];
        if (!p->average) continue;
        r->be->to_device(r->be, p->w, buf + o, p->n * sizeof(float));
        o += p->n;
    }
    dt_free(buf);
    return rc;
}

static void banner(dt_run *r)
{
    const dt_opts *o = r->opts;
    const dt_mode_env *env = &r->env;
    int p = comm_size(r->comm);
    char shape[112], mode[160] = "", codec[64];
    dt_shape s = {3, {r->ds->c, r->ds->h, r->ds->w}};
    shape_format(&s, shape, sizeof shape);
    if (strcmp(r->mode->name, "ps") == 0)
        snprintf(mode, sizeof mode, " (%d worker%s + %ld server%s, %s placement, staleness %ld)", env->n_workers,
                 env->n_workers == 1 ? "" : "s", o->ps_servers, o->ps_servers == 1 ? "" : "s", o->placement,
                 o->staleness);
    else if (strcmp(r->mode->name, "pipesgd") == 0)
        snprintf(mode, sizeof mode, " (K = %ld, %g warm-up epoch%s as D-Sync)", o->pipeline_depth, o->warmup_epochs,
                 o->warmup_epochs == 1 ? "" : "s");
    else if (!strcmp(r->mode->name, "topk") || !strcmp(r->mode->name, "gtopk"))
        snprintf(mode, sizeof mode, " (density %g, warm-up %s%s)", o->density, o->density_warmup,
                 o->momentum_correction ? ", momentum correction" : "");
    else if (!strcmp(r->mode->name, "csc") || !strcmp(r->mode->name, "terngrad"))
        snprintf(mode, sizeof mode, "%s", o->momentum_correction ? " (momentum correction)" : "");
    else if (isfinite(o->fusion_bytes))
        snprintf(mode, sizeof mode, " (lazy allreduce every %.0f bytes)", o->fusion_bytes);
    if (!mode_reads(r->mode, "compress")) snprintf(codec, sizeof codec, "(its own)");
    else if (strcmp(env->opts.compress, "q8") == 0) snprintf(codec, sizeof codec, "q8, block %ld", o->compress_block);
    else snprintf(codec, sizeof codec, "%s", env->opts.compress);
    char trained[48] = "", aug[96], crop[64] = "";
    augment_describe(&r->aug, aug, sizeof aug);
    if (r->view_h != r->ds->h || r->view_w != r->ds->w)
        snprintf(crop, sizeof crop, " cropped to %dx%d", r->view_h, r->view_w);
    strncat(shape, crop, sizeof shape - strlen(shape) - 1);
    if (net_n_weights(r->net) != r->net->n_params) snprintf(trained, sizeof trained, ", %zu trained", r->net->n_params);
    log_text(r->log, "dtrain %s: net %s (%zu parameters%s) on %s (%zu train / %zu test, %s, %d classes, %s)\n",
             PACKAGE_VERSION, r->net->name, net_n_weights(r->net), trained, o->dataset, r->ds->train.n, r->ds->test.n, shape,
             r->ds->n_classes, r->ds->dir);
    log_text(r->log, "%d rank%s x %d thread%s, mode %s%s, compress %s\n", p, p == 1 ? "" : "s", r->threads,
             r->threads == 1 ? "" : "s", r->mode->name, mode, codec);
    log_text(r->log, "global batch %ld (%d per worker), %ld iterations/epoch, %ld epoch%s, lr %g (%s), momentum %g%s, "
                     "wd %g\n",
             o->batch, r->local_batch, env->iters_per_epoch, o->epochs, o->epochs == 1 ? "" : "s", o->lr,
             o->lr_schedule, o->momentum, o->nesterov ? " (Nesterov)" : "", o->wd);
    log_text(r->log, "augmentation: %s; %ld batch%s prefetched\n", aug, o->prefetch, o->prefetch == 1 ? "" : "es");
    if (env->note[0]) log_text(r->log, "%s: %s\n", r->mode->name, env->note);
    log_text(r->log, "backend %s: %s; %s\n", r->be->name, backend_cpu_describe(), comm_library());
    if (p > 1)
        log_text(r->log,
                 "timing model (%s): alpha %.1f us, beta %.3g s/B (%.0f MB/s; %.0f MB/s streamed), gamma %.2f ns per "
                 "value\n",
                 env->model.measured ? "measured at start-up" : "from flags", env->model.alpha * 1e6, env->model.beta,
                 env->model.beta > 0 ? 1e-6 / env->model.beta : 0.0,
                 env->model.beta_stream > 0 ? 1e-6 / env->model.beta_stream : 0.0, env->model.gamma * 1e9);
}

int run_setup(dt_run *r)
{
    char *text;
    int rc;
    r->failed_rank = -1;
    r->t_start = dt_now();
    if (stage(r, setup_net(r)) != 0) return -1;
    if (stage(r, setup_local(r)) != 0) return -1;
    if (!(text = agreement_text(r))) return stage(r, -1);
    rc = comm_check_same(r->comm, text, "configuration");
    free(text);
    if (stage(r, rc) != 0) return -1;
    if (setup_weights(r) != 0) return -1;
    if (stage(r, netmodel_init(&r->env.model, r->comm, &r->env.codec, &r->env.opts)) != 0) return -1;
    rc = r->mode->init(&r->mode_state, &r->env);
    r->mode_ready = rc == 0;
    if (stage(r, rc) != 0) return -1;
    r->ckpt = (dt_ckpt_state){r->comm, r->be, r->net, r->optim->v, r->mode, r->mode_state, &r->env,
                              r->opts->dataset, r->ds->train.n, r->options, -1};
    if (r->opts->resume && ckpt_restore(&r->ckpt, r->opts->resume, &r->it0) != 0) {
        r->failed_rank = r->ckpt.failed_rank;
        dt_fail_prefix("--resume");
        return -1;
    }
    if (stage(r, start_loader(r, r->it0)) != 0) return -1;
    banner(r);
    return 0;
}

/* Loss and accuracy on this worker's share of the test set, summed over ranks. */
static int evaluate(dt_run *r, double *loss, double *acc)
{
    const dt_split *s = &r->ds->test;
    size_t first = 0, count = 0;
    double v[3] = {0, 0, 0};
    if (average_state(r) != 0) return -1;
    if (r->env.is_worker) split_range(s->n, r->env.worker_rank, r->env.n_workers, &first, &count);
    for (size_t done = 0; done < count;) {
        int rows = (int)DT_MIN((size_t)r->local_batch, count - done);
        for (int i = 0; i < rows; i++) r->eval_idx[i] = (uint32_t)(first + done + (size_t)i);
        dt_view view = {r->view_h, r->view_w, NULL, 0};
        dataset_fill_view(r->ds, s, &view, r->eval_idx, rows, r->x_host, r->y_host);
        net_set_input(r->net, r->x_host, rows);
        net_set_labels(r->net, r->y_host, rows);
        dt_pass pass = {.rows = rows, .train = 0, .labels = r->net->labels, .grad_scale = 1.0f};
        if (net_forward(r->net, &pass) != 0) return -1;
        v[0] += pass.loss_sum;
        v[1] += (double)pass.n_correct;
        done += (size_t)rows;
    }
    v[2] = (double)count;
    if (comm_allreduce_sum_f64(r->comm, v, 3) != 0) return -1;
    *loss = v[2] > 0 ? v[0] / v[2] : 0.0;
    *acc = v[2] > 0 ? v[1] / v[2] : 0.0;
    return 0;
}

static int save_weights(dt_run *r)
{
    int rc = 0;
    dt_net *net = r->net;
    if (!r->opts->save) return 0;
    if (average_state(r) != 0) fatal(r);
    if (comm_rank(r->comm) == 0) { /* always a worker: it holds the whole, final weights */
        float *host = dt_alloc((net->n_params + net->n_state + 1) * sizeof(float));
        if (!host) rc = -1;
        else {
            r->be->to_host(r->be, host, net->w, net->n_params * sizeof(float));
            r->be->to_host(r->be, host + net->n_params, net->state, net->n_state * sizeof(float));
            rc = weights_save(net, host, host + net->n_params, r->opts->save, r->opts->dataset);
            if (rc != 0) dt_fail_prefix("--save");
            dt_free(host);
        }
        if (rc == 0) log_text(r->log, "weights saved to %s\n", r->opts->save);
    }
    return stage(r, rc);
}

static void ready_cb(void *arg, size_t n_ready)
{
    dt_run *r = arg;
    r->mode->grad_ready(r->mode_state, &r->env, n_ready);
}

/* Predicted seconds per iteration for the mean phases in t (sums over n iterations). */
static double predict(dt_run *r, const dt_times *t, long n)
{
    dt_times m = {0};
    if (n <= 0) return 0.0;
    m.data = t->data / (double)n;
    m.forward = t->forward / (double)n;
    m.backward = t->backward / (double)n;
    m.update = t->update / (double)n;
    return r->mode->predict(r->mode_state, &r->env, &m);
}

/* One iteration on this rank; fills t. */
static void iteration(dt_run *r, long it, int epoch, float lr, dt_times *t, dt_pass *pass)
{
    const dt_opts *o = r->opts;
    dt_mode_env *env = &r->env;
    dt_iter info = {it, epoch, lr};
    double t_begin = dt_now();

    if (r->mode->begin && r->mode->begin(r->mode_state, env, &info, t) != 0) fatal(r);
    if (env->arena.g != r->net->g) net_set_grad_arena(r->net, env->arena.g);
    memset(pass, 0, sizeof *pass);
    if (env->is_worker) {
        dt_batch b;
        double t0 = dt_now(), t1, t2, t3;
        if (loader_next(r->loader, it, &b) != 0) fatal(r);
        net_set_input(r->net, b.x, b.rows);
        net_set_labels(r->net, b.y, b.rows);
        t1 = dt_now();
        pass->rows = b.rows;
        pass->train = 1;
        pass->labels = r->net->labels;
        pass->rng_key = rng_hash((uint64_t)o->seed, (uint64_t)it);
        pass->row0 = b.row0;
        pass->grad_scale = 1.0f / (float)b.global_rows;
        if (net_forward(r->net, pass) != 0) fatal(r);
        r->be->sync(r->be);
        t2 = dt_now();
        if (net_backward(r->net, pass, r->mode->grad_ready ? ready_cb : NULL, r) != 0) fatal(r);
        r->be->sync(r->be);
        t3 = dt_now();
        t->data += t1 - t0;
        t->forward += t2 - t1;
        t->backward += t3 - t2;
    }
    if (r->mode->end(r->mode_state, env, &info, t) != 0) fatal(r);
    t->iter += dt_now() - t_begin;
}

static void record_common(dt_run *r, dt_record *rec, const char *type, int epoch, int epochs, long it)
{
    memset(rec, 0, sizeof *rec);
    rec->type = type;
    rec->epoch = epoch;
    rec->epochs = epochs;
    rec->iter = it;
    rec->time = dt_now() - r->t_start;
    rec->overlapped = r->env.overlapped;
    rec->test_loss = rec->test_acc = -1.0;
}

/* Writes --checkpoint after `done` iterations; collective. Returns the seconds it took. */
static double checkpoint(dt_run *r, long done)
{
    double t0 = dt_now();
    if (ckpt_save(&r->ckpt, done, r->opts->checkpoint) != 0) {
        r->failed_rank = r->ckpt.failed_rank;
        if (comm_rank(r->comm) == r->failed_rank) fprintf(stderr, "dtrain: [rank %d] --checkpoint: %s\n", r->failed_rank, dt_errmsg());
        comm_abort(r->comm, 1);
    }
    double dt = dt_now() - t0;
    log_text(r->log, "checkpoint %s: %ld iterations (%.1f s)\n", r->opts->checkpoint, done, dt);
    return dt;
}

/* Is a checkpoint due after `done` iterations? (At an epoch's end: after its evaluation.) */
static int checkpoint_due(const dt_run *r, long done, int epoch_end)
{
    long ipe = r->env.iters_per_epoch;
    if (!r->opts->checkpoint || done >= r->env.total_iters) return 0;
    if (!epoch_end && done % ipe == 0) return 0; /* taken after the evaluation */
    if (r->ckpt_in_epochs) return epoch_end && (done / ipe) % r->ckpt_every == 0;
    return done % r->ckpt_every == 0;
}

int run_train(dt_run *r)
{
    const dt_opts *o = r->opts;
    dt_mode_env *env = &r->env;
    long ipe = env->iters_per_epoch, total = env->total_iters, it = r->it0;
    int epochs = (int)((total + ipe - 1) / ipe);
    double train_time = 0.0, eval_time = 0.0, samples = 0.0, test_loss = -1.0, test_acc = -1.0;
    float lr = (float)lr_at(&r->lr, it, ipe);
    dt_times all = {0};
    dt_record rec;

    if (r->it0 > 0)
        log_text(r->log, "resumed from %s at iteration %ld of %ld (epoch %ld, %ld of its iterations done)\n", o->resume,
                 r->it0, total, r->it0 / ipe + 1, r->it0 % ipe);
    for (int e = (int)(it / ipe); e < epochs && it < total; e++) {
        double ep_t0 = dt_now(), win_t0 = ep_t0, ep[3] = {0, 0, 0}, win[3] = {0, 0, 0};
        dt_times win_t = {0}, ep_t = {0};
        long win_n = 0, ep_n = 0, i0 = it % ipe;
        for (long i = i0; i < ipe && it < total; i++, it++) {
            dt_times t = {0};
            dt_pass pass;
            lr = (float)lr_at(&r->lr, it, ipe);
            iteration(r, it, e, lr, &t, &pass);
            /* the last iteration: checkpoint before the flush, so a longer run can continue from it as
             * if it had never stopped (Pipe-SGD's gradients in flight included) */
            if (it + 1 == total && o->checkpoint) {
                double dt = checkpoint(r, total);
                ep_t0 += dt, win_t0 += dt;
            }
            if (it + 1 == total && r->mode->flush) { /* every computed gradient lands */
                double f0 = dt_now();
                if (r->mode->flush(r->mode_state, env, lr, &t) != 0) fatal(r);
                t.iter += dt_now() - f0;
            }
            times_add(&win_t, &t);
            times_add(&ep_t, &t);
            times_add(&all, &t);
            win_n++;
            ep_n++;
            win[0] += pass.loss_sum;
            win[1] += (double)pass.n_correct;
            win[2] += pass.rows;

            record_common(r, &rec, "iter", e + 1, epochs, it + 1);
            rec.iter_in_epoch = i + 1;
            rec.iters_per_epoch = ipe;
            if (log_enabled(r->log)) {
                rec.loss = win[2] > 0 ? win[0] / win[2] : 0.0;
                rec.train_acc = win[2] > 0 ? win[1] / win[2] : 0.0;
                rec.train_time = dt_now() - ep_t0;
                rec.samples_per_s = (double)(i + 1 - i0) * (double)o->batch / rec.train_time;
                log_tick(r->log, &rec);
            }
            if ((it + 1) % o->log_every == 0 || i + 1 == ipe || it + 1 == total) {
                double sums[3] = {win[0], win[1], win[2]};
                if (comm_allreduce_sum_f64(r->comm, sums, 3) != 0) fatal(r);
                if (!isfinite(sums[0])) { /* every rank sees the same sum and stops with the others */
                    r->failed_rank = 0;
                    return dt_fail("training diverged: the loss is %s by iteration %ld (try a smaller --lr, or "
                                   "--lr-warmup-epochs)",
                                   isnan(sums[0]) ? "nan" : "infinite", it + 1);
                }
                for (int k = 0; k < 3; k++) ep[k] += sums[k];
                rec.time = dt_now() - r->t_start;
                rec.loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
                rec.train_acc = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
                rec.lr = lr;
                rec.samples_per_s = sums[2] / (dt_now() - win_t0);
                rec.n_iters = win_n;
                rec.t = win_t;
                rec.t_model = predict(r, &win_t, win_n);
                log_record(r->log, &rec);
                memset(win, 0, sizeof win);
                memset(&win_t, 0, sizeof win_t);
                win_n = 0;
                win_t0 = dt_now();
            }
            if (checkpoint_due(r, it + 1, 0)) { /* not training time */
                double dt = checkpoint(r, it + 1);
                ep_t0 += dt, win_t0 += dt;
            }
        }
        double ep_train = dt_now() - ep_t0, ev_t0 = dt_now();
        train_time += ep_train;
        samples += ep[2];
        if (evaluate(r, &test_loss, &test_acc) != 0) fatal(r);
        eval_time += dt_now() - ev_t0;

        record_common(r, &rec, "epoch", e + 1, epochs, it);
        rec.loss = ep[2] > 0 ? ep[0] / ep[2] : 0.0;
        rec.train_acc = ep[2] > 0 ? ep[1] / ep[2] : 0.0;
        rec.test_loss = test_loss;
        rec.test_acc = test_acc;
        rec.lr = lr;
        rec.samples_per_s = ep[2] / ep_train;
        rec.train_time = ep_train;
        rec.eval_time = dt_now() - ev_t0;
        rec.n_iters = ep_n;
        rec.t = ep_t;
        rec.t_model = predict(r, &ep_t, ep_n);
        log_record(r->log, &rec);
        if (checkpoint_due(r, it, 1)) checkpoint(r, it);
    }

    if (r->it0 >= total) { /* nothing to train (--epochs 0, or a finished run resumed): evaluate */
        double ev_t0 = dt_now();
        if (evaluate(r, &test_loss, &test_acc) != 0) fatal(r);
        eval_time = dt_now() - ev_t0;
        record_common(r, &rec, "epoch", epochs, epochs, it);
        rec.loss = rec.train_acc = -1.0;
        rec.test_loss = test_loss;
        rec.test_acc = test_acc;
        rec.eval_time = eval_time;
        log_record(r->log, &rec);
    }

    record_common(r, &rec, "summary", epochs, epochs, it);
    rec.loss = rec.train_acc = -1.0;
    rec.test_loss = test_loss;
    rec.test_acc = test_acc;
    rec.lr = lr;
    rec.samples_per_s = train_time > 0 ? samples / train_time : 0.0;
    rec.train_time = train_time;
    rec.eval_time = eval_time;
    rec.n_iters = it;
    rec.t = all;
    rec.t_model = predict(r, &all, it);
    if (log_enabled(r->log)) {
        char num[64];
        log_summary_field(r->log, "net", r->net->name, 0);
        log_summary_field(r->log, "dataset", o->dataset, 0);
        log_summary_field(r->log, "mode", r->mode->name, 0);
        log_summary_field(r->log, "compress", env->opts.compress, 0);
        snprintf(num, sizeof num, "%d", comm_size(r->comm));
        log_summary_field(r->log, "ranks", num, 1);
        snprintf(num, sizeof num, "%d", env->n_workers);
        log_summary_field(r->log, "workers", num, 1);
        snprintf(num, sizeof num, "%d", r->threads);
        log_summary_field(r->log, "threads", num, 1);
        snprintf(num, sizeof num, "%ld", o->batch);
        log_summary_field(r->log, "batch", num, 1);
        snprintf(num, sizeof num, "%zu", r->net->n_params);
        log_summary_field(r->log, "params", num, 1);
        snprintf(num, sizeof num, "%.6g", env->model.alpha);
        log_summary_field(r->log, "model_alpha", num, 1);
        snprintf(num, sizeof num, "%.6g", env->model.beta);
        log_summary_field(r->log, "model_beta", num, 1);
        snprintf(num, sizeof num, "%.6g", env->model.beta_stream);
        log_summary_field(r->log, "model_beta_stream", num, 1);
        snprintf(num, sizeof num, "%.6g", env->model.gamma);
        log_summary_field(r->log, "model_gamma", num, 1);
    }
    log_record(r->log, &rec);
    return save_weights(r);
}

void run_teardown(dt_run *r)
{
    if (r->mode_ready) r->mode->finalize(r->mode_state, &r->env);
    log_close(r->log);
    loader_destroy(r->loader);
    optim_destroy(r->optim);
    dt_free(r->x_host);
    dt_free(r->y_host);
    dt_free(r->eval_idx);
    free(r->options);
    net_destroy(r->net);
    dataset_close(r->ds);
    if (r->be) backend_destroy(r->be);
}
