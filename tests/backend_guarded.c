/* backend_guarded — a test backend whose memory host code cannot touch ("cpu-guarded").
 *
 * The CPU backend's kernels, run on memory that is kept PROT_NONE (mprotect) except while one of
 * this backend's own ops runs. A device backend's memory (a GPU's) cannot be dereferenced by the
 * host either; on the CPU backend a forgotten host access works by accident. Here it faults at
 * once, and the fault handler names the allocation. So a run of every mode, layer and
 * checkpoint path under this backend proves, on a machine without a GPU, that every path reaches
 * backend memory only through backend ops and host views (engine/hostbuf.h).
 *
 * Every allocation is its own anonymous mapping (page-rounded, zeroed). Ops are serialised by one
 * lock: memory is opened when an op starts and closed when it ends, so a comm thread's stray
 * access faults unless it happens to coincide with another thread's op (the guard is strong, not
 * perfect). The memory of the inner CPU backend's own scratch (oneDNN plans) is ordinary.
 *
 * Staging memory (host_alloc, as a GPU's page-locked memory) is ordinary host memory behind a
 * marked header: freeing anything else through host_free, or destroying the backend while any is
 * still allocated (a GPU's would then be freed after its context), aborts with a message. So does
 * destroying it with a queue (queue_create: a GPU's second stream) not freed.
 *
 * --precision fp16, which the CPU backend refuses, is emulated here so that the train loop's loss
 * scaling runs in tests: the inputs of GEMMs and convolutions are rounded to IEEE half (overflowing
 * to infinity beyond 65504) and multiplied in fp32. DTRAIN_GUARDED_INF_AT=N[:R] makes the N-th
 * training backward pass of this process (of rank R only, with :R) overflow: its loss gradient gets
 * an infinity; N+ makes every pass from the N-th on overflow.
 *
 * --gpu-graph: a recording is the list of the ops called between graph_begin and graph_end on the
 * recording thread (as CUDA records a stream's), each with its arguments, and a launch calls them
 * again in order. The ops of an mlp's pass are recorded (GEMM, bias, ReLU, softmax cross-entropy,
 * copy, add, scale); any other op called while recording fails, as an op CUDA cannot capture does,
 * so that the train loop's fallback runs in tests too. DTRAIN_GUARDED_GRAPH_MOVED=N: the N-th launch
 * of the process finds the buffers moved (as a GPU's scratch that grew): the pass is recorded anew.
 *
 * DTRAIN_GUARDED_STOP_IN_CREATE=R: rank R stops itself (SIGSTOP) as it joins a communicator of the
 * device transport's stand-in (net_create), where NCCL's ncclCommInitRank would leave the others blocked.
 *
 * Built twice: into the test library (the Check suites call backend_guarded_desc directly) and
 * as the module dtrain-cpu-guarded.so that `dtrain --device cpu-guarded` loads from
 * $DTRAIN_MODULE_PATH (the tests set it to the build's tests/ directory). Never installed.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "backend_guarded.h"
#include "comm/codec.h"
#include "comm/chunks.h"
#include "comm/codec_tern.h"
#include "comm/sparse.h"
#include "cpu.h"
#include "util.h"

typedef struct region {
    char *p;
    size_t bytes; /* mapped (page-rounded) */
    size_t asked;
} region;

typedef struct guarded {
    dt_backend *in; /* the CPU backend whose kernels run */
    pthread_mutex_t lock;
    region *r;
    int n, cap;
    long staging; /* host_alloc'd buffers not yet freed */
    long queues;  /* queue_create'd queues not yet freed */
    int device;   /* its "device" (g_device_id) */
    int fp16;     /* --precision fp16, emulated */
    long inf_at;  /* DTRAIN_GUARDED_INF_AT: the backward pass that overflows (0: none) */
    int inf_on;   /* ... and every one after it */
    long n_bwd;   /* training backward passes so far (softmax_xent_bwd calls) */
    long launches, moved_at; /* graph launches so far; DTRAIN_GUARDED_GRAPH_MOVED */
    long refuse_at;          /* DTRAIN_GUARDED_GRAPH_REFUSE: that launch is refused (returns 2) */
} guarded;

/* an op recorded for a graph, its arguments by kind: pointers, ints, floats, a count */
typedef struct rop {
    int kind;
    const void *p[4];
    int i[8];
    float f[2];
    size_t n;
} rop;
enum {
    R_GEMM,
    R_BIAS_ADD,
    R_BIAS_GRAD,
    R_RELU_FWD,
    R_RELU_BWD,
    R_SMX_FWD,
    R_SMX_BWD,
    R_COPY,
    R_ADD,
    R_ADD2,
    R_SCALE,
    R_ADD2_BF16,
    R_RELU_BWD_BF16
};
typedef struct grec {
    rop *ops;
    int n, cap;
    int failed;
    char why[160];
} grec;
static __thread grec *recording; /* this thread's recording, NULL: ops run */

static int rec_add(rop op)
{
    grec *r = recording;
    if (r->failed) return dt_fail("%s", r->why);
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        rop *ops = realloc(r->ops, (size_t)cap * sizeof *ops);
        if (!ops) {
            r->failed = 1;
            snprintf(r->why, sizeof r->why, "out of memory");
            return dt_fail("out of memory");
        }
        r->ops = ops, r->cap = cap;
    }
    r->ops[r->n++] = op;
    return 0;
}

static int rec_refuse(const char *op)
{
    grec *r = recording;
    if (!r->failed) snprintf(r->why, sizeof r->why, "cpu-guarded records no %s", op);
    r->failed = 1;
    return dt_fail("%s", r->why);
}

#define STAGING_MAGIC 0x5354414749494e47ull /* "STAGIING" */
#define STAGING_HDR 64

