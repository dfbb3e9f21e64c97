/* backend_cuda — the CUDA backend: the module dtrain-cuda.so that `--device cuda` loads.
 *
 * The table of src/engine/backend.h on one GPU: memory (cudaMalloc), copies, the elementwise
 * ops and the loss on our kernels (backend_cuda_kernels.cu, batch norm in backend_cuda_bn.cu),
 * GEMM on cuBLAS (backend_cuda_blas.c), convolution on cuDNN (backend_cuda_dnn.c). Every op is
 * queued on the backend's one stream, so the order ops were issued in is the order they run in,
 * whichever host thread issued them; copies to the host wait for the stream, so a host view
 * (hostbuf) is current when to_host returns.
 *
 * Which GPU: --gpu N, or the rank's local rank (its index among the ranks of its host, from MPI,
 * whichever launched it: mpirun, srun, mpiexec) modulo the GPUs visible, so ranks on one host
 * spread over its GPUs and several ranks may share one (each with its own context and stream).
 *
 * The module links cuBLAS and cuDNN dynamically and the CUDA runtime statically; dtrain loads it
 * only for --device cuda or auto, so a dtrain built with CUDA runs on machines without it.
 */
#include "backend_cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int cuda_fail_at(const char *lib, const char *call, const char *what, const char *err, const char *file, int line)
{
    const char *base = strrchr(file, '/');
    int n = (int)strcspn(call, "(");
    return dt_fail("%s: %s%s%.*s (%s:%d): %s", lib, what, *what ? ": " : "", n, call, base ? base + 1 : file, line,
                   err);
}

int cuda_enter(dt_backend *be)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == cuda_of(be)->dev) return 0;
    CU(cudaSetDevice(cuda_of(be)->dev), "selecting the GPU");
    return 0;
}

int cuda_launched(int rc, const char *kernel, const char *fmt, ...)
{
    if (rc == 0) return 0;
    /* cleared, as CU clears it: CUB and the runtime calls some launchers return (cudaMallocAsync, a
     * copy) leave it set, and the next kernel's launch check would report it as its own */
    (void)cudaGetLastError();
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return cuda_fail("CUDA", kernel, what, cudaGetErrorString((cudaError_t)rc));
}

#define ENTER(be)                                                                                                      \
    do {                                                                                                               \
        if (cuda_enter(be) != 0) return -1;                                                                            \
    } while (0)
#define S(be) (cuda_of(be)->stream)

/* ---- memory ------------------------------------------------------------------------------------ */

/* the header before each allocation: its size, for the live/peak count (256 bytes keep alignment) */
#define HDR 256

static void *cu_alloc(dt_backend *be, size_t bytes)
{
    cuda_impl *c = cuda_of(be);
    char *p = NULL;
    if (cuda_enter(be) != 0) return NULL;
    cudaError_t e = cudaMalloc((void **)&p, bytes + HDR);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        dt_fail("out of GPU memory on GPU %d: asked for %.1f MB, %.1f MB free of %.1f MB (dtrain holds %.1f MB); try a "
                "smaller --batch, fewer ranks per GPU or another --gpu",
                c->dev, (double)bytes / 1e6, (double)fr / 1e6, (double)tot / 1e6, (double)c->allocated / 1e6);
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, bytes + HDR, c->stream) != cudaSuccess ||
        cudaMemcpyAsync(p, &bytes, sizeof bytes, cudaMemcpyHostToDevice, c->stream) != cudaSuccess ||
        cudaStreamSynchronize(c->stream) != cudaSuccess) {
        cudaFree(p);
        dt_fail("CUDA: clearing %zu bytes of GPU memory: %s", bytes, cudaGetErrorString(cudaGetLastError()));
        return NULL;
    }
    cuda_count(c, (long long)bytes);
    return p + HDR;
}

void cuda_count(cuda_impl *c, long long bytes)
{
    c->allocated = (size_t)((long long)c->allocated + bytes);
    if (c->allocated > c->peak) c->peak = c->allocated;
}

static void cu_free(dt_backend *be, void *p)
{
    cuda_impl *c = cuda_of(be);
    size_t bytes = 0;
    if (!p || cuda_enter(be) != 0) return;
    char *base = (char *)p - HDR;
    if (cudaMemcpy(&bytes, base, sizeof bytes, cudaMemcpyDeviceToHost) == cudaSuccess) cuda_count(c, -(long long)bytes);
    cudaFree(base);
}

/* Page-locked host memory: copies from and to it run at the bus's rate without a bounce through the
 * driver's own pinned buffer. Allocated once per buffer (batches, gradient staging), never per
 * copy: pinning is slow. */
