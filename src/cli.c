/* The option table and everything derived from it. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/mode.h"
#include "comm/schedule.h"
#include "data/data.h"
#include "engine/engine.h"
#include "config.h"
#include "util.h"

typedef enum { K_FLAG, K_INT, K_DOUBLE, K_STRING, K_CHOICE, K_ACTION } opt_kind;

enum {
    LOCAL = 1,     /* may differ between ranks (paths, output): not in the agreement check */
    NO_CONFIG = 2, /* command line only */
};

typedef struct optdef {
    const char *group;
    const char *name;
    opt_kind kind;
    const char *metavar;
    size_t offset;
    double lo, hi;
    const char *choices; /* K_CHOICE: "a|b|c"; K_ACTION: unused */
    const char *dflt;    /* default as text; NULL: none */
    int flags;
    int action; /* K_ACTION */
    const char *help;
} optdef;

#define OFF(f) offsetof(dt_opts, f)

/* what --help offers for --device: the backends this build has */
#if DT_CUDA_BUILT
#define DEVICE_CHOICES "cpu|cuda|auto"
#else
#define DEVICE_CHOICES "cpu|auto"
#endif

static const optdef table[] = {
    {"Run", "net", K_STRING, "NAME|FILE", OFF(net), 0, 0, NULL, "mlp", 0, 0,
     "network: a built-in name (--list-nets) or a .net file"},
    {"Run", "dataset", K_STRING, "NAME", OFF(dataset), 0, 0, NULL, "fashion-mnist", 0, 0,
     "dataset (--list-datasets)"},
    {"Run", "data-dir", K_STRING, "DIR", OFF(data_dir), 0, 0, NULL, NULL, LOCAL, 0,
     "where the dataset's files are (default: its standard locations)"},
    {"Run", "epochs", K_INT, "N", OFF(epochs), 0, 1e6, NULL, "5", 0, 0,
     "passes over the training set; 0 only evaluates (with --load)"},
    {"Run", "iters", K_INT, "N", OFF(iters), 0, 1e12, NULL, "0", 0, 0,
     "stop after N iterations in total (0: no limit)"},
    {"Run", "batch", K_INT, "N", OFF(batch), 1, 1 << 24, NULL, "100", 0, 0,
     "global batch, summed over all ranks (as in the papers)"},
    {"Run", "seed", K_INT, "N", OFF(seed), 0, 9.2e18, NULL, "1", 0, 0,
     "one seed for initialisation, shuffling and every random stream"},
    {"Run", "threads", K_INT, "N", OFF(threads), 0, 1024, NULL, "0", LOCAL, 0,
     "compute threads per rank (0: the cores of this host divided by its ranks)"},
    {"Run", "device", K_STRING, DEVICE_CHOICES, OFF(device), 0, 0, NULL, "auto", 0, 0,
     "compute backend (--list-devices; auto: the best one that runs here)"},
    {"Run", "augment", K_STRING, "SPEC", OFF(augment), 0, 0, NULL, "default", 0, 0,
     "training augmentation: default (the dataset's), none, or a list of crop=PAD, resized-crop, flip"},
    {"Run", "image-size", K_INT, "S", OFF(image_size), 0, 4096, NULL, "0", 0, 0,
     "imagenet: side of the packed square images (0: the net's input side x 8/7, 256 for 224)"},
    {"Run", "prefetch", K_INT, "N", OFF(prefetch), 0, 64, NULL, "2", LOCAL, 0,
     "batches a loader thread prepares ahead of training (0: load in the training loop)"},
    {"Run", "config", K_STRING, "FILE", OFF(config), 0, 0, NULL, NULL, LOCAL | NO_CONFIG, 0,
     "read options from a key = value file first (dtrain.conf(5))"},

    {"Optimizer", "lr", K_DOUBLE, "X", OFF(lr), 0, 100, NULL, "0.02", 0, 0, "learning rate"},
    {"Optimizer", "momentum", K_DOUBLE, "X", OFF(momentum), 0, 0.9999, NULL, "0.9", 0, 0, "SGD momentum"},
    {"Optimizer", "nesterov", K_FLAG, NULL, OFF(nesterov), 0, 0, NULL, NULL, 0, 0, "Nesterov momentum"},
    {"Optimizer", "wd", K_DOUBLE, "X", OFF(wd), 0, 1, NULL, "0", 0, 0, "weight decay (L2, added to the gradient)"},
    {"Optimizer", "lr-schedule", K_STRING, "SPEC", OFF(lr_schedule), 0, 0, NULL, "constant", 0, 0,
     "constant, step:E1,E2,...[:GAMMA], poly:POWER or cosine"},
    {"Optimizer", "lr-warmup-epochs", K_DOUBLE, "X", OFF(lr_warmup_epochs), 0, 1e4, NULL, "0", 0, 0,
     "ramp the learning rate linearly from ~0 over the first X epochs"},

    {"Communication", "mode", K_STRING, "NAME", OFF(mode), 0, 0, NULL, "dsync", 0, 0,
     "how ranks combine gradients (--list-modes)"},
    {"Communication", "compress", K_STRING, "NAME", OFF(compress), 0, 0, NULL, NULL, 0, 0,
     "gradient codec on the wire: none, t16, fp16 or q8 (default: none; csc: fp16)"},
    {"Communication", "compress-block", K_INT, "N", OFF(compress_block), 1, 1 << 24, NULL, "256", 0, 0,
     "values per scale of --compress q8"},
    {"Communication", "ps-servers", K_INT, "S", OFF(ps_servers), 1, 1024, NULL, "1", 0, 0,
     "ps: the last S ranks are parameter servers"},
    {"Communication", "placement", K_CHOICE, "HOW", OFF(placement), 0, 0, "uniform|round-robin|greedy", "uniform", 0, 0,
     "ps: how layers are spread over servers: uniform, round-robin or greedy"},
    {"Communication", "staleness", K_INT, "S", OFF(staleness), 0, 1000, NULL, "0", 0, 0,
     "ps: a worker may run S iterations ahead of the slowest (0: bulk-synchronous)"},
    {"Communication", "pipeline-depth", K_INT, "K", OFF(pipeline_depth), 1, 16, NULL, "2", 0, 0,
     "pipesgd: iteration t applies the aggregated gradient of t-K"},
    {"Communication", "warmup-epochs", K_DOUBLE, "E", OFF(warmup_epochs), 0, 1e6, NULL, "0", 0, 0,
     "pipesgd: run the first E epochs as D-Sync"},
    {"Communication", "fusion-bytes", K_DOUBLE, "N", OFF(fusion_bytes), 4, INFINITY, NULL, "inf", 0, 0,
     "dsync: allreduce every N bytes of gradient as backward finishes them (inf: once after backward)"},
    {"Communication", "density", K_DOUBLE, "R", OFF(density), 1e-9, 1, NULL, "0.001", 0, 0,
     "topk, gtopk: fraction of the arena each rank sends (k = floor(R d))"},
    {"Communication", "density-warmup", K_STRING, "SPEC", OFF(density_warmup), 0, 0, NULL, "none", 0, 0,
     "topk, gtopk: densities of the first epochs: none, dgc, gtopk-code or R1,R2,..."},
    {"Communication", "momentum-correction", K_FLAG, NULL, OFF(momentum_correction), 0, 0, NULL, NULL, 0, 0,
     "topk, gtopk, csc: momentum on each rank before sparsification (DGC / GradientFlow Alg. 1)"},
    {"Communication", "chunk", K_INT, "N", OFF(chunk), 1, 1 << 30, NULL, "32768", 0, 0,
     "csc: values per chunk"},
    {"Communication", "chunk-ratio", K_DOUBLE, "R", OFF(chunk_ratio), 1e-6, 1, NULL, "0.1", 0, 0,
     "csc: fraction of chunks allreduced each iteration"},
    {"Communication", "sparsity-warmup", K_DOUBLE, "F", OFF(sparsity_warmup), 0, 1, NULL, "0", 0, 0,
     "csc: ramp from dense to --chunk-ratio over the first F of all iterations"},
    {"Communication", "clip", K_DOUBLE, "C", OFF(clip), 0.01, 1e6, NULL, "2.5", 0, 0,
     "terngrad: clip gradients at C standard deviations of their tensor"},
    {"Communication", "tern-skip-last", K_FLAG, NULL, OFF(tern_skip_last), 0, 0, NULL, NULL, 0, 0,
     "terngrad: send the last layer's gradients in fp32"},
    {"Communication", "tern-min-size", K_INT, "N", OFF(tern_min_size), 0, 1L << 40, NULL, "0", 0, 0,
     "terngrad: send tensors of fewer than N values in fp32"},
    {"Communication", "model-alpha", K_DOUBLE, "SECONDS", OFF(model_alpha), 0, 10, NULL, NULL, 0, 0,
     "timing model: latency per message (default: measured at start-up)"},
    {"Communication", "model-beta", K_DOUBLE, "SECONDS", OFF(model_beta), 0, 1, NULL, NULL, 0, 0,
     "timing model: seconds per byte on the wire, in the ring and streamed (default: measured)"},
    {"Communication", "model-gamma", K_DOUBLE, "SECONDS", OFF(model_gamma), 0, 1, NULL, NULL, 0, 0,
     "timing model: seconds per value to decode, add and encode (default: measured)"},

    {"Output", "log", K_STRING, "FILE", OFF(log), 0, 0, NULL, NULL, LOCAL, 0,
     "write JSON lines (iterations, epochs, summary) to FILE"},
    {"Output", "log-every", K_INT, "N", OFF(log_every), 1, 1e9, NULL, "50", LOCAL, 0,
     "iterations between \"iter\" records and progress lines"},
    {"Output", "progress", K_CHOICE, "WHEN", OFF(progress), 0, 0, "auto|bar|lines|none", "auto", LOCAL, 0,
     "progress on rank 0: bar (redrawn), lines, none; auto: bar on a terminal"},
    {"Output", "save", K_STRING, "FILE", OFF(save), 0, 0, NULL, NULL, LOCAL, 0,
     "write the trained weights (safetensors) to FILE"},
    {"Output", "load", K_STRING, "FILE", OFF(load), 0, 0, NULL, NULL, LOCAL, 0,
     "start from the weights in FILE (safetensors)"},

    {"Checkpoints", "checkpoint", K_STRING, "FILE", OFF(checkpoint), 0, 0, NULL, NULL, LOCAL, 0,
     "write a checkpoint to FILE (safetensors) every --checkpoint-every and at the end"},
    {"Checkpoints", "checkpoint-every", K_STRING, "N[it|ep]", OFF(checkpoint_every), 0, 0, NULL, "1ep", LOCAL, 0,
     "checkpoint cadence: N iterations (Nit) or N epochs (N or Nep)"},
    {"Checkpoints", "resume", K_STRING, "FILE", OFF(resume), 0, 0, NULL, NULL, LOCAL, 0,
     "continue the run a checkpoint FILE stopped, exactly where it stopped"},

    {"Information", "help", K_ACTION, NULL, 0, 0, 0, NULL, NULL, LOCAL | NO_CONFIG, DT_ACT_HELP,
     "print this help and exit"},
    {"Information", "version", K_ACTION, NULL, 0, 0, 0, NULL, NULL, LOCAL | NO_CONFIG, DT_ACT_VERSION,
     "print the version and build features and exit"},
    {"Information", "list-modes", K_ACTION, NULL, 0, 0, 0, NULL, NULL, LOCAL | NO_CONFIG, DT_ACT_LIST_MODES,
     "list the communication modes"},
    {"Information", "list-nets", K_ACTION, NULL, 0, 0, 0, NULL, NULL, LOCAL | NO_CONFIG, DT_ACT_LIST_NETS,
     "list the built-in nets"},
    {"Information", "list-datasets", K_ACTION, NULL, 0, 0, 0, NULL, NULL, LOCAL | NO_CONFIG, DT_ACT_LIST_DATASETS,
     "list the datasets and where they are looked for"},
    {"Information", "list-devices", K_ACTION, NULL, 0, 0, 0, NULL, NULL, LOCAL | NO_CONFIG, DT_ACT_LIST_DEVICES,
     "list the compute backends, whether each runs here (and why not), and their devices"},
    {"Information", "list-layers", K_ACTION, NULL, 0, 0, 0, NULL, NULL, LOCAL | NO_CONFIG, DT_ACT_LIST_LAYERS,
     "list the layer types of the .net format"},
};

