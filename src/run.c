/* The run context: set-up from the options (collective, failing cleanly on every rank
 * together), the banner, and teardown. The training itself is train.c's. */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cpu.h"
#include "gitversion.h"
#include "util.h"

int run_agree(dt_run *r, int rc)
{
    int who = comm_agree(r->comm, rc != 0);
    if (who < 0) return 0;
    r->failed_rank = who;
    if (rc == 0) dt_fail("rank %d failed", who);
    r->usage_error = comm_agree(r->comm, r->usage_error) >= 0; /* then the exit status is 2 on every rank */
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

/* Packing progress (ImageNet-style folders), on the ranks that pack. */
static void pack_progress(void *arg, const char *what, size_t done, size_t total, double seconds)
{
    dt_run *r = arg;
    static double last_line;
    int tty = isatty(2);
    double rate = seconds > 0 ? (double)done / seconds : 0.0, left = rate > 0 ? (double)(total - done) / rate : 0.0;
    char pace[64] = ""; /* a rate from less than a second of packing says nothing */
    if (!tty && done < total && seconds - last_line < 30.0) return;
    last_line = seconds;
    if (seconds >= 1.0)
        snprintf(pace, sizeof pace, ", %.0f images/s, %d:%02d left", rate, (int)(left / 60), (int)left % 60);
    fprintf(stderr, "%sdtrain: [rank %d] %s: %zu/%zu images (%.1f%%)%s%s", tty ? "\r" : "", comm_rank(r->comm), what,
            done, total, total ? 100.0 * (double)done / (double)total : 100.0, pace, tty && done < total ? "" : "\n");
    fflush(stderr);
}

/* The dataset: --dataset, or the one the net's input belongs to. */
static int choose_dataset(dt_run *r)
{
    const dt_shape *in = &r->net->input->out;
    char a[48];
    r->dataset = r->opts->dataset;
    if (r->dataset) return 0;
    if ((r->dataset = dataset_for_input(in->n_dims, in->d, net_n_classes(r->net)))) return 0;
    /* --classes N: the dataset of the net's shape, which may have fewer classes than N */
    if (r->opts->classes > 0 && (r->dataset = dataset_for_shape(in->n_dims, in->d))) return 0;
    shape_format(in, a, sizeof a);
    r->usage_error = 1;
    return dt_fail("%s: no dataset has the net's %s input and %d classes (expected --dataset NAME, one of %s; "
                   "--dataset synthetic measures speed without data)",
                   r->net->origin, a, net_n_classes(r->net), dataset_list());
}

/* The synthetic dataset in the net's shape, stored like the dataset the shape belongs to. */
static int open_synthetic(dt_run *r, int image_size)
{
    const dt_shape *in = &r->net->input->out;
    dt_synthetic s = {.like = dataset_for_shape(in->n_dims, in->d),
                      .n_classes = net_n_classes(r->net), .seed = (uint64_t)r->opts->seed};
    if (s.like && !strcmp(s.like, "cifar10") && s.n_classes == 100) s.like = "cifar100"; /* the same size, its own */
    dataset_sizes(s.like, &s.n_train, &s.n_test);
    if (r->opts->synthetic_samples > 0) s.n_train = (size_t)r->opts->synthetic_samples;
    if (in->n_dims == 3) s.c = in->d[0], s.h = in->d[1], s.w = in->d[2];
    else s.c = 1, s.h = 1, s.w = (int)shape_size(in);
    if (s.like && dataset_crops(s.like)) s.h = s.w = image_size;
    return dataset_open_synthetic(&s, &r->ds);
}

/* Opens the dataset: ImageNet-style folders are packed once per host, by its first rank. 0, -1, or
 * DT_DATA_NOT_FOUND (usage_error set). */
static int open_data(dt_run *r, int may_pack)
{
    const dt_opts *o = r->opts;
    const dt_shape *in = &r->net->input->out;
    dt_data_opts d = {.channels = 3, .threads = r->threads, .may_pack = may_pack, .scan_only = o->dry_run,
                      .skip_bad = !strcmp(o->on_bad_image, "skip"), .progress = pack_progress, .progress_arg = r};
    int synthetic = !strcmp(r->dataset, "synthetic"), rc;
    const char *like = synthetic ? dataset_for_shape(in->n_dims, in->d) : r->dataset;
    if (like && dataset_crops(like)) {
        r->usage_error = 1; /* until the net is found to fit (a net that does not is the command line's) */
        if (in->n_dims != 3 || in->d[1] < 8 || in->d[2] < 8)
            return dt_fail("%s: --dataset %s needs a net whose input is C x H x W images (at least 8 x 8)",
                           r->net->origin, r->dataset);
        if (!synthetic && in->d[0] != 1 && in->d[0] != 3)
            return dt_fail("%s: --dataset %s holds images of 1 or 3 channels, and the net's input has %d",
                           r->net->origin, r->dataset, in->d[0]);
        r->usage_error = 0;
        d.channels = in->d[0];
        d.image_size = o->image_size ? (int)o->image_size : (DT_MAX(in->d[1], in->d[2]) * 8 + 6) / 7;
        if (d.image_size < in->d[1] || d.image_size < in->d[2]) {
            r->usage_error = 1;
            return dt_fail("--image-size %d is smaller than the net's %dx%d input (expected at least %d)", d.image_size,
                           in->d[1], in->d[2], DT_MAX(in->d[1], in->d[2]));
        }
    } else if (o->image_size || strcmp(o->on_bad_image, "stop") != 0) { /* not the default: given */
        r->usage_error = 1;
        return dt_fail("--%s applies to ImageNet-shaped data, not to --dataset %s%s",
                       o->image_size ? "image-size" : "on-bad-image", r->dataset, o->dataset ? "" : " (the net's)");
    }
    if (synthetic) return open_synthetic(r, d.image_size);
    if (o->data_dir && !dt_is_kind(o->data_dir, 1)) r->usage_error = 1; /* no such directory */
    rc = dataset_open_opts(r->dataset, o->data_dir, &d, &r->ds);
    if (rc == DT_DATA_NOT_FOUND) {
        r->usage_error = 1;
        if (!o->dataset) dt_fail_prefix("net %s takes %s when --dataset is not given", r->net->name, r->dataset);
    }
    return rc == 0 ? 0 : rc == DT_DATA_NOT_FOUND ? rc : -1;
}

/* --ranks: the run is meant for that many ranks. */
static int check_ranks(dt_run *r)
{
    long want = r->opts->ranks;
    int have = comm_size(r->comm);
    if (want <= 0 || want == have || (r->opts->dry_run && have == 1)) return 0;
    r->usage_error = 1;
    if (r->opts->ranks_of_rerun)
        return dt_fail("--rerun %s: the run it repeats had %ld ranks, and this one has %d (expected mpirun -np %ld, or "
                       "--ranks %d to repeat it on these)",
                       r->opts->rerun, want, have, want, have);
    return dt_fail("--ranks %ld: this run is meant for %ld ranks, but it has %d (expected mpirun -np %ld)", want, want,
                   have, want);
}

/* Threads, backend, net, and the dataset the net takes. */
static int open_net(dt_run *r)
{
    const dt_opts *o = r->opts;
    r->threads = choose_threads(r);
    dt_backend_opts bo = {.n_threads = r->threads, .device = -1, .local_rank = comm_local_rank(r->comm)};
    bo.precision = strcmp(o->precision, "bf16") == 0   ? DT_PRECISION_BF16
                   : strcmp(o->precision, "fp16") == 0 ? DT_PRECISION_FP16
                                                       : DT_PRECISION_FP32;
#if DT_CUDA_BUILT
    bo.device = (int)o->gpu, bo.tf32 = o->tf32, bo.exact = o->gpu_exact, bo.workspace_mb = o->gpu_workspace;
#endif
    const char *device = o->device;
    if (check_ranks(r) != 0) return -1;
    if (strcmp(device, "auto") == 0) {
        device = backend_auto(r->auto_why, sizeof r->auto_why);
        if (strcmp(device, "cpu") == 0 && o->transport && strcmp(o->transport, "nccl") == 0)
            return dt_fail("--transport nccl moves gradients between GPUs, and --device auto took the cpu (%s)",
                           r->auto_why);
        r->auto_cpu = strcmp(device, "cpu") == 0; /* the GPU options given do nothing: said in the banner */
    }
    if (backend_create(device, &bo, &r->be) != 0) /* a message that names its option (--precision) keeps it */
        return strncmp(dt_errmsg(), "--", 2) == 0 ? -1 : dt_fail_prefix("--device");
    if (bo.precision == DT_PRECISION_FP16) { /* dynamic loss scaling (train.c) */
        r->scaler = (dt_loss_scaler){.on = 1, .scale = o->fp16_scale, .window = o->fp16_scale_window};
        if (!r->be->grad_unscale)
            return dt_fail("--precision fp16: backend %s cannot unscale gradients", r->be->name);
        if (!(r->scaler.flag = r->be->alloc(r->be, sizeof(int32_t)))) return -1;
    }
    if (net_load_classes(o->net, (int)o->classes, &r->net) != 0) {
        r->usage_error = !dt_is_kind(o->net, 0); /* no such net or file: the command line is wrong */
        if (!r->usage_error && o->classes > 0) { /* or a net that --classes cannot size */
            char why[512];
            dt_net *plain;
            snprintf(why, sizeof why, "%s", dt_errmsg());
            if (net_load(o->net, &plain) == 0) r->usage_error = 1, net_destroy(plain);
            dt_fail("%s", why);
        }
        return -1;
    }
    return choose_dataset(r);
}

/* What every rank needs before the data; the host's first rank opens the data here (packing it
 * if needed), so the others find it ready. */
static int setup_net(dt_run *r)
{
    if (open_net(r) != 0) return -1;
    if (comm_local_rank(r->comm) == 0) return open_data(r, 1);
    return 0;
}

/* The net's classes and the data's differ: --classes N takes data of up to N classes; a built-in
 * net without it is sized to the data's (parsed again: nothing is allocated yet); a net file must
 * say it itself. */
static int fit_classes(dt_run *r)
{
    const dt_opts *o = r->opts;
    int k = r->ds->n_classes, n = net_n_classes(r->net);
    dt_net *sized;
    if (k < 2) /* no net can be sized to it: a classifier needs two classes */
        return dt_fail("%s: --dataset %s has %d class%s (expected at least 2: a classifier tells classes apart)",
                       r->ds->dir, r->dataset, k, k == 1 ? "" : "es");
    if (o->classes > 0) {
        if (k <= n) return 0; /* every label has an output */
        return dt_fail("--dataset %s has %d classes, more than --classes %ld (expected --classes %d or more)",
                       r->dataset, k, o->classes, k);
    }
    if (!net_builtin_text(o->net))
        return dt_fail("%s: the net ends in %d classes, but %s has %d (expected the last dense layer to have out=%d, "
                       "or --classes %d)",
                       r->net->origin, n, r->dataset, k, k, k);
    if (net_load_classes(o->net, k, &sized) != 0) return -1;
    net_destroy(r->net);
    r->net = sized;
    snprintf(r->classes_note, sizeof r->classes_note, "%s's last layer sized from %d to the data's %d classes", o->net,
             n, k);
    return 0;
}

/* The data fits the net: sample shape, classes, batch; and the augmentation for it. */
static int fit(dt_run *r)
{
    const dt_opts *o = r->opts;
    char a[48], b[48];
    const dt_shape *in = &r->net->input->out;
    dt_shape ds_shape = {3, {r->ds->c, r->ds->h, r->ds->w}};
    shape_format(in, a, sizeof a);
    shape_format(&ds_shape, b, sizeof b);
    if (r->ds->crop) {
        if (in->d[0] != r->ds->c || in->d[1] > r->ds->h || in->d[2] > r->ds->w)
            return dt_fail("%s: the input layer expects %s samples, but %s has %s (expected as many channels and no "
                           "larger sides)",
                           r->net->origin, a, r->dataset, b);
        r->view_h = in->d[1], r->view_w = in->d[2];
    } else {
        if (shape_size(in) != shape_size(&ds_shape) ||
            (in->n_dims == 3 && (in->d[0] != ds_shape.d[0] || in->d[1] != ds_shape.d[1] || in->d[2] != ds_shape.d[2])))
            return dt_fail("%s: the input layer expects %s samples, but %s has %s (expected matching shapes)",
                           r->net->origin, a, r->dataset, b);
        r->view_h = r->ds->h, r->view_w = r->ds->w;
    }
    if (net_n_classes(r->net) != r->ds->n_classes && fit_classes(r) != 0) return -1;
    if ((size_t)o->batch > r->ds->train.n && o->epochs > 0) /* --epochs 0 only evaluates: no batch is drawn */
        return dt_fail("--batch %ld is larger than the training set (%zu samples)", o->batch, r->ds->train.n);
    if (augment_parse(o->augment, r->ds->synthetic ? r->ds->like : r->dataset, &r->aug) != 0)
        return dt_fail_prefix("--augment");
    return 0;
}

/* The same; what it finds is a usage error: the net, data, batch and augmentation asked for do not
 * go together. */
static int check_fit(dt_run *r)
{
    int rc = fit(r);
    if (rc != 0 && r->ds->n_classes >= 2) r->usage_error = 1; /* one class: the data is wrong, not the command */
    return rc;
}

/* --log: a device or a pipe (/dev/stdout) is written as it is; else a file as --save's */
static int check_log_target(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) { /* links followed, as fopen follows them */
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return 0;
        const char *kernel = dt_kernel_fs(path);
        if (kernel) return dt_fail("%s is one of the kernel's files (in %s), not one a log can go in", path, kernel);
        if (!S_ISREG(st.st_mode))
            return dt_fail("%s is %s (expected a regular file, a device or no file)", path, dt_file_kind(st.st_mode));
        return access(path, W_OK) == 0 ? 0 : dt_fail("%s: cannot write (%s)", path, strerror(errno));
    }
    if (lstat(path, &st) == 0) return 0; /* a dangling link: the run creates its target */
    return dt_check_creatable(path);
}

