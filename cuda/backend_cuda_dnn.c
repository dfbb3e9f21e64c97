/* backend_cuda_dnn — the CNN layers on the GPU, the twin of backend_cpu_dnnl.c.
 *
 * Convolution runs on cuDNN: a plan keeps its descriptors, and per batch size (rows) the
 * algorithms cuDNN's Find measured fastest among those that are deterministic and fit the
 * workspace limit (--gpu-workspace), found once and cached; DTRAIN_CUDA_VERBOSE=1 prints each
 * choice. Without --tf32 the convolutions are restricted to FMA math (no TensorFloat-32); with
 * --gpu-exact also to the GEMM-like algorithms (PICK), so they agree with the CPU to 1e-6.
 * Under --precision bf16 the descriptors of x, w and y are bfloat16 (cuDNN's bf16 configuration:
 * products summed in fp32 on tensor cores, the result rounded to bf16): each op rounds its fp32
 * inputs into the backend's bf16 memory (ew_bf16, the CPU's rounding) and widens the bf16 result
 * into its fp32 output, so activations and gradients between layers stay fp32 as on the CPU. The CPU
 * keeps its convolutions' results in fp32; here they are rounded to bf16 once, as under PyTorch's
 * autocast. --precision fp16 is the same in IEEE half (CUDNN_DATA_HALF, ew_half): a value beyond
 * 65504 becomes infinite, and the train loop's loss scaling skips that step.
 *
 * Pooling, LRN and the shortcut run on our kernels (backend_cuda_kernels.cu), batch norm on
 * backend_cuda_bn.cu: cuDNN's pooling takes symmetric padding only, where Caffe's ceil-mode
 * pooling pads at the end; its LRN backward wants the forward output, which the backend's
 * contract does not pass back; its batch norm sums in float (see backend_cuda_bn.cu). Activations
 * are plain NCHW: there is no blocked layout on the GPU.
 */
#include "backend_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef enum { PLAN_CONV, PLAN_POOL, PLAN_BN, PLAN_LRN } plan_kind;

#define MAX_ALGOS 16

enum { ALGO_FWD = 1, ALGO_BWD = 2 };
typedef struct conv_algos {
    int rows, dirs; /* the batch size, and which directions' algorithms are measured for it */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    /* the math type each was measured with: set before each call, or cuDNN may run the algorithm
     * another way (slower, or needing another workspace) */
    cudnnMathType_t m_fwd, m_bwd_data, m_bwd_filter;
} conv_algos;

typedef struct plan {
    plan_kind kind;
    union {
        dt_conv_cfg conv;
        dt_pool_cfg pool;
        dt_bn_cfg bn;
        dt_lrn_cfg lrn;
    } cfg;
    /* convolution */
    cudnnTensorDescriptor_t x, y, bias;
    cudnnTensorDescriptor_t y32; /* y in fp32 (= y's type but under bf16/fp16): the bias's add and gradient */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnMathType_t math; /* the math cuDNN measures algorithms under (each runs under its own) */
    int desc_rows;
    conv_algos algos[MAX_ALGOS];
    int n_algos;
    /* max pooling: the argmax of each output of the last training forward */
    int *argmax;
    size_t argmax_n;
    /* batch norm: per-channel coefficients */
    double *tmp;
} plan;

static const float one = 1.0f, zero = 0.0f;

static plan *plan_new(plan_kind k, const void *cfg, size_t bytes)
{
    plan *p = calloc(1, sizeof *p);
    if (!p) {
        dt_fail("out of memory");
        return NULL;
    }
    p->kind = k;
    memcpy(&p->cfg, cfg, bytes);
    return p;
}