#define N_OPTS ((int)DT_ARRAY_LEN(table))
_Static_assert(DT_ARRAY_LEN(table) <= sizeof(((dt_opts *)0)->given), "dt_opts.given is too small for the table");

static const optdef *find_opt(const char *name)
{
    for (int i = 0; i < N_OPTS; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

static void *field(dt_opts *o, const optdef *d) { return (char *)o + d->offset; }
static const void *cfield(const dt_opts *o, const optdef *d) { return (const char *)o + d->offset; }

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

/* Checks names that tables elsewhere define, so a typo fails before any rank starts work. */
static int check_name(const dt_opts *o, const optdef *d, const char *value, const char *origin)
{
    (void)o;
    if (strcmp(d->name, "mode") == 0 && !mode_find(value))
        return dt_fail("%s: unknown mode '%s' (expected one of %s)", origin, value, mode_list());
    if (strcmp(d->name, "density-warmup") == 0) {
        dt_density_sched tmp;
        if (density_sched_parse(value, 0.001, &tmp) != 0) return dt_fail_prefix("%s", origin);
    }
    if (strcmp(d->name, "lr-schedule") == 0) {
        dt_lr_schedule tmp;
        if (lr_schedule_parse(value, 1.0, 0.0, 1.0, &tmp) != 0) return dt_fail_prefix("%s", origin);
    }
    if (strcmp(d->name, "compress") == 0 && !codec_exists(value))
        return dt_fail("%s: unknown codec '%s' (expected one of %s)", origin, value, codec_list());
    if (strcmp(d->name, "augment") == 0) {
        dt_augment tmp;
        if (augment_parse(value, "", &tmp) != 0) return dt_fail_prefix("%s", origin);
    }
    if (strcmp(d->name, "checkpoint-every") == 0 && cli_every_parse(value, &(long){0}, &(int){0}) != 0)
        return dt_fail_prefix("%s", origin);
    if (strcmp(d->name, "device") == 0 && strcmp(value, "auto") != 0 && !backend_known(value))
        return dt_fail("%s: expected one of %s, found '%s'", origin, DEVICE_CHOICES, value);
    if (strcmp(d->name, "dataset") == 0 && !dataset_default_dirs(value)[0])
        return dt_fail("%s: unknown dataset '%s' (expected one of %s)", origin, value, dataset_list());
    return 0;
}

static int apply(dt_opts *o, const optdef *d, const char *value, const char *origin);

int cli_apply(dt_opts *o, const char *name, const char *value, const char *origin, int from_config)
{
    const optdef *d = find_opt(name);
    if (!d || (from_config && (d->flags & NO_CONFIG)))
        return dt_fail("%s: unknown option '%s' (see dtrain --help)", origin, name);
    if (apply(o, d, value, origin) != 0) return -1;
    o->given[d - table] = 1;
    return 0;
}

int cli_given(const dt_opts *o, const char *name)
{
    const optdef *d = find_opt(name);
    return d && o->given[d - table];
}

static int apply(dt_opts *o, const optdef *d, const char *value, const char *origin)
{
    long l;
    double x;
    switch (d->kind) {
    case K_ACTION: o->action = (dt_action)d->action; return 0;
    case K_FLAG:
        if (!value || strcmp(value, "1") == 0 || strcmp(value, "true") == 0 || strcmp(value, "yes") == 0)
            *(int *)field(o, d) = 1;
        else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0 || strcmp(value, "no") == 0)
            *(int *)field(o, d) = 0;
        else
            return dt_fail("%s: expected true or false, found '%s'", origin, value);
        return 0;
    case K_INT:
        if (dt_parse_long(value, (long)d->lo, (long)d->hi, origin, &l) != 0) return -1;
        *(long *)field(o, d) = l;
        return 0;
    case K_DOUBLE:
        if (dt_parse_double(value, d->lo, d->hi, origin, &x) != 0) return -1;
        *(double *)field(o, d) = x;
        return 0;
    case K_CHOICE:
        if (!choice_ok(d->choices, value))
            return dt_fail("%s: expected one of %s, found '%s'", origin, d->choices, value);
        /* fall through */
    case K_STRING: {
        if (!*value) return dt_fail("%s: expected %s, found an empty value", origin, d->metavar);
        if (check_name(o, d, value, origin) != 0) return -1;
        char **slot = field(o, d), *copy = dt_strdup(value);
        if (!copy) return -1;
        free(*slot);
        *slot = copy;
        return 0;
    }
    }
    return 0;
}

static int set_defaults(dt_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < N_OPTS; i++) {
        const optdef *d = &table[i];
        char origin[64];
        if (!d->dflt) continue;
        snprintf(origin, sizeof origin, "default of --%s", d->name);
        if (apply(o, d, d->dflt, origin) != 0) return -1;
    }
    return 0;
}

