/* The option table and everything derived from it. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "data/data.h"
#include "engine/engine.h"
#include "config.h"
#include "json.h"
#include "util.h"

#define OFF(f) offsetof(dt_opts, f)

/* what --help offers for --device: the backends this build has */
#if DT_CUDA_BUILT
#define DEVICE_CHOICES "cpu|cuda|auto"
#else
#define DEVICE_CHOICES "cpu|auto"
#endif

/* a timeout under a second would end healthy jobs in their start-up's first collective */
static int check_comm_timeout(const char *v, const char *origin)
{
    double x = strtod(v, NULL);
    if (x == 0 || x >= 1) return 0;
    return dt_fail("%s: expected 0 (wait forever) or at least 1 second, found '%s'", origin, v);
}

/* one class would make the loss constant: the net's layer would say so, blaming the net file */
static int check_classes(const char *v, const char *origin)
{
    if (strtol(v, NULL, 10) != 1) return 0;
    return dt_fail("%s: expected 0 (as the net says) or 2 to 65535 classes, found %s", origin, v);
}

/* Names and specs that other modules' tables define, checked as they are parsed, so a typo fails
 * before any rank starts work. */
static int check_mode(const char *v, const char *origin)
{
    return mode_find(v) || strcmp(v, "auto") == 0
               ? 0
               : dt_fail("%s: unknown mode '%s' (expected one of %s, or auto)", origin, v, mode_list());
}

static int check_lr_schedule(const char *v, const char *origin)
{
    dt_lr_schedule tmp;
    return lr_schedule_parse(v, 1.0, 0.0, 1.0, &tmp) != 0 ? dt_fail_prefix("%s", origin) : 0;
}

static int check_augment(const char *v, const char *origin)
{
    dt_augment tmp;
    return augment_parse(v, "", &tmp) != 0 ? dt_fail_prefix("%s", origin) : 0;
}

static int every_parse(const char *spec, long *n, int *epochs);

static int check_every(const char *v, const char *origin)
{
    return every_parse(v, &(long){0}, &(int){0}) != 0 ? dt_fail_prefix("%s", origin) : 0;
}

static int check_dataset(const char *v, const char *origin)
{
    if (dataset_known(v)) return 0;
    return dt_fail("%s: unknown dataset '%s' (expected one of %s)", origin, v, dataset_list());
}

static int check_device(const char *v, const char *origin)
{
    if (strcmp(v, "auto") == 0 || backend_known(v)) return 0;
    return dt_fail("%s: expected one of %s, found '%s'", origin, DEVICE_CHOICES, v);
}

static int check_precision(const char *v, const char *origin)
{
    if (strcmp(v, "fp32") == 0 || strcmp(v, "bf16") == 0 || strcmp(v, "fp16") == 0) return 0;
    return dt_fail("%s: expected one of fp32|bf16|fp16, found '%s'", origin, v);
}