static void cu_plan_free(dt_backend *be, void *pv)
{
    plan *p = pv;
    if (!p) return;
    cuda_enter(be);
    if (p->x) cudnnDestroyTensorDescriptor(p->x);
    if (p->y) cudnnDestroyTensorDescriptor(p->y);
    if (p->y32) cudnnDestroyTensorDescriptor(p->y32);
    if (p->bias) cudnnDestroyTensorDescriptor(p->bias);
    if (p->w) cudnnDestroyFilterDescriptor(p->w);
    if (p->conv) cudnnDestroyConvolutionDescriptor(p->conv);
    cudaFree(p->argmax);
    cudaFree(p->tmp);
    cuda_count(cuda_of(be), -(long long)(p->argmax_n * sizeof(int)));
    if (p->tmp) cuda_count(cuda_of(be), -(long long)(sizeof(double) * CUDA_BN_TMP(p->cfg.bn.c)));
    free(p);
}

/* ---- convolution ------------------------------------------------------------------------------ */

/* what x, w and y of a convolution are stored in */
static cudnnDataType_t data_type(const cuda_impl *cu) { return cu->precision ? CUDNN_LOWP_TYPE(cu) : CUDNN_DATA_FLOAT; }

static void conv_shape(const dt_conv_cfg *c, char *what, size_t n)
{
    snprintf(what, n, "convolution %dx%dx%d -> %dx%dx%d, kernel %dx%d, stride %dx%d, padding %d/%d/%d/%d, groups %d",
             c->c, c->h, c->w, c->o, c->oh, c->ow, c->kh, c->kw, c->sh, c->sw, c->pt, c->pb, c->pl, c->pr, c->groups);
}

static void *cu_conv_plan(dt_backend *be, const dt_conv_cfg *c)
{
    char what[256];
    conv_shape(c, what, sizeof what);
    if (c->pt != c->pb || c->pl != c->pr) {
        /* cuDNN pads symmetrically; extra padding at the end that no window reaches is harmless */
        int oh = (c->h + 2 * c->pt - c->kh) / c->sh + 1, ow = (c->w + 2 * c->pl - c->kw) / c->sw + 1;
        if (oh != c->oh || ow != c->ow) {
            dt_fail("%s: cuDNN takes symmetric padding only", what);
            return NULL;
        }
    }
    plan *p = plan_new(PLAN_CONV, c, sizeof *c);
    if (!p) return NULL;
    cuda_impl *cu = cuda_of(be);
    int g = c->groups > 0 ? c->groups : 1;
    cudnnStatus_t s;
    cudnnMathType_t math = cu->precision ? CUDNN_TENSOR_OP_MATH : cu->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    if (cuda_enter(be) != 0) goto fail;
    if ((s = cudnnCreateTensorDescriptor(&p->x)) || (s = cudnnCreateTensorDescriptor(&p->y)) ||
        (s = cudnnCreateTensorDescriptor(&p->y32)) || (s = cudnnCreateTensorDescriptor(&p->bias)) ||
        (s = cudnnCreateFilterDescriptor(&p->w)) || (s = cudnnCreateConvolutionDescriptor(&p->conv)) ||
        (s = cudnnSetFilter4dDescriptor(p->w, data_type(cu), CUDNN_TENSOR_NCHW, c->o, c->c / g, c->kh, c->kw)) ||
        (s = cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, c->o, 1, 1)) ||
        (s = cudnnSetConvolution2dDescriptor(p->conv, c->pt, c->pl, c->sh, c->sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_FLOAT)) ||
        (s = cudnnSetConvolutionGroupCount(p->conv, g)) ||
        (s = cudnnSetConvolutionMathType(p->conv, p->math = math))) {
        cuda_fail("cuDNN", "describing the layer", what, cudnnGetErrorString(s));
        goto fail;
    }
    return p;
fail:
    cu_plan_free(be, p);
    return NULL;
}

