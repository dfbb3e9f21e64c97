/* backend_cuda — the CUDA backend's insides, shared by its files (never included from src/).
 *
 * One backend per rank: one GPU, one stream every op runs on (so ops and copies stay in the
 * order they were issued, from any thread), a cuBLAS and a cuDNN handle bound to it, and a
 * scratch area for the kernels that return values to the host.
 *
 * Errors: every CUDA, cuBLAS and cuDNN call goes through CU/CB/DN, which on failure set the
 * message (dt_fail) naming the call, the op and its shapes, and make the op return -1.
 */
#ifndef DT_BACKEND_CUDA_H
#define DT_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "engine/backend.h"

typedef struct cuda_impl {
    int dev;             /* the GPU */
    cudaStream_t stream; /* every op's */
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    int tf32;                 /* --tf32: TensorFloat-32 in cuBLAS and cuDNN */
    int exact;                /* --gpu-exact: GEMM-like convolution algorithms only */
    size_t workspace_limit;   /* --gpu-workspace, bytes: the most a convolution algorithm may use */
    void *workspace;          /* the convolution workspace, grown to the largest chosen algorithm's need */
    size_t workspace_bytes;
    int precision;            /* --precision (DT_PRECISION_*): bf16 or fp16 (nonzero) run GEMMs and
                                 convolutions on 16-bit inputs (tensor ops) */
    void *lowp;               /* their operands rounded to 16 bits (and a convolution's 16-bit result) */
    size_t lowp_bytes;
    void *scratch;            /* device scratch of the softmax (per-row loss and correct count) */
    size_t scratch_bytes;
    void *host_scratch;       /* its pinned host twin */
    size_t allocated, peak;   /* bytes of device memory live now (alloc()'s and the scratch), and the most at once */
    int verbose;              /* log the convolution algorithms chosen (DTRAIN_CUDA_VERBOSE) */
    /* graphs (--gpu-graph): a recording names the buffers above; each time one of them moves,
     * moved counts it and recordings made before are stale */
    unsigned long moved;
    int capturing;            /* between graph_begin and graph_end */
    int cap_loss_rows;        /* the recorded softmax's rows (its per-row losses land in host_scratch) */
} cuda_impl;

static inline cuda_impl *cuda_of(dt_backend *be) { return (cuda_impl *)be->impl; }

/* Fails with "LIB: WHAT: FUNCTION (file:line): the library's message"; WHAT names the op and its
 * shapes, FUNCTION is the call's name (the text of call up to its parenthesis). */
int cuda_fail_at(const char *lib, const char *call, const char *what, const char *err, const char *file, int line);
#define cuda_fail(lib, call, what, err) cuda_fail_at(lib, call, what, err, __FILE__, __LINE__)

/* counts bytes of device memory allocated (> 0) or freed (< 0) into the live and peak bytes */
void cuda_count(cuda_impl *c, long long bytes);

#define CU(call, what)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) { /* cleared: the next kernel's launch check would report it as its own */           \
            cudaGetLastError();                                                                                        \
            return cuda_fail("CUDA", #call, what, cudaGetErrorString(e_));                                             \
        }                                                                                                              \
    } while (0)