static const dt_optdef table[] = {
    {"Run", "net", OPT_STRING, "NAME|FILE", OFF(net), 0, 0, NULL, "mlp", 0, 0,
     "network: a built-in name (--list-nets) or a .net file", NULL},
    {"Run", "classes", OPT_INT, "N", OFF(classes), 0, 65535, NULL, "0", 0, 0,
     "size the net's last dense layer to N classes (0: as the net file says; a built-in net takes the dataset's)",
     check_classes},
    {"Run", "dataset", OPT_STRING, "NAME", OFF(dataset), 0, 0, NULL, NULL, 0, 0,
     "dataset (--list-datasets; default: the net's, --list-nets); synthetic: made on the fly, for speed",
     check_dataset},
    {"Run", "synthetic-samples", OPT_INT, "N", OFF(synthetic_samples), 0, 4294967295.0, NULL, "0", 0, 0,
     "training samples of --dataset synthetic (0: as many as the dataset the net's shape belongs to)", NULL},
    {"Run", "synthetic-once", OPT_FLAG, NULL, OFF(synthetic_once), 0, 0, NULL, NULL, 0, 0,
     "--dataset synthetic: make one batch (the first) once, keep it on the device and train on it every iteration "
     "(compute and communication alone, no loader)",
     NULL},
    {"Run", "data-dir", OPT_STRING, "DIR", OFF(data_dir), 0, 0, NULL, NULL, OPT_LOCAL, 0,
     "where the dataset's files are (default: its standard locations)", NULL},
    {"Run", "epochs", OPT_INT, "N", OFF(epochs), 0, 1e6, NULL, "5", 0, 0,
     "passes over the training set; 0 only evaluates (with --load)", NULL},
    {"Run", "iters", OPT_INT, "N", OFF(iters), 0, 1e12, NULL, "0", 0, 0,
     "stop after N iterations in total (0: no limit)", NULL},
    {"Run", "batch", OPT_INT, "N", OFF(batch), 1, 1 << 24, NULL, "100", 0, 0,
     "global batch, summed over all ranks (as in the papers)", NULL},
    {"Run", "seed", OPT_INT, "N", OFF(seed), 0, 9.2e18, NULL, "1", 0, 0,
     "one seed for initialisation, shuffling and every random stream", NULL},
    {"Run", "threads", OPT_INT, "N", OFF(threads), 0, 1024, NULL, "0", OPT_LOCAL, 0,
     "compute threads per rank (0: the cores of this host divided by its ranks)", NULL},
    {"Run", "device", OPT_STRING, DEVICE_CHOICES, OFF(device), 0, 0, NULL, "auto", OPT_LOCAL, 0,
     "compute backend (--list-devices; auto: the best one that runs here)", check_device},
    {"Run", "precision", OPT_STRING, "fp32|bf16|fp16", OFF(precision), 0, 0, NULL, "fp32", 0, 0,
     "what GEMMs and convolutions multiply in: bf16 or fp16 rounds their inputs and sums in fp32 (bf16: CPUs with "
     "AVX512_BF16 or AMX, GPUs of compute capability 8.0+; fp16: GPUs, with dynamic loss scaling; weights, optimizer, "
     "batch norm and loss stay fp32)",
     check_precision},
    {"Run", "fp16-scale", OPT_DOUBLE, "S", OFF(fp16_scale), 1.0 / 16777216, 1e30, NULL, "65536", 0, 0,
     "--precision fp16: the initial loss scale; halved when a step's gradient overflows (the step is skipped)", NULL},
    {"Run", "fp16-scale-window", OPT_INT, "N", OFF(fp16_scale_window), 1, 1e9, NULL, "2000", 0, 0,
     "--precision fp16: the loss scale doubles after N steps in a row without an overflow", NULL},
#if DT_CUDA_BUILT
    {"Run", "gpu", OPT_INT, "N", OFF(gpu), -1, 1023, NULL, "-1", OPT_LOCAL, 0,
     "the GPU of this rank (-1: its local rank modulo the GPUs of its host)", NULL},
    {"Run", "tf32", OPT_FLAG, NULL, OFF(tf32), 0, 0, NULL, NULL, OPT_LOCAL, 0,
     "let GEMMs and convolutions on a GPU use TensorFloat-32 (faster, 10-bit mantissa products)", NULL},
    {"Run", "gpu-exact", OPT_FLAG, NULL, OFF(gpu_exact), 0, 0, NULL, NULL, OPT_LOCAL, 0,
     "GPU convolutions only with cuDNN's deterministic GEMM-like algorithms: runs repeat bit for bit and agree "
     "with the CPU to 1e-6 (its FFT and Winograd ones are faster and 1e-5 to 1e-4 off)",
     NULL},
    {"Run", "gpu-graph", OPT_FLAG, NULL, OFF(gpu_graph), 0, 0, NULL, NULL, OPT_LOCAL, 0,
     "record a training pass's forward and backward once per shape as a CUDA graph and launch it as one (fewer "
     "launches for nets of small kernels; not with dropout, fp16 or a mode that acts during backward)",
     NULL},
    {"Run", "gpu-workspace", OPT_INT, "MB", OFF(gpu_workspace), 1, 1 << 20, NULL, "1024", OPT_LOCAL, 0,
     "the most GPU memory a convolution algorithm may use as workspace", NULL},
#endif
    {"Run", "no-shuffle", OPT_FLAG, NULL, OFF(no_shuffle), 0, 0, NULL, NULL, 0, 0,
     "take the training samples in file order every epoch (for debugging and cross-checks)", NULL},
    {"Run", "augment", OPT_STRING, "SPEC", OFF(augment), 0, 0, NULL, "default", 0, 0,
     "training augmentation: default (the dataset's), none, or a list of crop=PAD, resized-crop, flip", check_augment},
    {"Run", "image-size", OPT_INT, "S", OFF(image_size), 0, 4096, NULL, "0", 0, 0,
     "imagenet: side of the packed square images (0: the net's input side x 8/7, 256 for 224)", NULL},
    {"Run", "on-bad-image", OPT_CHOICE, "stop|skip", OFF(on_bad_image), 0, 0, "stop|skip", "stop", 0, 0,
     "imagenet: an image that cannot be decoded while packing stops the run naming it, or is left out and counted",
     NULL},
    {"Run", "pack-only", OPT_FLAG, NULL, OFF(pack_only), 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, 0,
     "imagenet: pack the image tree for the net's input (once per host, --threads in parallel), then exit", NULL},
    {"Run", "prefetch", OPT_INT, "N", OFF(prefetch), 0, 64, NULL, "2", OPT_LOCAL, 0,
     "batches a loader thread prepares ahead of training (0: load in the training loop)", NULL},
    {"Run", "config", OPT_STRING, "FILE", OFF(config), 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, 0,
     "read options from a key = value file first (dtrain.conf(5))", NULL},
    {"Run", "ranks", OPT_INT, "P", OFF(ranks), 0, 1 << 20, NULL, "0", OPT_LOCAL, 0,
     "the number of ranks the run is meant for: another count stops it at start-up (0: any); --dry-run checks it",
     NULL},
    {"Run", "rerun", OPT_STRING, "LOG", OFF(rerun), 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, 0,
     "run the experiment a --log file records again: its options, data directory and rank count (flags given "
     "here override)",
     NULL},
    {"Run", "dry-run", OPT_FLAG, NULL, OFF(dry_run), 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, 0,
     "check options, net, data (or what it expects) and rank count as a run would, then exit without training", NULL},

    {"Optimizer", "lr", OPT_DOUBLE, "X", OFF(lr), 0, 100, NULL, "0.02", 0, 0, "learning rate", NULL},
    {"Optimizer", "momentum", OPT_DOUBLE, "X", OFF(momentum), 0, 0.9999, NULL, "0.9", 0, 0, "SGD momentum", NULL},
    {"Optimizer", "nesterov", OPT_FLAG, NULL, OFF(nesterov), 0, 0, NULL, NULL, 0, 0, "Nesterov momentum", NULL},
    {"Optimizer", "wd", OPT_DOUBLE, "X", OFF(wd), 0, 1, NULL, "0", 0, 0, "weight decay (L2, added to the gradient)",
     NULL},
    {"Optimizer", "lr-schedule", OPT_STRING, "SPEC", OFF(lr_schedule), 0, 0, NULL, "constant", 0, 0,
     "constant, step:E1,E2,...[:GAMMA], poly:POWER or cosine", check_lr_schedule},
    {"Optimizer", "lr-warmup-epochs", OPT_DOUBLE, "X", OFF(lr_warmup_epochs), 0, 1e4, NULL, "0", 0, 0,
     "ramp the learning rate linearly from ~0 over the first X epochs", NULL},

    {"Communication", "mode", OPT_STRING, "NAME", OFF(mode), 0, 0, NULL, "dsync", 0, 0,
     "how ranks combine gradients (--list-modes); auto: the fastest of --auto-allow by the timing model", check_mode},

#if DT_NCCL_BUILT
    {"Communication", "transport", OPT_CHOICE, "mpi|nccl|auto", OFF(transport), 0, 0, "mpi|nccl|auto", "auto", 0, 0,
     "how gradients on a GPU travel: mpi (staged through the host), nccl (GPU to GPU; a GPU per rank; dsync, "
     "ps, pipesgd, topk, gtopk, csc, terngrad), auto (nccl where it can, else mpi, saying why)",
     NULL},
#endif
    {"Communication", "comm-timeout", OPT_DOUBLE, "S", OFF(comm_timeout), 0, 1e7, NULL, "300", OPT_LOCAL | OPT_AGREE, 0,
     "end the job when a rank waits more than S seconds for another (0: wait forever; else at least 1)",
     check_comm_timeout},

    {"Output", "log", OPT_STRING, "FILE", OFF(log), 0, 0, NULL, NULL, OPT_LOCAL | OPT_AGREE_SET, 0,
     "write JSON lines (iterations, epochs, summary) to FILE", NULL},
    {"Output", "log-every", OPT_INT, "N", OFF(log_every), 1, 1e9, NULL, "50", OPT_LOCAL | OPT_AGREE, 0,
     "iterations between \"iter\" records and progress lines", NULL},
    {"Output", "progress", OPT_CHOICE, "WHEN", OFF(progress), 0, 0, "auto|bar|lines|none", "auto", OPT_LOCAL, 0,
     "progress on rank 0: bar (redrawn), lines, none; auto: bar on a terminal", NULL},
    {"Output", "save", OPT_STRING, "FILE", OFF(save), 0, 0, NULL, NULL, OPT_LOCAL | OPT_AGREE_SET, 0,
     "write the trained weights (safetensors) to FILE", NULL},
    {"Output", "load", OPT_STRING, "FILE", OFF(load), 0, 0, NULL, NULL, OPT_LOCAL | OPT_AGREE_SET, 0,
     "start from the weights in FILE (safetensors)", NULL},
    {"Output", "allow-nonfinite", OPT_FLAG, NULL, OFF(allow_nonfinite), 0, 0, NULL, NULL, OPT_LOCAL, 0,
     "--load: accept weights that hold NaN or infinity (refused by default)", NULL},

    {"Checkpoints", "checkpoint", OPT_STRING, "FILE", OFF(checkpoint), 0, 0, NULL, NULL, OPT_LOCAL | OPT_AGREE_SET, 0,
     "write a checkpoint to FILE (safetensors) every --checkpoint-every and at the end", NULL},
    {"Checkpoints", "checkpoint-every", OPT_STRING, "N[it|ep]", OFF(checkpoint_every), 0, 0, NULL, "1ep",
     OPT_LOCAL | OPT_AGREE, 0, "checkpoint cadence: N iterations (Nit) or N epochs (N or Nep)", check_every},
    {"Checkpoints", "resume", OPT_STRING, "FILE", OFF(resume), 0, 0, NULL, NULL, OPT_LOCAL | OPT_AGREE_SET, 0,
     "continue the run a checkpoint FILE stopped, exactly where it stopped", NULL},

    {"Information", "help", OPT_ACTION, NULL, 0, 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, DT_ACT_HELP,
     "print this help and exit", NULL},
    {"Information", "version", OPT_ACTION, NULL, 0, 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, DT_ACT_VERSION,
     "print the version and build features and exit", NULL},
    {"Information", "list-modes", OPT_ACTION, NULL, 0, 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, DT_ACT_LIST_MODES,
     "list the communication modes", NULL},
    {"Information", "list-nets", OPT_ACTION, NULL, 0, 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, DT_ACT_LIST_NETS,
     "list the built-in nets", NULL},
    {"Information", "list-datasets", OPT_ACTION, NULL, 0, 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG,
     DT_ACT_LIST_DATASETS, "list the datasets and where they are looked for", NULL},
    {"Information", "list-devices", OPT_ACTION, NULL, 0, 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG,
     DT_ACT_LIST_DEVICES, "list the compute backends, whether each runs here (and why not), and their devices", NULL},
    {"Information", "list-layers", OPT_ACTION, NULL, 0, 0, 0, NULL, NULL, OPT_LOCAL | OPT_NO_CONFIG, DT_ACT_LIST_LAYERS,
     "list the layer types of the .net format", NULL},
};