/* Makes the workspace at least bytes (all queued work done first: it may be in use). */
static int workspace(dt_backend *be, size_t bytes)
{
    cuda_impl *c = cuda_of(be);
    if (bytes <= c->workspace_bytes) return 0;
    CU(cudaStreamSynchronize(c->stream), "convolution workspace");
    c->moved++;
    cudaFree(c->workspace);
    cuda_count(c, -(long long)c->workspace_bytes);
    c->workspace = NULL, c->workspace_bytes = 0;
    cudaError_t e = cudaMalloc(&c->workspace, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return dt_fail("out of GPU memory for a convolution workspace of %.1f MB (--gpu-workspace %zu)",
                       (double)bytes / 1e6, c->workspace_limit >> 20);
    }
    c->workspace_bytes = bytes;
    cuda_count(c, (long long)bytes);
    return 0;
}

/* Picks, of cuDNN's measured results (fastest first, within the workspace limit), the fastest,
 * or a deterministic one within 10% of it (so reruns give the same numbers where that costs
 * little). With --gpu-exact only deterministic GEMM-like algorithms, so runs repeat bit for bit
 * and agree with the CPU: cuDNN's FFT and Winograd convolutions are 1e-5 to 1e-4 off (relative),
 * enough to move lenet's loss by 7e-4 in 20 steps against the CPU (measured on an H200), where
 * with the GEMM-like ones lenet's 20 losses are the CPU's to all printed digits. */
#define PICK(perf, n, limit, allowed, out, math, bytes)                                                                \
    do {                                                                                                               \
        int best_ = -1;                                                                                                \
        for (int i_ = 0; i_ < (n); i_++) {                                                                             \
            if ((perf)[i_].status != CUDNN_STATUS_SUCCESS || (perf)[i_].memory > (limit)) continue;                    \
            if (cu->exact && (!allowed((perf)[i_].algo) || (perf)[i_].determinism != CUDNN_DETERMINISTIC)) continue;   \
            if (best_ < 0) best_ = i_;                                                                                 \
            if ((perf)[best_].determinism == CUDNN_DETERMINISTIC) break;                                               \
            if ((perf)[i_].determinism == CUDNN_DETERMINISTIC && (perf)[i_].time <= 1.1f * (perf)[best_].time) {       \
                best_ = i_;                                                                                            \
                break;                                                                                                 \
            }                                                                                                          \
        }                                                                                                              \
        if (best_ < 0)                                                                                                 \
            return dt_fail("%s: cuDNN has no%s algorithm within --gpu-workspace %zu MB", what,                         \
                           cu->exact ? " deterministic GEMM-like (--gpu-exact)" : "", (limit) >> 20);                  \
        (out) = (perf)[best_].algo;                                                                                    \
        /* fp32 without --tf32 stays FMA whatever the result says: no TF32 by way of a math type */                    \
        (math) = cu->precision || cu->tf32 ? (perf)[best_].mathType : CUDNN_FMA_MATH;                                  \
        (bytes) = (perf)[best_].memory;                                                                                \
    } while (0)

static int exact_fwd(cudnnConvolutionFwdAlgo_t a)
{
    return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}

static int exact_bwd_data(cudnnConvolutionBwdDataAlgo_t a)
{
    return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}