/* Rank 0 writes the outputs: a target it cannot replace, or a file the data is read from, is found
 * now (also by --dry-run), not after training. */
static int check_targets(dt_run *r)
{
    const dt_opts *o = r->opts;
    if (comm_rank(r->comm) != 0) return 0;
    const char *paths[] = {o->save, o->checkpoint, o->log}, *names[] = {"--save", "--checkpoint", "--log"};
    for (int i = 0; i < 3; i++) {
        const char *data = paths[i] ? dataset_file_named(r->ds, paths[i]) : NULL;
        if (data) {
            r->usage_error = 1;
            return dt_fail("%s %s is %s's file %s: the run would replace the data it reads (give another name)",
                           names[i], paths[i], r->dataset, data);
        }
        const char *tree = paths[i] ? dataset_tree_holding(r->ds, paths[i]) : NULL;
        if (tree) {
            r->usage_error = 1;
            return dt_fail("%s %s is among the images of %s's tree (%s): the next scan would take it for an image, "
                           "or it would replace one (give a path outside the tree's train and val)",
                           names[i], paths[i], r->dataset, tree);
        }
        if (paths[i] && (i < 2 ? dt_check_creatable(paths[i]) : check_log_target(paths[i])) != 0) {
            r->usage_error = dt_target_misnamed(paths[i]);
            return dt_fail_prefix("%s", names[i]);
        }
    }
    return 0;
}

/* The file system of path: whether it has room for `bytes` more; 0, or -1 and a message naming what
 * is free. The temporary file is written whole while the file it replaces is still there. */
static int check_room(const char *path, double bytes, const char *what)
{
    char dir[4096];
    struct statvfs fs;
    dt_parent_dir(path, dir, sizeof dir);
    if (statvfs(dir, &fs) != 0) return 0; /* nothing to go by: the write says what went wrong */
    double room = (double)fs.f_bavail * (double)fs.f_frsize;
    if (room >= bytes) return 0;
    return dt_fail("%s: its file system has %.1f MB free, and %s take at least %.1f MB: the run would fail when it "
                   "writes them (expected room for them, or a path on another file system)",
                   path, room / 1e6, what, bytes / 1e6);
}

/* Rank 0, before training: --save and --checkpoint are this run's alone (a second run onto either
 * fails now instead of replacing this one's files unseen), and there is room for them now rather
 * than a failure after hours of training. */
static int hold_targets(dt_run *r)
{
    const dt_opts *o = r->opts;
    const dt_net *net = r->net;
    if (comm_rank(r->comm) != 0) return 0;
    double weights = 4.0 * (double)(net->n_params + net->n_state),
           ckpt = weights + (o->momentum != 0.0 ? 4.0 * (double)net->n_params : 0.0);
    if (o->save && (dt_hold_output(o->save) != 0 || check_room(o->save, weights, "the weights") != 0))
        return dt_fail_prefix("--save");
    if (o->checkpoint && (dt_hold_output(o->checkpoint) != 0 ||
                          check_room(o->checkpoint, ckpt, "the checkpoint's weights and momentum") != 0))
        return dt_fail_prefix("--checkpoint");
    return 0;
}