/* The whole table: the one above, with the comm modes' flags (mode.h) after --mode. Each entry
 * knows where its value lives: in dt_opts, or in its comm options. */
typedef struct entry {
    const dt_optdef *d;
    size_t base; /* of the struct d->offset is relative to, in dt_opts */
} entry;

#define MAX_OPTS 128
_Static_assert(MAX_OPTS <= sizeof(((dt_opts *)0)->given), "dt_opts.given is too small for the options");
static entry all[MAX_OPTS];
static int n_all;

static void add(const dt_optdef *d, size_t base)
{
    if (n_all == MAX_OPTS) { /* a table grew past MAX_OPTS: a build mistake, caught by any test */
        fprintf(stderr, "dtrain: internal error: more than %d options\n", MAX_OPTS);
        abort();
    }
    all[n_all++] = (entry){d, base};
}

static void build(void)
{
    if (n_all) return;
    for (size_t i = 0; i < DT_ARRAY_LEN(table); i++) {
        add(&table[i], 0);
        if (strcmp(table[i].name, "mode") == 0)
            for (int k = 0; k < mode_optdef_count(); k++) add(mode_optdef_at(k), OFF(comm));
    }
}

static const entry *find_opt(const char *name)
{
    build();
    for (int i = 0; i < n_all; i++)
        if (strcmp(all[i].d->name, name) == 0) return &all[i];
    return NULL;
}

static void *field(dt_opts *o, const entry *e) { return (char *)o + e->base + e->d->offset; }
static const void *cfield(const dt_opts *o, const entry *e) { return (const char *)o + e->base + e->d->offset; }

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return 1;
        p += len + (bar ? 1 : 0);
    }
    return 0;
}

static int apply(dt_opts *o, const entry *e, const char *value, const char *origin)
{
    const dt_optdef *d = e->d;
    long l;
    double x;
    switch (d->kind) {
    case OPT_ACTION: o->action = (dt_action)d->action; return 0;
    case OPT_FLAG:
        if (!value || strcmp(value, "1") == 0 || strcmp(value, "true") == 0 || strcmp(value, "yes") == 0)
            *(int *)field(o, e) = 1;
        else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0 || strcmp(value, "no") == 0)
            *(int *)field(o, e) = 0;
        else
            return dt_fail("%s: expected true or false, found '%s'", origin, value);
        return 0;
    case OPT_INT:
        if (dt_parse_long(value, (long)d->lo, (long)d->hi, origin, &l) != 0) return -1;
        if (d->check && d->check(value, origin) != 0) return -1;
        *(long *)field(o, e) = l;
        return 0;
    case OPT_DOUBLE:
        if (dt_parse_double(value, d->lo, d->hi, origin, &x) != 0) return -1;
        if (d->check && d->check(value, origin) != 0) return -1;
        *(double *)field(o, e) = x;
        return 0;
    case OPT_CHOICE:
        if (!choice_ok(d->choices, value))
            return dt_fail("%s: expected one of %s, found '%s'", origin, d->choices, value);
        /* fall through */
    case OPT_STRING: {
        if (!*value) return dt_fail("%s: expected %s, found an empty value", origin, d->metavar);
        if (d->check && d->check(value, origin) != 0) return -1;
        char **slot = field(o, e), *copy = dt_strdup(value);
        if (!copy) return -1;
        free(*slot);
        *slot = copy;
        return 0;
    }
    }
    return 0;
}

/* per option, the file and line that set it ("x.conf:3"), empty where the command line or nothing did */
static char set_at[MAX_OPTS][160];