static int exact_bwd_filter(cudnnConvolutionBwdFilterAlgo_t a)
{
    return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

/* Measures cuDNN's algorithms of one direction (forward, or backward's two) for one batch size and
 * keeps the choice (and grows the workspace). A direction is measured on its first use: a batch size
 * that only evaluates (the test set's last batch) measures no backward, nor grows the workspace for it. */
static int find_algos(dt_backend *be, plan *p, int rows, int bwd, conv_algos *a, const char *what)
{
    cuda_impl *cu = cuda_of(be);
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nf = 0, nd = 0, nw = 0;
    size_t bf = 0, bd = 0, bw = 0, limit = cu->workspace_limit;
    CU(cudaStreamSynchronize(cu->stream), what);
    DN(cudnnSetConvolutionMathType(p->conv, p->math), what); /* the last call left its algorithm's */
    if (!bwd) {
        DN(cudnnFindConvolutionForwardAlgorithm(cu->dnn, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                &nf, fp),
           what);
        PICK(fp, nf, limit, exact_fwd, a->fwd, a->m_fwd, bf);
    } else {
        DN(cudnnFindConvolutionBackwardDataAlgorithm(cu->dnn, p->w, p->y, p->conv, p->x,
                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, dp),
           what);
        DN(cudnnFindConvolutionBackwardFilterAlgorithm(cu->dnn, p->x, p->y, p->conv, p->w,
                                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, wp),
           what);
        PICK(dp, nd, limit, exact_bwd_data, a->bwd_data, a->m_bwd_data, bd);
        PICK(wp, nw, limit, exact_bwd_filter, a->bwd_filter, a->m_bwd_filter, bw);
    }
    if (workspace(be, bf > bd ? (bf > bw ? bf : bw) : (bd > bw ? bd : bw)) != 0) return -1;
    if (cu->verbose && !bwd)
        fprintf(stderr, "dtrain: cuda: %s, %d rows: forward algorithm %d (%.1f MB)\n", what, rows, (int)a->fwd,
                bf / 1e6);
    else if (cu->verbose)
        fprintf(stderr,
                "dtrain: cuda: %s, %d rows: backward data algorithm %d (%.1f MB), backward filter %d (%.1f MB)\n",
                what, rows, (int)a->bwd_data, bd / 1e6, (int)a->bwd_filter, bw / 1e6);
    return 0;
}

/* The descriptors for rows and the algorithms of a direction for them (found on its first use at this
 * batch size). */
static conv_algos *conv_prepare(dt_backend *be, plan *p, int rows, int bwd)
{
    const dt_conv_cfg *c = &p->cfg.conv;
    char what[300];
    conv_shape(c, what, sizeof what);
    if (p->desc_rows != rows) {
        cudnnStatus_t s;
        cudnnDataType_t t = data_type(cuda_of(be));
        if ((s = cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, t, rows, c->c, c->h, c->w)) ||
            (s = cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, t, rows, c->o, c->oh, c->ow)) ||
            (s = cudnnSetTensor4dDescriptor(p->y32, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, rows, c->o, c->oh, c->ow))) {
            cuda_fail("cuDNN", "cudnnSetTensor4dDescriptor", what, cudnnGetErrorString(s));
            return NULL;
        }
        p->desc_rows = rows;
    }
    conv_algos *a = NULL;
    int dir = bwd ? ALGO_BWD : ALGO_FWD;
    for (int i = 0; i < p->n_algos && !a; i++)
        if (p->algos[i].rows == rows) a = &p->algos[i];
    if (a && (a->dirs & dir)) return a;
    if (cuda_of(be)->capturing) { /* measuring synchronizes, which would end the capture without saying why */
        dt_fail("%s: no measured algorithm for %d rows (more batch sizes than the cache's %d since the op-by-op "
                "pass that measured it)", what, rows, MAX_ALGOS);
        return NULL;
    }
    conv_algos found = a ? *a : (conv_algos){.rows = rows}; /* into the cache only when complete */
    if (find_algos(be, p, rows, bwd, &found, what) != 0) return NULL;
    found.dirs |= dir;
    if (!a) a = &p->algos[p->n_algos < MAX_ALGOS ? p->n_algos++ : MAX_ALGOS - 1];
    *a = found;
    return a;
}

/* --precision bf16 or fp16: a convolution's x, w and y (or dx, dw, dy) in the backend's 16-bit memory */
typedef struct lowp_ops {
    uint16_t *x, *w, *y;
    size_t nx, nw, ny;
} lowp_ops;