/* A batch norm over 1 value per channel (a dense layer's, or 1x1 pixels, on 1 sample) outputs its
 * shift alone and nothing before it learns; PyTorch refuses it. A rank sees 1 sample when the batch
 * gives it 1, or when the epoch's last, short batch does (n_train % batch samples under 2 a worker,
 * some worker then getting 1, as splits are balanced). Refused before training, with the nearest
 * batch from --batch up that gives every rank 0 or at least 2 of every batch. */
static int ones_a_rank(size_t n_train, long batch, int workers)
{
    long last = batch > 0 ? (long)(n_train % (size_t)batch) : 0;
    return batch / workers == 1 ? 1 : last > 0 && last < 2L * workers ? 2 : 0; /* 2: the last batch */
}

static int check_batchnorm(dt_run *r, size_t n_train)
{
    const dt_mode_env *env = &r->env;
    long batch = r->opts->batch;
    int p = env->n_workers, ones = ones_a_rank(n_train, batch, p);
    if (!ones || env->total_iters == 0) return 0;
    if (ones == 2 && env->total_iters < env->iters_per_epoch) return 0; /* --iters ends before the last batch */
    for (int i = 0; i < r->net->n_layers; i++) {
        const dt_layer *l = r->net->layers[i];
        long per = 1;
        for (int d = 1; d < l->out.n_dims; d++) per *= l->out.d[d];
        if (strcmp(l->ops->type, "batchnorm") != 0 || per != 1) continue;
        long fit = batch; /* ends: n_train itself leaves no short batch */
        while (fit < (long)n_train && ones_a_rank(n_train, fit, p)) fit++;
        char why[160];
        if (ones == 1)
            snprintf(why, sizeof why, "--batch %ld over %d worker%s gives a rank 1 sample an iteration", batch, p,
                     p == 1 ? "" : "s");
        else
            snprintf(why, sizeof why,
                     "the last batch of each epoch, %ld of the %zu training samples at --batch %ld, "
                     "gives a rank of the %d worker%s 1 sample",
                     (long)(n_train % (size_t)batch), n_train, batch, p, p == 1 ? "" : "s");
        r->usage_error = 1;
        return dt_fail("%s, so batch norm '%s' (%s:%d) normalizes 1 value per channel: its output is its shift alone "
                       "and nothing before it learns (expected at least 2 samples per rank in every batch: "
                       "--batch %ld, say)",
                       why, l->name, r->net->origin, l->line, fit);
    }
    return 0;
}

/* The mode and its roles on p ranks (which compute; the batch is split over those), the codec,
 * and the iterations for n_train training samples. */
static int setup_mode(dt_run *r, int p, size_t n_train)
{
    const dt_opts *o = r->opts;
    dt_mode_env *env = &r->env;
    r->auto_mode = strcmp(o->mode, "auto") == 0; /* set up as dsync; choose_mode picks the mode later */
    if (!(r->mode = mode_find(r->auto_mode ? "dsync" : o->mode)))
        return dt_fail("--mode: unknown mode '%s' (expected one of %s, or auto)", o->mode, mode_list());
    env->comm = r->comm;
    env->n_ranks = p;
    env->threads = r->threads;
    env->opts = mode_opts_for(r->mode, &o->comm);
    if (r->auto_mode) env->opts.compress = "none";
    comm_set_sleepy(r->comm, strcmp(env->opts.comm_wait, "sleep") == 0,
                    NULL); /* a communication thread's own: its mode's */
    env->seed = (uint64_t)o->seed;
    if (mode_codec_create(&env->opts, &env->codec) != 0) return -1;
    if (mode_roles(r->mode, env) != 0) { /* the rank count does not suit the mode's roles */
        r->usage_error = 1;
        return -1;
    }
    if (o->batch < env->n_workers) {
        r->usage_error = 1;
        return dt_fail("--batch %ld is smaller than the number of %s %d (expected at least one sample per rank)",
                       o->batch, env->n_workers == p ? "ranks" : "workers", env->n_workers);
    }
    env->iters_per_epoch = (long)((n_train + (size_t)o->batch - 1) / (size_t)o->batch);
    env->total_iters = o->epochs * env->iters_per_epoch;
    if (o->iters > 0 && o->iters < env->total_iters) env->total_iters = o->iters;
    if (env->total_iters == 0 && r->ds && r->ds->synthetic && !o->save && !o->load) {
        r->usage_error = 1; /* --epochs 0 evaluates, and synthetic data has nothing to evaluate against */
        return dt_fail("--epochs 0 on synthetic data would neither train nor evaluate (expected --epochs 1 or more, "
                       "--save FILE for the initial weights, or --load FILE to check a weight file)");
    }
    if (env->total_iters == 0 && o->checkpoint && !o->resume) {
        r->usage_error = 1; /* --epochs 0 only evaluates: no iteration ends in a checkpoint */
        return dt_fail("--checkpoint with --epochs 0 would write nothing: the run only evaluates "
                       "(expected --epochs 1 or more, or --save FILE for the weights)");
    }
    if (r->net->n_params == 0 && env->total_iters > 0) /* the sparse modes would select from nothing */
        return dt_fail("--net %s: no layer has parameters to train (all are frozen), so there is nothing to train "
                       "(--epochs 0 evaluates it)",
                       o->net);
    r->local_batch = (int)((o->batch + env->n_workers - 1) / env->n_workers);
    return check_batchnorm(r, n_train);
}

/* --rerun: the net and the data the record's are those it recorded (where the command line did
 * not name others): a net file edited since, or other data in the directory, would be another run */
static int check_rerun(dt_run *r, int data)
{
    const dt_opts *o = r->opts;
    char digest[17], fp[17];
    net_digest(r->net, digest);
    if (o->rerun_net[0] && strcmp(digest, o->rerun_net) != 0) {
        if (!net_is_path(o->net))
            return dt_fail("--rerun %s: this dtrain's built-in net %s is not the one the run had: its layers differ "
                           "(digest %s, the record's %s; expected the build that made the record, or --net %s to "
                           "run this one)",
                           o->rerun, o->net, digest, o->rerun_net, o->net);
        return dt_fail("--rerun %s: the net file %s is not the one the run had: its layers differ (digest %s, the "
                       "record's %s; expected the file as it was, or --net to run another net)",
                       o->rerun, o->net, digest, o->rerun_net);
    }
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)r->ds->fingerprint);
    if (!data || !o->rerun_data[0] || !strcmp(fp, o->rerun_data) || (r->ds->synthetic && o->rerun_synth_given))
        return 0;
    if (r->ds->synthetic) /* of the same settings: only another build generates other samples */
        return dt_fail(
            "--rerun %s: this dtrain generates other synthetic samples than the run had (fingerprint %s, the "
            "record's %s; expected the build that made the record)",
            o->rerun, fp, o->rerun_data);
    return dt_fail("--rerun %s: the data in %s is not the data the run had: its fingerprint is %s, the record's %s "
                   "(expected the same samples and labels, or --data-dir for other data)",
                   o->rerun, r->ds->dir, fp, o->rerun_data);
}

/* Everything else that depends only on this rank's inputs. */
static int setup_local(dt_run *r)
{
    const dt_opts *o = r->opts;
    dt_mode_env *env = &r->env;

    if (!r->ds && open_data(r, 0) != 0) return -1;
    if (check_fit(r) != 0 || check_rerun(r, 1) != 0 || check_targets(r) != 0 || hold_targets(r) != 0 ||
        setup_mode(r, comm_size(r->comm), r->ds->train.n) != 0)
        return -1;
    if (net_alloc(r->net, r->be, r->local_batch) != 0) return -1;
    size_t d = (size_t)r->ds->c * r->view_h * r->view_w;
    if (!(r->x_host = backend_host_alloc(r->be, sizeof(float) * d * (size_t)r->local_batch)) ||
        !(r->y_host = backend_host_alloc(r->be, sizeof(int32_t) * (size_t)r->local_batch)) ||
        !(r->eval_idx = dt_alloc(sizeof(uint32_t) * (size_t)r->local_batch)))
        return -1;
    if (optim_create(&r->optim, r->be, r->net->n_params, (float)o->momentum, (float)o->wd, o->nesterov) != 0) return -1;
    if (lr_schedule_parse(o->lr_schedule, o->lr, o->lr_warmup_epochs, (double)o->epochs, &r->lr) != 0) return -1;
    env->arena = net_arena(r->net);
    env->optim = r->optim;
    if (log_open(&r->log, comm_rank(r->comm) == 0, o->log, o->progress, (int)o->log_every, r->launched,
                 o->resume != NULL) != 0) {
        r->usage_error = o->log && dt_target_misnamed(o->log);
        return -1;
    }
    return 0;
}

/* --load into host arenas host (n_params floats) and state (n_state): the file holds the net's
 * tensors, finite unless --allow-nonfinite; a missing file is a usage error. */