int cli_apply(dt_opts *o, const char *name, const char *value, const char *origin, int from_config)
{
    const entry *e = find_opt(name);
    if (!e) return dt_fail("%s: unknown option '%s' (see dtrain --help)", origin, name);
    if (from_config && (e->d->flags & OPT_NO_CONFIG))
        return dt_fail("%s: '%s' is an option of the command line only (not of a config file)", origin, name);
    if (apply(o, e, value, origin) != 0) return -1;
    o->given[e - all] = 1;
    size_t at = strlen(origin), key = strlen(name) + 2; /* a config's origin: "PATH:LINE: key" */
    set_at[e - all][0] = 0;
    if (from_config && at > key && !strcmp(origin + at - key + 2, name) && !strncmp(origin + at - key, ": ", 2))
        snprintf(set_at[e - all], sizeof set_at[0], "%.*s", (int)(at - key), origin);
    return 0;
}

void cli_explain(void)
{
    char msg[1024], add[512] = "";
    snprintf(msg, sizeof msg, "%s", dt_errmsg());
    for (int i = 0; i < n_all; i++) {
        const char *name = all[i].d->name, *p = msg;
        size_t len = strlen(name);
        if (!set_at[i][0] || strstr(msg, set_at[i])) continue;
        while ((p = strstr(p, "--")) && (strncmp(p + 2, name, len) || isalnum((unsigned char)p[2 + len]) ||
                                         p[2 + len] == '-'))
            p += 2;
        if (p && strlen(add) + len + strlen(set_at[i]) + 8 < sizeof add)
            snprintf(add + strlen(add), sizeof add - strlen(add), "%s--%s from %s", add[0] ? "; " : "", name,
                     set_at[i]);
    }
    if (add[0]) dt_fail("%s (%s)", msg, add);
}

/* the options only a GPU backend reads (a build without CUDA has none of them) */
static const char *const gpu_options[] = {"gpu", "tf32", "gpu-exact", "gpu-graph", "gpu-workspace", NULL};

int cli_given(const dt_opts *o, const char *name)
{
    const entry *e = find_opt(name);
    return e && o->given[e - all];
}

static int given_cb(const void *o, const char *name) { return cli_given(o, name); }

/* Defaults; a number without one is -1 ("not given": its user decides, e.g. measure it). */
static int set_defaults(dt_opts *o)
{
    build();
    memset(o, 0, sizeof *o);
    for (int i = 0; i < n_all; i++) {
        const entry *e = &all[i];
        char origin[64];
        if (!e->d->dflt) {
            if (e->d->kind == OPT_INT) *(long *)field(o, e) = -1;
            if (e->d->kind == OPT_DOUBLE) *(double *)field(o, e) = -1.0;
            continue;
        }
        snprintf(origin, sizeof origin, "default of --%s", e->d->name);
        if (apply(o, e, e->d->dflt, origin) != 0) return -1;
    }
    return 0;
}

/* What the options mean together: the comm mode judges its flags, the rest is here. */
/* p with its symbolic links followed as far as they go, also where the last one dangles: the name
 * a write through p creates */
static void follow_links(const char *p, char *out, size_t n)
{
    snprintf(out, n, "%s", p);
    for (int hop = 0; hop < 40; hop++) { /* as the kernel's limit on a path's links */
        char to[PATH_MAX], next[2 * PATH_MAX];
        ssize_t k = readlink(out, to, sizeof to - 1);
        if (k < 0) return;
        to[k] = 0;
        const char *slash = strrchr(out, '/');
        if (to[0] == '/' || !slash) snprintf(next, sizeof next, "%s", to);
        else snprintf(next, sizeof next, "%.*s%s", (int)(slash - out) + 1, out, to);
        size_t len = strlen(next);
        if (len >= n) return; /* too long to be a path: compared as it was */
        memcpy(out, next, len + 1);
    }
}

/* whether paths a and b name one regular file: the same existing file, or the same name in the same
 * directory once links are followed (not devices: --log /dev/null --save /dev/null is fine) */
static int same_file(const char *path_a, const char *path_b)
{
    char a[PATH_MAX], b[PATH_MAX];
    follow_links(path_a, a, sizeof a);
    follow_links(path_b, b, sizeof b);
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (strcmp(a, b) == 0) return 1;
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    if (strcmp(na ? na + 1 : a, nb ? nb + 1 : b) != 0) return 0;
    char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];
    snprintf(da, sizeof da, "%.*s", na ? (int)(na - a) + 1 : 1, na ? a : ".");
    snprintf(db, sizeof db, "%.*s", nb ? (int)(nb - b) + 1 : 1, nb ? b : ".");
    return realpath(da, ra) && realpath(db, rb) && strcmp(ra, rb) == 0;
}