static int lowp_layout(dt_backend *be, const dt_conv_cfg *c, int rows, lowp_ops *o)
{
    int g = c->groups > 0 ? c->groups : 1;
    o->nx = (size_t)rows * c->c * c->h * c->w;
    o->nw = (size_t)c->o * (c->c / g) * c->kh * c->kw;
    o->ny = (size_t)rows * c->o * c->oh * c->ow;
    size_t at_w = cuda_lowp_bytes(o->nx), at_y = at_w + cuda_lowp_bytes(o->nw);
    if (cuda_lowp(be, at_y + cuda_lowp_bytes(o->ny)) != 0) return -1;
    char *base = cuda_of(be)->lowp;
    o->x = (uint16_t *)base, o->w = (uint16_t *)(base + at_w), o->y = (uint16_t *)(base + at_y);
    return 0;
}

static int round_in(dt_backend *be, const float *v, uint16_t *out, size_t n, const char *what)
{
    cuda_impl *cu = cuda_of(be);
    return cuda_launched(cuk_to_lowp(cu->stream, CUDA_FP16(cu), v, 1, n, n, out), "16-bit rounding", "%s", what);
}

static int widen_out(dt_backend *be, float *y, const uint16_t *v, size_t n, float beta, const char *what)
{
    cuda_impl *cu = cuda_of(be);
    return cuda_launched(cuk_from_lowp(cu->stream, CUDA_FP16(cu), y, v, n, beta), "16-bit widening", "%s", what);
}

static int cu_conv_fwd(dt_backend *be, void *pv, int rows, const float *x, const float *w, const float *b, float *y)
{
    plan *p = pv;
    cuda_impl *cu = cuda_of(be);
    char what[300];
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    conv_algos *a = conv_prepare(be, p, rows, 0);
    if (!a) return -1;
    conv_shape(&p->cfg.conv, what, sizeof what);
    if (cu->precision) {
        lowp_ops o;
        if (lowp_layout(be, &p->cfg.conv, rows, &o) != 0 || round_in(be, x, o.x, o.nx, what) != 0 ||
            round_in(be, w, o.w, o.nw, what) != 0)
            return -1;
        DN(cudnnSetConvolutionMathType(p->conv, a->m_fwd), what);
        DN(cudnnConvolutionForward(cu->dnn, &one, p->x, o.x, p->w, o.w, p->conv, a->fwd, cu->workspace,
                                   cu->workspace_bytes, &zero, p->y, o.y),
           what);
        if (widen_out(be, y, o.y, o.ny, 0.0f, what) != 0) return -1;
    } else {
        DN(cudnnSetConvolutionMathType(p->conv, a->m_fwd), what);
        DN(cudnnConvolutionForward(cu->dnn, &one, p->x, x, p->w, w, p->conv, a->fwd, cu->workspace,
                                   cu->workspace_bytes, &zero, p->y, y),
           what);
    }
    if (b) DN(cudnnAddTensor(cu->dnn, &one, p->bias, b, &one, p->y32, y), what);
    return 0;
}

/* the 16-bit operands of a conv_bwd: dx from w and dy, dw from x and dy (dy rounded once) */
static int conv_bwd_lowp(dt_backend *be, plan *p, conv_algos *a, int rows, const float *x, const float *w,
                         const float *dy, float *dx, float dx_beta, float *dw, const char *what)
{
    cuda_impl *cu = cuda_of(be);
    lowp_ops o;
    if (lowp_layout(be, &p->cfg.conv, rows, &o) != 0 || round_in(be, dy, o.y, o.ny, what) != 0) return -1;
    if (dx) {
        if (round_in(be, w, o.w, o.nw, what) != 0) return -1;
        DN(cudnnSetConvolutionMathType(p->conv, a->m_bwd_data), what);
        DN(cudnnConvolutionBackwardData(cu->dnn, &one, p->w, o.w, p->y, o.y, p->conv, a->bwd_data, cu->workspace,
                                        cu->workspace_bytes, &zero, p->x, o.x),
           what);
        if (widen_out(be, dx, o.x, o.nx, dx_beta, what) != 0) return -1;
    }
    if (dw) { /* x into x's place (dx's 16 bits are in dx by now), dw's into w's */
        if (round_in(be, x, o.x, o.nx, what) != 0) return -1;
        DN(cudnnSetConvolutionMathType(p->conv, a->m_bwd_filter), what);
        DN(cudnnConvolutionBackwardFilter(cu->dnn, &one, p->x, o.x, p->y, o.y, p->conv, a->bwd_filter, cu->workspace,
                                          cu->workspace_bytes, &zero, p->w, o.w),
           what);
        if (widen_out(be, dw, o.w, o.nw, 0.0f, what) != 0) return -1;
    }
    return 0;
}