static int read_load(dt_run *r, float *host, float *state)
{
    const dt_opts *o = r->opts;
    int rc = weights_read(r->net, o->load, host, state, &r->bn_batches);
    if (rc == 0 && !o->allow_nonfinite && weights_check_finite(r->net, host, state, o->load) != 0)
        rc = dt_fail("%s: refused (expected finite weights; --allow-nonfinite loads them anyway)", dt_errmsg());
    if (rc == 0) { /* the weights as read (converted to fp32), and the counter */
        uint64_t h = dt_hash64(host, r->net->n_params * sizeof(float), DT_HASH_INIT);
        h = dt_hash64(state, r->net->n_state * sizeof(float), h);
        h = dt_hash64(&r->bn_batches, sizeof r->bn_batches, h);
        snprintf(r->load_digest, sizeof r->load_digest, "%016llx", (unsigned long long)h);
        if (o->rerun_load[0] && strcmp(o->rerun_load, r->load_digest) != 0)
            return dt_fail("--rerun %s: the weights in %s are not those the run loaded (their digest is %s, the "
                           "record's %s; expected the same file, or --load FILE to start from other weights)",
                           o->rerun, o->load, r->load_digest, o->rerun_load);
    }
    if (rc != 0) {
        dt_fail_prefix("--load");
        r->usage_error = !dt_is_kind(r->opts->load, 0); /* no such file */
    }
    return rc;
}

/* --dry-run --resume: the checkpoint opens (format, version, checksum), is of this net, and is not
 * past this run's end; what else must match (options, data, ranks) is checked when the run restores */
/* the checkpoint's iteration it against the run's end: a resume runs from it to total_iters */
static int resume_within(const dt_run *r, long it)
{
    if (it <= r->env.total_iters) return 0;
    return dt_fail("--resume %s: the checkpoint is at iteration %ld, past this run's last (%ld): expected --epochs "
                   "or --iters that reach beyond it",
                   r->opts->resume, it, r->env.total_iters);
}

/* --dry-run --resume: the checks ckpt_restore makes of the file's metadata (the data's size and
 * fingerprint where the data is here) and of the rank count (of `ranks` ranks, --ranks or this job's),
 * and the iteration against the run's end */
static int dry_resume(dt_run *r, int ranks)
{
    const char *path = r->opts->resume;
    int known = r->ds && (r->ds->synthetic || r->ds->train.x);
    dt_ckpt_state s = {.net = r->net,
                       .dataset = r->dataset,
                       .train_samples = known ? r->ds->train.n : 0,
                       .data_fingerprint = known ? r->ds->fingerprint : 0,
                       .options = r->options,
                       .mode = r->mode};
    long it = 0;
    if (ckpt_peek(&s, path, ranks, &it) != 0) {
        r->usage_error = s.usage_error || !dt_is_kind(path, 0); /* another rank count; no such file */
        return dt_fail_prefix("--resume");
    }
    return resume_within(r, it);
}

/* --dry-run on this rank: what run_setup checks before it trains, without training, packing or
 * allocating the net; data that is not here is described by what the run would look for. */
static int dry_check(dt_run *r, char *data, size_t data_n)
{
    const dt_opts *o = r->opts;
    const dt_shape *in;
    int p = o->ranks > 0 ? (int)o->ranks : comm_size(r->comm), rc;
    size_t n_train, n_test;
    if (open_net(r) != 0) return -1;
    in = &r->net->input->out;
    if ((rc = open_data(r, 0)) == 0) {
        if (check_fit(r) != 0 || check_rerun(r, !strstr(r->ds->train.origin, "not packed yet")) != 0) return -1;
        n_train = r->ds->train.n;
        if (r->ds->synthetic) /* never evaluated: no test samples to speak of */
            snprintf(data, data_n, "%s, %zu training samples (generated; no evaluation)", r->dataset, r->ds->train.n);
        else
            snprintf(data, data_n, "%s, %zu training and %zu test samples in %s%s", r->dataset, r->ds->train.n,
                     r->ds->test.n, r->ds->dir,
                     strstr(r->ds->train.origin, "not packed yet") ? " (not packed yet: the first run packs it)" : "");
    } else if (rc == DT_DATA_NOT_FOUND) {
        snprintf(data, data_n, "%s, not here: %s", r->dataset, dt_errmsg());
        r->usage_error = 0;
        dt_err_clear();
        if (!(o->classes > 0 ? dataset_fits_shape(r->dataset, in->n_dims, in->d)
                             : dataset_fits_input(r->dataset, in->n_dims, in->d, net_n_classes(r->net)))) {
            char a[48];
            r->usage_error = 1;
            shape_format(in, a, sizeof a);
            return dt_fail("%s: the net's %s input and %d classes do not fit --dataset %s (expected %s)",
                           r->net->origin, a, net_n_classes(r->net), r->dataset,
                           dataset_for_input(in->n_dims, in->d, net_n_classes(r->net)) ?: "a dataset of that shape");
        }
        dataset_sizes(r->dataset, &n_train, &n_test);
        r->usage_error = 1; /* until the checks below pass */
        if ((size_t)o->batch > n_train && o->epochs > 0)
            return dt_fail("--batch %ld is larger than the training set (%zu samples)", o->batch, n_train);
        if (augment_parse(o->augment, r->dataset, &r->aug) != 0) return dt_fail_prefix("--augment");
        r->usage_error = 0;
    } else {
        return -1;
    }
    r->n_train = n_train;
    if (check_targets(r) != 0 || setup_mode(r, p, n_train) != 0 || sampler_fits(n_train) != 0) return -1;
    if (r->auto_mode && o->comm.model_compute > 0 && (o->comm.model_alpha < 0 || o->comm.model_beta < 0)) {
        r->usage_error = 1; /* nothing to measure the link with in a dry run */
        return dt_fail(
            "--dry-run with --model-compute predicts for a given link: give --model-alpha and --model-beta too");
    }
    if (lr_schedule_parse(o->lr_schedule, o->lr, o->lr_warmup_epochs, (double)o->epochs, &r->lr) != 0) return -1;
    if (o->load) { /* the file read as the run reads it */
        float *host = dt_alloc((r->net->n_params + r->net->n_state + 1) * sizeof(float));
        int bad = host ? read_load(r, host, host + r->net->n_params) : -1;
        dt_free(host);
        if (bad) return -1;
    }
    if (o->resume && dry_resume(r, p) != 0) return -1;
    return net_check_memory(r->net, r->be, r->local_batch, NULL);
}

/* --dry-run --mode auto with the link (--model-alpha, --model-beta) and the compute (--model-compute)
 * given: the ranking a run on --ranks ranks would make, from those and the candidates' codecs and
 * selections timed on this CPU (--model-gamma replaces the codecs' time); cores are not a limit
 * unless --model-cores says so. Nothing is sent: a prediction for a cluster that is not here. */
static int dry_rank(dt_run *r, char *out, size_t n_out)
{
    dt_mode_env env = r->env;
    const dt_comm_opts *o = &env.opts;
    dt_auto_cand c[DT_AUTO_MAX], best;
    int n;
    if (auto_parse(o->auto_allow, c, DT_AUTO_MAX, &n) != 0) return -1;
    env.arena.n = r->net->n_params;
    env.model = (dt_netmodel){.alpha = o->model_alpha, .beta = o->model_beta, .beta_stream = o->model_beta,
                              .beta_busy = o->model_beta, .gamma = DT_MAX(o->model_gamma, 0.0),
                              .cores = DT_MAX(o->model_cores, 0.0)};
    if (auto_calibrate(c, n, &env) != 0) return -1; /* --model-gamma, where given */
    if (auto_rank(c, n, &env, o->model_compute, o->model_compute, &best) != 0) return -1;
    int off = snprintf(out, n_out, "would choose %s; predicted per iteration: ", best.name);
    if (off > 0 && (size_t)off < n_out) auto_format(c, n, out + off, n_out - (size_t)off);
    return 0;
}

/* --pack-only (also under --dry-run): the dataset is an image tree */
static int pack_only_fits(dt_run *r)
{
    if (!r->opts->pack_only || strcmp(r->dataset, "imagenet") == 0) return 0;
    r->usage_error = 1;
    return dt_fail("--pack-only packs ImageNet-style image trees; --dataset %s%s has nothing to pack", r->dataset,
                   r->opts->dataset ? "" : " (the net's)");
}

