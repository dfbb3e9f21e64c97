/* cli — the one option table: getopt_long parsing, config files, --help, and the canonical
 * text of the options all ranks must agree on.
 *
 * Every flag lives in one table (cli.c). Parsing the command line, reading `--config` files
 * (same names without dashes, the command line wins), printing --help and checking
 * man/dtrain.1 (tests/man_options.sh reads --help) all come from that table, so they cannot
 * drift apart. Parsing is pure: no MPI, no files other than the config file.
 */
#ifndef DT_CLI_H
#define DT_CLI_H

#include <stdio.h>

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
    char *net, *dataset, *data_dir, *device, *config, *augment;
    long epochs, iters, batch, seed, threads, image_size, prefetch;
    /* optimizer */
    double lr, momentum, wd, lr_warmup_epochs;
    int nesterov;
    char *lr_schedule;
    /* communication */
    char *mode, *compress, *placement;
    long compress_block, ps_servers, staleness, pipeline_depth;
    double warmup_epochs, fusion_bytes, model_alpha, model_beta, model_gamma;
    double density, chunk_ratio, sparsity_warmup, clip;
    char *density_warmup;
    int momentum_correction, tern_skip_last;
    long chunk, tern_min_size;
    /* output */
    char *log, *save, *load, *progress;
    long log_every;
    /* checkpoints */
    char *checkpoint, *checkpoint_every, *resume;
    unsigned char given[96]; /* per option-table entry: set on the command line or in a config */
} dt_opts;

/* Parses argv (and the --config file it names) into o, starting from the defaults.
 * Returns 0, or -1 with a one-line message (dt_errmsg). */
int cli_parse(int argc, char **argv, dt_opts *o);
void cli_free(dt_opts *o);
void cli_help(FILE *f);
/* 1 if option NAME was set on the command line or in a config file (not left at its default). */
int cli_given(const dt_opts *o, const char *name);
/* Applies one option by long name; `origin` prefixes messages ("--lr", "x.conf:3: lr"). */
int cli_apply(dt_opts *o, const char *name, const char *value, const char *origin, int from_config);
/* "key = value\n" for every option that changes the computation, in table order (malloc'd). */
char *cli_canonical(const dt_opts *o);

/* "500it" -> 500 iterations, "2ep" or "2" -> 2 epochs. */
int cli_every_parse(const char *spec, long *n, int *epochs);

#endif
