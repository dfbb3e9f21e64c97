/* dtrain: parse → validate → run. The only place that decides to exit. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "comm/comm.h"
#include "cpu.h"
#include "data/data.h"
#include "engine/engine.h"
#include "gitversion.h"
#include "train.h"
#include "util.h"

/* Before MPI starts (a singleton MPI_Init sets these variables too): the rank a launcher gave
 * this process, or -1 when no launcher started it. */
static int launcher_rank(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < DT_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v) return atoi(v);
    }
    return -1;
}

/* Tasks of the srun step this process is one of (0 outside srun; a batch script that runs dtrain
 * itself in a larger allocation is no step of several tasks). */
static long slurm_tasks(void)
{
    const char *v = getenv("SLURM_STEP_NUM_TASKS");
    return v ? atol(v) : 0;
}

static void print_version(void)
{
    printf("dtrain %s (git %s)\n", PACKAGE_VERSION, DT_GIT_VERSION);
    printf("features: %s; images: libjpeg-turbo %s, libpng %s; %s\n", comm_library(), DT_JPEG_VERSION, DT_PNG_VERSION,
           DT_CUDA_BUILT ? (DT_NCCL_BUILT ? "CUDA backend with the NCCL transport" : "CUDA backend, no NCCL transport")
                         : "no CUDA backend (CPU only)");
    printf("backends: %s; cpu: %s\n", backend_list(), backend_cpu_describe());
    printf("cuda toolkit at build time: %s\n", DT_CUDA_SUMMARY);
    printf("modes: %s\n", mode_list());
}

static void list_nets(void)
{
    printf("%-19s %-22s %-14s %s\n", "net", "parameters", "dataset", "description");
    for (int i = 0; i < net_builtin_count(); i++) {
        const char *name = net_builtin_name(i), *text = net_builtin_text(name);
        dt_net *net;
        char desc[128] = "";
        /* the first comment line of the file describes it */
        if (text[0] == '#') {
            const char *p = text + 1, *nl = strchr(p, '\n');
            while (*p == ' ') p++;
            snprintf(desc, sizeof desc, "%.*s", (int)(nl ? nl - p : (long)strlen(p)), p);
        }
        if (net_parse(text, name, name, &net) == 0) {
            char count[64];
            if (net_n_weights(net) == net->n_params) snprintf(count, sizeof count, "%zu", net->n_params);
            else snprintf(count, sizeof count, "%zu (%zu trained)", net_n_weights(net), net->n_params);
            const dt_shape *in = &net->input->out;
            const char *ds = dataset_for_input(in->n_dims, in->d, net_n_classes(net));
            printf("%-19s %-22s %-14s %s\n", name, count, ds ? ds : "(give one)", desc);
            net_destroy(net);
        } else {
            printf("%-19s %-22s %-14s %s\n", name, "(invalid)", "", dt_errmsg());
        }
    }
}

static int info(dt_action a)
{
    switch (a) {
    case DT_ACT_HELP: cli_help(stdout); break;
    case DT_ACT_VERSION: print_version(); break;
    case DT_ACT_LIST_MODES:
        for (int i = 0; i < mode_count(); i++) {
            const dt_mode_desc *m = mode_at(i);
            printf("%-10s %s\n", m->name, m->help);
            printf("%-10s options: %s\n", "", m->options && *m->options ? m->options : "(none of its own)");
        }
        printf("%-10s %s\n", "auto", "the timing model times one iteration and runs the fastest of the candidates "
                                     "(the first predicted within 15% of it)");
        printf("%-10s options: auto-allow model-compute\n", "");
        break;
    case DT_ACT_LIST_NETS: list_nets(); break;
    case DT_ACT_LIST_DATASETS: {
        const char *names = dataset_list();
        char buf[256], *save = NULL, *tok;
        snprintf(buf, sizeof buf, "%s", names);
        for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
            if (!strcmp(tok, "synthetic")) printf("%-14s made on the fly from --seed, in the net's input shape\n", tok);
            else printf("%-14s looked for in: %s\n", tok, dataset_default_dirs(tok));
        break;
    }
    case DT_ACT_LIST_DEVICES: backend_list_devices(stdout); break;
    case DT_ACT_LIST_LAYERS:
        for (int i = 0; i < layer_n_types(); i++) printf("%-13s %s\n", layer_type_at(i)->type, layer_type_at(i)->help);
        break;
    case DT_ACT_TRAIN: break;
    }
    return 0;
}

#if DT_SANITIZE
/* A sanitized build keeps every shared object it loads (Open MPI's components) until exit, so
 * LeakSanitizer can name the library a leak is in (tests/lsan.supp) instead of "unknown module". */
int dlclose(void *handle);
int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
#endif

/* rc, or 1 where what this process printed did not all reach standard output (a full disk under
 * > out.txt, /dev/full): without --log that is the run's only record, and exit 0 would pass it off */