static int cu_conv_bwd(dt_backend *be, void *pv, int rows, const float *x, const float *w, const float *dy, float *dx,
                       float dx_beta, float *dw, float *db)
{
    plan *p = pv;
    cuda_impl *cu = cuda_of(be);
    char what[300];
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    conv_algos *a = conv_prepare(be, p, rows, 1);
    if (!a) return -1;
    conv_shape(&p->cfg.conv, what, sizeof what);
    if (cu->precision) {
        if (conv_bwd_lowp(be, p, a, rows, x, w, dy, dx, dx_beta, dw, what) != 0) return -1;
        if (dw && db && p->cfg.conv.bias)
            DN(cudnnConvolutionBackwardBias(cu->dnn, &one, p->y32, dy, &zero, p->bias, db), what);
        return 0;
    }
    if (dx) {
        DN(cudnnSetConvolutionMathType(p->conv, a->m_bwd_data), what);
        DN(cudnnConvolutionBackwardData(cu->dnn, &one, p->w, w, p->y, dy, p->conv, a->bwd_data, cu->workspace,
                                        cu->workspace_bytes, &dx_beta, p->x, dx),
           what);
    }
    if (dw) {
        DN(cudnnSetConvolutionMathType(p->conv, a->m_bwd_filter), what);
        DN(cudnnConvolutionBackwardFilter(cu->dnn, &one, p->x, x, p->y, dy, p->conv, a->bwd_filter, cu->workspace,
                                          cu->workspace_bytes, &zero, p->w, dw),
           what);
        if (db && p->cfg.conv.bias) DN(cudnnConvolutionBackwardBias(cu->dnn, &one, p->y, dy, &zero, p->bias, db), what);
    }
    return 0;
}

/* ---- pooling, LRN, batch norm: our kernels ----------------------------------------------------- */

static void *cu_pool_plan(dt_backend *be, const dt_pool_cfg *cfg)
{
    (void)be;
    return plan_new(PLAN_POOL, cfg, sizeof *cfg);
}

static int cu_pool_fwd(dt_backend *be, void *pv, int rows, int train, const float *x, float *y)
{
    plan *p = pv;
    const dt_pool_cfg *c = &p->cfg.pool;
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    int keep = train && c->max;
    size_t n = (size_t)rows * c->c * c->oh * c->ow;
    if (keep && n > p->argmax_n) {
        CU(cudaStreamSynchronize(cuda_of(be)->stream), "max pooling");
        cuda_of(be)->moved++;
        cudaFree(p->argmax);
        cuda_count(cuda_of(be), -(long long)(p->argmax_n * sizeof(int)));
        p->argmax = NULL, p->argmax_n = 0;
        CU(cudaMalloc((void **)&p->argmax, n * sizeof(int)), "max pooling: its argmax");
        p->argmax_n = n;
        cuda_count(cuda_of(be), (long long)(n * sizeof(int)));
    }
    int rc = cuk_pool_fwd(cuda_of(be)->stream, c, rows, x, y, keep ? p->argmax : NULL);
    return cuda_launched(rc, "pooling", "%s %dx%dx%d, window %dx%d, %d rows", c->max ? "max" : "average", c->c, c->h,
                         c->w, c->kh, c->kw, rows);
}

