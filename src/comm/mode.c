/* The table of modes, the flags several modes share, and what the CLI and the banner ask of
 * modes as a whole. A new mode is a new file and one line here. */
#include "mode.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../cpu.h"
#include "../registry.h"
#include "../util.h"
#include "ring.h"
#include "schedule.h"
#include "worker.h"

extern const dt_mode_desc mode_dsync, mode_ps, mode_pipesgd, mode_topk, mode_gtopk, mode_csc, mode_terngrad;

static const dt_mode_desc *const modes[] = {&mode_dsync, &mode_ps,   &mode_pipesgd, &mode_topk,
                                            &mode_gtopk, &mode_csc, &mode_terngrad};

static const dt_registry registry = DT_REGISTRY("mode", modes);

const dt_mode_desc *mode_find(const char *name) { return registry_find(&registry, name); }
int mode_count(void) { return registry.n; }
const dt_mode_desc *mode_at(int i) { return modes[i]; }

const char *mode_list(void)
{
    static char buf[256];
    return buf[0] ? buf : registry_list(&registry, buf, sizeof buf);
}

int mode_reads(const dt_mode_desc *m, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = m->options; p && *p;) {
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        if (len == n && strncmp(p, flag, n) == 0) return 1;
        p += len + (sp ? 1 : 0);
    }
    return 0;
}

int mode_env_views(dt_mode_env *env)
{
    env->be = env->arena.be;
    if (hostbuf_view(&env->gh, env->be, env->arena.g, env->arena.n) != 0 ||
        hostbuf_view(&env->wh, env->be, env->arena.w, env->arena.n) != 0)
        return -1;
    return 0;
}

int mode_comm_thread(dt_mode_env *env, dt_comm **cc, dt_worker **worker)
{
    if (comm_dup(env->comm, cc) != 0) return -1;
    if (worker_create(worker) != 0) return -1;
    /* auto: sleep while the compute thread computes; once it waits for this thread, spin, if the rank
     * has a core per compute thread (then the waiting compute thread's); with fewer, the spinning
     * would take other ranks' cores: sleep then too */
    int spin_when_idle = strcmp(env->opts.comm_wait, "auto") == 0 && env->model.cores >= env->threads;
    comm_set_sleepy(*cc, strcmp(env->opts.comm_wait, "spin") != 0, spin_when_idle ? worker_computing(*worker) : NULL);
    /* after the thread started: it keeps the priority it was born with */
    if (env->opts.compute_nice > 0) cpu_lower_priority((int)env->opts.compute_nice);
    return 0;
}

void mode_env_release(dt_mode_env *env)
{
    hostbuf_free(&env->gh);
    hostbuf_free(&env->wh);
}

static int staged(const dt_hostbuf *h, size_t off, size_t n, double *seconds, int push)
{
    if (h->host == h->dev) return 0;
    double t0 = dt_now();
    int rc = push ? hostbuf_push(h, off, n) : hostbuf_pull(h, off, n);
    *seconds += dt_now() - t0;
    return rc;
}

int mode_pull(const dt_hostbuf *h, size_t off, size_t n, double *seconds) { return staged(h, off, n, seconds, 0); }
int mode_push(const dt_hostbuf *h, size_t off, size_t n, double *seconds) { return staged(h, off, n, seconds, 1); }

const char *mode_in_backward(const dt_mode_desc *m, const dt_comm_opts *o)
{
    if (!m->grad_ready) return NULL;
    if (mode_reads(m, "fusion-bytes") && isfinite(o->fusion_bytes))
        return "--fusion-bytes sends buckets as backward makes them";
    if (mode_reads(m, "ps-wait-free") && o->ps_wait_free) return "--ps-wait-free pushes as backward makes the gradient";
    return NULL;
}

int mode_topk_sampled(const dt_comm_opts *o) { return o->topk_select && strcmp(o->topk_select, "sampled") == 0; }

int mode_ring_device_net(const dt_mode_env *env, char *why, size_t n)
{
    if (ring_can_run_on(env->arena.be, &env->codec)) return 1;
    snprintf(why, n, "the %s backend does not run codec %s on its memory", env->arena.be->name, env->codec.desc->name);
    return 0;
}

int mode_roles(const dt_mode_desc *m, dt_mode_env *env)
{
    if (m->roles) return m->roles(env);
    env->is_worker = 1;
    env->n_workers = mode_ranks(env);
    env->worker_rank = comm_rank(env->comm);
    return 0;
}