/* A flag the chosen mode or codec does not read is an error, not a silent no-op. */
static int check_combinations(const dt_opts *o)
{
    const dt_mode_desc *m = mode_find(o->mode);
    for (int i = 0; i < N_OPTS; i++) {
        const char *name = table[i].name;
        int mode_specific = 0;
        if (!o->given[i]) continue;
        for (int k = 0; k < mode_count(); k++) mode_specific |= mode_reads(mode_at(k), name);
        if (mode_specific && !mode_reads(m, name)) {
            char users[128] = "";
            for (int k = 0; k < mode_count(); k++)
                if (mode_reads(mode_at(k), name))
                    snprintf(users + strlen(users), sizeof users - strlen(users), "%s%s", users[0] ? ", " : "",
                             mode_at(k)->name);
            return dt_fail("--%s applies to --mode %s, not to --mode %s", name, users, o->mode);
        }
    }
    if (cli_given(o, "checkpoint-every") && !o->checkpoint)
        return dt_fail("--checkpoint-every needs --checkpoint FILE (where to write them)");
    if (o->resume && o->load)
        return dt_fail("--resume and --load exclude each other (a checkpoint holds the weights; --load starts a new run)");
    if (cli_given(o, "image-size") && !dataset_crops(o->dataset))
        return dt_fail("--image-size applies to --dataset imagenet, not to --dataset %s", o->dataset);
    if (cli_given(o, "compress-block") && (!o->compress || strcmp(o->compress, "q8") != 0))
        return dt_fail("--compress-block applies to --compress q8, not to --compress %s",
                       o->compress ? o->compress : "none");
    return 0;
}