static int cu_pool_bwd(dt_backend *be, void *pv, int rows, const float *dy, float *dx, float dx_beta)
{
    plan *p = pv;
    const dt_pool_cfg *c = &p->cfg.pool;
    if (rows <= 0 || !dx) return 0; /* no dx wanted: nothing to do (the contract; the CPU's too) */
    if (cuda_enter(be) != 0) return -1;
    if (c->max && (size_t)rows * c->c * c->oh * c->ow > p->argmax_n)
        return dt_fail("max pooling backward of %d rows without a training forward of as many", rows);
    int rc = cuk_pool_bwd(cuda_of(be)->stream, c, rows, dy, p->argmax, dx, dx_beta);
    return cuda_launched(rc, "pooling backward", "%s %dx%dx%d, window %dx%d, %d rows", c->max ? "max" : "average", c->c,
                         c->h, c->w, c->kh, c->kw, rows);
}

static void *cu_lrn_plan(dt_backend *be, const dt_lrn_cfg *cfg)
{
    (void)be;
    return plan_new(PLAN_LRN, cfg, sizeof *cfg);
}

static int cu_lrn_fwd(dt_backend *be, void *pv, int rows, int train, const float *x, float *y)
{
    plan *p = pv;
    (void)train;
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    int rc = cuk_lrn_fwd(cuda_of(be)->stream, &p->cfg.lrn, rows, x, y);
    return cuda_launched(rc, "LRN", "%dx%dx%d, size %d, %d rows", p->cfg.lrn.c, p->cfg.lrn.h, p->cfg.lrn.w,
                         p->cfg.lrn.size, rows);
}

static int cu_lrn_bwd(dt_backend *be, void *pv, int rows, const float *x, const float *dy, float *dx, float dx_beta)
{
    plan *p = pv;
    if (rows <= 0 || !dx) return 0;
    if (cuda_enter(be) != 0) return -1;
    int rc = cuk_lrn_bwd(cuda_of(be)->stream, &p->cfg.lrn, rows, x, dy, dx, dx_beta);
    return cuda_launched(rc, "LRN backward", "%dx%dx%d, size %d, %d rows", p->cfg.lrn.c, p->cfg.lrn.h, p->cfg.lrn.w,
                         p->cfg.lrn.size, rows);
}

static void *cu_bn_plan(dt_backend *be, const dt_bn_cfg *cfg)
{
    if (cfg->layout != DT_LAYOUT_PLAIN) { /* the kernels index NCHW; cu_layout_for asks for no other */
        dt_fail("CUDA: batch norm of %d channels in layout %d: only NCHW is built", cfg->c, (int)cfg->layout);
        return NULL;
    }
    plan *p = plan_new(PLAN_BN, cfg, sizeof *cfg);
    if (!p) return NULL;
    cudaError_t e = cuda_enter(be) == 0 ? cudaMalloc((void **)&p->tmp, sizeof(double) * CUDA_BN_TMP(cfg->c))
                                        : cudaErrorInvalidDevice;
    if (e != cudaSuccess) {
        cudaGetLastError();
        dt_fail("CUDA: batch norm of %d channels: %s", cfg->c, cudaGetErrorString(e));
        cu_plan_free(be, p);
        return NULL;
    }
    cuda_count(cuda_of(be), (long long)(sizeof(double) * CUDA_BN_TMP(cfg->c)));
    return p;
}

static int cu_bn_fwd(dt_backend *be, void *pv, int rows, int train, const float *x, const float *scale,
                     const float *shift, float *mean, float *var, float *y)
{
    plan *p = pv;
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    int rc = cuk_bn_fwd(cuda_of(be)->stream, &p->cfg.bn, rows, train, x, scale, shift, mean, var, y, p->tmp);
    return cuda_launched(rc, "batch norm", "%dx%dx%d, %d rows", p->cfg.bn.c, p->cfg.bn.h, p->cfg.bn.w, rows);
}