/* ---- flags ------------------------------------------------------------------------------------- */

#define C(f) offsetof(dt_comm_opts, f)
#define G "Communication"

static int check_codec(const char *v, const char *origin)
{
    return codec_exists(v) ? 0 : dt_fail("%s: unknown codec '%s' (expected one of %s)", origin, v, codec_list());
}

static int check_density_warmup(const char *v, const char *origin)
{
    dt_density_sched tmp; /* its form here; against --density in mode_check_opts */
    return density_sched_parse(v, 0.0, &tmp) != 0 ? dt_fail_prefix("%s", origin) : 0;
}

/* the codec's: every mode that sends through the ring or to servers reads them */
static const dt_optdef codec_flags[] = {
    {G, "compress", OPT_STRING, "NAME", C(compress), 0, 0, NULL, NULL, 0, 0,
     "gradient codec on the wire: none, t16, fp16 or q8 (default: none; csc: fp16)", check_codec},
    {G, "compress-block", OPT_INT, "N", C(compress_block), 0, 1 << 24, NULL, "256", 0, 0,
     "values per scale of --compress q8 (0: one scale per message, as in Pipe-SGD)", NULL},
};

/* read by more than one mode (each mode's .options says which it reads) */
static const dt_optdef shared_flags[] = {
    {G, "fusion-bytes", OPT_DOUBLE, "N", C(fusion_bytes), 4, INFINITY, NULL, "inf", 0, 0,
     "dsync, csc: allreduce every N bytes of gradient as backward finishes them (inf: once after backward)", NULL},
    {G, "density", OPT_DOUBLE, "R", C(density), 1e-9, 1, NULL, "0.001", 0, 0,
     "topk, gtopk: fraction of the arena each rank sends (k = floor(R d))", NULL},
    {G, "density-warmup", OPT_STRING, "SPEC", C(density_warmup), 0, 0, NULL, "none", 0, 0,
     "topk, gtopk: densities of the first epochs: none, dgc, gtopk-code or R1,R2,...", check_density_warmup},
    {G, "clip-norm", OPT_DOUBLE, "X", C(clip_norm), 0, 1e9, NULL, "0", 0, 0,
     "topk, gtopk: DGC's local gradient clipping: each rank scales its gradient to L2 norm at most X/sqrt(P) before "
     "it joins the residual (0: none)",
     NULL},
    {G, "topk-select", OPT_CHOICE, "exact|sampled", C(topk_select), 0, 0, "exact|sampled", "exact", 0, 0,
     "topk, gtopk: each rank's selection: exact (the k largest) or sampled (DGC: a threshold estimated from a sample, "
     "one scan; close to the k largest, not always them)",
     NULL},
    {G, "compute-nice", OPT_INT, "N", C(compute_nice), 0, 19, NULL, "10", 0, 0,
     "pipesgd; dsync, csc with --fusion-bytes: niceness of the compute threads, so that the communication thread "
     "runs as soon as its messages need it (0: equal priority)",
     NULL},
    {G, "momentum-correction", OPT_FLAG, NULL, C(momentum_correction), 0, 0, NULL, NULL, 0, 0,
     "topk, gtopk, csc: momentum on each rank before sparsification (DGC / GradientFlow Alg. 1)", NULL},
};

static int check_auto_allow(const char *v, const char *origin)
{
    dt_auto_cand c[DT_AUTO_MAX];
    int n;
    (void)origin; /* the message names --auto-allow */
    return auto_parse(v, c, DT_AUTO_MAX, &n);
}

/* read by every mode */
static const dt_optdef wait_flags[] = {
    {G, "auto-allow", OPT_STRING, "LIST", C(auto_allow), 0, 0, NULL,
     "dsync,dsync+t16,dsync+fp16,dsync+q8,pipesgd,pipesgd+t16,pipesgd+fp16,pipesgd+q8", 0, 0,
     "--mode auto: the candidates in order of preference, MODE[+CODEC] separated by commas (modes: dsync, pipesgd, "
     "topk, gtopk, csc, terngrad; a codec for dsync, pipesgd, csc); the first predicted within 15% of the fastest runs",
     check_auto_allow},
    {G, "comm-wait", OPT_CHOICE, "auto|spin|sleep", C(comm_wait), 0, 0, "auto|spin|sleep", "auto", 0, 0,
     "how a rank waits for messages: spin (lowest latency, a busy core), sleep (poll every 50 us), auto (communication "
     "threads beside compute sleep, other waits spin)",
     NULL},
};