int run_dry(dt_run *r)
{
    const dt_opts *o = r->opts;
    const dt_mode_env *env = &r->env;
    char data[1400], shape[48], mode[320];
    double bytes = 0;
    r->failed_rank = -1;
    if (run_agree(r, dry_check(r, data, sizeof data)) != 0 || run_agree(r, pack_only_fits(r)) != 0) return -1;
    if (comm_rank(r->comm) != 0) return 0;
    net_check_memory(r->net, r->be, r->local_batch, &bytes);
    if ((float)o->momentum != 0.0f) bytes += 4.0 * (double)r->net->n_params; /* optim_create's velocity */
    double shuffle = (double)sampler_bytes(r->n_train); /* the sampler's indices, host memory */
    shape_format(&r->net->input->out, shape, sizeof shape);
    int predict = r->auto_mode && o->comm.model_alpha >= 0 && o->comm.model_beta >= 0 && o->comm.model_compute > 0;
    char ranking[DT_AUTO_MAX * 48 + 64] = "";
    if (predict && dry_rank(r, ranking, sizeof ranking) != 0) return -1;
    if (r->auto_mode) /* chosen at start-up, by what the run measures then */
        snprintf(mode, sizeof mode, "mode auto (the timing model chooses among %s at start-up)", env->opts.auto_allow);
    else
        mode_describe(r->mode, env, mode, sizeof mode);
    printf("dry run%s%s: everything a run checks before training passed\n", o->config ? " of " : "",
           o->config ? o->config : "");
    char trained[48] = ""; /* parameters as the banner and --list-nets count them: frozen ones too */
    if (net_n_weights(r->net) != r->net->n_params) snprintf(trained, sizeof trained, " (%zu trained)", r->net->n_params);
    printf("  net %s: %zu parameters%s, %s input, %d classes; %.3g GB per rank on %s at %d samples per rank (the net "
           "and its optimizer; the mode's buffers come on top), and %.3g GB of host memory per rank for the shuffle\n",
           r->net->name, net_n_weights(r->net), trained, shape, net_n_classes(r->net), bytes / 1e9, r->be->name,
           r->local_batch, shuffle / 1e9);
    printf("  data %s\n", data);
    printf("  %d rank%s (%d computing), %s; global batch %ld, %ld iteration%s per epoch, %ld in all\n", env->n_ranks,
           env->n_ranks == 1 ? "" : "s", env->n_workers, mode, o->batch, env->iters_per_epoch,
           env->iters_per_epoch == 1 ? "" : "s", env->total_iters);
    if (predict) {
        char rate[32] = "unlimited"; /* a beta of 0: no time per byte */
        if (o->comm.model_beta > 0) snprintf(rate, sizeof rate, "%.4g GB/s", 1e-9 / o->comm.model_beta);
        printf("  timing model, a prediction for %d rank%s on links of %g us and %s, compute %g ms per iteration "
               "(codecs and selection timed on this CPU%s): %s\n",
               env->n_ranks, env->n_ranks == 1 ? "" : "s", 1e6 * o->comm.model_alpha, rate, 1e3 * o->comm.model_compute,
               o->comm.model_gamma >= 0 ? "; --model-gamma for the codecs" : "", ranking);
    }
    return 0;
}

/* --pack-only: the host's first rank packs the image tree for the net's input (the others wait),
 * rank 0 says what the packs hold. */
int run_pack(dt_run *r)
{
    const dt_split *tr, *va;
    r->failed_rank = -1;
    comm_set_timeout(r->comm, 0.0); /* packing takes as long as it takes */
    comm_set_label(r->comm, "packing");
    if (run_agree(r, open_net(r)) != 0) return -1;
    if (run_agree(r, pack_only_fits(r)) != 0) return -1;
    if (run_agree(r, comm_local_rank(r->comm) == 0 ? open_data(r, 1) : 0) != 0) return -1;
    if (comm_rank(r->comm) != 0) return 0;
    tr = &r->ds->train, va = &r->ds->test;
    printf("packed %s for %dx%dx%d images: train %zu images (%s)", r->ds->dir, r->ds->c, r->ds->h, r->ds->w, tr->n,
           tr->origin);
    if (tr->skipped) printf(", %zu left out as unreadable", tr->skipped);
    printf("; val %zu images (%s)", va->n, va->origin);
    if (va->skipped) printf(", %zu left out as unreadable", va->skipped);
    printf("; %d classes\n", r->ds->n_classes);
    return 0;
}

/* The training batches of this worker, from iteration it0 on. */
/* --synthetic-once: the first iteration's batch of this worker, made by a loader as any batch is,
 * copied to backend memory and kept there; every iteration trains on it (also after --resume) */
static int make_once(dt_run *r)
{
    const dt_opts *o = r->opts;
    dt_loader *l;
    dt_batch b;
    int rc = loader_create(&l, r->ds, &r->aug, r->view_h, r->view_w, (int)o->batch, r->env.worker_rank,
                           r->env.n_workers, (uint64_t)o->seed, !o->no_shuffle, 0, 0, 1, r->threads, NULL);
    if (rc == 0) rc = loader_next(l, 0, &b);
    if (rc == 0) {
        size_t rows = (size_t)DT_MAX(b.rows, 1), xb = sizeof(float) * rows * r->ds->c * r->view_h * r->view_w,
               yb = sizeof(int32_t) * rows;
        r->once = b;
        if (!(r->once.x = r->be->alloc(r->be, xb)) || !(r->once.y = r->be->alloc(r->be, yb)) ||
            r->be->to_device(r->be, r->once.x, b.x, xb) != 0 || r->be->to_device(r->be, r->once.y, b.y, yb) != 0)
            rc = -1;
    }
    loader_destroy(l);
    return rc;
}

static int start_loader(dt_run *r, long it0)
{
    const dt_opts *o = r->opts;
    dt_host_allocator mem = backend_host_allocator(r->be);
    if (!r->env.is_worker || it0 >= r->env.total_iters) return 0;
    if (o->synthetic_once) return make_once(r);
    if (loader_create(&r->loader, r->ds, &r->aug, r->view_h, r->view_w, (int)o->batch, r->env.worker_rank,
                      r->env.n_workers, (uint64_t)o->seed, !o->no_shuffle, (int)o->prefetch, it0, r->env.total_iters,
                      r->be->host_memory ? 1 : r->threads, /* beside a GPU the host's cores make batches */
                      &mem) != 0)
        return -1;
    return upload_create(&r->upload, r->be, r->loader, (size_t)r->ds->c * (size_t)r->view_h * (size_t)r->view_w,
                         r->local_batch, r->env.total_iters);
}

/* What every rank must agree on: the options that change the computation, and what they led to. */
static char *agreement_text(const dt_run *r)
{
    /* an option given at its default is the same configuration as one left out (--compress none) */
    char *opts = r->agreement ? ckpt_options_resolved(r->agreement, r->dataset, r->auto_mode ? NULL : r->mode->name,
                                                      net_n_classes(r->net))
                              : NULL;
    char *text = NULL, *layers = NULL;
    size_t n_layers = 0;
    FILE *m = open_memstream(&layers, &n_layers); /* the net's layers, "net layer = ..." a line */
    for (const char *s = r->net->structure ? r->net->structure : ""; m && *s;) {
        size_t len = strcspn(s, "\n");
        fprintf(m, "net layer = %.*s\n", (int)len, s);
        s += len + (s[len] == '\n');
    }
    if (!m || fclose(m) != 0) {
        free(opts);
        dt_fail("out of memory");
        return NULL;
    }
    if (!opts || asprintf(&text,
                          "%snet parameters = %zu + %zu state\n%straining samples = %zu\ntest samples = %zu\n"
                          "data fingerprint = %016llx\n",
                          opts, r->net->n_params, r->net->n_state, layers, r->ds->train.n, r->ds->test.n,
                          (unsigned long long)r->ds->fingerprint) < 0) {
        dt_fail("out of memory");
        text = NULL;
    }
    free(opts);
    free(layers);
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
    if (!host) return run_agree(r, -1);
    if (comm_rank(r->comm) == 0) {
        if (r->opts->load) {
            rc = read_load(r, host, state);
        } else {
            rc = net_init_params(net, (uint64_t)r->opts->seed);
            if (rc == 0 && (r->be->to_host(r->be, host, net->w, n * sizeof(float)) != 0 ||
                            r->be->to_host(r->be, state, net->state, ns * sizeof(float)) != 0))
                rc = -1;
        }
    }
    if (run_agree(r, rc) != 0) {
        dt_free(host);
        return -1;
    }
    rc = comm_bcast(r->comm, host, (n + ns) * sizeof(float), 0);
    if (rc == 0 && (r->be->to_device(r->be, net->w, host, n * sizeof(float)) != 0 ||
                    r->be->to_device(r->be, net->state, state, ns * sizeof(float)) != 0))
        rc = -1;
    dt_free(host);
    return run_agree(r, rc);
}

/* Running statistics are each worker's own (its local batches): before evaluating or saving,
 * every rank takes the workers' mean. Collective. */