static void *cu_host_alloc(dt_backend *be, size_t bytes)
{
    void *p = NULL;
    if (cuda_enter(be) != 0) return NULL;
    cudaError_t e = cudaMallocHost(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        dt_fail("CUDA: cudaMallocHost of %.1f MB of page-locked host memory: %s (try a smaller --batch or fewer ranks "
                "per host)",
                (double)bytes / 1e6, cudaGetErrorString(e));
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void cu_host_free(dt_backend *be, void *p)
{
    if (!p || cuda_enter(be) != 0) return;
    cudaFreeHost(p);
}

static int cu_to_device(dt_backend *be, void *dst, const void *src, size_t bytes)
{
    ENTER(be);
    if (!bytes) return 0;
    CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, S(be)), "copy to the GPU");
    CU(cudaStreamSynchronize(S(be)), "copy to the GPU");
    return 0;
}

static int cu_to_host(dt_backend *be, void *dst, const void *src, size_t bytes)
{
    ENTER(be);
    if (!bytes) return 0;
    CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, S(be)), "copy from the GPU");
    CU(cudaStreamSynchronize(S(be)), "copy from the GPU");
    return 0;
}

static int cu_copy(dt_backend *be, void *dst, const void *src, size_t bytes)
{
    ENTER(be);
    if (!bytes || dst == src) return 0;
    CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, S(be)), "copy on the GPU");
    return 0;
}

static int cu_sync(dt_backend *be)
{
    ENTER(be);
    CU(cudaStreamSynchronize(S(be)), "waiting for the GPU");
    return 0;
}

static int cu_memory(dt_backend *be, size_t *free_bytes, size_t *total_bytes)
{
    ENTER(be);
    CU(cudaMemGetInfo(free_bytes, total_bytes), "GPU memory");
    return 0;
}

int cuda_scratch(dt_backend *be, size_t bytes)
{
    cuda_impl *c = cuda_of(be);
    if (bytes <= c->scratch_bytes) return 0;
    CU(cudaStreamSynchronize(c->stream), "scratch");
    c->moved++;
    cudaFree(c->scratch);
    cudaFreeHost(c->host_scratch);
    cuda_count(c, -(long long)c->scratch_bytes);
    c->scratch = c->host_scratch = NULL;
    c->scratch_bytes = 0;
    CU(cudaMalloc(&c->scratch, bytes), "scratch");
    CU(cudaMallocHost(&c->host_scratch, bytes), "pinned scratch"); /* fails: scratch is freed at the next call */
    cuda_count(c, (long long)bytes); /* counted once both are there, as scratch_bytes says */
    c->scratch_bytes = bytes;
    return 0;
}

int cuda_lowp(dt_backend *be, size_t bytes)
{
    cuda_impl *c = cuda_of(be);
    if (bytes <= c->lowp_bytes) return 0;
    CU(cudaStreamSynchronize(c->stream), "16-bit operands");
    c->moved++;
    cudaFree(c->lowp);
    cuda_count(c, -(long long)c->lowp_bytes);
    c->lowp = NULL, c->lowp_bytes = 0;
    bytes += bytes / 4; /* room for a larger batch or layer without another synchronization */
    cudaError_t e = cudaMalloc(&c->lowp, bytes);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        return dt_fail("out of GPU memory on GPU %d for the %s operands: asked for %.1f MB, %.1f MB free of "
                       "%.1f MB; try a smaller --batch",
                       c->dev, CUDA_LOWP_NAME(c), (double)bytes / 1e6, (double)fr / 1e6, (double)tot / 1e6);
    }
    c->lowp_bytes = bytes;
    cuda_count(c, (long long)bytes);
    return 0;
}

/* ---- elementwise ops and the loss: our kernels ---------------------------------------------- */

static int cu_bias_add(dt_backend *be, float *y, const float *b, int rows, int cols)
{
    ENTER(be);
    return cuda_launched(cuk_bias_add(S(be), y, b, rows, cols, 1), "bias add", "%d x %d", rows, cols);
}

static int cu_bias_grad(dt_backend *be, float *db, const float *dy, int rows, int cols, float beta)
{
    ENTER(be);
    return cuda_launched(cuk_bias_grad(S(be), db, dy, rows, cols, beta), "bias gradient", "%d x %d", rows, cols);
}

static int cu_relu_fwd(dt_backend *be, float *y, const float *x, size_t n)
{
    ENTER(be);
    return cuda_launched(cuk_relu_fwd(S(be), y, x, n), "ReLU", "%zu elements", n);
}

static int cu_relu_bwd(dt_backend *be, float *dx, const float *dy, const float *y, size_t n, float beta)
{
    ENTER(be);
    return cuda_launched(cuk_relu_bwd(S(be), dx, dy, y, n, beta), "ReLU backward", "%zu elements", n);
}

static int cu_dropout_fwd(dt_backend *be, float *y, const float *x, int rows, int cols, float p, uint64_t key,
                          int64_t row0)
{
    ENTER(be);
    return cuda_launched(cuk_dropout(S(be), y, x, (size_t)rows * cols, (uint64_t)row0 * (uint64_t)cols, p, key, 0.0f),
                    "dropout", "%d x %d", rows, cols);
}