/* the timing model's (netmodel.c): every mode predicts with it */
static const dt_optdef model_flags[] = {
    {G, "model-alpha", OPT_DOUBLE, "SECONDS", C(model_alpha), 0, 10, NULL, NULL, 0, 0,
     "timing model: latency per message (default: measured at start-up)", NULL},
    {G, "model-beta", OPT_DOUBLE, "SECONDS", C(model_beta), 0, 1, NULL, NULL, 0, 0,
     "timing model: seconds per byte on the wire, in the ring and streamed (default: measured)", NULL},
    {G, "model-gamma", OPT_DOUBLE, "SECONDS", C(model_gamma), 0, 1, NULL, NULL, 0, 0,
     "timing model: seconds per value to decode, add and encode (default: measured)", NULL},
    {G, "model-cores", OPT_DOUBLE, "N", C(model_cores), 0.01, 1e6, NULL, NULL, 0, 0,
     "timing model: cores per rank (default: this machine's cores over the ranks on it)", NULL},
    {G, "model-compute", OPT_DOUBLE, "SECONDS", C(model_compute), 1e-7, 1e4, NULL, NULL, 0, 0,
     "--mode auto: forward, backward and update per iteration, for the device and batch the ranking is for "
     "(default: measured at start-up); with --dry-run, --model-alpha and --model-beta: the ranking for --ranks, "
     "without running",
     NULL},
};

#define MAX_FLAGS 64
static const dt_optdef *flags[MAX_FLAGS];
static int n_flags;

static void collect(void)
{
    if (n_flags) return;
    for (size_t i = 0; i < DT_ARRAY_LEN(codec_flags); i++) flags[n_flags++] = &codec_flags[i];
    for (size_t m = 0; m < DT_ARRAY_LEN(modes); m++)
        for (int i = 0; i < modes[m]->n_flags && n_flags < MAX_FLAGS; i++) flags[n_flags++] = &modes[m]->flags[i];
    for (size_t i = 0; i < DT_ARRAY_LEN(shared_flags) && n_flags < MAX_FLAGS; i++) flags[n_flags++] = &shared_flags[i];
    for (size_t i = 0; i < DT_ARRAY_LEN(model_flags) && n_flags < MAX_FLAGS; i++) flags[n_flags++] = &model_flags[i];
    for (size_t i = 0; i < DT_ARRAY_LEN(wait_flags) && n_flags < MAX_FLAGS; i++) flags[n_flags++] = &wait_flags[i];
}

int mode_optdef_count(void)
{
    collect();
    return n_flags;
}

const dt_optdef *mode_optdef_at(int i)
{
    collect();
    return flags[i];
}

/* a flag some mode reads but not every mode (not the codec's nor the timing model's) */
static int mode_specific(const char *name)
{
    for (size_t k = 0; k < DT_ARRAY_LEN(modes); k++)
        if (mode_reads(modes[k], name)) return 1;
    return 0;
}

int mode_flag_specific(const char *flag)
{
    collect();
    if (strcmp(flag, "auto-allow") == 0 || strcmp(flag, "model-compute") == 0) return 1;
    if (!mode_specific(flag)) return 0;
    for (size_t k = 0; k < DT_ARRAY_LEN(modes); k++)
        if (!mode_reads(modes[k], flag)) return 1;
    return 0;
}