static int cu_bn_bwd(dt_backend *be, void *pv, int rows, const float *x, const float *scale, const float *mean,
                     const float *var, const float *dy, const float *y, float *dx, float dx_beta, float *dscale,
                     float *dshift)
{
    plan *p = pv;
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    int rc = cuk_bn_bwd(cuda_of(be)->stream, &p->cfg.bn, rows, x, scale, mean, var, dy, y, dx, dx_beta, dscale, dshift,
                        p->tmp);
    return cuda_launched(rc, "batch norm backward", "%dx%dx%d, %d rows", p->cfg.bn.c, p->cfg.bn.h, p->cfg.bn.w, rows);
}

static int cu_shortcut_fwd(dt_backend *be, const dt_shortcut_cfg *s, int rows, const float *x, float *y)
{
    if (s->in_bf16) return dt_fail("internal: cuda: a shortcut's input in bf16 (this backend has no add2_bf16)");
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    int rc = cuk_shortcut_fwd(cuda_of(be)->stream, s, rows, x, y);
    return cuda_launched(rc, "shortcut", "%dx%dx%d -> %dx%dx%d, %d rows", s->c, s->h, s->w, s->o, s->oh, s->ow, rows);
}

static int cu_shortcut_bwd(dt_backend *be, const dt_shortcut_cfg *s, int rows, const float *dy, float *dx,
                           float dx_beta)
{
    if (rows <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    int rc = cuk_shortcut_bwd(cuda_of(be)->stream, s, rows, dy, dx, dx_beta);
    return cuda_launched(rc, "shortcut backward", "%dx%dx%d -> %dx%dx%d, %d rows", s->c, s->h, s->w, s->o, s->oh, s->ow,
                         rows);
}

/* ---- layouts: plain NCHW only ------------------------------------------------------------------- */

static dt_layout cu_layout_for(dt_backend *be, int c, int h, int w)
{
    (void)be, (void)c, (void)h, (void)w;
    return DT_LAYOUT_PLAIN;
}

static size_t cu_act_size(dt_backend *be, dt_layout l, int rows, int c, int h, int w)
{
    (void)be, (void)l;
    return (size_t)rows * (size_t)c * (size_t)h * (size_t)w;
}

static int cu_to_plain(dt_backend *be, dt_layout from, const float *x, float *y, int rows, int c, int h, int w)
{
    if (from != DT_LAYOUT_PLAIN) return dt_fail("cuda: no blocked layout on the GPU");
    return be->copy(be, y, x, sizeof(float) * (size_t)rows * c * h * w);
}

static int cu_from_plain(dt_backend *be, dt_layout to, const float *x, float *y, int rows, int c, int h, int w,
                         float beta)
{
    if (to != DT_LAYOUT_PLAIN) return dt_fail("cuda: no blocked layout on the GPU");
    return be->add(be, y, x, (size_t)rows * c * h * w, beta);
}

void cuda_dnn_init(dt_backend *be)
{
    be->layout_for = cu_layout_for;
    be->act_size = cu_act_size;
    be->to_plain = cu_to_plain;
    be->from_plain = cu_from_plain;
    be->conv_plan = cu_conv_plan;
    be->conv_fwd = cu_conv_fwd;
    be->conv_bwd = cu_conv_bwd;
    be->pool_plan = cu_pool_plan;
    be->pool_fwd = cu_pool_fwd;
    be->pool_bwd = cu_pool_bwd;
    be->bn_plan = cu_bn_plan;
    be->bn_fwd = cu_bn_fwd;
    be->bn_bwd = cu_bn_bwd;
    be->fuses_bn_relu = 1; /* backend_cuda_bn.cu's kernels take dt_bn_cfg's relu */
    be->lrn_plan = cu_lrn_plan;
    be->lrn_fwd = cu_lrn_fwd;
    be->lrn_bwd = cu_lrn_bwd;
    be->shortcut_fwd = cu_shortcut_fwd;
    be->shortcut_bwd = cu_shortcut_bwd;
    be->plan_free = cu_plan_free;
}