static int cu_dropout_bwd(dt_backend *be, float *dx, const float *dy, int rows, int cols, float p, uint64_t key,
                          int64_t row0, float beta)
{
    ENTER(be);
    return cuda_launched(cuk_dropout(S(be), dx, dy, (size_t)rows * cols, (uint64_t)row0 * (uint64_t)cols, p, key, beta),
                    "dropout backward", "%d x %d", rows, cols);
}

/* rows losses (double) and hits (int) back in pinned memory, added in row order, in double, as the
 * CPU adds them */
static void add_losses(const void *host, int rows, double *loss_sum, int64_t *n_correct)
{
    const double *hl = host;
    const int *hh = (const int *)(hl + rows);
    double s = 0.0;
    int64_t k = 0;
    for (int r = 0; r < rows; r++) s += hl[r], k += hh[r];
    *loss_sum += s;
    *n_correct += k;
}

/* The kernel leaves each row's loss and hit on the GPU; they come back in one copy and are added
 * here (while a graph records: at its launch). */
static int cu_softmax_xent_fwd(dt_backend *be, float *prob, const float *logits, const int32_t *labels, int rows,
                               int classes, double *loss_sum, int64_t *n_correct)
{
    cuda_impl *c = cuda_of(be);
    ENTER(be);
    if (rows <= 0) return 0;
    size_t need = (size_t)rows * (sizeof(double) + sizeof(int));
    if (cuda_scratch(be, need) != 0) return -1;
    double *loss = c->scratch;
    int *hit = (int *)(loss + rows);
    if (cuda_launched(cuk_softmax_xent_fwd(c->stream, prob, logits, labels, rows, classes, loss, hit), "softmax",
                 "%d rows x %d classes", rows, classes) != 0)
        return -1;
    CU(cudaMemcpyAsync(c->host_scratch, c->scratch, need, cudaMemcpyDeviceToHost, c->stream), "softmax");
    if (c->capturing) { /* the launch adds them up */
        if (c->cap_loss_rows) return dt_fail("CUDA: a graph records one softmax cross-entropy, and this pass has two");
        c->cap_loss_rows = rows;
        return 0;
    }
    CU(cudaStreamSynchronize(c->stream), "softmax");
    add_losses(c->host_scratch, rows, loss_sum, n_correct);
    return 0;
}

static int cu_softmax_xent_bwd(dt_backend *be, float *dx, const float *prob, const int32_t *labels, int rows,
                               int classes, float scale, float beta)
{
    ENTER(be);
    return cuda_launched(cuk_softmax_xent_bwd(S(be), dx, prob, labels, rows, classes, scale, beta),
                    "softmax cross-entropy backward", "%d rows x %d classes", rows, classes);
}

static int cu_sgd_step(dt_backend *be, float *w, const float *g, float *v, size_t n, float lr, float m, float wd,
                       int nesterov)
{
    ENTER(be);
    return cuda_launched(cuk_sgd(S(be), w, g, v, n, lr, m, wd, nesterov), "SGD step", "%zu parameters", n);
}

static int cu_scale(dt_backend *be, float *x, float a, size_t n)
{
    ENTER(be);
    return cuda_launched(cuk_scale(S(be), x, a, n), "scale", "%zu elements", n);
}

static int cu_bn_running(dt_backend *be, float *rmean, float *rvar, const float *mean, const float *var, size_t n,
                         float m, double unbias)
{
    ENTER(be);
    return cuda_launched(cuk_bn_running(S(be), rmean, rvar, mean, var, n, m, unbias), "batch norm's running statistics",
                         "%zu channels", n);
}

static int cu_grad_unscale(dt_backend *be, float *g, size_t n, float a, int32_t *flag)
{
    ENTER(be);
    return cuda_launched(cuk_unscale(S(be), g, a, n, flag), "loss unscaling", "%zu gradient values", n);
}

static int cu_add(dt_backend *be, float *y, const float *x, size_t n, float beta)
{
    ENTER(be);
    if (beta == 0.0f) return y == x ? 0 : cu_copy(be, y, x, n * sizeof(float));
    return cuda_launched(cuk_add(S(be), y, x, n, beta), "add", "%zu elements", n);
}

static int cu_add2(dt_backend *be, float *y, const float *a, const float *b, size_t n, int relu)
{
    ENTER(be);
    return cuda_launched(cuk_add2(S(be), y, a, b, n, relu), relu ? "add and relu" : "add", "%zu elements", n);
}

static const char *wire_name(int kind)
{
    return kind == DT_WIRE_T16 ? "t16" : kind == DT_WIRE_FP16 ? "fp16" : kind == DT_WIRE_Q8 ? "q8" : "unknown codec";
}

static int cu_wire_encode(dt_backend *be, int kind, int block, const float *x, size_t n, void *out)
{
    ENTER(be);
    return cuda_launched(cuk_wire_encode(S(be), kind, block, x, n, out), "codec encode", "%s, %zu values, block %d",
                         wire_name(kind), n, block);
}