int mode_check_opts(const dt_mode_desc *m, const dt_comm_opts *o, int (*given)(const void *arg, const char *name),
                    const void *arg)
{
    collect();
    if (!m) { /* --mode auto: flags of its candidates' modes; the codec is what it chooses */
        if (given(arg, "compress"))
            return dt_fail("--compress with --mode auto: the codec is part of what auto chooses (restrict the "
                           "candidates with --auto-allow, e.g. dsync+q8,pipesgd+q8)");
        dt_auto_cand c[DT_AUTO_MAX];
        int n, used;
        if (auto_parse(o->auto_allow, c, DT_AUTO_MAX, &n) != 0) return -1;
        for (int i = 0; i < n_flags; i++) {
            const char *name = flags[i]->name;
            if (!given(arg, name) || !mode_specific(name)) continue;
            used = 0;
            for (int j = 0; j < n; j++) used |= mode_reads(c[j].mode, name);
            if (!used)
                return dt_fail("--%s applies to none of --mode auto's candidates (--auto-allow %s)", name,
                               o->auto_allow);
        }
        int q8 = 0, mpi = o->allreduce && strcmp(o->allreduce, "mpi") == 0;
        for (int j = 0; j < n; j++) {
            int coded = c[j].codec[0] && strcmp(c[j].codec, "none") != 0;
            q8 |= strcmp(c[j].codec, "q8") == 0;
            if (coded && mpi && mode_reads(c[j].mode, "allreduce"))
                return dt_fail("--allreduce mpi sums fp32 in the MPI library, which knows no codec, and --mode auto's "
                               "candidate %s has one (expected candidates without a codec, or --allreduce ring)",
                               c[j].name);
        }
        if (given(arg, "compress-block") && !q8)
            return dt_fail("--compress-block applies to --compress q8, and none of --mode auto's candidates has it "
                           "(--auto-allow %s)",
                           o->auto_allow);
        return 0;
    }
    if (given(arg, "auto-allow")) return dt_fail("--auto-allow applies to --mode auto, not to --mode %s", m->name);
    if (given(arg, "model-compute")) /* a run's own prediction takes the compute it measures */
        return dt_fail("--model-compute applies to --mode auto, not to --mode %s", m->name);
    for (int i = 0; i < n_flags; i++) {
        const char *name = flags[i]->name;
        if (!given(arg, name) || !mode_specific(name) || mode_reads(m, name)) continue;
        char users[128] = "";
        for (size_t k = 0; k < DT_ARRAY_LEN(modes); k++)
            if (mode_reads(modes[k], name))
                snprintf(users + strlen(users), sizeof users - strlen(users), "%s%s", users[0] ? ", " : "",
                         modes[k]->name);
        return dt_fail("--%s applies to --mode %s, not to --mode %s", name, users, m->name);
    }
    if (mode_reads(m, "allreduce") && o->allreduce && strcmp(o->allreduce, "mpi") == 0 && o->compress &&
        strcmp(o->compress, "none") != 0)
        return dt_fail("--allreduce mpi sums fp32 in the MPI library, which knows no codec (expected --compress none, "
                       "or --allreduce ring for --compress %s)",
                       o->compress);
    if (given(arg, "compress-block") && (!o->compress || strcmp(o->compress, "q8") != 0))
        return dt_fail("--compress-block applies to --compress q8, not to --compress %s",
                       o->compress ? o->compress : "none");
    dt_density_sched sched;
    if (mode_reads(m, "density-warmup") && o->density_warmup &&
        density_sched_parse(o->density_warmup, o->density, &sched) != 0)
        return dt_fail_prefix("--density-warmup");
    if (given(arg, "compute-nice") && mode_reads(m, "fusion-bytes") && !isfinite(o->fusion_bytes))
        return dt_fail("--compute-nice applies to --mode %s with --fusion-bytes N (without it no communication "
                       "thread runs to make way for)",
                       m->name);
    return 0;
}

dt_comm_opts mode_opts_for(const dt_mode_desc *m, const dt_comm_opts *o)
{
    dt_comm_opts c = *o;
    if (!c.compress) c.compress = (char *)(m->default_compress ? m->default_compress : "none");
    return c;
}

int mode_codec_create(const dt_comm_opts *o, dt_codec *out)
{
    return codec_create(o->compress, o->compress_block ? (int)o->compress_block : DT_CODEC_PER_VECTOR, out);
}

void mode_describe(const dt_mode_desc *m, const dt_mode_env *env, char *buf, size_t n)
{
    char own[192] = "", codec[64];
    if (m->describe) m->describe(env, own, sizeof own);
    if (!mode_reads(m, "compress")) snprintf(codec, sizeof codec, "(its own)");
    else if (strcmp(env->opts.compress, "q8") == 0 && env->opts.compress_block == 0)
        snprintf(codec, sizeof codec, "q8, one scale per message");
    else if (strcmp(env->opts.compress, "q8") == 0)
        snprintf(codec, sizeof codec, "q8, block %ld", env->opts.compress_block);
    else snprintf(codec, sizeof codec, "%s", env->opts.compress);
    snprintf(buf, n, "mode %s%s, compress %s", m->name, own, codec);
}