static int stdout_checked(int rc, int rank)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    fprintf(stderr, "dtrain: [rank %d] standard output: write failed (%s)\n", rank,
            errno ? strerror(errno) : "an earlier write");
    return rc != 0 ? rc : 1;
}

int main(int argc, char **argv)
{
    dt_opts opts;
    dt_run run;
    char *canon, *agree, *given;
    dt_comm *comm;
    int parse_rc, rc, rank, launched_rank = launcher_rank();

    cpu_flush_denormals();
    /* a file over ulimit -f: EFBIG from the write, said and its temporary file removed, not a kill */
    signal(SIGXFSZ, SIG_IGN);

    parse_rc = cli_parse(argc, argv, &opts);
    if (parse_rc == 0 && opts.action != DT_ACT_TRAIN && launched_rank < 0) { /* a launcher's: below */
        info(opts.action);
        cli_free(&opts);
        return stdout_checked(0, 0);
    }
    dt_signals_block(); /* before any thread starts: stop signals go to dt_signals_install's thread only */
    /* MPI's start-up waits for every rank: --comm-timeout bounds it too (its default where parsing failed) */
    if (comm_init(&argc, &argv, parse_rc == 0 ? opts.comm_timeout : 300.0, &comm) != 0) {
        fprintf(stderr, "dtrain: %s\n", dt_errmsg());
        return 1;
    }
    rank = comm_rank(comm);
    if (comm_size(comm) == 1 && slurm_tasks() > 1) { /* srun without PMI: every task a job of its own */
        fprintf(
            stderr,
            "dtrain: Slurm started %ld tasks but MPI sees a single rank (srun found no PMI to connect them): launch "
            "with srun --mpi=pmix (or --mpi=pmi2; srun --mpi=list shows what this cluster has), or with mpirun "
            "inside the allocation\n",
            slurm_tasks());
        cli_free(&opts);
        comm_finalize(comm);
        return 1;
    }
    /* a bad option on any rank stops every rank; the lowest such rank says why. Every rank takes the same
     * collectives: first whether any parse failed, then (all parsed) whether all do the same thing, since a rank
     * that only prints (--version), checks (--dry-run) or packs would leave the others waiting */
    rc = comm_agree(comm, parse_rc != 0);
    if (rc < 0) {
        static const char *const acts[] = {"train", "--help", "--version", "--list-modes", "--list-nets",
                                           "--list-datasets", "--list-layers", "--list-devices"};
        char what[128];
        snprintf(what, sizeof what, "%s\n", opts.action != DT_ACT_TRAIN ? acts[opts.action]
                                            : opts.dry_run             ? "--dry-run"
                                            : opts.pack_only           ? "--pack-only"
                                                                       : "train");
        parse_rc = comm_check_same(comm, what, "action");
        rc = comm_agree(comm, parse_rc != 0);
    }
    if (rc >= 0) {
        if (rank == rc) {
            cli_explain();
            fprintf(stderr, "dtrain: [rank %d] %s\n", rank, dt_errmsg());
        }
        cli_free(&opts);
        comm_finalize(comm);
        return 2;
    }
    if (opts.action != DT_ACT_TRAIN) {
        if (rank == 0) info(opts.action);
        cli_free(&opts);
        comm_finalize(comm);
        return stdout_checked(0, rank);
    }

    memset(&run, 0, sizeof run);
    run.opts = &opts;
    run.options = canon = cli_canonical(&opts); /* NULL (out of memory) fails the set-up on this rank */
    run.agreement = agree = cli_agreement(&opts);
    run.given = given = cli_given_text(&opts);
    run.comm = comm;
    run.launched = launched_rank >= 0;
    dt_signals_install();
    rc = opts.dry_run ? run_dry(&run) : opts.pack_only ? run_pack(&run) : run_setup(&run);
    if (rc == 0 && !opts.dry_run && !opts.pack_only) rc = train_run(&run);
    if (rc != 0 && (run.failed_rank < 0 || comm_broken(comm))) { /* only this rank knows: the others may wait */
        cli_explain();
        fprintf(stderr, "dtrain: [rank %d] %s\n", rank, dt_errmsg());
        if (comm_size(comm) > 1) comm_abort(comm, 1);
        run.failed_rank = rank;
    } else if (rc != 0 && rank == run.failed_rank) {
        cli_explain();
        fprintf(stderr, "dtrain: [rank %d] %s\n", rank, dt_errmsg());
    }
    run_teardown(&run);
    free(canon);
    free(agree);
    free(given);
    cli_free(&opts);
    comm_finalize(comm);
    return stdout_checked(rc != 0       ? (run.usage_error ? 2 : 1)
                          : run.stopped ? 128 + run.stopped
                                        : 0, /* stopped by a signal: as the shell reports it */
                          rank);
}