static int cu_wire_decode(dt_backend *be, int kind, int block, const void *in, size_t n, float *x, int add)
{
    ENTER(be);
    return cuda_launched(cuk_wire_decode(S(be), kind, block, in, n, x, add), add ? "codec decode-add" : "codec decode",
                         "%s, %zu values, block %d", wire_name(kind), n, block);
}

static int cu_residual_add(dt_backend *be, float *r, float *u, const float *g, const float *w, size_t n, float m,
                           float wd)
{
    ENTER(be);
    return cuda_launched(cuk_residual_add(S(be), r, u, g, w, n, m, wd), "residual", "%zu values%s", n,
                         u ? ", momentum correction" : "");
}

static int cu_topk(dt_backend *be, const float *x, size_t n, size_t k, void *pairs)
{
    ENTER(be);
    return cuda_launched(cuk_topk(S(be), x, n, k, pairs), "top-k selection", "%zu of %zu values", k, n);
}

/* the sample on the GPU, then to the host through the pinned scratch */
static int cu_topk_sample(dt_backend *be, const float *x, size_t n, size_t m, float *out)
{
    ENTER(be);
    cuda_impl *c = cuda_of(be);
    if (m == 0) return 0;
    if (cuda_scratch(be, m * sizeof(float)) != 0) return -1;
    if (cuda_launched(cuk_topk_sample(c->stream, x, n, m, c->scratch), "top-k's sample", "%zu of %zu values", m, n) !=
        0)
        return -1;
    CU(cudaMemcpyAsync(c->host_scratch, c->scratch, m * sizeof(float), cudaMemcpyDeviceToHost, c->stream),
       "top-k's sample");
    CU(cudaStreamSynchronize(c->stream), "top-k's sample");
    memcpy(out, c->host_scratch, m * sizeof(float));
    return 0;
}

static int cu_topk_above(dt_backend *be, const float *x, size_t n, size_t k, float thr, void *pairs)
{
    ENTER(be);
    return cuda_launched(cuk_topk_above(S(be), x, n, k, thr, pairs), "top-k above a sampled threshold",
                         "%zu of %zu values", k, n);
}

static int cu_pairs_apply(dt_backend *be, float *x, const void *pairs, size_t k, int how, float a)
{
    ENTER(be);
    return cuda_launched(cuk_pairs_apply(S(be), x, pairs, k, how, a), "sparse update", "%zu pairs", k);
}

static int cu_pairs_merge(dt_backend *be, const void *a, size_t na, const void *b, size_t nb, size_t k, void *out,
                          size_t *n_out)
{
    ENTER(be);
    return cuda_launched(cuk_pairs_merge(S(be), a, na, b, nb, k, out, n_out), "gTop-k merge",
                         "%zu and %zu pairs to %zu", na, nb, k);
}

static int cu_pairs_zero_common(dt_backend *be, float *x, const void *a, size_t na, const void *b, size_t nb)
{
    ENTER(be);
    return cuda_launched(cuk_pairs_zero_common(S(be), x, a, na, b, nb), "residual reset", "%zu of %zu pairs", na, nb);
}

/* TernGrad: every range's sums in one pass of launches, then one copy of the results to the host */
static int cu_tern_stats(dt_backend *be, const float *x, const size_t *off, const size_t *n, int count, double *sum,
                         double *sq, float *mx)
{
    ENTER(be);
    cuda_impl *c = cuda_of(be);
    size_t lanes = 0, head = (size_t)count * (2 * sizeof(double) + sizeof(unsigned int));
    for (int k = 0; k < count; k++) lanes = DT_MAX(lanes, cuk_tern_lanes_floats(n[k]));
    head = (head + 63) / 64 * 64;
    if (count <= 0) return 0;
    if (cuda_scratch(be, head + 2 * lanes * sizeof(float)) != 0) return -1;
    double *out = c->scratch;
    unsigned int *mxb = (unsigned int *)(out + 2 * (size_t)count);
    float *lane = (float *)((char *)c->scratch + head);
    CU(cudaMemsetAsync(mxb, 0, (size_t)count * sizeof *mxb, c->stream), "TernGrad's sums");
    for (int k = 0; k < count; k++)
        if (cuda_launched(cuk_tern_stats(c->stream, x + off[k], n[k], lane, out + 2 * k, mxb + k), "TernGrad's sums",
                          "range %d of %d: %zu values", k, count, n[k]) != 0)
            return -1;
    CU(cudaMemcpyAsync(c->host_scratch, c->scratch, head, cudaMemcpyDeviceToHost, c->stream), "TernGrad's sums");
    CU(cudaStreamSynchronize(c->stream), "TernGrad's sums");
    const double *h = c->host_scratch;
    const unsigned int *hm = (const unsigned int *)(h + 2 * (size_t)count);
    for (int k = 0; k < count; k++) {
        sum[k] = h[2 * k], sq[k] = h[2 * k + 1];
        memcpy(&mx[k], &hm[k], sizeof mx[k]);
    }
    return 0;
}