int run_average_state(dt_run *r)
{
    dt_net *net = r->net;
    size_t n = 0;
    for (int t = 0; t < net->n_states; t++) n += net->states[t]->average ? net->states[t]->n : 0;
    if (n == 0 || comm_size(r->comm) == 1) return 0;
    float *buf = dt_alloc(n * sizeof(float));
    if (!buf) return -1;
    size_t o = 0;
    int rc = 0;
    memset(buf, 0, n * sizeof(float)); /* a parameter server's share: it has no batches */
    for (int t = 0; rc == 0 && t < net->n_states; t++) {
        const dt_param *p = net->states[t];
        if (!p->average) continue;
        if (r->env.is_worker) rc = r->be->to_host(r->be, buf + o, p->w, p->n * sizeof(float));
        o += p->n;
    }
    if (rc == 0) rc = comm_allreduce_sum_f32(r->comm, buf, n);
    for (size_t i = 0; i < n; i++) buf[i] /= (float)r->env.n_workers;
    o = 0;
    for (int t = 0; rc == 0 && t < net->n_states; t++) {
        const dt_param *p = net->states[t];
        if (!p->average) continue;
        rc = r->be->to_device(r->be, p->w, buf + o, p->n * sizeof(float));
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
    char shape[112], mode[320];
    dt_shape s = {3, {r->ds->c, r->ds->h, r->ds->w}};
    shape_format(&s, shape, sizeof shape);
    mode_describe(r->mode, env, mode, sizeof mode);
    char trained[48] = "", aug[96], crop[64] = "";
    augment_describe(&r->aug, aug, sizeof aug);
    if (r->view_h != r->ds->h || r->view_w != r->ds->w)
        snprintf(crop, sizeof crop, " cropped to %dx%d", r->view_h, r->view_w);
    strncat(shape, crop, sizeof shape - strlen(shape) - 1);
    if (net_n_weights(r->net) != r->net->n_params) snprintf(trained, sizeof trained, ", %zu trained", r->net->n_params);
    if (r->ds->synthetic)
        log_text(r->log, "dtrain %s: net %s (%zu parameters%s) on synthetic data (%zu samples, %s, %d classes, %s%s; "
                         "no evaluation: it measures speed, not accuracy)\n",
                 PACKAGE_VERSION, r->net->name, net_n_weights(r->net), trained, r->ds->train.n, shape, r->ds->n_classes,
                 r->ds->dir, r->opts->synthetic_once ? "; one batch made once, on the device, every iteration" : "");
    else
        log_text(r->log, "dtrain %s: net %s (%zu parameters%s) on %s (%zu train / %zu test, %s, %d classes, %s)\n",
                 PACKAGE_VERSION, r->net->name, net_n_weights(r->net), trained, r->dataset, r->ds->train.n,
                 r->ds->test.n, shape, r->ds->n_classes, r->ds->dir);
    if (r->ds->train.skipped || r->ds->test.skipped)
        log_text(r->log, "images left out of the packs as unreadable (--on-bad-image skip): %zu train, %zu val\n",
                 r->ds->train.skipped, r->ds->test.skipped);
    if (r->classes_note[0]) log_text(r->log, "%s\n", r->classes_note);
    log_text(r->log, "%d rank%s x %d thread%s, %s\n", p, p == 1 ? "" : "s", r->threads, r->threads == 1 ? "" : "s",
             mode);
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN), here = comm_local_size(r->comm); /* rank 0's host */
    if (o->threads > 0 && cores > 0 &&
        (long)r->threads * here > cores) { /* oversubscribed: OpenMP's threads wait for each other */
        char fix[96] = "more ranks than cores: fewer ranks on this host";
        if (here <= cores) snprintf(fix, sizeof fix, "--threads 0 takes %d", cores / DT_MAX(1, here));
        log_text(r->log,
                 "note: --threads %d on %d rank%s of this host is more threads than its %d core%s, which "
                 "slows every pass (%s)\n",
                 r->threads, here, here == 1 ? "" : "s", cores, cores == 1 ? "" : "s", fix);
    }
    char length[96]; /* --iters cuts the epochs short */
    if (env->total_iters < o->epochs * env->iters_per_epoch)
        snprintf(length, sizeof length, "%ld iteration%s (--iters; %ld epoch%s asked)", env->total_iters,
                 env->total_iters == 1 ? "" : "s", o->epochs, o->epochs == 1 ? "" : "s");
    else snprintf(length, sizeof length, "%ld epoch%s", o->epochs, o->epochs == 1 ? "" : "s");
    char warm[64] = "";
    if (o->lr_warmup_epochs > 0) snprintf(warm, sizeof warm, ", warm-up %g epoch%s", o->lr_warmup_epochs,
                                          o->lr_warmup_epochs == 1 ? "" : "s");
    log_text(r->log, "global batch %ld (%d per worker), %ld iterations/epoch, %s, lr %g (%s%s), momentum %g%s, wd %g\n",
             o->batch, r->local_batch, env->iters_per_epoch, length, o->lr, o->lr_schedule, warm, o->momentum,
             o->nesterov ? " (Nesterov)" : "", o->wd);
    /* a schedule longer than the run is legal (a short run of a long configuration), but said */
    double run_epochs = (double)env->total_iters / (double)DT_MAX(env->iters_per_epoch, 1);
    if (o->lr_warmup_epochs > run_epochs && env->total_iters > 0)
        log_text(r->log, "note: the warm-up (%g epochs) outlasts the run (%g epochs): lr reaches %.3g%% of --lr\n",
                 o->lr_warmup_epochs, run_epochs, 100.0 * run_epochs / o->lr_warmup_epochs);
    int beyond = 0;
    for (int i = 0; i < r->lr.n_milestones; i++) beyond += r->lr.milestones[i] >= run_epochs;
    if (beyond && env->total_iters > 0)
        log_text(r->log, "note: %d of the %d steps of --lr-schedule %s fall at or after the run's end (%g epochs)\n",
                 beyond, r->lr.n_milestones, o->lr_schedule, run_epochs);
    if (o->epochs == 0 && o->iters > 0) /* a cap on nothing: said, as a flag that does nothing must be */
        log_text(r->log, "note: --iters %ld stops nothing: --epochs 0 only evaluates (train with --epochs 1 or more)\n",
                 o->iters);
    if (o->synthetic_once) /* no loader: nothing prefetched */
        log_text(r->log, "augmentation: %s; one batch made once (--synthetic-once), no loader\n", aug);
    else
        log_text(r->log, "augmentation: %s; %ld batch%s prefetched%s%s%s\n", aug, o->prefetch,
                 o->prefetch == 1 ? "" : "es", UPLOADS(r->be) ? ", copied to " : "", UPLOADS(r->be) ? r->be->name : "",
                 UPLOADS(r->be) ? " memory a batch ahead on a queue of their own" : "");
    if (env->note[0]) log_text(r->log, "%s: %s\n", r->mode->name, env->note);
    if (env->model.note[0]) log_text(r->log, "note: %s\n", env->model.note);
    if (o->rerun_git[0] && strcmp(o->rerun_git, DT_GIT_VERSION) != 0)
        log_text(r->log, "note: --rerun of a run made by dtrain git %s; this one is git %s, so where the code changed "
                 "the run may differ from the one it repeats\n", o->rerun_git, DT_GIT_VERSION);
    if (r->ckpt.precision_was[0] && strcmp(r->ckpt.precision_was, o->precision) != 0) /* rank 0, resumed */
        log_text(r->log, "resumed in %s a checkpoint written in %s: its fp32 weights and optimizer state go on, "
                         "computed from here in %s\n",
                 o->precision, r->ckpt.precision_was, o->precision);
    char lowp[128] = "";
    if (strcmp(o->precision, "fp32") != 0)
        snprintf(lowp, sizeof lowp, ", %s GEMMs and convolutions", o->precision);
    if (r->scaler.on)
        snprintf(lowp + strlen(lowp), sizeof lowp - strlen(lowp), " (loss scale %g, doubled every %ld good steps)",
                 r->scaler.scale, r->scaler.window);
    int edges = 0, convs = 0, bn_edges = 0, bns = 0, add_edges = 0, adds = 0; /* net.c's y_bf16 */
    for (int i = 0; i < r->net->n_layers; i++) {
        const dt_layer *l = r->net->layers[i];
        int conv = !strcmp(l->ops->type, "conv"), bn = !strcmp(l->ops->type, "batchnorm"),
            add = !strcmp(l->ops->type, "add");
        convs += conv, bns += bn, adds += add;
        edges += conv && l->y_bf16, bn_edges += bn && l->y_bf16, add_edges += add && l->y_bf16;
    }
    char what[400] = ""; /* the clauses of the layers that have such edges */
    size_t w = 0;
    if (edges)
        w += (size_t)snprintf(what + w, sizeof what - w,
                              "%d of the %d convolutions store their outputs (and take their gradients) in bf16 for "
                              "the batch norms after them",
                              edges, convs);
    if (bn_edges)
        w += (size_t)snprintf(what + w, sizeof what - w, "%s%d of the %d batch norms %s for the layers after them",
                              w ? ", " : "", bn_edges, bns, w ? "their outputs" : "store their outputs in bf16");
    if (add_edges)
        snprintf(what + w, sizeof what - w, "%s%d of the %d adds %s (the residual stream, rounded)", w ? ", " : "",
                 add_edges, adds, w ? "theirs" : "store their outputs in bf16 for the layers after them");

    log_text(r->log, "backend %s%s%s%s%s: %s; %s\n", r->be->name, r->auto_why[0] ? " (auto; " : "", r->auto_why,
             r->auto_why[0] ? ")" : "", lowp, backend_describe(r->be), comm_library());
    if (what[0]) log_text(r->log, "bf16 activations: %s\n", what);
    if (r->auto_cpu && r->opts->gpu_given[0])
        log_text(r->log, "%s: no effect: --device auto took the cpu\n", r->opts->gpu_given);
    if (!r->be->host_memory) log_text(r->log, "transport %s\n", r->transport);
    if (r->graphs)
        log_text(r->log, "gpu graph: forward and backward recorded once per shape and launched as one (from the "
                         "second iteration of a shape; t_forward holds both)\n");
    else if (r->graph_why[0])
        log_text(r->log, "gpu graph: off: %s\n", r->graph_why);
    if (p > 1) {
        const dt_netmodel *m = &env->model;
        const dt_comm_opts *co = &r->opts->comm;
        char from[96] = "", rate[3][32];
        const double betas[3] = {m->beta, m->beta_stream, m->beta_busy};
        for (int i = 0; i < 3; i++) /* a beta of 0: no time per byte */
            if (betas[i] > 0)
                snprintf(rate[i], sizeof rate[i], 1e-6 / betas[i] < 1e9 ? "%.0f MB/s" : "%.3g MB/s", 1e-6 / betas[i]);
            else
                snprintf(rate[i], sizeof rate[i], "unlimited");
        const char *given[3] = {co->model_alpha >= 0 ? "alpha" : NULL, co->model_beta >= 0 ? "beta" : NULL,
                                co->model_gamma >= 0 ? "gamma" : NULL};
        for (int i = 0, k = 0; i < 3; i++) /* the flags given beside what was measured */
            if (given[i])
                snprintf(from + strlen(from), sizeof from - strlen(from), "%s%s", k++ ? ", " : "; ", given[i]);
        if (from[0]) snprintf(from + strlen(from), sizeof from - strlen(from), " from the flags");
        log_text(r->log,
                 "timing model (%s%s): alpha %.1f us, beta %.3g s/B (%s; %s streamed, %s back to back), gamma %.3g "
                 "ns per value, %.3g core%s a rank\n",
                 m->measured ? "measured at start-up" : "from flags", m->measured ? from : "", m->alpha * 1e6, m->beta,
                 rate[0], rate[1], rate[2], m->gamma * 1e9, m->cores, m->cores == 1 ? "" : "s");
    }
}