/* the live instances, for the fault handler */
#define MAX_INSTANCES 16
static guarded *instances[MAX_INSTANCES];
static pthread_mutex_t instances_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction old_segv;
static int handler_installed;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    char *a = si->si_addr;
    for (int k = 0; k < MAX_INSTANCES; k++) {
        guarded *g = instances[k];
        for (int i = 0; g && i < g->n; i++)
            if (a >= g->r[i].p && a < g->r[i].p + g->r[i].bytes) {
                char msg[256];
                int len = snprintf(msg, sizeof msg,
                                   "dtrain: guarded backend: host code touched backend memory at %p (byte %zu of an "
                                   "allocation of %zu bytes) outside a backend op\n",
                                   (void *)a, (size_t)(a - g->r[i].p), g->r[i].asked);
                if (write(2, msg, (size_t)len) < 0) { /* nothing more to do */
                }
                signal(SIGABRT, SIG_DFL);
                abort();
            }
    }
    /* not ours: the handler that was there before */
    if (old_segv.sa_flags & SA_SIGINFO) {
        old_segv.sa_sigaction(sig, si, uc);
    } else if (old_segv.sa_handler != SIG_IGN && old_segv.sa_handler != SIG_DFL) {
        old_segv.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static void set_all(guarded *g, int prot)
{
    for (int i = 0; i < g->n; i++) mprotect(g->r[i].p, g->r[i].bytes, prot);
}

static guarded *enter(dt_backend *be)
{
    guarded *g = be->impl;
    pthread_mutex_lock(&g->lock);
    set_all(g, PROT_READ | PROT_WRITE);
    return g;
}

static void leave(guarded *g)
{
    set_all(g, PROT_NONE);
    pthread_mutex_unlock(&g->lock);
}

static void *g_alloc(dt_backend *be, size_t bytes)
{
    guarded *g = be->impl;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), mapped = (bytes + page - 1) / page * page;
    if (mapped == 0) mapped = page;
    void *p = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        dt_fail("cpu-guarded: cannot map %zu bytes", bytes);
        return NULL;
    }
    pthread_mutex_lock(&g->lock);
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        region *r = realloc(g->r, sizeof *r * (size_t)cap);
        if (!r) {
            pthread_mutex_unlock(&g->lock);
            munmap(p, mapped);
            dt_fail("out of memory");
            return NULL;
        }
        g->r = r;
        g->cap = cap;
    }
    g->r[g->n++] = (region){p, mapped, bytes};
    pthread_mutex_unlock(&g->lock);
    return p;
}

static void g_free(dt_backend *be, void *p)
{
    guarded *g = be->impl;
    if (!p) return;
    pthread_mutex_lock(&g->lock);
    for (int i = 0; i < g->n; i++)
        if (g->r[i].p == p) {
            munmap(p, g->r[i].bytes);
            g->r[i] = g->r[--g->n];
            break;
        }
    pthread_mutex_unlock(&g->lock);
}

/* An op: open the memory, run the CPU backend's kernel, close it again (while recording a graph:
 * refused). OPR: an op a graph records as `record` (a rop). */