static int cu_tern_encode(dt_backend *be, const float *x, size_t n, float clip, float s, uint64_t key, int8_t *t)
{
    ENTER(be);
    float scale = s > 0.0f ? 65536.0f / s : 0.0f; /* as tern_ternarize: computed on the host */
    return cuda_launched(cuk_tern_encode(S(be), x, n, clip, scale, key, t), "TernGrad's ternarizing", "%zu values", n);
}

static int cu_tern_pack(dt_backend *be, const int8_t *t, size_t n, uint8_t *codes)
{
    ENTER(be);
    return cuda_launched(cuk_tern_pack(S(be), t, n, codes), "TernGrad's packing", "%zu values", n);
}

static int cu_tern_sum(dt_backend *be, const uint8_t *codes, int p, size_t code_bytes, size_t n, int8_t *acc)
{
    ENTER(be);
    return cuda_launched(cuk_tern_sum(S(be), codes, p, code_bytes, n, acc), "TernGrad's sum of codes",
                         "%zu values of %d ranks", n, p);
}

static int cu_tern_decode(dt_backend *be, const int8_t *acc, size_t n, float s, float *x)
{
    ENTER(be);
    return cuda_launched(cuk_tern_decode(S(be), acc, n, s, x), "TernGrad's decoding", "%zu values", n);
}

static int cu_csc_pack(dt_backend *be, float *g, const float *h, const float *w, float wd, size_t lo, size_t hi,
                       size_t chunk, const int32_t *slot, float scale, float limit, float *pack)
{
    ENTER(be);
    return cuda_launched(cuk_csc_pack(S(be), g, h, w, wd, lo, hi, chunk, slot, scale, limit, pack),
                         "csc's correction and packing", "values %zu to %zu, chunks of %zu", lo, hi, chunk);
}

static int cu_csc_fold(dt_backend *be, float *g, float *h, float *hu, float *w, const float *pack, const int32_t *slot,
                       size_t n, size_t chunk, int p, float m, float lr, float *norms)
{
    ENTER(be);
    return cuda_launched(cuk_csc_fold(S(be), g, h, hu, w, pack, slot, n, chunk, p, m, lr, norms), "csc's fold",
                         "%zu values, chunks of %zu%s", n, chunk, hu ? ", momentum correction" : "");
}

/* ---- graphs (--gpu-graph) ---------------------------------------------------------------------- */

typedef struct {
    cudaGraphExec_t exec;
    unsigned long moved; /* the backend's count when it was recorded */
    int loss_rows;
} cu_graph;

static int cu_graph_begin(dt_backend *be)
{
    cuda_impl *c = cuda_of(be);
    ENTER(be);
    if (c->capturing) return dt_fail("internal: CUDA: a graph is being recorded already");
    /* thread-local: another thread's allocations (a communication thread's) do not end it */
    CU(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "recording a graph");
    c->capturing = 1;
    c->cap_loss_rows = 0;
    return 0;
}

static int cu_graph_end(dt_backend *be, void **graph)
{
    cuda_impl *c = cuda_of(be);
    cudaGraph_t g = NULL;
    unsigned long moved = c->moved;
    *graph = NULL;
    c->capturing = 0; /* the recording ends in any case, also when the device cannot be entered */
    int entered = cuda_enter(be);
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (entered != 0) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        return -1;
    }
    if (e != cudaSuccess || !g) {
        cudaGetLastError();
        return dt_fail("CUDA: cudaStreamEndCapture: %s (an op of the pass cannot be recorded)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "no graph");
    }
    cu_graph *r = calloc(1, sizeof *r);
    if (!r) {
        cudaGraphDestroy(g);
        return dt_fail("out of memory");
    }
    e = cudaGraphInstantiate(&r->exec, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        free(r);
        return dt_fail("CUDA: cudaGraphInstantiate: %s", cudaGetErrorString(e));
    }
    r->moved = moved;
    r->loss_rows = c->cap_loss_rows;
    *graph = r;
    return 0;
}

static int cu_graph_launch(dt_backend *be, void *graph, double *loss_sum, int64_t *n_correct)
{
    cuda_impl *c = cuda_of(be);
    cu_graph *r = graph;
    ENTER(be);
    if (r->moved != c->moved) return 1; /* a buffer it names has moved */
    /* refused up front (the graph's memory nodes, say: cuBLAS may record cudaMallocAsync): nothing of
     * it ran, so the pass can run op by op (2); an error of earlier work is sticky and fails that too */
    cudaError_t e = cudaGraphLaunch(r->exec, c->stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        cuda_fail("CUDA", "cudaGraphLaunch(r->exec, c->stream)", "launching a recorded pass", cudaGetErrorString(e));
        return 2;
    }
    if (!r->loss_rows) return 0;
    CU(cudaStreamSynchronize(c->stream), "softmax");
    add_losses(c->host_scratch, r->loss_rows, loss_sum, n_correct);
    return 0;
}

static void cu_graph_free(dt_backend *be, void *graph)
{
    cu_graph *r = graph;
    if (!r || cuda_enter(be) != 0) return;
    cudaGraphExecDestroy(r->exec);
    free(r);
}