/* config_load's callback: a setting of a config file is an option, except command-line-only ones */
static int apply_config(void *arg, const char *key, const char *value, const char *origin)
{
    return cli_apply(arg, key, value, origin, 1);
}

int cli_every_parse(const char *spec, long *n, int *epochs)
{
    char *end;
    errno = 0;
    long v = strtol(spec, &end, 10);
    if (end == spec || errno || v < 1 || v > 1000000000L || (*end && strcmp(end, "it") && strcmp(end, "ep")))
        return dt_fail("expected N, Nit or Nep with N at least 1 (e.g. 500it, 2ep), found '%s'", spec);
    *n = v;
    *epochs = strcmp(end, "it") != 0;
    return 0;
}

int cli_parse(int argc, char **argv, dt_opts *o)
{
    struct option longopts[N_OPTS + 1];
    struct {
        int idx;
        const char *val;
    } given[256];
    int n_given = 0, c;
    const char *config = NULL;

    if (set_defaults(o) != 0) return -1;
    for (int i = 0; i < N_OPTS; i++) {
        longopts[i].name = table[i].name;
        longopts[i].has_arg = (table[i].kind == K_FLAG || table[i].kind == K_ACTION) ? no_argument : required_argument;
        longopts[i].flag = NULL;
        longopts[i].val = 256 + i;
    }
    memset(&longopts[N_OPTS], 0, sizeof longopts[0]);

    opterr = 0;
    optind = 0; /* GNU: reinitialise, so tests may call this more than once */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            o->action = DT_ACT_HELP;
            continue;
        }
        if (c == '?') {
            const char *arg = argv[optind - 1];
            if (optopt && optopt < 256) return dt_fail("unknown option '-%c' (see dtrain --help)", optopt);
            return dt_fail("unknown option '%s' (see dtrain --help)", arg);
        }
        if (c == ':') {
            const char *arg = argv[optind - 1];
            if (optopt >= 256) arg = table[optopt - 256].name;
            return dt_fail("--%s: missing value (expected %s)", arg, optopt >= 256 ? table[optopt - 256].metavar : "a value");
        }
        if (n_given == (int)DT_ARRAY_LEN(given)) return dt_fail("too many options");
        given[n_given].idx = c - 256;
        given[n_given].val = optarg;
        n_given++;
        if (strcmp(table[c - 256].name, "config") == 0) config = optarg;
    }
    if (optind < argc)
        return dt_fail("unexpected argument '%s' (options start with --; see dtrain --help)", argv[optind]);
    if (config && config_load(config, apply_config, o) != 0) return -1;
    for (int i = 0; i < n_given; i++) {
        char origin[64];
        snprintf(origin, sizeof origin, "--%s", table[given[i].idx].name);
        if (cli_apply(o, table[given[i].idx].name, given[i].val, origin, 0) != 0) return -1;
    }
    return o->action == DT_ACT_TRAIN ? check_combinations(o) : 0;
}