#define OP(name, params, args)                                                                                         \
    static int g_##name params                                                                                         \
    {                                                                                                                  \
        if (recording) return rec_refuse(#name);                                                                       \
        guarded *g = enter(be);                                                                                        \
        dt_backend *in = g->in;                                                                                        \
        int rc = in->name args;                                                                                        \
        leave(g);                                                                                                      \
        return rc;                                                                                                     \
    }
#define OPR(name, params, args, record)                                                                                \
    static int g_##name params                                                                                         \
    {                                                                                                                  \
        if (recording) return rec_add(record);                                                                         \
        guarded *g = enter(be);                                                                                        \
        dt_backend *in = g->in;                                                                                        \
        int rc = in->name args;                                                                                        \
        leave(g);                                                                                                      \
        return rc;                                                                                                     \
    }

OP(to_device, (dt_backend * be, void *dst, const void *src, size_t bytes), (in, dst, src, bytes))
OP(to_host, (dt_backend * be, void *dst, const void *src, size_t bytes), (in, dst, src, bytes))
OPR(copy, (dt_backend * be, void *dst, const void *src, size_t bytes), (in, dst, src, bytes),
    ((rop){.kind = R_COPY, .p = {dst, src}, .n = bytes}))
OP(sync, (dt_backend * be), (in))
OPR(bias_add, (dt_backend * be, float *y, const float *b, int rows, int cols), (in, y, b, rows, cols),
    ((rop){.kind = R_BIAS_ADD, .p = {y, b}, .i = {rows, cols}}))
OPR(bias_grad, (dt_backend * be, float *db, const float *dy, int rows, int cols, float beta),
    (in, db, dy, rows, cols, beta), ((rop){.kind = R_BIAS_GRAD, .p = {db, dy}, .i = {rows, cols}, .f = {beta}}))
OPR(relu_fwd, (dt_backend * be, float *y, const float *x, size_t n), (in, y, x, n),
    ((rop){.kind = R_RELU_FWD, .p = {y, x}, .n = n}))
OPR(relu_bwd, (dt_backend * be, float *dx, const float *dy, const float *y, size_t n, float beta),
    (in, dx, dy, y, n, beta), ((rop){.kind = R_RELU_BWD, .p = {dx, dy, y}, .n = n, .f = {beta}}))
OP(dropout_fwd, (dt_backend * be, float *y, const float *x, int rows, int cols, float p, uint64_t key, int64_t row0),
   (in, y, x, rows, cols, p, key, row0))
OP(dropout_bwd,
   (dt_backend * be, float *dx, const float *dy, int rows, int cols, float p, uint64_t key, int64_t row0, float beta),
   (in, dx, dy, rows, cols, p, key, row0, beta))
OPR(softmax_xent_fwd, /* recorded: the launch adds the loss to its own */
    (dt_backend * be, float *prob, const float *logits, const int32_t *labels, int rows, int classes,
     double *loss_sum, int64_t *n_correct),
    (in, prob, logits, labels, rows, classes, loss_sum, n_correct),
    ((rop){.kind = R_SMX_FWD, .p = {prob, logits, labels}, .i = {rows, classes}}))
OP(sgd_step, (dt_backend * be, float *w, const float *gr, float *v, size_t n, float lr, float m, float wd, int nest),
   (in, w, gr, v, n, lr, m, wd, nest))
OPR(scale, (dt_backend * be, float *x, float a, size_t n), (in, x, a, n),
    ((rop){.kind = R_SCALE, .p = {x}, .n = n, .f = {a}}))
OP(grad_unscale, (dt_backend * be, float *gr, size_t n, float a, int32_t *flag), (in, gr, n, a, flag))
OP(bn_running,
   (dt_backend * be, float *rm, float *rv, const float *mean, const float *var, size_t n, float m, double u),
   (in, rm, rv, mean, var, n, m, u))
OPR(add, (dt_backend * be, float *y, const float *x, size_t n, float beta), (in, y, x, n, beta),
    ((rop){.kind = R_ADD, .p = {y, x}, .n = n, .f = {beta}}))
OPR(add2, (dt_backend * be, float *y, const float *a, const float *b, size_t n, int relu), (in, y, a, b, n, relu),
    ((rop){.kind = R_ADD2, .p = {y, a, b}, .n = n, .i = {relu}}))
OPR(add2_bf16, (dt_backend * be, void *y, const void *a, const void *b, size_t n, int flags), (in, y, a, b, n, flags),
    ((rop){.kind = R_ADD2_BF16, .p = {y, a, b}, .n = n, .i = {flags}}))
OPR(relu_bwd_bf16, (dt_backend * be, float *dx, const float *dy, const void *y, size_t n, float beta),
    (in, dx, dy, y, n, beta), ((rop){.kind = R_RELU_BWD_BF16, .p = {dx, dy, y}, .n = n, .f = {beta}}))
OP(to_plain, (dt_backend * be, dt_layout from, const float *x, float *y, int rows, int c, int h, int w),
   (in, from, x, y, rows, c, h, w))
OP(from_plain, (dt_backend * be, dt_layout to, const float *x, float *y, int rows, int c, int h, int w, float beta),
   (in, to, x, y, rows, c, h, w, beta))
OP(pool_fwd, (dt_backend * be, void *plan, int rows, int train, const float *x, float *y),
   (in, plan, rows, train, x, y))
OP(pool_bwd, (dt_backend * be, void *plan, int rows, const float *dy, float *dx, float dx_beta),
   (in, plan, rows, dy, dx, dx_beta))
OP(bn_fwd,
   (dt_backend * be, void *plan, int rows, int train, const float *x, const float *scale, const float *shift,
    float *mean, float *var, float *y),
   (in, plan, rows, train, x, scale, shift, mean, var, y))
OP(bn_bwd,
   (dt_backend * be, void *plan, int rows, const float *x, const float *scale, const float *mean, const float *var,
    const float *dy, const float *y, float *dx, float dx_beta, float *dscale, float *dshift),
   (in, plan, rows, x, scale, mean, var, dy, y, dx, dx_beta, dscale, dshift))
OP(lrn_fwd, (dt_backend * be, void *plan, int rows, int train, const float *x, float *y), (in, plan, rows, train, x, y))
OP(lrn_bwd, (dt_backend * be, void *plan, int rows, const float *x, const float *dy, float *dx, float dx_beta),
   (in, plan, rows, x, dy, dx, dx_beta))
OP(shortcut_fwd, (dt_backend * be, const dt_shortcut_cfg *cfg, int rows, const float *x, float *y),
   (in, cfg, rows, x, y))
OP(shortcut_bwd, (dt_backend * be, const dt_shortcut_cfg *cfg, int rows, const float *dy, float *dx, float dx_beta),
   (in, cfg, rows, dy, dx, dx_beta))

/* --precision fp16, emulated: f rounded to IEEE half (to nearest even; beyond 65504 infinite, as a
 * GPU's conversion) and back */
uint16_t codec_fp16_from_float(float f);
float codec_fp16_to_float(uint16_t h);

static float half_of(float f)
{
    if (isfinite(f) && fabsf(f) >= 65520.0f) return f > 0 ? INFINITY : -INFINITY; /* 65520 rounds up to 2^16 */
    return isfinite(f) ? codec_fp16_to_float(codec_fp16_from_float(f)) : f;
}

/* n values of x rounded to half into new host memory (NULL: x was NULL); out of memory: NULL, *rc -1 */
static float *halves(const float *x, size_t n, int *rc)
{
    if (!x) return NULL;
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) {
        *rc = dt_fail("out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) h[i] = half_of(x[i]);
    return h;
}

static int g_gemm(dt_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
    if (recording)
        return rec_add(
            (rop){.kind = R_GEMM, .p = {a, b, c}, .i = {ta, tb, m, n, k, lda, ldb, ldc}, .f = {alpha, beta}});
    guarded *g = enter(be);
    dt_backend *in = g->in;
    int rc = 0;
    /* op(A) is m x k, stored in (ta ? k : m) rows of (ta ? m : k) values, lda apart; op(B) likewise */
    if (g->fp16 && m > 0 && n > 0 && k > 0) {
        float *ha = halves(a, (size_t)((ta ? k : m) - 1) * (size_t)lda + (size_t)(ta ? m : k), &rc);
        float *hb = rc == 0 ? halves(b, (size_t)((tb ? n : k) - 1) * (size_t)ldb + (size_t)(tb ? k : n), &rc) : NULL;
        if (rc == 0) rc = in->gemm(in, ta, tb, m, n, k, alpha, ha, lda, hb, ldb, beta, c, ldc);
        free(ha), free(hb);
    } else {
        rc = in->gemm(in, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    leave(g);
    return rc;
}

/* A convolution's plan: the CPU backend's and the configuration (the sizes of what fp16 rounds). The
 * live ones are listed, so plan_free knows them from the other ops' plans. */
typedef struct gconv {
    void *in;
    dt_conv_cfg cfg;
    struct gconv *next;
} gconv;
static gconv *conv_plans;
static pthread_mutex_t conv_lock = PTHREAD_MUTEX_INITIALIZER;

static void *g_conv_plan(dt_backend *be, const dt_conv_cfg *cfg)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    gconv *p = calloc(1, sizeof *p);
    if (!p) {
        dt_fail("out of memory");
        return NULL;
    }
    if (!(p->in = in->conv_plan(in, cfg))) {
        free(p);
        return NULL;
    }
    p->cfg = *cfg;
    pthread_mutex_lock(&conv_lock);
    p->next = conv_plans, conv_plans = p;
    pthread_mutex_unlock(&conv_lock);
    return p;
}

/* fp16: a convolution's x, w and dy (dy NULL: forward) replaced by their roundings to half, in
 * own[0..2] for the caller to free */
static int conv_halves(guarded *g, const gconv *p, int rows, const float **x, const float **w, const float **dy,
                       float **own)
{
    int rc = 0;
    own[0] = own[1] = own[2] = NULL;
    if (!g->fp16) return 0;
    const dt_conv_cfg *c = &p->cfg;
    size_t nx = g->in->act_size(g->in, c->in_layout, rows, c->c, c->h, c->w);
    size_t nw = (size_t)c->o * (size_t)(c->c / c->groups) * (size_t)c->kh * (size_t)c->kw;
    size_t ny = g->in->act_size(g->in, c->out_layout, rows, c->o, c->oh, c->ow);
    *x = own[0] = halves(*x, nx, &rc);
    if (rc == 0) *w = own[1] = halves(*w, nw, &rc);
    if (rc == 0 && dy) *dy = own[2] = halves(*dy, ny, &rc);
    return rc;
}

static int g_conv_fwd(dt_backend *be, void *plan, int rows, const float *x, const float *w, const float *b, float *y)
{
    if (recording) return rec_refuse("conv_fwd");
    gconv *p = plan;
    guarded *g = enter(be);
    float *own[3];
    int rc = conv_halves(g, p, rows, &x, &w, NULL, own);
    if (rc == 0) rc = g->in->conv_fwd(g->in, p->in, rows, x, w, b, y);
    free(own[0]), free(own[1]), free(own[2]);
    leave(g);
    return rc;
}

static int g_conv_bwd(dt_backend *be, void *plan, int rows, const float *x, const float *w, const float *dy, float *dx,
                      float dx_beta, float *dw, float *db)
{
    if (recording) return rec_refuse("conv_bwd");
    gconv *p = plan;
    guarded *g = enter(be);
    float *own[3];
    int rc = conv_halves(g, p, rows, &x, &w, &dy, own);
    if (rc == 0) rc = g->in->conv_bwd(g->in, p->in, rows, x, w, dy, dx, dx_beta, dw, db);
    free(own[0]), free(own[1]), free(own[2]);
    leave(g);
    return rc;
}

/* the loss gradient; DTRAIN_GUARDED_INF_AT's backward pass gets an infinity in it */
static int g_softmax_xent_bwd(dt_backend *be, float *dx, const float *prob, const int32_t *labels, int rows,
                              int classes, float scale, float beta)
{
    if (recording)
        return rec_add((rop){.kind = R_SMX_BWD, .p = {dx, prob, labels}, .i = {rows, classes}, .f = {scale, beta}});
    guarded *g = enter(be);
    dt_backend *in = g->in;
    int rc = in->softmax_xent_bwd(in, dx, prob, labels, rows, classes, scale, beta);
    ++g->n_bwd;
    if (rc == 0 && g->inf_at > 0 && (g->n_bwd == g->inf_at || (g->inf_on && g->n_bwd > g->inf_at)) && rows > 0)
        dx[0] = INFINITY;
    leave(g);
    return rc;
}

/* The gradient codecs (a device's run its kernels): the CPU codecs on the guarded memory, so that
 * the comm code's device paths (ring_create_on) run here */
static int wire_codec(int kind, int block, dt_codec *c)
{
    const char *name = kind == DT_WIRE_T16 ? "t16" : kind == DT_WIRE_FP16 ? "fp16" : kind == DT_WIRE_Q8 ? "q8" : NULL;
    if (!name) return dt_fail("cpu-guarded: no codec %d", kind);
    return codec_create(name, block > 0 ? block : DT_CODEC_PER_VECTOR, c);
}

static int g_wire_encode(dt_backend *be, int kind, int block, const float *x, size_t n, void *out)
{
    dt_codec c;
    if (wire_codec(kind, block, &c) != 0) return -1;
    guarded *g = enter(be);
    codec_encode(&c, x, n, out);
    leave(g);
    return 0;
}

static int g_wire_decode(dt_backend *be, int kind, int block, const void *in, size_t n, float *x, int add)
{
    dt_codec c;
    if (wire_codec(kind, block, &c) != 0) return -1;
    guarded *g = enter(be);
    if (add) codec_decode_add(&c, in, n, x);
    else codec_decode(&c, in, n, x);
    leave(g);
    return 0;
}

/* The sparse modes' residuals (a device's run its kernels): the CPU's arithmetic on the guarded
 * memory, each product and sum rounded on its own as memory.c, so that comm/memory.c's device paths
 * run here and must give the CPU's bits */
DT_NO_CONTRACT static int g_residual_add(dt_backend *be, float *r, float *u, const float *gr, const float *w, size_t n,
                                         float m, float wd)
{
    guarded *g = enter(be);
    for (size_t i = 0; i < n; i++) {
        if (!u) {
            r[i] += gr[i];
            continue;
        }
        float v = m * u[i] + gr[i] + wd * w[i];
        u[i] = v;
        r[i] += v;
    }
    leave(g);
    return 0;
}

static int g_topk(dt_backend *be, const float *x, size_t n, size_t k, void *pairs)
{
    guarded *g = enter(be);
    int rc = topk_select_sort(x, n, k, pairs);
    leave(g);
    return rc;
}

DT_NO_CONTRACT static int g_pairs_apply(dt_backend *be, float *x, const void *pairs, size_t k, int how, float a)
{
    guarded *g = enter(be);
    const dt_pair *p = pairs;
    for (size_t j = 0; j < k; j++)
        x[p[j].i] = how == DT_PAIRS_SET    ? p[j].v
                    : how == DT_PAIRS_ZERO ? 0.0f
                    : how == DT_PAIRS_SUB  ? x[p[j].i] - a * p[j].v
                                           : x[p[j].i] + a * p[j].v;
    leave(g);
    return 0;
}

/* --topk-select sampled: the sample into host memory, and sparse.c's scan, on the guarded memory */
static int g_topk_sample(dt_backend *be, const float *x, size_t n, size_t m, float *out)
{
    guarded *g = enter(be);
    for (size_t s = 0; s < m; s++) out[s] = fabsf(x[topk_sample_index(s, n)]);
    leave(g);
    return 0;
}

static int g_topk_above(dt_backend *be, const float *x, size_t n, size_t k, float thr, void *pairs)
{
    int rc = 0;
    guarded *g = enter(be);
    if (topk_count_above(x, n, thr) >= k) rc = topk_select_sort(x, n, k, pairs); /* the k largest */
    else topk_take_above(x, n, k, thr, pairs);
    leave(g);
    return rc;
}

/* gTop-k's merge: sparse.c's on the guarded memory */
static int g_pairs_merge(dt_backend *be, const void *a, size_t na, const void *b, size_t nb, size_t k, void *out,
                         size_t *n_out)
{
    dt_pair *tmp = malloc((na + nb + 1) * sizeof *tmp);
    if (!tmp) return dt_fail("out of memory");
    guarded *g = enter(be);
    *n_out = sparse_merge_topk(a, na, b, nb, k, out, tmp);
    leave(g);
    free(tmp);
    return 0;
}

static int g_pairs_zero_common(dt_backend *be, float *x, const void *a, size_t na, const void *b, size_t nb)
{
    guarded *g = enter(be);
    const dt_pair *p = a, *q = b;
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        if (p[i].i < q[j].i) i++;
        else if (q[j].i < p[i].i) j++;
        else x[p[i++].i] = 0.0f, j++;
    }
    leave(g);
    return 0;
}

/* TernGrad (a device's run its kernels): codec_tern.c on the guarded memory */
static int g_tern_stats(dt_backend *be, const float *x, const size_t *off, const size_t *n, int count, double *sum,
                        double *sq, float *mx)
{
    guarded *g = enter(be);
    for (int k = 0; k < count; k++) tern_stats(x + off[k], n[k], &sum[k], &sq[k], &mx[k]);
    leave(g);
    return 0;
}

static int g_tern_encode(dt_backend *be, const float *x, size_t n, float clip, float s, uint64_t key, int8_t *t)
{
    guarded *g = enter(be);
    tern_ternarize(x, n, clip, s, key, t);
    leave(g);
    return 0;
}

static int g_tern_pack(dt_backend *be, const int8_t *t, size_t n, uint8_t *codes)
{
    guarded *g = enter(be);
    tern_pack(t, n, codes);
    leave(g);
    return 0;
}

static int g_tern_decode(dt_backend *be, const int8_t *acc, size_t n, float s, float *x)
{
    guarded *g = enter(be);
    for (size_t i = 0; i < n; i++) x[i] = s * (float)acc[i];
    leave(g);
    return 0;
}

static int g_tern_sum(dt_backend *be, const uint8_t *codes, int p, size_t code_bytes, size_t n, int8_t *acc)
{
    guarded *g = enter(be);
    memset(acc, 0, n);
    for (int r = 0; r < p; r++) tern_unpack_add(codes + (size_t)r * code_bytes, n, acc);
    leave(g);
    return 0;
}

/* csc (a device's run its kernels): chunks.c on the guarded memory, chunk by chunk */
static int g_csc_pack(dt_backend *be, float *gr, const float *h, const float *w, float wd, size_t lo, size_t hi,
                      size_t chunk, const int32_t *slot, float scale, float limit, float *pack)
{
    guarded *g = enter(be);
    for (size_t a = lo; a < hi;) {
        size_t c = a / chunk, b = DT_MIN((c + 1) * chunk, hi);
        chunks_correct(gr + a, h + a, w ? w + a : NULL, wd, b - a);
        if (slot[c] >= 0) chunks_pack(pack + (size_t)slot[c] * chunk + (a - c * chunk), gr + a, b - a, scale, limit);
        a = b;
    }
    leave(g);
    return 0;
}

static int g_csc_fold(dt_backend *be, float *gr, float *h, float *hu, float *w, const float *pack,
                      const int32_t *slot, size_t n, size_t chunk, int p, float m, float lr, float *norms)
{
    guarded *g = enter(be);
    for (size_t c = 0, a = 0; a < n; c++, a += chunk) {
        size_t len = DT_MIN(chunk, n - a);
        const float *sum = slot[c] >= 0 ? pack + (size_t)slot[c] * chunk : NULL;
        norms[c] = chunks_fold(gr + a, h + a, hu ? hu + a : NULL, hu ? w + a : NULL, sum, len, p, m, lr);
    }
    leave(g);
    return 0;
}

/* Plans and layout queries touch no data: straight to the CPU backend. */
static dt_layout g_layout_for(dt_backend *be, int c, int h, int w)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    return in->layout_for(in, c, h, w);
}

static size_t g_act_size(dt_backend *be, dt_layout l, int rows, int c, int h, int w)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    return in->act_size(in, l, rows, c, h, w);
}