/* A queue for a communication thread: a stream of its own on the same GPU, with the ops a ring
 * needs (copies, add, scale, the codecs); it has no cuBLAS or cuDNN handle and allocates nothing. */
static int cu_queue_create(dt_backend *be, dt_backend **out)
{
    ENTER(be);
    dt_backend *q = calloc(1, sizeof *q);
    cuda_impl *c = calloc(1, sizeof *c);
    if (!q || !c) {
        free(q), free(c);
        return dt_fail("out of memory");
    }
    c->dev = cuda_of(be)->dev;
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(q), free(c);
        return cuda_fail("CUDA", "cudaStreamCreateWithFlags", "a stream for communication", cudaGetErrorString(e));
    }
    q->name = be->name;
    q->n_threads = be->n_threads;
    q->impl = c;
    q->to_device = cu_to_device;
    q->to_host = cu_to_host;
    q->copy = cu_copy;
    q->sync = cu_sync;
    q->add = cu_add;
    q->scale = cu_scale;
    q->wire_encode = cu_wire_encode;
    q->wire_decode = cu_wire_decode;
#if DT_NCCL_BUILT
    q->net_sendrecv = cuda_net_sendrecv;
    q->net_allreduce = cuda_net_allreduce;
    q->net_allreduce_i8 = cuda_net_allreduce_i8;
    q->net_allgather = cuda_net_allgather;
    q->net_wait = cuda_net_wait;
#endif
    *out = q;
    return 0;
}

static void cu_queue_free(dt_backend *be, dt_backend *q)
{
    (void)be;
    cuda_impl *c = q->impl;
    cudaSetDevice(c->dev);
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
    free(c);
    free(q);
}

/* the GPU's UUID, as nvidia-smi writes it: the same for every rank on it, whatever its index there */
static int cu_device_id(dt_backend *be, char *buf, size_t n)
{
    struct cudaDeviceProp p;
    CU(cudaGetDeviceProperties(&p, cuda_of(be)->dev), "the GPU's identity");
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
             u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return 0;
}

/* ---- the backend's life -------------------------------------------------------------------------- */

static void cu_destroy(dt_backend *be)
{
    if (!be) return;
    cuda_impl *c = be->impl;
    if (c) {
        cudaSetDevice(c->dev);
        if (c->stream) cudaStreamSynchronize(c->stream);
        if (c->blas) cublasDestroy(c->blas);
        if (c->dnn) cudnnDestroy(c->dnn);
        cudaFree(c->workspace);
        cudaFree(c->lowp);
        cudaFree(c->scratch);
        cudaFreeHost(c->host_scratch);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(be);
}

/* the GPU this rank takes: --gpu, else its local rank modulo the GPUs */
static int choose_gpu(int asked, int local_rank, int count, int *dev)
{
    if (asked >= 0) {
        if (asked >= count) {
            if (count == 1) return dt_fail("--gpu %d: this machine has one GPU, GPU 0", asked);
            return dt_fail("--gpu %d: this machine has %d GPUs, 0 to %d", asked, count, count - 1);
        }
        *dev = asked;
        return 0;
    }
    *dev = (local_rank > 0 ? local_rank : 0) % count;
    return 0;
}

static int n_gpus(char *why, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (why)
            snprintf(why, n, "%s (%s)",
                     e == cudaErrorInsufficientDriver ? "the NVIDIA driver is missing or older than this CUDA runtime"
                     : e == cudaErrorNoDevice         ? "no GPU"
                                                      : "the CUDA runtime cannot start",
                     cudaGetErrorString(e));
        return 0;
    }
    if (count == 0 && why) snprintf(why, n, "no GPU");
    return count;
}

static int g_dev = -1; /* the GPU of the backend made last, for describe() */