#define CB(call, what)                                                                                                 \
    do {                                                                                                               \
        cublasStatus_t e_ = (call);                                                                                    \
        if (e_ != CUBLAS_STATUS_SUCCESS) return cuda_fail("cuBLAS", #call, what, cublasGetStatusString(e_));          \
    } while (0)
#define DN(call, what)                                                                                                 \
    do {                                                                                                               \
        cudnnStatus_t e_ = (call);                                                                                     \
        if (e_ != CUDNN_STATUS_SUCCESS) return cuda_fail("cuDNN", #call, what, cudnnGetErrorString(e_));              \
    } while (0)

/* Makes the backend's GPU the calling thread's (a comm thread's first op may come from a thread
 * that never set it). */
int cuda_enter(dt_backend *be);
/* A launcher's result (0, or a cudaError_t as int) as the op's: a failure names the kernel and, from
 * fmt, the shapes. */
int cuda_launched(int rc, const char *kernel, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Device scratch of at least bytes (grown, never shrunk; a growth counts in moved), and its pinned
 * host twin. */
int cuda_scratch(dt_backend *be, size_t bytes);

/* Device memory of at least bytes for bf16 or fp16 operands (grown, never shrunk; queued work done
 * first). */
int cuda_lowp(dt_backend *be, size_t bytes);
/* the 16-bit types of cuBLAS and cuDNN for the backend's --precision, and its name */
#define CUDA_FP16(cu) ((cu)->precision == DT_PRECISION_FP16)
#define CUDA_LOWP_TYPE(cu) (CUDA_FP16(cu) ? CUDA_R_16F : CUDA_R_16BF)
#define CUDNN_LOWP_TYPE(cu) (CUDA_FP16(cu) ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16)
#define CUDA_LOWP_NAME(cu) (CUDA_FP16(cu) ? "fp16" : "bf16")
/* the bytes n 16-bit values take there, rounded up so that the next operand starts 256-byte aligned */
static inline size_t cuda_lowp_bytes(size_t n) { return (n * 2 + 255) & ~(size_t)255; }

/* backend_cuda_blas.c */
void cuda_blas_init(dt_backend *be);

/* backend_cuda_dnn.c: convolution on cuDNN; pooling, LRN, shortcut and layouts on our kernels */
void cuda_dnn_init(dt_backend *be);

/* backend_cuda_nccl.c: the NCCL transport (be->net_*; where DT_NCCL_BUILT) */
int cuda_net_available(dt_backend *be, char *why, size_t n);
int cuda_net_id(dt_backend *be, void *id);
int cuda_net_create(dt_backend *be, const void *id, int nranks, int rank, void **net);
void cuda_net_free(dt_backend *be, void *net);
int cuda_net_sendrecv(dt_backend *q, void *net, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes,
                      int src);
int cuda_net_allreduce(dt_backend *q, void *net, float *x, size_t n);
int cuda_net_allreduce_i8(dt_backend *q, void *net, int8_t *x, size_t n);
int cuda_net_allgather(dt_backend *q, void *net, const void *sbuf, size_t bytes, void *rbuf);
int cuda_net_wait(dt_backend *q, void *net, double timeout);

/* backend_cuda_kernels.cu: launchers of our kernels on a stream; 0, or a CUDA error code. The
 * per-element arithmetic of each is in elementwise.h. */
#ifdef __cplusplus
extern "C" {
#endif
int cuk_relu_fwd(cudaStream_t s, float *y, const float *x, size_t n);
int cuk_relu_bwd(cudaStream_t s, float *dx, const float *dy, const float *y, size_t n, float beta);
int cuk_dropout(cudaStream_t s, float *y, const float *x, size_t n, uint64_t base, float p, uint64_t key, float beta);
int cuk_bias_add(cudaStream_t s, float *y, const float *b, int rows, int cols, int hw);
int cuk_bias_grad(cudaStream_t s, float *db, const float *dy, int rows, int cols, float beta);
int cuk_softmax_xent_fwd(cudaStream_t s, float *prob, const float *logits, const int32_t *labels, int rows,
                         int classes, double *loss, int *correct);
int cuk_softmax_xent_bwd(cudaStream_t s, float *dx, const float *prob, const int32_t *labels, int rows, int classes,
                         float scale, float beta);
int cuk_sgd(cudaStream_t s, float *w, const float *g, float *v, size_t n, float lr, float m, float wd, int nesterov);
int cuk_scale(cudaStream_t s, float *x, float a, size_t n);
int cuk_add(cudaStream_t s, float *y, const float *x, size_t n, float beta);
int cuk_add2(cudaStream_t s, float *y, const float *a, const float *b, size_t n, int relu);
/* --precision bf16 or fp16 (fp16 1): rows x cols of x (rows ld apart) rounded to 16 bits into out,
 * densely; y = v widened (beta 0) or y + v */
int cuk_to_lowp(cudaStream_t s, int fp16, const float *x, size_t rows, size_t cols, size_t ld, uint16_t *out);
int cuk_from_lowp(cudaStream_t s, int fp16, float *y, const uint16_t *v, size_t n, float beta);
/* loss scaling: g *= a; *flag (device) = 1 where a result is not finite */
int cuk_unscale(cudaStream_t s, float *g, float a, size_t n, int32_t *flag);
int cuk_bn_running(cudaStream_t s, float *rmean, float *rvar, const float *mean, const float *var, size_t n, float m,
                   double unbias);
int cuk_pool_fwd(cudaStream_t s, const dt_pool_cfg *c, int rows, const float *x, float *y, int *argmax);
int cuk_pool_bwd(cudaStream_t s, const dt_pool_cfg *c, int rows, const float *dy, const int *argmax, float *dx,
                 float beta);
int cuk_lrn_fwd(cudaStream_t s, const dt_lrn_cfg *c, int rows, const float *x, float *y);
int cuk_lrn_bwd(cudaStream_t s, const dt_lrn_cfg *c, int rows, const float *x, const float *dy, float *dx, float beta);
int cuk_shortcut_fwd(cudaStream_t s, const dt_shortcut_cfg *c, int rows, const float *x, float *y);
int cuk_shortcut_bwd(cudaStream_t s, const dt_shortcut_cfg *c, int rows, const float *dy, float *dx, float beta);
/* backend_cuda_bn.cu: batch norm with per-channel sums in double (as backend_cpu_bn.c), with the
 * relu after it under c->relu (y: its output, read by the backward then); tmp is device scratch of
 * CUDA_BN_TMP(C) doubles */
#define CUDA_BN_TMP(c) ((size_t)(c) * (3 + 64 * 3))
int cuk_bn_fwd(cudaStream_t s, const dt_bn_cfg *c, int rows, int train, const float *x, const float *scale,
               const float *shift, float *mean, float *var, float *y, double *tmp);
int cuk_bn_bwd(cudaStream_t s, const dt_bn_cfg *c, int rows, const float *x, const float *scale, const float *mean,
               const float *var, const float *dy, const float *y, float *dx, float beta, float *dscale, float *dshift,
               double *tmp);
/* backend_cuda_codec.cu: the gradient codecs (be->wire_encode, wire_decode: DT_WIRE_* of backend.h) */
int cuk_wire_encode(cudaStream_t s, int kind, int block, const float *x, size_t n, void *out);
int cuk_wire_decode(cudaStream_t s, int kind, int block, const void *in, size_t n, float *x, int add);
/* backend_cuda_sparse.cu: the sparse modes' residuals, top-k and sparse updates (be->residual_add,
 * topk, pairs_apply) and gTop-k's merge */
int cuk_residual_add(cudaStream_t s, float *r, float *u, const float *g, const float *w, size_t n, float m, float wd);
int cuk_topk(cudaStream_t s, const float *x, size_t n, size_t k, void *pairs);
int cuk_pairs_apply(cudaStream_t s, float *x, const void *pairs, size_t k, int how, float a);
/* --topk-select sampled (be->topk_sample: out is device memory here; topk_above) */
int cuk_topk_sample(cudaStream_t s, const float *x, size_t n, size_t m, float *out);
int cuk_topk_above(cudaStream_t s, const float *x, size_t n, size_t k, float thr, void *pairs);
/* gTop-k (be->pairs_merge, pairs_zero_common); the merge waits for the union's size */
int cuk_pairs_merge(cudaStream_t s, const void *a, size_t na, const void *b, size_t nb, size_t k, void *out,
                    size_t *n_out);
int cuk_pairs_zero_common(cudaStream_t s, float *x, const void *a, size_t na, const void *b, size_t nb);
/* backend_cuda_tern.cu: TernGrad (be->tern_stats, tern_encode, tern_pack, tern_decode). tern_stats needs
 * 2 cuk_tern_lanes_floats(n) floats of device scratch (lanes); out: sum and sum of squares (device),
 * mx: the largest |x|'s bits, maxed into (zero it first) */
size_t cuk_tern_lanes_floats(size_t n);
int cuk_tern_stats(cudaStream_t s, const float *x, size_t n, float *lanes, double *out, unsigned int *mx);
int cuk_tern_encode(cudaStream_t s, const float *x, size_t n, float clip, float scale, uint64_t key, int8_t *t);
int cuk_tern_pack(cudaStream_t s, const int8_t *t, size_t n, uint8_t *codes);
int cuk_tern_decode(cudaStream_t s, const int8_t *acc, size_t n, float sc, float *x);
int cuk_tern_sum(cudaStream_t s, const uint8_t *codes, int p, size_t code_bytes, size_t n, int8_t *acc);
/* backend_cuda_chunks.cu: csc (be->csc_pack, csc_fold) */
int cuk_csc_pack(cudaStream_t s, float *g, const float *h, const float *w, float wd, size_t lo, size_t hi, size_t chunk,
                 const int32_t *slot, float scale, float limit, float *pack);
int cuk_csc_fold(cudaStream_t s, float *g, float *h, float *hu, float *w, const float *pack, const int32_t *slot,
                 size_t n, size_t chunk, int p, float m, float lr, float *norms);
#ifdef __cplusplus
}
#endif

#endif