static int g_conv_bf16_out(dt_backend *be, const dt_conv_cfg *cfg)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    return in->conv_bf16_out && in->conv_bf16_out(in, cfg);
}

static int g_conv_bf16_in(dt_backend *be, const dt_conv_cfg *cfg)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    return in->conv_bf16_in && in->conv_bf16_in(in, cfg);
}

static void *g_pool_plan(dt_backend *be, const dt_pool_cfg *cfg)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    return in->pool_plan(in, cfg);
}

static void *g_bn_plan(dt_backend *be, const dt_bn_cfg *cfg)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    return in->bn_plan(in, cfg);
}

static void *g_lrn_plan(dt_backend *be, const dt_lrn_cfg *cfg)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    return in->lrn_plan(in, cfg);
}

static void g_plan_free(dt_backend *be, void *plan)
{
    dt_backend *in = ((guarded *)be->impl)->in;
    gconv **at = &conv_plans, *conv = NULL;
    pthread_mutex_lock(&conv_lock);
    while (*at && *at != plan) at = &(*at)->next;
    if (*at) conv = *at, *at = conv->next;
    pthread_mutex_unlock(&conv_lock);
    in->plan_free(in, conv ? conv->in : plan);
    free(conv);
}

static void *g_host_alloc(dt_backend *be, size_t bytes)
{
    guarded *g = be->impl;
    uint64_t *h = dt_zalloc(bytes + STAGING_HDR);
    if (!h) return NULL;
    h[0] = STAGING_MAGIC;
    pthread_mutex_lock(&g->lock);
    g->staging++;
    pthread_mutex_unlock(&g->lock);
    return (char *)h + STAGING_HDR;
}