/* Files the run writes must not be one another's, nor a file it reads before writing over it. */
static int check_paths(const dt_opts *o)
{
    static const struct {
        const char *out, *other, *why;
    } pairs[] = {
        {"log", "save", "the weights would replace the log"},
        {"log", "checkpoint", "the checkpoints would replace the log"},
        {"log", "load", "the log would replace the weights before they are read"},
        {"log", "resume", "the log would replace the checkpoint before it is read"},
        {"log", "config", "the log would replace the configuration"},
        {"log", "rerun", "the new log would replace the one --rerun reads"},
        {"save", "checkpoint", "the weights and the checkpoints would replace one another"},
        {"save", "resume", "the final weights would replace the checkpoint, which --resume may need again"},
        {"save", "config", "the weights would replace the configuration"},
        {"checkpoint", "config", "the checkpoints would replace the configuration"},
        {"checkpoint", "load", "the checkpoints would replace the weights --load reads"},
        {"save", "rerun", "the weights would replace the log --rerun reads, and the record of the run with it"},
        {"checkpoint", "rerun",
         "the checkpoints would replace the log --rerun reads, and the record of the run with it"},
        {"log", "net", "the log would replace the net file before it is read"},
        {"save", "net", "the weights would replace the net file"},
        {"checkpoint", "net", "the checkpoints would replace the net file"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(pairs); i++) {
        const entry *a = find_opt(pairs[i].out), *b = find_opt(pairs[i].other);
        const char *pa = *(char *const *)cfield(o, a), *pb = *(char *const *)cfield(o, b);
        if (strcmp(pairs[i].other, "net") == 0 && pb && !net_is_path(pb)) continue; /* a built-in net: no file */
        if (pa && pb && *pa && *pb && same_file(pa, pb))
            return dt_fail("--%s %s and --%s %s are one file: %s (give another name)", pairs[i].out, pa, pairs[i].other,
                           pb, pairs[i].why);
    }
    return 0;
}

static int check_combinations(const dt_opts *o)
{
    if (check_paths(o) != 0) return -1;
    if (!mode_find(o->mode) && strcmp(o->mode, "auto") != 0) return check_mode(o->mode, "--mode");
    if (mode_check_opts(mode_find(o->mode), &o->comm, given_cb, o) != 0) return -1; /* NULL: auto */
    if (o->resume && strcmp(o->mode, "auto") == 0)
        return dt_fail(
            "--resume with --mode auto: give the mode and codec the run chose (its log's summary has them as "
            "mode and compress)");
    if (strcmp(o->device, "cpu") == 0)
        for (const char *const *g = gpu_options; *g; g++)
            if (cli_given(o, *g)) return dt_fail("--%s is for a GPU, and this run has --device cpu", *g);
    if (o->tf32 && o->gpu_exact)
        return dt_fail("--tf32 and --gpu-exact exclude each other (TF32 multiplies with 10-bit mantissas: no longer "
                       "the CPU's results to 1e-6)");
    if (o->transport && strcmp(o->transport, "nccl") == 0) {
        const dt_mode_desc *m = mode_find(o->mode);
        if (strcmp(o->device, "cpu") == 0)
            return dt_fail("--transport nccl moves gradients between GPUs, and this run has --device cpu");
        if (m && mode_reads(m, "topk-scope") && o->comm.topk_scope && strcmp(o->comm.topk_scope, "layer") == 0)
            return dt_fail("--transport nccl and --topk-scope layer exclude each other (the per-tensor selection "
                           "goes through the host)");
        if (m && mode_reads(m, "allreduce") && o->comm.allreduce && strcmp(o->comm.allreduce, "mpi") == 0)
            return dt_fail("--transport nccl and --allreduce mpi exclude each other (MPI_Allreduce sums on the host)");
    }
    for (const char *const *g = (const char *const[]){"fp16-scale", "fp16-scale-window", NULL}; *g; g++)
        if (cli_given(o, *g) && strcmp(o->precision, "fp16") != 0)
            return dt_fail("--%s is for --precision fp16, and this run has --precision %s", *g, o->precision);
    if (cli_given(o, "checkpoint-every") && !o->checkpoint)
        return dt_fail("--checkpoint-every needs --checkpoint FILE (where to write them)");
    if (o->resume && o->load)
        return dt_fail(
            "--resume and --load exclude each other (a checkpoint holds the weights; --load starts a new run)");
    if (o->allow_nonfinite && !o->load) return dt_fail("--allow-nonfinite applies to --load FILE");
    if (cli_given(o, "image-size") && o->dataset && strcmp(o->dataset, "synthetic") != 0 && !dataset_crops(o->dataset))
        return dt_fail("--image-size applies to --dataset imagenet, not to --dataset %s", o->dataset);
    if (cli_given(o, "synthetic-samples") && (!o->dataset || strcmp(o->dataset, "synthetic") != 0))
        return dt_fail("--synthetic-samples applies to --dataset synthetic");
    if (o->synthetic_once && (!o->dataset || strcmp(o->dataset, "synthetic") != 0))
        return dt_fail("--synthetic-once applies to --dataset synthetic");
    if (o->synthetic_once && cli_given(o, "prefetch"))
        return dt_fail("--prefetch and --synthetic-once exclude each other (with one batch made once, no loader "
                       "thread runs to prefetch)");
    if (cli_given(o, "log-every") && !o->log && o->progress && !strcmp(o->progress, "none"))
        return dt_fail("--log-every applies to --log's records and the progress lines, and this run has neither "
                       "(--progress none, no --log)");
    if (o->nesterov && o->comm.momentum_correction)
        return dt_fail("--nesterov and --momentum-correction exclude each other (momentum correction keeps each "
                       "rank's plain momentum before sparsification, DGC's; the step after it has none to look "
                       "ahead with)");
    if (o->nesterov && o->momentum == 0)
        return dt_fail("--nesterov needs --momentum above 0 (Nesterov's step is a momentum method; with none it "
                       "is plain SGD)");
    if (cli_given(o, "on-bad-image") && o->dataset && !dataset_crops(o->dataset))
        return dt_fail("--on-bad-image applies to --dataset imagenet (a tree of image files), not to --dataset %s",
                       o->dataset);
    if (o->data_dir && o->dataset && strcmp(o->dataset, "synthetic") == 0)
        return dt_fail("--data-dir applies to a dataset read from files, not to --dataset synthetic");
    return 0;
}

/* Values derived from the text of options, once they are all in. */
static int finish(dt_opts *o)
{
    if (every_parse(o->checkpoint_every, &o->ckpt_every, &o->ckpt_in_epochs) != 0)
        return dt_fail_prefix("--checkpoint-every");
    o->gpu_given[0] = 0;
    for (const char *const *g = gpu_options; *g; g++)
        if (cli_given(o, *g)) {
            size_t len = strlen(o->gpu_given);
            snprintf(o->gpu_given + len, sizeof o->gpu_given - len, "%s--%s", len ? ", " : "", *g);
        }
    return check_combinations(o);
}

/* "500it" -> 500 iterations, "2ep" or "2" -> 2 epochs. */
static int every_parse(const char *spec, long *n, int *epochs)
{
    char num[32];
    size_t len = strlen(spec), unit = len >= 2 && (!strcmp(spec + len - 2, "it") || !strcmp(spec + len - 2, "ep"));
    len -= unit ? 2 : 0;
    snprintf(num, sizeof num, "%.*s", (int)len, spec);
    errno = 0;
    long v = len < sizeof num && dt_is_decimal(num, 1) ? strtol(num, NULL, 10) : 0;
    if (errno || v < 1 || v > 1000000000L)
        return dt_fail("expected N, Nit or Nep with N from 1 to 1000000000 (e.g. 500it, 2ep), found '%s'", spec);
    *n = v;
    *epochs = !unit || !strcmp(spec + len, "ep");
    return 0;
}

/* config_load's callback: a setting of a config file is an option, except command-line-only ones */
static int apply_config(void *arg, const char *key, const char *value, const char *origin)
{
    return cli_apply(arg, key, value, origin, 1);
}

/* An option's value as canonical text: the shortest that reads back as the same value. */
static void value_text(const dt_opts *o, const entry *e, char *val, size_t n)
{
    switch (e->d->kind) {
    case OPT_FLAG: snprintf(val, n, "%s", *(const int *)cfield(o, e) ? "true" : "false"); break;
    case OPT_INT: snprintf(val, n, "%ld", *(const long *)cfield(o, e)); break;
    case OPT_DOUBLE: {
        double v = *(const double *)cfield(o, e);
        if (v == floor(v) && fabs(v) < 1e9) { /* whole numbers as people write them: 300, not 3e+02 */
            snprintf(val, n, "%.0f", v);
            break;
        }
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(val, n, "%.*g", prec, v);
            if (strtod(val, NULL) == v) break;
        }
        break;
    }
    default: {
        const char *str = *(char *const *)cfield(o, e);
        snprintf(val, n, "%s", str ? str : "");
    }
    }
}