void cli_free(dt_opts *o)
{
    for (int i = 0; i < N_OPTS; i++)
        if (table[i].kind == K_STRING || table[i].kind == K_CHOICE) {
            char **slot = field(o, &table[i]);
            free(*slot);
            *slot = NULL;
        }
}

void cli_help(FILE *f)
{
    const char *group = "";
    fprintf(f, "Usage: dtrain [OPTION]...\n"
               "       mpirun -np P dtrain [OPTION]...\n"
               "Train a network on one or many ranks, exchanging gradients as --mode says.\n"
               "Every option is described in dtrain(1); config files in dtrain.conf(5); nets in dtrain-net(5).\n");
    for (int i = 0; i < N_OPTS; i++) {
        const optdef *d = &table[i];
        char left[64];
        if (strcmp(group, d->group) != 0) {
            group = d->group;
            fprintf(f, "\n%s:\n", group);
        }
        snprintf(left, sizeof left, "--%s%s%s", d->name, d->metavar ? " " : "", d->metavar ? d->metavar : "");
        fprintf(f, "  %-26s %s", left, d->help);
        if (d->dflt) fprintf(f, " [%s]", d->dflt);
        fputc('\n', f);
    }
    fprintf(f, "\nExample: mpirun -np 4 dtrain --net mlp --dataset fashion-mnist --epochs 2\n");
}

char *cli_canonical(const dt_opts *o)
{
    size_t cap = 4096, off = 0;
    char *buf = dt_malloc(cap);
    if (!buf) return NULL;
    buf[0] = 0;
    for (int i = 0; i < N_OPTS; i++) {
        const optdef *d = &table[i];
        char val[600];
        if (d->flags & LOCAL || d->kind == K_ACTION) continue;
        switch (d->kind) {
        case K_FLAG: snprintf(val, sizeof val, "%s", *(const int *)cfield(o, d) ? "true" : "false"); break;
        case K_INT: snprintf(val, sizeof val, "%ld", *(const long *)cfield(o, d)); break;
        case K_DOUBLE: { /* the shortest text that reads back as the same double */
            double v = *(const double *)cfield(o, d);
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(val, sizeof val, "%.*g", prec, v);
                if (strtod(val, NULL) == v) break;
            }
            break;
        }
        default: {
            const char *s = *(char *const *)cfield(o, d);
            snprintf(val, sizeof val, "%s", s ? s : "");
        }
        }
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