static void g_host_free(dt_backend *be, void *p)
{
    guarded *g = be->impl;
    uint64_t *h = (uint64_t *)((char *)p - STAGING_HDR);
    if (h[0] != STAGING_MAGIC) {
        fprintf(stderr, "cpu-guarded: host_free of %p, which host_alloc did not make\n", p);
        abort();
    }
    h[0] = 0;
    dt_free(h);
    pthread_mutex_lock(&g->lock);
    g->staging--;
    pthread_mutex_unlock(&g->lock);
}

/* A stand-in for a device transport (NCCL): the net_* ops over MPI, so that the comm code's paths for
 * --transport nccl run here. Each communicator is a duplicate of MPI_COMM_WORLD whose ranks must be
 * the ones the caller names, and every rank must hold the id rank 0 drew (the caller broadcasts it):
 * checked. The transfers copy the guarded memory out, send, and copy back in, so no guarded page is
 * open while a rank waits for another. Its "devices": DTRAIN_GUARDED_DEVICES of them (default 1), a
 * rank's being --gpu or its local rank modulo that count, so tests make ranks share one or not.
 * DTRAIN_GUARDED_NO_NET=1: as a machine without the library. A transfer is done when its op returns,
 * but, as NCCL's, it gives up after the timeout its communicator's net_wait was last given (its first
 * ops: after 300 s, the default --comm-timeout) with NCCL's kind of error, after which every op of the
 * communicator fails (it counts as aborted): so that a rank that stops ends a job over this transport
 * as it ends one over NCCL. A send is done only once its receive has begun (MPI_Issend): the strictest
 * reading of NCCL's point-to-point, where a send may wait for its peer's receive, so that an order of
 * transfers that could deadlock over NCCL deadlocks (and times out) here rather than passing. */
typedef struct gnet {
    MPI_Comm comm;
    unsigned char id[DT_NET_ID_BYTES];
    int rank, nranks, aborted;
    double timeout;
} gnet;