/* The last run record ("start" or "summary" with "options") of the JSON-lines log at path. */
static int rerun_record(const char *path, json **out)
{
    char *text, *line, *save = NULL;
    size_t n;
    json *best = NULL;
    char why[300] = ""; /* why the last line that looked like a record did not parse */
    if (dt_read_file(path, &text, &n) != 0) return dt_fail_prefix("--rerun");
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json *j;
        if (!strstr(line, "\"options\"")) continue;
        if (json_parse(line, strlen(line), path, &j) != 0) {
            snprintf(why, sizeof why, "; a line that looks like one does not parse: %s", dt_errmsg());
            dt_err_clear();
            continue;
        }
        const json *t = json_get(j, "type"), *opts = json_get(j, "options"), *given = json_get(j, "given");
        if (t && t->type == JSON_STR && (!strcmp(t->str, "start") || !strcmp(t->str, "summary")) && opts &&
            opts->type == JSON_STR && given && given->type == JSON_STR) {
            json_free(best);
            best = j;
        } else {
            json_free(j);
        }
    }
    free(text);
    if (!best)
        return dt_fail("--rerun %s: no run record in it (expected the JSON-lines log of a run, --log FILE, whose start "
                       "record holds its options%s)",
                       path, why);
    *out = best;
    return 0;
}

/* A record's options (text, of what) hold none of the options a run keeps to itself (--log, --save, --threads ...):
 * one there was edited in, and obeying it could write where the user did not ask. */
static int record_keys_check(const char *path, const char *text, const char *what)
{
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n'), *eq = strstr(line, " = ");
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (eq && (size_t)(eq - line) < len && (size_t)(eq - line) < 64) {
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(eq - line), line);
            const entry *e = find_opt(key);
            if (e && e->d->flags & OPT_LOCAL)
                return dt_fail(
                    "--rerun %s: the record's %s set --%s, which a run record never holds (is the log edited "
                    "or damaged?)",
                    path, what, key);
        }
        line += len + (nl ? 1 : 0);
    }
    return 0;
}

/* e's value taken from the run record at path (a message that names it says where) */
static void took(const entry *e, const char *path) { snprintf(set_at[e - all], sizeof set_at[0], "--rerun %s", path); }

/* --rerun: the record's given options as a config file would set them; then, after the command
 * line, every other option the record holds is set to its recorded value where this dtrain's
 * default differs, and the data directory and rank count come from the record unless given. */
static int rerun_before(dt_opts *o, const char *path, json **rec)
{
    const json *given;
    char origin[600];
    if (rerun_record(path, rec) != 0) return -1;
    given = json_get(*rec, "given");
    if (record_keys_check(path, given->str, "given options") != 0 ||
        record_keys_check(path, json_get(*rec, "options")->str, "options") != 0)
        return -1;
    char *text = dt_strdup(given->str);
    if (!text) return -1;
    snprintf(origin, sizeof origin, "--rerun %s (the options it records)", path);
    int rc = config_parse(text, strlen(text), origin, 0, apply_config, o); /* values as recorded, '#' too */
    free(text);
    return rc;
}

/* --rerun LOG --mode M of another mode than the log's: the recorded flags that only the log's mode
 * read (its --chunk, its --auto-allow) are no longer given, as that run's own and not M's (their
 * values stay, as every recorded option's does, and M does not read them); given on the command
 * line, they stay given (and M may refuse them). */
static void rerun_other_mode(dt_opts *o, const char *recorded, const int *cmdline)
{
    const dt_mode_desc *m = mode_find(o->mode);
    if (!recorded[0] || strcmp(recorded, o->mode) == 0) return;
    for (int i = 0; i < n_all; i++) {
        const char *name = all[i].d->name;
        if (cmdline[i] || !o->given[i] || !mode_flag_specific(name)) continue;
        int reads = m ? mode_reads(m, name) : strcmp(name, "auto-allow") == 0 || strcmp(name, "model-compute") == 0;
        if (!reads) o->given[i] = 0, set_at[i][0] = 0;
    }
}

static int rerun_after(dt_opts *o, const char *path, const json *rec, const int *cmdline)
{
    const json *opts = json_get(rec, "options"), *dir = json_get(rec, "data_dir"), *ranks = json_get(rec, "ranks");
    char *text = dt_strdup(opts->str), *line, *save = NULL, origin[600], now[600];
    if (!text) return -1;
    char recorded[64] = ""; /* the run's --mode: its line of the options */
    for (const char *at = opts->str; at && !recorded[0]; at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL)
        if (strncmp(at, "mode = ", 7) == 0) sscanf(at + 7, "%63[^\n]", recorded);
    if (cmdline[find_opt("mode") - all]) rerun_other_mode(o, recorded, cmdline);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strstr(line, " = ");
        const entry *e;
        if (!eq) continue;
        *eq = 0;
        int bad = 0; /* the message names line, a part of text: made before text is freed */
        if (!(e = find_opt(line)))
            bad = dt_fail("--rerun %s: the run set --%s, which this dtrain does not have (expected the dtrain that "
                          "wrote the log, or a later one)",
                          path, line);
        if (bad) {
            free(text);
            return -1;
        }
        value_text(o, e, now, sizeof now);
        if (o->given[e - all] || !strcmp(now, eq + 3)) continue; /* given here, or this dtrain's default is the same */
        snprintf(origin, sizeof origin, "--rerun %s: %s", path, line);
        if (apply(o, e, eq + 3, origin) != 0) { /* this dtrain's default differs: the run's value, not marked given */
            free(text);
            return -1;
        }
    }
    free(text);
    if (!cmdline[find_opt("mode") - all] && strcmp(o->mode, "auto") == 0) { /* the model measures and may choose anew */
        const json *m = json_get(rec, "mode"), *z = json_get(rec, "compress");
        const dt_mode_desc *chose = m && m->type == JSON_STR ? mode_find(m->str) : NULL;
        if (chose) { /* the codec only where that mode takes one (--compress none is refused by gtopk) */
            char codec[96] = "";
            if (mode_reads(chose, "compress"))
                snprintf(codec, sizeof codec, " --compress %s", z && z->type == JSON_STR && z->str[0] ? z->str : "none");
            return dt_fail("--rerun %s: the run had --mode auto, which measures the links and may choose another mode "
                           "now; give the mode it chose, --mode %s%s, or --mode auto to choose again",
                           path, m->str, codec);
        }
        return dt_fail("--rerun %s: the run had --mode auto, which measures the links and may choose another mode now "
                       "(the log records no choice); give --mode, or --mode auto to choose again",
                       path);
    }
    const json *git = json_get(rec, "git");
    if (git && git->type == JSON_STR) snprintf(o->rerun_git, sizeof o->rerun_git, "%s", git->str);