/* The run's record, in the log's start record and its summary: what ran (version, commit,
 * libraries, hosts) and every option after config files and defaults, from which --rerun runs it
 * again. Collective (the host names). */
static int record_run(dt_run *r)
{
    char hosts[1024], libs[512], dir[4096];
    dt_log *l = r->log;
    if (comm_hosts(r->comm, hosts, sizeof hosts) != 0) return -1;
    if (!log_enabled(l)) return 0;
    if (!r->options || !r->given) return dt_fail("out of memory");
    snprintf(libs, sizeof libs, "%s; %s: %s; libjpeg-turbo %s; libpng %s", comm_library(), r->be->name,
             backend_describe(r->be), DT_JPEG_VERSION, DT_PNG_VERSION);
    log_summary_field(l, "version", PACKAGE_VERSION, 0);
    log_summary_field(l, "git", DT_GIT_VERSION, 0);
    log_summary_field(l, "backend", r->be->name, 0);
    log_summary_field(l, "precision", r->opts->precision, 0);
    log_summary_field(l, "transport", r->env.transport == DT_TRANSPORT_NCCL ? "nccl" : "mpi", 0);
    log_summary_field(l, "libraries", libs, 0);
    log_summary_field(l, "hosts", hosts, 0);
    char ranks[16]; /* in the start record too: a rerun of a run that died takes its rank count */
    snprintf(ranks, sizeof ranks, "%d", comm_size(r->comm));
    log_summary_field(l, "ranks", ranks, 1);
    /* what a rerun takes and checks: the net (its file's absolute path: a rerun may start elsewhere),
     * the data's directory and fingerprint, --load's file and weights */
    char digest[17], fp[17];
    net_digest(r->net, digest);
    log_summary_field(l, "net_digest", digest, 0);
    if (net_is_path(r->opts->net))
        log_summary_field(l, "net_file", realpath(r->opts->net, dir) ? dir : r->opts->net, 0);
    if (!r->ds->synthetic) log_summary_field(l, "data_dir", realpath(r->ds->dir, dir) ? dir : r->ds->dir, 0);
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)r->ds->fingerprint);
    log_summary_field(l, "data_fingerprint", fp, 0);
    if (r->opts->load) {
        log_summary_field(l, "load", realpath(r->opts->load, dir) ? dir : r->opts->load, 0);
        log_summary_field(l, "load_digest", r->load_digest, 0);
    }
    log_summary_field(l, "options", r->options, 0);
    log_summary_field(l, "given", r->given, 0);
    if (r->opts->resume) { /* where this part of the run began */
        char it[24];
        snprintf(it, sizeof it, "%ld", r->it0);
        log_summary_field(l, "resumed_from", realpath(r->opts->resume, dir) ? dir : r->opts->resume, 0);
        log_summary_field(l, "resumed_at", it, 1);
    }
    return 0;
}

/* Compute seconds (wall and CPU) of one iteration without communication: forward and backward on a
 * local batch (all ranks together, as in training, where ranks that share cores get their share;
 * the median of 3 to 15 after a warm-up, as many as fit in about 0.25 s; on zero inputs; the state
 * arena, running statistics, is put back afterwards, and the first iteration's backward overwrites
 * the gradients) and an optimizer step on scratch memory. */
#define TIME_REPS 15
static int time_compute(dt_run *r, double *wall, double *cpu)
{
    dt_net *net = r->net;
    size_t d = (size_t)r->ds->c * r->view_h * r->view_w, bytes = net->n_state * sizeof(float);
    float *state = bytes ? dt_alloc(bytes) : NULL;
    double w[TIME_REPS], c[TIME_REPS];
    int reps = 3;
    if (bytes && (!state || r->be->to_host(r->be, state, net->state, bytes) != 0)) return dt_fail_prefix("--mode auto");
    memset(r->x_host, 0, sizeof(float) * d * (size_t)r->local_batch);
    memset(r->y_host, 0, sizeof(int32_t) * (size_t)r->local_batch);
    int rc = net_set_input(net, r->x_host, r->local_batch) != 0 || net_set_labels(net, r->y_host, r->local_batch) != 0;
    for (int i = 0; !rc && i <= reps; i++) {
        dt_pass pass = {.rows = r->local_batch, .train = 1, .labels = net->labels, .grad_scale = 1.0f};
        if ((rc = comm_size(r->comm) > 1 && comm_barrier(r->comm) != 0)) break;
        double t0 = dt_now(), c0 = dt_cpu_process();
        rc = net_forward(net, &pass) != 0 || net_backward(net, &pass, NULL, NULL) != 0 || r->be->sync(r->be) != 0;
        if (i > 0) {
            w[i - 1] = dt_now() - t0, c[i - 1] = dt_cpu_process() - c0;
            continue;
        }
        double warm = rc ? 1e9 : dt_now() - t0; /* the same count on every rank: by the slowest warm-up */
        rc = comm_allreduce_max_f64(r->comm, &warm, 1) != 0 || rc;
        reps = warm > 0.25 / TIME_REPS ? (int)DT_MAX(3.0, 0.25 / warm) : TIME_REPS;
    }
    if (!rc && bytes) rc = r->be->to_device(r->be, net->state, state, bytes) != 0;
    dt_free(state);
    if (rc) return dt_fail_prefix("--mode auto: timing the compute");
    /* the optimizer's step, on scratch weights of a scratch optimizer: the same for every candidate,
     * it keeps the model's differences in proportion */
    dt_optim *scratch = NULL;
    float *ws = r->be->alloc(r->be, net->n_params * sizeof(float)),
          *gs = r->be->alloc(r->be, net->n_params * sizeof(float));
    double step = 0.0;
    rc = !ws || !gs ||
         optim_create(&scratch, r->be, net->n_params, (float)r->opts->momentum, (float)r->opts->wd, r->opts->nesterov);
    for (int i = 0; !rc && i < 2; i++) {
        double t0 = dt_now();
        rc = optim_step(scratch, ws, gs, 0.01f, 0, net->n_params) != 0 || r->be->sync(r->be) != 0;
        step = dt_now() - t0; /* the second: warm */
    }
    optim_destroy(scratch);
    if (ws) r->be->free(r->be, ws);
    if (gs) r->be->free(r->be, gs);
    if (rc) return dt_fail_prefix("--mode auto: timing the optimizer");
    for (int i = 1; i < reps; i++) /* sort by wall time, CPU time alongside */
        for (int j = i; j > 0 && w[j - 1] > w[j]; j--) {
            double t = w[j];
            w[j] = w[j - 1], w[j - 1] = t, t = c[j], c[j] = c[j - 1], c[j - 1] = t;
        }
    *wall = w[reps / 2] + step, *cpu = c[reps / 2] + step;
    return 0;
}