/* waits for an op's MPI requests, giving up (and aborting the communicator) after net->timeout */
static int g_net_done(gnet *net, MPI_Request *req, int n, const char *what)
{
    double t0 = dt_now();
    for (long polls = 0;; polls++) {
        int done = 0;
        if (MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return dt_fail("cpu-guarded: %s: MPI_Testall failed", what);
        if (done) return 0;
        if (net->timeout > 0 && dt_now() - t0 > net->timeout) {
            net->aborted = 1;
            return dt_fail(
                "cpu-guarded (NCCL's stand-in): rank %d of %d: %s did not finish in %.0f s (--comm-timeout): "
                "a rank stopped or died; the communicator was aborted",
                net->rank, net->nranks, what, net->timeout);
        }
        if (polls > 1000) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

static int g_net_usable(const gnet *net)
{
    return net->aborted ? dt_fail("cpu-guarded (NCCL's stand-in): the communicator was aborted") : 0;
}

/* bytes sent through net ops, reported when the backend goes with DTRAIN_GUARDED_STATS set (tests
 * check that a --transport nccl run sent its gradients this way) */
static long long net_bytes;

static int g_net_available(dt_backend *be, char *why, size_t n)
{
    (void)be;
    if (getenv("DTRAIN_GUARDED_NO_NET")) {
        snprintf(why, n, "the guarded backend's transport is switched off (DTRAIN_GUARDED_NO_NET)");
        return 0;
    }
    snprintf(why, n, "MPI standing in for NCCL (cpu-guarded)");
    return 1;
}

static int g_net_id(dt_backend *be, void *id)
{
    (void)be;
    unsigned char *u = id;
    uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(dt_now() * 1e9);
    for (int i = 0; i < DT_NET_ID_BYTES; i++) u[i] = (unsigned char)((x = x * 6364136223846793005ull + 1) >> 56);
    return 0;
}

static int g_net_create(dt_backend *be, const void *id, int nranks, int rank, void **out)
{
    (void)be;
    int size, me;
    const char *stop = getenv("DTRAIN_GUARDED_STOP_IN_CREATE");
    if (stop && atoi(stop) == rank) raise(SIGSTOP); /* a rank wedged while the others join (faults.sh) */
    gnet *net = calloc(1, sizeof *net);
    unsigned char first[DT_NET_ID_BYTES];
    if (!net) return dt_fail("out of memory");
    memcpy(net->id, id, DT_NET_ID_BYTES);
    memcpy(first, id, DT_NET_ID_BYTES);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &net->comm) != MPI_SUCCESS) {
        free(net);
        return dt_fail("cpu-guarded: MPI_Comm_dup failed");
    }
    MPI_Comm_size(net->comm, &size);
    MPI_Comm_rank(net->comm, &me);
    net->rank = me, net->nranks = size, net->timeout = 300;
    MPI_Bcast(first, DT_NET_ID_BYTES, MPI_BYTE, 0, net->comm);
    int bad = size != nranks || me != rank || memcmp(first, id, DT_NET_ID_BYTES) != 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, net->comm);
    if (any) {
        MPI_Comm_free(&net->comm);
        free(net);
        return dt_fail("cpu-guarded: net_create: %s", bad ? "this rank's id, rank or rank count differs from the job's"
                                                          : "another rank's id, rank or rank count differs");
    }
    *out = net;
    return 0;
}

static void g_net_free(dt_backend *be, void *p)
{
    (void)be;
    gnet *net = p;
    MPI_Comm_free(&net->comm);
    free(net);
}

/* copies between guarded memory and a host buffer */
static void g_out(dt_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return; /* a side of a transfer left out: its buffer may be NULL */
    guarded *g = enter(be);
    memcpy(dst, src, bytes);
    leave(g);
}

static int g_net_sendrecv(dt_backend *q, void *p, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes,
                          int src)
{
    gnet *net = p;
    char *s = malloc(sbytes + 1), *r = malloc(rbytes + 1), what[96];
    MPI_Request req[2];
    int rc = -1;
    if (!s || !r) {
        dt_fail("out of memory");
        goto out;
    }
    if (g_net_usable(net) != 0) goto out;
    g_out(q, s, sbuf, sbytes);
    __atomic_add_fetch(&net_bytes, (long long)sbytes, __ATOMIC_RELAXED);
    if (MPI_Irecv(r, (int)rbytes, MPI_BYTE, rbytes ? src : MPI_PROC_NULL, 7, net->comm, &req[0]) != MPI_SUCCESS ||
        MPI_Issend(s, (int)sbytes, MPI_BYTE, sbytes ? dst : MPI_PROC_NULL, 7, net->comm, &req[1]) != MPI_SUCCESS) {
        dt_fail("cpu-guarded: MPI_Issend or MPI_Irecv failed");
        goto out;
    }
    snprintf(what, sizeof what, "a transfer of %zu bytes to rank %d and %zu from rank %d", sbytes, dst, rbytes, src);
    if (g_net_done(net, req, 2, what) != 0) {
        s = r = NULL; /* MPI may still write or read them: leaked, the job ends */
        goto out;
    }
    g_out(q, rbuf, r, rbytes);
    rc = 0;
out:
    free(s), free(r);
    return rc;
}

static int g_net_allreduce(dt_backend *q, void *p, float *x, size_t n)
{
    gnet *net = p;
    MPI_Request req;
    if (g_net_usable(net) != 0) return -1;
    float *h = malloc(n * sizeof *h + 1);
    if (!h) return dt_fail("out of memory");
    g_out(q, h, x, n * sizeof *h);
    __atomic_add_fetch(&net_bytes, (long long)(n * sizeof *h), __ATOMIC_RELAXED);
    if (MPI_Iallreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, net->comm, &req) != MPI_SUCCESS) {
        free(h);
        return dt_fail("cpu-guarded: MPI_Iallreduce failed");
    }
    if (g_net_done(net, &req, 1, "an allreduce") != 0) return -1; /* h leaked: MPI may still use it */
    g_out(q, x, h, n * sizeof *h);
    free(h);
    return 0;
}

static int g_net_allreduce_i8(dt_backend *q, void *p, int8_t *x, size_t n)
{
    gnet *net = p;
    MPI_Request req;
    if (g_net_usable(net) != 0) return -1;
    int8_t *h = malloc(n + 1);
    if (!h) return dt_fail("out of memory");
    g_out(q, h, x, n);
    __atomic_add_fetch(&net_bytes, (long long)n, __ATOMIC_RELAXED);
    if (MPI_Iallreduce(MPI_IN_PLACE, h, (int)n, MPI_INT8_T, MPI_SUM, net->comm, &req) != MPI_SUCCESS) {
        free(h);
        return dt_fail("cpu-guarded: MPI_Iallreduce of int8 failed");
    }
    if (g_net_done(net, &req, 1, "an allreduce of int8") != 0) return -1; /* h leaked: MPI may still use it */
    g_out(q, x, h, n);
    free(h);
    return 0;
}