#define GIVEN_HERE(name) (cmdline[find_opt(name) - all])
    /* what the command line gives instead of the record's: taken without the comparison */
    int dir_here = GIVEN_HERE("data-dir") || GIVEN_HERE("dataset"),
        data_here = dir_here || GIVEN_HERE("image-size"); /* another size packs other pixels */
    if (dir && dir->type == JSON_STR && !dir_here) {
        free(o->data_dir);
        if (!(o->data_dir = dt_strdup(dir->str))) return -1;
        took(find_opt("data-dir"), path);
    }
    /* the net file where the run read it (a relative --net would resolve elsewhere), and digests of the
     * net, the data and --load's weights, which run.c compares where they come from the record */
    const json *net_file = json_get(rec, "net_file"), *load = json_get(rec, "load");
    if (!GIVEN_HERE("net") && net_file && net_file->type == JSON_STR && net_file->str[0]) {
        free(o->net);
        if (!(o->net = dt_strdup(net_file->str))) return -1;
        took(find_opt("net"), path);
    }
    if (!GIVEN_HERE("load") && !GIVEN_HERE("resume") && load && load->type == JSON_STR && load->str[0]) {
        free(o->load);
        if (!(o->load = dt_strdup(load->str))) return -1;
        took(find_opt("load"), path);
    }
    /* a built-in net takes the data's classes: other data may size it otherwise */
    int net_here = GIVEN_HERE("net") || GIVEN_HERE("classes") || (!net_is_path(o->net) && data_here);
    o->rerun_synth_given =
        GIVEN_HERE("seed") || GIVEN_HERE("synthetic-samples") || GIVEN_HERE("classes") || GIVEN_HERE("net");
    const struct {
        const char *key;
        char *out;
        int here;
    } digests[] = {{"net_digest", o->rerun_net, net_here},
                   {"data_fingerprint", o->rerun_data, data_here},
                   {"load_digest", o->rerun_load, GIVEN_HERE("load") || GIVEN_HERE("resume") || !o->load}};
#undef GIVEN_HERE
    for (size_t i = 0; i < DT_ARRAY_LEN(digests); i++) {
        const json *d = json_get(rec, digests[i].key);
        if (digests[i].here || !d || d->type != JSON_STR) continue;
        if (strlen(d->str) != 16 || strspn(d->str, "0123456789abcdef") != 16)
            return dt_fail("--rerun %s: the record's %s is '%s' (expected 16 hex digits: is the log damaged?)", path,
                           digests[i].key, d->str);
        memcpy(digests[i].out, d->str, 17);
    }
    if (ranks && ranks->type == JSON_NUM && !cmdline[find_opt("ranks") - all]) {
        if (!(ranks->num >= 1 && ranks->num <= (1 << 20) && ranks->num == floor(ranks->num)))
            return dt_fail("--rerun %s: the record's ranks is %g (expected a rank count, 1 to %d: is the log damaged?)",
                           path, ranks->num, 1 << 20);
        o->ranks = (long)ranks->num;
        o->ranks_of_rerun = 1;
    }
    return 0;
}