/* --mode auto: ranks the candidates by the timing model for the measured compute, link and codecs
 * (the same on every rank: each input is the maximum over ranks), prints the ranking and sets up
 * the fastest. */
static int choose_mode(dt_run *r)
{
    dt_mode_env *env = &r->env;
    dt_auto_cand c[DT_AUTO_MAX];
    double v[2 + 3 * DT_AUTO_MAX];
    int n;
    if (auto_parse(env->opts.auto_allow, c, DT_AUTO_MAX, &n) != 0) return -1;
    if (env->opts.model_compute > 0)
        v[0] = v[1] = env->opts.model_compute;
    else if (time_compute(r, &v[0], &v[1]) != 0)
        return -1;
    if (auto_calibrate(c, n, env) != 0) return -1;
    for (int i = 0; i < n; i++) v[2 + 3 * i] = c[i].gamma, v[3 + 3 * i] = c[i].encode, v[4 + 3 * i] = c[i].decode;
    if (comm_allreduce_max_f64(r->comm, v, (size_t)(2 + 3 * n)) != 0) return -1;
    for (int i = 0; i < n; i++) c[i].gamma = v[2 + 3 * i], c[i].encode = v[3 + 3 * i], c[i].decode = v[4 + 3 * i];
    dt_auto_cand best;
    if (auto_rank(c, n, env, v[0], v[1], &best) != 0) return -1;
    auto_format(c, n, r->auto_ranking, sizeof r->auto_ranking);
    log_text(r->log, "--mode auto: compute %.3f ms per iteration (forward, backward and update, %s); predicted per "
             "iteration: %s; chose %s\n", 1e3 * v[0], env->opts.model_compute > 0 ? "--model-compute" : "measured",
             r->auto_ranking, best.name);
    r->mode = best.mode;
    dt_comm_opts o = r->opts->comm;
    snprintf(r->auto_codec, sizeof r->auto_codec, "%s", best.codec);
    o.compress = r->auto_codec;
    env->opts = mode_opts_for(r->mode, &o);
    if (mode_codec_create(&env->opts, &env->codec) != 0) return -1;
    env->model.gamma = best.gamma;
    return 0;
}

/* --transport: over MPI, or over the device's own transport where every rank can and the mode sends
 * over it; collective */
static int choose_transport(dt_run *r)
{
    char why[300] = "";
    const char *want = r->opts->transport ? r->opts->transport : "mpi";
    if (!r->mode->device_net)
        snprintf(why, sizeof why, "mode %s sends over MPI only", r->mode->name);
    else if (r->mode->device_net(&r->env, why, sizeof why))
        why[0] = 0;
    return devnet_choose(r->comm, r->be, want, why, &r->env.transport, r->transport, sizeof r->transport);
}

/* --gpu-graph: on a worker where nothing in a pass changes between iterations but what the graph's
 * key names (engine/graph.h) */
static int setup_graphs(dt_run *r)
{
    if (!r->opts->gpu_graph || !r->env.is_worker) return 0; /* (a build without CUDA has no flag to set it) */
    const char *why = graphs_unsupported(r->be, r->net);
    if (!why) why = mode_in_backward(r->mode, &r->env.opts);
    if (!why && r->scaler.on) why = "--precision fp16 unscales the gradient as backward makes it";
    if (why) {
        snprintf(r->graph_why, sizeof r->graph_why, "%s", why);
        return 0;
    }
    return graphs_create(&r->graphs);
}

int run_setup(dt_run *r)
{
    char *text;
    int rc;
    r->failed_rank = -1;
    r->t_start = dt_now();
    comm_set_timeout(r->comm, 0.0); /* the host's first rank may pack a dataset for long while the others wait */
    comm_set_label(r->comm, "start-up");
    if (run_agree(r, setup_net(r)) != 0) return -1;
    comm_set_timeout(r->comm, r->opts->comm_timeout);
    if (run_agree(r, setup_local(r)) != 0) return -1;
    if (!(text = agreement_text(r))) return run_agree(r, -1);
    rc = comm_check_same(r->comm, text, "configuration");
    free(text);
    if (run_agree(r, rc) != 0) return -1;
    if (setup_weights(r) != 0) return -1;
    if (run_agree(r, netmodel_init(&r->env.model, r->comm, &r->env.codec, &r->env.opts)) != 0) return -1;
    if (r->auto_mode && run_agree(r, choose_mode(r)) != 0) return -1;
    if (run_agree(r, choose_transport(r)) != 0) return -1;
    r->stop_req = -1;
    if (comm_size(r->comm) > 1 && run_agree(r, comm_dup(r->comm, &r->ctl)) != 0) return -1;
    rc = r->mode->init(&r->mode_state, &r->env);
    r->mode_ready = rc == 0;
    snprintf(r->comm_label, sizeof r->comm_label, "training, mode %s", r->mode->name);
    comm_set_label(r->comm, r->comm_label);
    if (run_agree(r, rc) != 0 || run_agree(r, setup_graphs(r)) != 0) return -1;
    r->ckpt = (dt_ckpt_state){r->comm, r->be, r->net, r->optim->v, r->mode, r->mode_state, &r->env,
                              r->dataset, r->ds->train.n, r->ds->fingerprint, r->options, -1, 0, "",
                              r->scaler.on ? &r->scaler.scale : NULL, r->scaler.on ? &r->scaler.good : NULL, {0}};
    if (r->opts->resume && ckpt_restore(&r->ckpt, r->opts->resume, &r->it0) != 0) {
        r->failed_rank = r->ckpt.failed_rank;
        /* no such file, or a rank count it cannot take: the command line is wrong */
        r->usage_error = !dt_is_kind(r->opts->resume, 0) || r->ckpt.usage_error;
        dt_fail_prefix("--resume");
        return -1;
    }
    if (resume_within(r, r->it0) != 0) { /* every rank read the same iteration */
        r->failed_rank = 0;
        return -1;
    }
    if (run_agree(r, start_loader(r, r->it0)) != 0) return -1;
    int kept = comm_rank(r->comm) == 0 && r->opts->resume
                   ? log_resume(r->log, r->it0, r->env.iters_per_epoch, r->it0 < r->env.total_iters)
                   : 0;
    if (run_agree(r, kept) != 0) return -1;
    if (run_agree(r, record_run(r)) != 0) return -1;
    banner(r);
    if (comm_rank(r->comm) == 0 && log_start(r->log) != 0) return -1;
    return 0;
}

void run_teardown(dt_run *r)
{
    if (r->mode_ready) r->mode->finalize(r->mode_state, &r->env);
    if (r->ctl && r->stop_req >= 0 && !comm_broken(r->ctl)) comm_wait(r->ctl, r->stop_req, NULL, NULL);
    if (r->ctl) comm_free(r->ctl);
    log_close(r->log);
    upload_destroy(r->upload);
    loader_destroy(r->loader);
    if (r->once.x) r->be->free(r->be, r->once.x);
    if (r->once.y) r->be->free(r->be, r->once.y);
    optim_destroy(r->optim);
    backend_host_free(r->be, r->x_host); /* the backend's staging memory, freed before it (NULL without one) */
    backend_host_free(r->be, r->y_host);
    dt_free(r->eval_idx);
    graphs_destroy(r->graphs, r->be);
    net_destroy(r->net);
    dataset_close(r->ds);
    if (r->be && r->scaler.flag) r->be->free(r->be, r->scaler.flag);
    if (r->be) backend_destroy(r->be);
}