static int g_net_allgather(dt_backend *q, void *p, const void *sbuf, size_t bytes, void *rbuf)
{
    gnet *net = p;
    int size;
    MPI_Comm_size(net->comm, &size);
    char *s = malloc(bytes + 1), *r = malloc(bytes * (size_t)size + 1);
    MPI_Request req;
    int rc = -1;
    if (!s || !r) {
        dt_fail("out of memory");
        goto out;
    }
    if (g_net_usable(net) != 0) goto out;
    g_out(q, s, sbuf, bytes);
    __atomic_add_fetch(&net_bytes, (long long)bytes, __ATOMIC_RELAXED);
    if (MPI_Iallgather(s, (int)bytes, MPI_BYTE, r, (int)bytes, MPI_BYTE, net->comm, &req) != MPI_SUCCESS) {
        dt_fail("cpu-guarded: MPI_Iallgather failed");
        goto out;
    }
    if (g_net_done(net, &req, 1, "an allgather") != 0) {
        s = r = NULL; /* MPI may still use them: leaked, the job ends */
        goto out;
    }
    g_out(q, rbuf, r, bytes * (size_t)size);
    rc = 0;
out:
    free(s), free(r);
    return rc;
}

static int g_net_wait(dt_backend *q, void *p, double timeout)
{
    gnet *net = p;
    (void)q;
    net->timeout = timeout; /* its transfers are done when they return; the next ones give up after this */
    return g_net_usable(net);
}

static int g_device_id(dt_backend *be, char *buf, size_t n)
{
    guarded *g = be->impl;
    snprintf(buf, n, "guarded device %d", g->device);
    return 0;
}

/* ---- graphs (--gpu-graph): see the top ---------------------------------------------------------- */

static int g_graph_begin(dt_backend *be)
{
    (void)be;
    if (recording) return dt_fail("internal: cpu-guarded: a graph is being recorded already");
    if (!(recording = calloc(1, sizeof *recording))) return dt_fail("out of memory");
    return 0;
}

static void g_graph_free(dt_backend *be, void *graph)
{
    grec *r = graph;
    (void)be;
    if (r) free(r->ops);
    free(r);
}

static int g_graph_end(dt_backend *be, void **graph)
{
    grec *r = recording;
    recording = NULL;
    *graph = NULL;
    if (!r) return dt_fail("internal: cpu-guarded: graph_end without graph_begin");
    if (r->failed) {
        char why[sizeof r->why];
        snprintf(why, sizeof why, "%s", r->why);
        g_graph_free(be, r);
        return dt_fail("%s (the pass cannot be recorded)", why);
    }
    *graph = r;
    return 0;
}

static int g_graph_launch(dt_backend *be, void *graph, double *loss_sum, int64_t *n_correct)
{
    guarded *g = be->impl;
    const grec *r = graph;
    ++g->launches;
    if (g->moved_at > 0 && g->launches == g->moved_at) return 1;
    if (g->refuse_at > 0 && g->launches == g->refuse_at) {
        dt_fail("cpu-guarded: launch %ld refused (DTRAIN_GUARDED_GRAPH_REFUSE)", g->launches);
        return 2;
    }
    for (int k = 0; k < r->n; k++) {
        const rop *o = &r->ops[k];
        float *p0 = (float *)o->p[0];
        const float *p1 = o->p[1], *p2 = o->p[2];
        int rc = 0;
        switch (o->kind) {
        case R_GEMM:
            rc = g_gemm(be, o->i[0], o->i[1], o->i[2], o->i[3], o->i[4], o->f[0], o->p[0], o->i[5], p1, o->i[6],
                        o->f[1], (float *)o->p[2], o->i[7]);
            break;
        case R_BIAS_ADD: rc = g_bias_add(be, p0, p1, o->i[0], o->i[1]); break;
        case R_BIAS_GRAD: rc = g_bias_grad(be, p0, p1, o->i[0], o->i[1], o->f[0]); break;
        case R_RELU_FWD: rc = g_relu_fwd(be, p0, p1, o->n); break;
        case R_RELU_BWD: rc = g_relu_bwd(be, p0, p1, p2, o->n, o->f[0]); break;
        case R_SMX_FWD: rc = g_softmax_xent_fwd(be, p0, p1, o->p[2], o->i[0], o->i[1], loss_sum, n_correct); break;
        case R_SMX_BWD: rc = g_softmax_xent_bwd(be, p0, p1, o->p[2], o->i[0], o->i[1], o->f[0], o->f[1]); break;
        case R_COPY: rc = g_copy(be, (void *)o->p[0], o->p[1], o->n); break;
        case R_ADD: rc = g_add(be, p0, p1, o->n, o->f[0]); break;
        case R_ADD2: rc = g_add2(be, p0, p1, p2, o->n, o->i[0]); break;
        case R_SCALE: rc = g_scale(be, p0, o->f[0], o->n); break;
        case R_ADD2_BF16: rc = g_add2_bf16(be, p0, p1, p2, o->n, o->i[0]); break;
        case R_RELU_BWD_BF16: rc = g_relu_bwd_bf16(be, p0, p1, p2, o->n, o->f[0]); break;
        default: rc = dt_fail("internal: cpu-guarded: recorded op %d", o->kind);
        }
        if (rc != 0) return -1;
    }
    return 0;
}

/* A second queue (a GPU's stream for a communication thread): the same ops on the same memory, as
 * a table of its own, so the comm code's two-queue paths run here; it allocates nothing (a GPU's
 * queue allocates through its backend), and one not freed before the backend aborts. */
static int g_queue_create(dt_backend *be, dt_backend **out)
{
    guarded *g = be->impl;
    dt_backend *q = malloc(sizeof *q);
    if (!q) return dt_fail("out of memory");
    *q = *be;
    q->alloc = NULL, q->free = NULL, q->host_alloc = NULL, q->host_free = NULL;
    q->queue_create = NULL, q->queue_free = NULL, q->destroy = NULL;
    q->graph_begin = NULL, q->graph_end = NULL, q->graph_launch = NULL, q->graph_free = NULL;
    pthread_mutex_lock(&g->lock);
    g->queues++;
    pthread_mutex_unlock(&g->lock);
    *out = q;
    return 0;
}

static void g_queue_free(dt_backend *be, dt_backend *q)
{
    guarded *g = be->impl;
    if (q->impl != g) {
        fprintf(stderr, "cpu-guarded: queue_free of a queue another backend made\n");
        abort();
    }
    free(q);
    pthread_mutex_lock(&g->lock);
    g->queues--;
    pthread_mutex_unlock(&g->lock);
}