int cli_parse(int argc, char **argv, dt_opts *o)
{
    struct option longopts[MAX_OPTS + 1];
    struct {
        int idx;
        const char *val;
    } given[256];
    int n_given = 0, c, cmdline[MAX_OPTS] = {0};
    const char *config = NULL, *rerun = NULL;
    json *rec = NULL;

    if (set_defaults(o) != 0) return -1;
    memset(set_at, 0, sizeof set_at);
    for (int i = 0; i < n_all; i++) {
        longopts[i].name = all[i].d->name;
        /* a flag takes true or false after '=' (--nesterov=false turns off a config file's) */
        longopts[i].has_arg = all[i].d->kind == OPT_FLAG     ? optional_argument
                              : all[i].d->kind == OPT_ACTION ? no_argument
                                                             : required_argument;
        longopts[i].flag = NULL;
        longopts[i].val = 256 + i;
    }
    memset(&longopts[n_all], 0, sizeof longopts[0]);

    const char *order[64] = {NULL}; /* the arguments as given: getopt_long moves the others to the end */
    for (int i = 0; i < argc && i < (int)DT_ARRAY_LEN(order); i++) order[i] = argv[i];
    opterr = 0;
    optind = 0; /* GNU: reinitialise, so tests may call this more than once */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            o->action = DT_ACT_HELP;
            continue;
        }
        if (c == '?') {
            const char *arg = argv[optind - 1];
            if (optopt && optopt < 256) { /* the word it came in: "-np" reports '-n' */
                const char *w = NULL;
                for (int k = optind - 1; k <= optind && k < argc; k++)
                    if (k > 0 && !w && argv[k][0] == '-' && argv[k][1] == optopt) w = argv[k];
                if (w && (!strcmp(w, "-np") || !strcmp(w, "-n")))
                    return dt_fail("unknown option '%s': mpirun's -np goes before dtrain (mpirun -np P dtrain "
                                   "[OPTION]...)",
                                   w);
                if (w) return dt_fail("unknown option '%s' (dtrain's options are --NAME; see dtrain --help)", w);
                return dt_fail("unknown option '-%c' (see dtrain --help)", optopt);
            }
            /* getopt_long takes a unique prefix of a name; one that starts several is ambiguous */
            char names[512] = "";
            size_t len = arg[0] == '-' && arg[1] == '-' ? strcspn(arg + 2, "=") : 0;
            int n_match = 0;
            for (int i = 0; len && i < n_all; i++) {
                const char *name = all[i].d->name;
                if (strncmp(name, arg + 2, len) != 0) continue;
                if (strlen(name) == len) { /* the name itself, which other names may start with */
                    snprintf(names, sizeof names, "--%s", name);
                    n_match = 1;
                    break;
                }
                if (strlen(names) + strlen(name) + 8 < sizeof names)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s--%s", n_match ? ", " : "", name);
                n_match++;
            }
            if (n_match > 1)
                return dt_fail("option '--%.*s' is ambiguous: it starts %s (give more of the name)", (int)len, arg + 2,
                               names);
            if (n_match == 1 && arg[2 + len] == '=') return dt_fail("%s takes no value, found '%s'", names, arg);
            return dt_fail("unknown option '%s' (see dtrain --help)", arg);
        }
        if (c == ':') {
            const char *arg = argv[optind - 1];
            if (optopt >= 256) arg = all[optopt - 256].d->name;
            return dt_fail("--%s: missing value (expected %s)", arg,
                           optopt >= 256 ? all[optopt - 256].d->metavar : "a value");
        }
        /* "--save --nesterov": the value left out, so getopt took the next option for it */
        if (optarg && optarg == argv[optind - 1] && optarg[0] == '-' && optarg[1] == '-' && isalpha(optarg[2]))
            return dt_fail("--%s: missing value (expected %s; the next argument, %s, is an option; a value that "
                           "starts with -- goes after =: --%s=%s)",
                           all[c - 256].d->name, all[c - 256].d->metavar, optarg, all[c - 256].d->name, optarg);
        if (n_given == (int)DT_ARRAY_LEN(given)) return dt_fail("too many options");
        given[n_given].idx = c - 256;
        given[n_given].val = optarg;
        n_given++;
        cmdline[c - 256] = 1;
        if (strcmp(all[c - 256].d->name, "config") == 0) {
            if (config)
                return dt_fail("--config given twice (%s, then %s): put the settings in one file", config, optarg);
            config = optarg;
        }
        if (strcmp(all[c - 256].d->name, "rerun") == 0) rerun = optarg;
    }
    if (optind < argc && optind > 1 && !strcmp(argv[optind - 1], "--"))
        return dt_fail("unexpected argument '%s' after '--' (dtrain reads no options after it, and takes no other "
                       "arguments; see dtrain --help)",
                       argv[optind]);
    if (optind < argc) { /* "--nesterov false": the flag's value given as an argument of its own */
        const char *before = NULL;
        for (int i = 1; i < argc && i < (int)DT_ARRAY_LEN(order); i++)
            if (order[i] == argv[optind]) before = order[i - 1];
        const entry *f = before && !strncmp(before, "--", 2) ? find_opt(before + 2) : NULL;
        if (f && f->d->kind == OPT_FLAG)
            return dt_fail("unexpected argument '%s' (a flag's value goes after '=': %s=%s)", argv[optind], before,
                           argv[optind]);
        return dt_fail("unexpected argument '%s' (options start with --; see dtrain --help)", argv[optind]);
    }
    if (config && rerun)
        return dt_fail("--rerun and --config exclude each other (the log records every option the run had)");
    if (config && config_load(config, apply_config, o) != 0) return -1;
    if (rerun && rerun_before(o, rerun, &rec) != 0) {
        json_free(rec);
        return -1;
    }
    for (int i = 0; i < n_given; i++) {
        char origin[64];
        snprintf(origin, sizeof origin, "--%s", all[given[i].idx].d->name);
        if (cli_apply(o, all[given[i].idx].d->name, given[i].val, origin, 0) != 0) {
            json_free(rec);
            return -1;
        }
    }
    if (rec) {
        int rc = rerun_after(o, rerun, rec, cmdline);
        json_free(rec);
        if (rc != 0) return -1;
    }
    return o->action == DT_ACT_TRAIN ? finish(o) : 0;
}

void cli_free(dt_opts *o)
{
    build();
    for (int i = 0; i < n_all; i++)
        if (all[i].d->kind == OPT_STRING || all[i].d->kind == OPT_CHOICE) {
            char **slot = field(o, &all[i]);
            free(*slot);
            *slot = NULL;
        }
}

void cli_help(FILE *f)
{
    const char *group = "";
    build();
    fprintf(f, "Usage: dtrain [OPTION]...\n"
               "       mpirun -np P dtrain [OPTION]...\n"
               "Train a network on one or many ranks, exchanging gradients as --mode says.\n"
               "Every option is described in dtrain(1); config files in dtrain.conf(5); nets in dtrain-net(5).\n");
    for (int i = 0; i < n_all; i++) {
        const dt_optdef *d = all[i].d;
        char left[64];
        if (strcmp(group, d->group) != 0) {
            group = d->group;
            fprintf(f, "\n%s:\n", group);
        }
        snprintf(left, sizeof left, "--%s%s%s", d->name, d->metavar ? " " : "", d->metavar ? d->metavar : "");
        if (strlen(left) < 26) fprintf(f, "  %-26s %s", left, d->help);
        else fprintf(f, "  %s\n  %-26s %s", left, "", d->help); /* as GNU's --help: no run-together columns */
        if (d->dflt) fprintf(f, " [%s]", d->dflt);
        fputc('\n', f);
    }
    fprintf(f, "\nExample: mpirun -np 4 dtrain --net mlp --dataset fashion-mnist --epochs 2\n");
}

/* "key = value" lines of the options: 0 the effective ones that change the computation, 1 those and
 * what ranks must agree on, 2 the first kind that were given (command line or config). */
static char *canonical(const dt_opts *o, int agreement)
{
    int given_only = agreement == 2;
    if (given_only) agreement = 0;
    size_t cap = 4096, off = 0;
    char *buf = dt_malloc(cap);
    build();
    if (!buf) return NULL;
    buf[0] = 0;
    for (int i = 0; i < n_all; i++) {
        const entry *e = &all[i];
        const dt_optdef *d = e->d;
        char val[600];
        if (d->kind == OPT_ACTION || (d->flags & OPT_LOCAL && !(agreement && d->flags & (OPT_AGREE | OPT_AGREE_SET))))
            continue;
        if (given_only && !o->given[i]) continue;
        if (d->flags & OPT_AGREE_SET) snprintf(val, sizeof val, "%s", o->given[i] ? "(given)" : "(not given)");
        else value_text(o, e, val, sizeof val);
        size_t need = strlen(d->name) + strlen(val) + 5;
        if (off + need >= cap) {
            char *g = realloc(buf, cap = (off + need) * 2);
            if (!g) {
                free(buf);
                dt_fail("out of memory");
                return NULL;
            }
            buf = g;
        }
        off += (size_t)snprintf(buf + off, cap - off, "%s = %s\n", d->name, val);
    }
    return buf;
}

char *cli_canonical(const dt_opts *o) { return canonical(o, 0); }
char *cli_agreement(const dt_opts *o) { return canonical(o, 1); }
char *cli_given_text(const dt_opts *o) { return canonical(o, 2); }