static int cuda_create(dt_backend **out, const dt_backend_opts *o)
{
    char why[256];
    int count = n_gpus(why, sizeof why), dev = 0;
    if (count == 0) return dt_fail("%s", why);
    if (choose_gpu(o->device, o->local_rank, count, &dev) != 0) return -1;
    dt_backend *be = calloc(1, sizeof *be);
    cuda_impl *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be), free(c);
        return dt_fail("out of memory");
    }
    be->impl = c;
    be->name = "cuda";
    be->n_threads = 1;
    be->host_memory = 0;
    c->dev = dev;
    c->tf32 = o->tf32;
    c->precision = o->precision;
    c->exact = o->exact;
    c->workspace_limit = (size_t)(o->workspace_mb > 0 ? o->workspace_mb : 1024) << 20;
    c->verbose = getenv("DTRAIN_CUDA_VERBOSE") != NULL;
    int rc = -1;
    cudaError_t e;
    if ((e = cudaSetDevice(dev)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        dt_fail("CUDA: cannot start on GPU %d: %s", dev, cudaGetErrorString(e));
        goto out;
    }
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        dt_fail("cuBLAS: cublasCreate on GPU %d: %s", dev, cublasGetStatusString(bs));
        goto out;
    }
    cudnnStatus_t ds = cudnnCreate(&c->dnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        dt_fail("cuDNN: cudnnCreate on GPU %d: %s", dev, cudnnGetErrorString(ds));
        goto out;
    }
    if (c->precision == DT_PRECISION_BF16) { /* bf16 tensor operations: Ampere (8.0) and newer; fp16's: 7.0 */
        struct cudaDeviceProp prop;
        if ((e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess) {
            dt_fail("CUDA: cudaGetDeviceProperties of GPU %d: %s", dev, cudaGetErrorString(e));
            goto out;
        }
        if (prop.major < 8) {
            dt_fail("--precision bf16: GPU %d (%s, compute capability %d.%d) has no bf16 tensor operations, which "
                    "need 8.0 or newer (A100, H100); use --precision fp32",
                    dev, prop.name, prop.major, prop.minor);
            goto out;
        }
    }
    if (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
        cudnnSetStream(c->dnn, c->stream) != CUDNN_STATUS_SUCCESS) {
        dt_fail("cuBLAS, cuDNN: binding their handles to the stream of GPU %d failed", dev);
        goto out;
    }
    /* the sparse modes' and q8's scratch comes from the stream-ordered pool (cudaMallocAsync) every
     * iteration: the pool keeps it, instead of giving it back to the driver at each synchronize
     * (its default) and mapping it anew (1.4 GB for alexnet's top-k) */
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    if (cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
        cudaGetLastError(); /* only slower without it */
    /* fp32 unless --tf32: results within fp32 tolerances of the CPU's; under bf16 or fp16 every GEMM takes
     * 16-bit operands, whose products are exact in fp32, and the default math sums them on tensor cores */
    if (cublasSetMathMode(c->blas, c->tf32        ? CUBLAS_TF32_TENSOR_OP_MATH
                                   : c->precision ? CUBLAS_DEFAULT_MATH
                                                  : CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) {
        dt_fail("cuBLAS: cublasSetMathMode (%s) failed on GPU %d",
                c->tf32 ? "TF32" : c->precision ? "default" : "pedantic", dev);
        goto out;
    }
    be->destroy = cu_destroy;
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->host_alloc = cu_host_alloc;
    be->host_free = cu_host_free;
    be->to_device = cu_to_device;
    be->to_host = cu_to_host;
    be->copy = cu_copy;
    be->sync = cu_sync;
    be->memory = cu_memory;
    be->bias_add = cu_bias_add;
    be->bias_grad = cu_bias_grad;
    be->relu_fwd = cu_relu_fwd;
    be->relu_bwd = cu_relu_bwd;
    be->dropout_fwd = cu_dropout_fwd;
    be->dropout_bwd = cu_dropout_bwd;
    be->softmax_xent_fwd = cu_softmax_xent_fwd;
    be->softmax_xent_bwd = cu_softmax_xent_bwd;
    be->sgd_step = cu_sgd_step;
    be->scale = cu_scale;
    be->grad_unscale = cu_grad_unscale;
    be->bn_running = cu_bn_running;
    be->add = cu_add;
    be->add2 = cu_add2;
    be->wire_encode = cu_wire_encode;
    be->wire_decode = cu_wire_decode;
    be->residual_add = cu_residual_add;
    be->topk = cu_topk;
    be->pairs_apply = cu_pairs_apply;
    be->pairs_merge = cu_pairs_merge;
    be->topk_sample = cu_topk_sample;
    be->topk_above = cu_topk_above;
    be->pairs_zero_common = cu_pairs_zero_common;
    be->tern_stats = cu_tern_stats;
    be->tern_encode = cu_tern_encode;
    be->tern_pack = cu_tern_pack;
    be->tern_decode = cu_tern_decode;
    be->tern_sum = cu_tern_sum;
    be->csc_pack = cu_csc_pack;
    be->csc_fold = cu_csc_fold;
    be->graph_begin = cu_graph_begin;
    be->graph_end = cu_graph_end;
    be->graph_launch = cu_graph_launch;
    be->graph_free = cu_graph_free;
    be->queue_create = cu_queue_create;
    be->queue_free = cu_queue_free;
    be->device_id = cu_device_id;
#if DT_NCCL_BUILT
    be->net_available = cuda_net_available;
    be->net_id = cuda_net_id;
    be->net_create = cuda_net_create;
    be->net_free = cuda_net_free;
    be->net_sendrecv = cuda_net_sendrecv;
    be->net_allreduce = cuda_net_allreduce;
    be->net_allreduce_i8 = cuda_net_allreduce_i8;
    be->net_allgather = cuda_net_allgather;
    be->net_wait = cuda_net_wait;
#endif
    cuda_blas_init(be);
    cuda_dnn_init(be);
    g_dev = dev;
    *out = be;
    rc = 0;
out:
    if (rc != 0) cu_destroy(be);
    return rc;
}

/* ---- the module's descriptor ------------------------------------------------------------------- */

static int cuda_available(char *why, size_t n) { return n_gpus(why, n) > 0; }

static void version3(int v, int *a, int *b) { *a = v / 1000, *b = v % 1000 / 10; }

static const char *cuda_describe(void)
{
    static char buf[1024];
    int drv = 0, rt = 0, da, db, ra, rb;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    version3(drv, &da, &db);
    version3(rt, &ra, &rb);
    size_t dnn = cudnnGetVersion();
    int blas = 0;
    cublasGetProperty(MAJOR_VERSION, &blas);
    int bmin = 0, bpatch = 0;
    cublasGetProperty(MINOR_VERSION, &bmin);
    cublasGetProperty(PATCH_LEVEL, &bpatch);
    char nccl[300] = "built without NCCL";
#if DT_NCCL_BUILT
    char why[256];
    if (cuda_net_available(NULL, why, sizeof why)) snprintf(nccl, sizeof nccl, "%s", why);
    else snprintf(nccl, sizeof nccl, "no NCCL: %s", why);
#endif
    int off = snprintf(buf, sizeof buf, "CUDA runtime %d.%d, driver %d.%d, cuBLAS %d.%d.%d, cuDNN %zu.%zu.%zu, %s", ra,
                       rb, da, db, blas, bmin, bpatch, dnn / 10000, dnn % 10000 / 100, dnn % 100, nccl);
    if (g_dev >= 0) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, g_dev) == cudaSuccess)
            snprintf(buf + off, sizeof buf - (size_t)off, "; GPU %d: %s (sm_%d%d, %.0f GiB)", g_dev, p.name, p.major,
                     p.minor, (double)p.totalGlobalMem / (1 << 30));
    }
    return buf;
}