static void g_destroy(dt_backend *be)
{
    guarded *g = be->impl;
    if (g->queues != 0) {
        fprintf(stderr, "cpu-guarded: destroyed with %ld queue%s (queue_create) not freed\n", g->queues,
                g->queues == 1 ? "" : "s");
        abort();
    }
    if (g->staging != 0) {
        fprintf(stderr, "cpu-guarded: destroyed with %ld staging buffer%s (host_alloc) still allocated\n", g->staging,
                g->staging == 1 ? "" : "s");
        abort();
    }
    if (getenv("DTRAIN_GUARDED_STATS"))
        fprintf(stderr, "cpu-guarded: %lld bytes sent over its transport\n",
                __atomic_load_n(&net_bytes, __ATOMIC_RELAXED));
    pthread_mutex_lock(&instances_lock);
    for (int k = 0; k < MAX_INSTANCES; k++)
        if (instances[k] == g) instances[k] = NULL;
    pthread_mutex_unlock(&instances_lock);
    for (int i = 0; i < g->n; i++) munmap(g->r[i].p, g->r[i].bytes);
    free(g->r);
    backend_destroy(g->in);
    pthread_mutex_destroy(&g->lock);
    free(g);
    free(be);
}

static int g_create(dt_backend **out, const dt_backend_opts *o)
{
    dt_backend *be = calloc(1, sizeof *be);
    guarded *g = calloc(1, sizeof *g);
    if (!be || !g) {
        free(be);
        free(g);
        return dt_fail("out of memory");
    }
    dt_backend_opts inner = *o;
    if (o->precision == DT_PRECISION_FP16) inner.precision = DT_PRECISION_FP32, g->fp16 = 1;
    if (backend_cpu_create_with(&g->in, &inner) != 0) {
        free(be);
        free(g);
        return -1;
    }
    pthread_mutex_init(&g->lock, NULL);
    *be = *g->in; /* the CPU backend's table, then every op that touches memory wrapped */
    be->name = "cpu-guarded";
    be->host_memory = 0;
    be->impl = g;
    be->destroy = g_destroy;
    be->alloc = g_alloc;
    be->free = g_free;
    be->host_alloc = g_host_alloc;
    be->host_free = g_host_free;
    be->queue_create = g_queue_create;
    be->queue_free = g_queue_free;
    be->graph_begin = g_graph_begin, be->graph_end = g_graph_end;
    be->graph_launch = g_graph_launch, be->graph_free = g_graph_free;
    if (getenv("DTRAIN_GUARDED_GRAPH_MOVED")) g->moved_at = atol(getenv("DTRAIN_GUARDED_GRAPH_MOVED"));
    if (getenv("DTRAIN_GUARDED_GRAPH_REFUSE")) g->refuse_at = atol(getenv("DTRAIN_GUARDED_GRAPH_REFUSE"));
    {
        const char *nd = getenv("DTRAIN_GUARDED_DEVICES");
        int count = nd && atoi(nd) > 0 ? atoi(nd) : 1;
        g->device = (o->device >= 0 ? o->device : o->local_rank > 0 ? o->local_rank : 0) % count;
        const char *inf = getenv("DTRAIN_GUARDED_INF_AT"), *colon = inf ? strchr(inf, ':') : NULL;
        const char *rank = getenv("OMPI_COMM_WORLD_RANK");
        if (inf && (!colon || atoi(colon + 1) == (rank ? atoi(rank) : 0))) {
            char *end;
            g->inf_at = strtol(inf, &end, 10);
            g->inf_on = *end == '+';
        }
    }
    be->device_id = g_device_id;
    be->net_available = g_net_available;
    be->net_id = g_net_id;
    be->net_create = g_net_create;
    be->net_free = g_net_free;
    be->net_sendrecv = g_net_sendrecv;
    be->net_allreduce = g_net_allreduce;
    be->net_allreduce_i8 = g_net_allreduce_i8;
    be->net_allgather = g_net_allgather;
    be->net_wait = g_net_wait;
#define WRAP(name) be->name = g_##name
    WRAP(to_device), WRAP(to_host), WRAP(copy), WRAP(sync), WRAP(gemm), WRAP(bias_add), WRAP(bias_grad);
    WRAP(relu_fwd), WRAP(relu_bwd), WRAP(dropout_fwd), WRAP(dropout_bwd), WRAP(softmax_xent_fwd);
    WRAP(softmax_xent_bwd), WRAP(sgd_step), WRAP(scale), WRAP(grad_unscale), WRAP(add), WRAP(add2), WRAP(bn_running);
    if (g->in->add2_bf16) WRAP(add2_bf16), WRAP(relu_bwd_bf16); /* the stream in bf16: where the CPU's is */
    WRAP(to_plain), WRAP(from_plain);
    WRAP(layout_for), WRAP(act_size), WRAP(conv_bf16_out), WRAP(conv_bf16_in), WRAP(conv_plan), WRAP(conv_fwd),
        WRAP(conv_bwd), WRAP(pool_plan);
    WRAP(pool_fwd), WRAP(pool_bwd), WRAP(bn_plan), WRAP(bn_fwd), WRAP(bn_bwd), WRAP(lrn_plan), WRAP(lrn_fwd);
    WRAP(lrn_bwd), WRAP(plan_free), WRAP(shortcut_fwd), WRAP(shortcut_bwd), WRAP(wire_encode), WRAP(wire_decode);
    WRAP(residual_add), WRAP(topk), WRAP(pairs_apply), WRAP(pairs_merge), WRAP(pairs_zero_common), WRAP(tern_stats);
    WRAP(topk_sample), WRAP(topk_above);
    WRAP(tern_encode), WRAP(tern_pack);
    WRAP(tern_decode), WRAP(tern_sum), WRAP(csc_pack), WRAP(csc_fold);
#undef WRAP
    pthread_mutex_lock(&instances_lock);
    int slot = -1;
    for (int k = 0; k < MAX_INSTANCES && slot < 0; k++)
        if (!instances[k]) slot = k;
    if (slot >= 0) instances[slot] = g;
    if (!handler_installed) { /* after MPI_Init, which installs its own: ours chains to it */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &old_segv);
        handler_installed = 1;
    }
    pthread_mutex_unlock(&instances_lock);
    if (slot < 0) {
        g_destroy(be);
        return dt_fail("cpu-guarded: more than %d instances", MAX_INSTANCES);
    }
    *out = be;
    return 0;
}

static int g_available(char *why, size_t n)
{
    (void)why, (void)n;
    return 1;
}

static const char *g_describe(void)
{
    return "the cpu backend's kernels on memory kept PROT_NONE outside its ops (tests)";
}

const dt_backend_desc backend_guarded_desc = {
    .name = "cpu-guarded",
    .help = "test backend: the cpu kernels on memory host code cannot touch",
    .hidden = 1,
    .available = g_available,
    .create = g_create,
    .describe = g_describe,
};

const dt_backend_desc *dtrain_backend_module(int abi)
{
    return abi == DT_BACKEND_ABI ? &backend_guarded_desc : NULL;
}