static void cuda_list_devices(FILE *f)
{
    int count = n_gpus(NULL, 0);
    for (int i = 0; i < count; i++) {
        struct cudaDeviceProp p;
        size_t fr = 0, tot = 0;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        if (cudaSetDevice(i) == cudaSuccess) cudaMemGetInfo(&fr, &tot);
        fprintf(f, "  GPU %d: %s, compute capability %d.%d, %.1f GiB (%.1f GiB free), %d SMs\n", i, p.name, p.major,
                p.minor, (double)p.totalGlobalMem / (1 << 30), (double)fr / (1 << 30), p.multiProcessorCount);
    }
    fprintf(f,
            "  run on a GPU (an H200, 2026-11-26): every op against the CPU, training, every mode with 2 ranks on one\n"
            "  GPU, checkpoints across devices; only compiled: the codecs (t16, fp16, q8), the D-Sync and Pipe-SGD\n"
            "  rings, Top-k's residuals and selection (exact and sampled), TernGrad's coding and CSC's chunks on\n"
            "  the GPU, batches copied on a stream of their own, the NCCL transport (every mode),\n"
            "  --precision bf16 and fp16 (cuBLAS and cuDNN on 16-bit operands, fp16's loss scaling), batch norm\n"
            "  and add fused with the relu after them, batch norm of more than 65535 channels;\n"
            "  README.md, \"On a GPU\"\n");
}

static size_t cuda_peak(const dt_backend *be)
{
    const cuda_impl *c = cuda_of((dt_backend *)be);
    return c->peak; /* all of dtrain's device memory but the stream-ordered pool's passing scratch */
}

static const dt_backend_desc cuda_desc = {
    .name = "cuda",
    .help = "an NVIDIA GPU: cuBLAS, cuDNN and dtrain's kernels",
    .available = cuda_available,
    .create = cuda_create,
    .describe = cuda_describe,
    .list_devices = cuda_list_devices,
    .peak_memory = cuda_peak,
    /* keep in step with README.md, "What has run on a GPU" */
    .verified = "run on a GPU (one H200, 2026-11-26): every op against the CPU, training equal to the CPU's, every "
                "mode with 2 ranks on one GPU, checkpoints between devices; only compiled so far: --gpu-exact's "
                "bit-for-bit repeat, 4 ranks on one GPU, page-locked staging, --precision bf16 and fp16 (GEMMs "
                "and convolutions on 16-bit operands, fp16's loss scaling), the codecs, the D-Sync and Pipe-SGD "
                "rings, Top-k's residuals and selection (exact and sampled), TernGrad's coding and CSC's chunks on "
                "the GPU, batches "
                "copied on a stream of their own, the NCCL "
                "transport (--transport nccl; PS-Sync's pushes summed, Top-k's pairs summed and gTop-k's merged on "
                "the GPU included), forward and backward recorded as a CUDA graph (--gpu-graph), batch norm and "
                "add fused with the relu after them (add2), batch norm of more than 65535 channels, subnormals "
                "flushed in every kernel (-ftz=true)",
};

const dt_backend_desc *dtrain_backend_module(int abi);
const dt_backend_desc *dtrain_backend_module(int abi) { return abi == DT_BACKEND_ABI ? &cuda_desc : NULL; }
