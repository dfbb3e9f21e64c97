/* backend — the kernels and memory a compute device supplies, and the registry of backends.
 *
 * A backend owns memory on its device and the kernels that work on it. Layers, the net, the
 * optimizer and the comm modes never touch a backend pointer's contents directly: they call
 * through this table, so a CUDA backend (cuBLAS/cuDNN) implements the same table without any
 * layer changing. Host code that must read or write backend memory (codecs, MPI) goes through a
 * host view (hostbuf.h), which copies for a device and is the memory itself for the CPU.
 * The CPU backend (backend_cpu.c) is the reference and what CI tests; the guarded test backend
 * (tests/backend_guarded.c) keeps its memory inaccessible outside its own ops, so any code that
 * forgets this faults at once on a machine without a GPU.
 *
 * Every op that can fail returns 0, or -1 with a message (dt_fail) naming the op and its
 * shapes; callers check it. alloc and the plan constructors return NULL on failure.
 *
 * Conventions: all matrices are row-major fp32. Activations are [rows][cols] where rows is the
 * batch and cols the per-sample size. `beta` arguments select overwrite (0) or accumulate (1)
 * for gradients that several consumers add into.
 */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../util.h"

typedef struct dt_backend dt_backend;

/* How a backend lays out an activation of C x H x W per sample. Layers never look inside: they
 * pass layouts to the backend's ops and call to_plain/from_plain where they need NCHW. */
typedef enum {
    DT_LAYOUT_PLAIN = 0,   /* NCHW */
    DT_LAYOUT_BLOCK16 = 1, /* oneDNN nChw16c: [N][C/16][H][W][16]; only for C a multiple of 16 */
    DT_LAYOUT_NHWC = 2,    /* channels last, [N][H][W][C]; only for C a multiple of 16 */
} dt_layout;

/* Convolution: C x H x W in, O x OH x OW out; kernel KH x KW, stride SH x SW, padding top/bottom/
 * left/right, groups; weights [O][C/groups][KH][KW] (PyTorch's layout), bias [O]. */
typedef struct dt_conv_cfg {
    int c, h, w, o, oh, ow, kh, kw, sh, sw, pt, pb, pl, pr, groups, bias;
    dt_layout in_layout, out_layout;
    /* y and dy in bf16, two bytes a value in the layout (the rest of their float buffers unused):
     * conv_fwd writes y rounded to bf16 and conv_bwd takes dy as bf16; only where conv_bf16_out said
     * yes for this configuration (ABI 16) */
    int out_bf16;
    /* x in bf16 (a batch norm's output of out_bf16), which the passes multiply in as it is (its
     * rounding gone); dx stays fp32. Only where conv_bf16_in said yes (ABI 16) */
    int in_bf16;
} dt_conv_cfg;

/* Pooling: max, or average over the window's values inside the input (padding excluded). */
typedef struct dt_pool_cfg {
    int max, c, h, w, oh, ow, kh, kw, sh, sw, pt, pb, pl, pr;
    dt_layout layout;
} dt_pool_cfg;

/* Batch normalisation over N, H, W per channel; scale and shift [C]. relu (a backend with
 * fuses_bn_relu only): y = max(bn(x), 0) as relu_fwd computes it, and bn_bwd's dy is the gradient
 * of that y, taken where its y (the forward's output) is > 0 as relu_bwd does: bit for bit the
 * batch norm and relu layers run one after the other, two passes over the activations fewer. */
typedef struct dt_bn_cfg {
    int c, h, w;
    float eps;
    dt_layout layout;
    int relu;
    /* x and dx in bf16, as a convolution of out_bf16 stores them (its y and dy): bn_fwd and bn_bwd
     * read x so, bn_bwd writes dx rounded to bf16 (dx_beta 0 only). A backend with conv_bf16_out. */
    int in_bf16;
    /* y in bf16 (after the relu), for a convolution of in_bf16 that alone consumes it: bn_fwd writes y
     * rounded to bf16, bn_bwd reads its y so; dy stays fp32. A backend with conv_bf16_in. */
    int out_bf16;
} dt_bn_cfg;

/* Local response normalisation across channels (Caffe/AlexNet):
 * y = x / (k + alpha/size * sum over size neighbouring channels of x^2)^beta */
typedef struct dt_lrn_cfg {
    int c, h, w, size;
    float alpha, beta, k;
    dt_layout layout;
} dt_lrn_cfg;

/* ResNet option-A shortcut: C x H x W in, O x OH x OW out (OH = ceil(H / stride)); output channel
 * front + c is input channel c subsampled by stride, the other channels are zero. */
typedef struct dt_shortcut_cfg {
    int c, h, w, o, oh, ow, stride, front;
    dt_layout in_layout, out_layout;
    int in_bf16; /* x in bf16 (the residual stream's): only a backend with add2_bf16 (ABI 17) */
} dt_shortcut_cfg;

/* add2_bf16's flags: the relu, and which of its operands hold bf16 */
enum { DT_ADD2_RELU = 1, DT_ADD2_A_BF16 = 2, DT_ADD2_B_BF16 = 4, DT_ADD2_Y_BF16 = 8 };

/* the codecs a backend may run (wire_encode): t16, fp16 and q8 of comm/codec.h */
enum { DT_WIRE_T16 = 1, DT_WIRE_FP16 = 2, DT_WIRE_Q8 = 3 };
/* the bytes of a device communicator's id (net_id) */
#define DT_NET_ID_BYTES 128
/* what pairs_apply does at each pair */
enum { DT_PAIRS_SET = 0, DT_PAIRS_ZERO = 1, DT_PAIRS_SUB = 2, DT_PAIRS_ADD = 3 };

struct dt_backend {
    const char *name;
    int n_threads;
    int host_memory; /* its memory is ordinary host memory that host code may address (cpu) */
    int fuses_bn_relu; /* its bn_plan takes dt_bn_cfg's relu (ABI 14, as bn_bwd's y) */
    void *impl;

    void (*destroy)(dt_backend *be);

    /* memory on the device, 64-byte aligned and zeroed; NULL (with a message) when there is none */
    void *(*alloc)(dt_backend *be, size_t bytes);
    void (*free)(dt_backend *be, void *p);
    int (*to_device)(dt_backend *be, void *dst, const void *src, size_t bytes);
    int (*to_host)(dt_backend *be, void *dst, const void *src, size_t bytes);
    int (*copy)(dt_backend *be, void *dst, const void *src, size_t bytes); /* device to device */
    /* waits until queued work is done (timing, host reads) */
    int (*sync)(dt_backend *be);
    /* bytes of its memory free now and in all (for checks before large allocations) */
    int (*memory)(dt_backend *be, size_t *free_bytes, size_t *total_bytes);
    /* host memory that to_device and to_host copy from and to: page-locked where the device's
     * copies then run at the bus's full rate (cudaMallocHost); zeroed, 64-byte aligned, NULL with a
     * message when there is none. NULL hooks: ordinary host memory. Reached through
     * backend_host_alloc / backend_host_free, and freed before the backend is destroyed. */
    void *(*host_alloc)(dt_backend *be, size_t bytes);
    void (*host_free)(dt_backend *be, void *p);

    /* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C (row-major, like cblas_sgemm) */
    int (*gemm)(dt_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);
    /* y[r][c] += b[c] for r < rows, c < cols */
    int (*bias_add)(dt_backend *be, float *y, const float *b, int rows, int cols);
    /* db[c] = beta * db[c] + sum_r dy[r][c] */
    int (*bias_grad)(dt_backend *be, float *db, const float *dy, int rows, int cols, float beta);
    /* y = max(x, 0); dx = beta * dx + dy * (y > 0) */
    int (*relu_fwd)(dt_backend *be, float *y, const float *x, size_t n);
    int (*relu_bwd)(dt_backend *be, float *dx, const float *dy, const float *y, size_t n, float beta);
    /* Inverted dropout with drop probability p. The mask of element (r, c) is a pure function of
     * (key, (row0 + r) * cols + c), so it is identical however a global batch is split over ranks
     * and backward regenerates it instead of storing it. */
    int (*dropout_fwd)(dt_backend *be, float *y, const float *x, int rows, int cols, float p, uint64_t key,
                       int64_t row0);
    int (*dropout_bwd)(dt_backend *be, float *dx, const float *dy, int rows, int cols, float p, uint64_t key,
                       int64_t row0, float beta);
    /* prob = softmax(logits) per row; adds sum of -log prob[label] to *loss_sum (double, host) and
     * the number of rows whose argmax equals the label to *n_correct (host). labels live on the
     * device. */
    int (*softmax_xent_fwd)(dt_backend *be, float *prob, const float *logits, const int32_t *labels, int rows,
                            int classes, double *loss_sum, int64_t *n_correct);
    /* dx = beta * dx + scale * (prob - onehot(label)) */
    int (*softmax_xent_bwd)(dt_backend *be, float *dx, const float *prob, const int32_t *labels, int rows,
                            int classes, float scale, float beta);
    /* SGD with momentum / Nesterov / weight decay on n elements (PyTorch semantics):
     * d = g + wd*w; v = m*v + d; d = nesterov ? d + m*v : v; w -= lr*d. v may be NULL if m == 0. */
    int (*sgd_step)(dt_backend *be, float *w, const float *g, float *v, size_t n, float lr, float momentum,
                    float wd, int nesterov);
    /* x *= a; a == 0 zeroes x whatever it held (an infinity or NaN of a skipped fp16 step too) */
    int (*scale)(dt_backend *be, float *x, float a, size_t n);
    /* y = beta * y + x */
    int (*add)(dt_backend *be, float *y, const float *x, size_t n, float beta);
    /* y = a + b, y apart from a and b; relu: max(a + b, 0) as relu_fwd computes it. The add layer's
     * forward in one pass instead of a copy and an add (and relu_fwd after it, where the add layer
     * takes the relu that alone consumes it; ABI 15). NULL where the backend has none: the add layer
     * copies and adds, and a relu after it runs on its own. */
    int (*add2)(dt_backend *be, float *y, const float *a, const float *b, size_t n, int relu);
    /* The residual stream in bf16 (ABI 17; net.c's mark_bf16_edges): add2 where flags (DT_ADD2_*)
     * say which of a, b and y hold bf16 (two bytes a value, the rest of their float buffers
     * unused): each input taken as the float it stands for, the sum (and relu) in float as add2's,
     * y rounded to bf16 as the CPU's vcvtneps2bf16. Where a backend has it, relu_bwd_bf16 (relu_bwd
     * with y in bf16) and shortcut_fwd's in_bf16 are there too. NULL (the CPU backend: but under
     * --precision bf16): the stream stays fp32. */
    int (*add2_bf16)(dt_backend *be, void *y, const void *a, const void *b, size_t n, int flags);
    int (*relu_bwd_bf16)(dt_backend *be, float *dx, const float *dy, const void *y, size_t n, float beta);
    /* Batch norm's running statistics after a training forward (PyTorch's; ABI 13), on n channels:
     * rmean = (1-m) rmean + m mean, rvar = (1-m) rvar + m (float)(var unbias), var unbias in double,
     * every other product and sum in float and rounded on its own (no fused multiply-add), so every
     * backend gives the same bits. On the device: a recorded pass (--gpu-graph) keeps it. */
    int (*bn_running)(dt_backend *be, float *rmean, float *rvar, const float *mean, const float *var, size_t n,
                      float momentum, double unbias);
    /* Loss scaling (--precision fp16): g *= a, and *flag (an int32 in the backend's memory) set to 1
     * if any g[i] is then not finite (left as it is otherwise) */
    int (*grad_unscale)(dt_backend *be, float *g, size_t n, float a, int32_t *flag);
    /* Gradient codecs (--compress) on the backend's memory, for comm code that keeps gradients there:
     * comm/codec.h's formats, the same bytes as the CPU codecs for the same input and the same floats
     * decoded (subnormals aside: the CPU flushes them). kind: DT_WIRE_*; block: q8's values per scale
     * (0: one for all n). out holds the encoding of x[0..n); decode writes x, or adds into it with add.
     * NULL where the backend has none (the comm code then codes on host views). */
    int (*wire_encode)(dt_backend *be, int kind, int block, const float *x, size_t n, void *out);
    int (*wire_decode)(dt_backend *be, int kind, int block, const void *in, size_t n, float *x, int add);
    /* The residuals of the sparse modes (comm/memory.h) on the backend's memory, for comm code that
     * keeps them there; NULL where the backend has none. Pairs are {uint32 index, float value},
     * 8 bytes each, in the backend's memory.
     * residual_add: r += g; or with u (momentum correction) v = m u + g + wd w, u = v, r += v (each
     * product and sum rounded on its own, as the CPU's memory.c).
     * topk: the k largest |x[i]| of x[0..n) (ties to the lower index) as pairs sorted by index.
     * pairs_apply: at each pair's index i, x[i] = v (DT_PAIRS_SET), 0 (DT_PAIRS_ZERO), x[i] - a v
     * (DT_PAIRS_SUB) or x[i] + a v (DT_PAIRS_ADD; ABI 10); indices distinct.
     * pairs_merge (ABI 10; gTop-k over the device's transport): comm/sparse.h's sparse_merge_topk on
     * the backend's memory: a and b (sorted by index) summed where indices meet (a's value + b's),
     * the k largest |v| of that union (ties to the lower index) sorted by index into out (which may
     * not overlap a or b); *n_out (host) = min(k, |union|) (it waits for it).
     * pairs_zero_common (ABI 10): x[i] = 0 for each index i of a that b (sorted by index) holds too.
     * --topk-select sampled (ABI 11): topk_sample: out[s] = |x[topk_sample_index(s, n)]| for s < m, into
     * host memory (it waits); topk_above: where k or more |x[i]| reach thr, topk's k largest, else
     * comm/sparse.h's topk_take_above (those that reach it and the first of the rest), sorted by index. */
    int (*residual_add)(dt_backend *be, float *r, float *u, const float *g, const float *w, size_t n, float m,
                        float wd);
    int (*topk)(dt_backend *be, const float *x, size_t n, size_t k, void *pairs);
    int (*pairs_apply)(dt_backend *be, float *x, const void *pairs, size_t k, int how, float a);
    int (*pairs_merge)(dt_backend *be, const void *a, size_t na, const void *b, size_t nb, size_t k, void *out,
                       size_t *n_out);
    int (*pairs_zero_common)(dt_backend *be, float *x, const void *a, size_t na, const void *b, size_t nb);
    int (*topk_sample)(dt_backend *be, const float *x, size_t n, size_t m, float *out);
    int (*topk_above)(dt_backend *be, const float *x, size_t n, size_t k, float thr, void *pairs);
    /* TernGrad (comm/codec_tern.h) on the backend's memory, for comm code that keeps gradients there;
     * NULL where the backend has none. tern_stats: for each of count ranges [off[k], off[k] + n[k]) of
     * x, the sum and sum of squares of its values in codec_tern.c's one order and its largest |value|,
     * into host arrays (it waits for them). tern_encode: t[i] of x[0..n) clipped at clip, with scaler s
     * (0: all zero) and coins from key; tern_pack: 2-bit codes of t[0..n); tern_decode: x[i] = s acc[i];
     * tern_sum: acc[i] = the sum over p ranks' codes of value i (rank r's at codes + r code_bytes). */
    int (*tern_stats)(dt_backend *be, const float *x, const size_t *off, const size_t *n, int count, double *sum,
                      double *sq, float *mx);
    int (*tern_encode)(dt_backend *be, const float *x, size_t n, float clip, float s, uint64_t key, int8_t *t);
    int (*tern_pack)(dt_backend *be, const int8_t *t, size_t n, uint8_t *codes);
    int (*tern_decode)(dt_backend *be, const int8_t *acc, size_t n, float s, float *x);
    int (*tern_sum)(dt_backend *be, const uint8_t *codes, int p, size_t code_bytes, size_t n, int8_t *acc);
    /* csc (comm/chunks.h) on the backend's memory (ABI 11), for comm code that keeps csc's state there;
     * NULL where the backend has none. The arena of n values is cut into chunks of `chunk` values;
     * slot (int32, the backend's memory, one per chunk): an important chunk's place among the packed
     * ones, -1 for the others. csc_pack, over values [lo, hi): g = chunks_correct(g, h, w, wd), and each
     * value i of an important chunk c packed (chunks_pack with scale and limit) into pack[slot[c] chunk +
     * i - c chunk]. csc_fold, every chunk: chunks_fold with its packed sum (important) or without, hu NULL
     * without momentum correction (then w is not read); norms (the backend's memory): the chunks' norms. */
    int (*csc_pack)(dt_backend *be, float *g, const float *h, const float *w, float wd, size_t lo, size_t hi,
                    size_t chunk, const int32_t *slot, float scale, float limit, float *pack);
    int (*csc_fold)(dt_backend *be, float *g, float *h, float *hu, float *w, const float *pack, const int32_t *slot,
                    size_t n, size_t chunk, int p, float m, float lr, float *norms);
    /* A second queue on the same device and memory, for a communication thread: ops called through q
     * run in their own order beside be's (a CUDA stream of its own), so that communication overlaps
     * compute. q offers copies, sync, add, scale and the codecs; memory is allocated through be.
     * Ordering between the two is the caller's: sync the one that wrote before the other reads.
     * NULL where ops are done when they return (the CPU): be serves as its own queue
     * (backend_queue). */
    int (*queue_create)(dt_backend *be, dt_backend **q);
    void (*queue_free)(dt_backend *be, dt_backend *q);
    /* Collectives between the ranks of a job on the backend's memory, one rank per device (NCCL on
     * CUDA), for --transport nccl (comm/devnet.h); NULL where the backend has none.
     * net_available: 1 and the library's name and version in why ("NCCL 2.28.3"), or 0 and why not.
     * net_id: a new communicator's id (DT_NET_ID_BYTES), made on one rank and handed to every rank by
     * the caller; net_create joins it as rank of nranks (collective: every rank calls it at once).
     * net_sendrecv (one ring step: the send to dst and the receive from src together; a side of 0
     * bytes is left out, its rank ignored) and
     * net_allreduce (sum of n floats in place; net_allreduce_i8: of n int8 values, which the caller
     * keeps from overflowing), net_allgather (every rank's bytes into rbuf, in rank order) are called
     * through a queue (be, or a queue_create'd
     * one), run in its order and are done when net_wait returns: it waits for the queue, giving up
     * after timeout seconds (0: never) with an error, and reports a failure of the communicator
     * (a rank that died). A communicator is used by one thread. */
    int (*net_available)(dt_backend *be, char *why, size_t n);
    int (*net_id)(dt_backend *be, void *id);
    int (*net_create)(dt_backend *be, const void *id, int nranks, int rank, void **net);
    void (*net_free)(dt_backend *be, void *net);
    int (*net_sendrecv)(dt_backend *q, void *net, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes,
                        int src);
    int (*net_allreduce)(dt_backend *q, void *net, float *x, size_t n);
    int (*net_allreduce_i8)(dt_backend *q, void *net, int8_t *x, size_t n);
    int (*net_allgather)(dt_backend *q, void *net, const void *sbuf, size_t bytes, void *rbuf);
    int (*net_wait)(dt_backend *q, void *net, double timeout);
    /* Graphs (--gpu-graph; ABI 12; NULL where the backend has none): the ops called on be between
     * graph_begin and graph_end are recorded, not run, and graph_launch runs the recording (*graph)
     * as one unit, as often as asked, on the memory the recorded ops named. During a recording
     * softmax_xent_fwd leaves *loss_sum and *n_correct alone: graph_launch adds the recorded pass's
     * to its own (one softmax_xent_fwd per recording). graph_end ends the recording in any case and
     * fails (*graph NULL) where an op could not be recorded, saying which; graph_launch returns 1,
     * running nothing, where buffers the recording names have moved since (a backend's scratch grown
     * after it): record it anew; 2, saying why, where the launch was refused before anything of it
     * ran (ABI 18): the pass may run op by op; -1 where it failed running. graph_free frees a
     * recording. */
    int (*graph_begin)(dt_backend *be);
    int (*graph_end)(dt_backend *be, void **graph);
    int (*graph_launch)(dt_backend *be, void *graph, double *loss_sum, int64_t *n_correct);
    void (*graph_free)(dt_backend *be, void *graph);
    /* The device's identity, the same for every rank that runs on it ("GPU 0 (GPU-8d0e...)"), so that
     * ranks sharing one are found; NULL where memory is the host's. */
    int (*device_id)(dt_backend *be, char *buf, size_t n);

    /* --- the layers of CNNs. Each op gets a plan once per layer (from its configuration; NULL
     * and an error on failure) and then runs for any number of rows. Backward writes dx
     * overwriting (dx_beta 0) or adding (1); dx, dw may be NULL when not wanted. --- */
    dt_layout (*layout_for)(dt_backend *be, int c, int h, int w);
    /* floats a [rows][C][H][W] activation takes in layout (padding included) */
    size_t (*act_size)(dt_backend *be, dt_layout layout, int rows, int c, int h, int w);
    int (*to_plain)(dt_backend *be, dt_layout from, const float *x, float *y, int rows, int c, int h, int w);
    int (*from_plain)(dt_backend *be, dt_layout to, const float *x, float *y, int rows, int c, int h, int w,
                      float beta);

    /* conv_bwd's x is its forward's: a backend may reuse what it made of x in the plan's last
     * conv_fwd for as many rows at the same address (the CPU's rounding to bf16) */
    void *(*conv_plan)(dt_backend *be, const dt_conv_cfg *cfg);
    /* Whether a convolution of cfg (its out_bf16 aside) may store y and dy in bf16 for a batch norm
     * that alone consumes it (ABI 16): under --precision bf16, where its kernels take and give bf16
     * there anyway; then the batch norm's passes read and write half the bytes, and the rounding of
     * dy before the convolution's backward is gone. NULL: never. */
    int (*conv_bf16_out)(dt_backend *be, const dt_conv_cfg *cfg);
    /* Whether a convolution of cfg (its bf16 flags aside) may take x in bf16 from a batch norm that
     * it alone consumes (ABI 16): where it rounds x to bf16 in x's layout anyway, the batch norm
     * writes that rounding instead of fp32, the same bits in half the bytes. NULL: never. */
    int (*conv_bf16_in)(dt_backend *be, const dt_conv_cfg *cfg);
    int (*conv_fwd)(dt_backend *be, void *plan, int rows, const float *x, const float *w, const float *b, float *y);
    int (*conv_bwd)(dt_backend *be, void *plan, int rows, const float *x, const float *w, const float *dy, float *dx,
                    float dx_beta, float *dw, float *db);
    void *(*pool_plan)(dt_backend *be, const dt_pool_cfg *cfg);
    int (*pool_fwd)(dt_backend *be, void *plan, int rows, int train, const float *x, float *y);
    int (*pool_bwd)(dt_backend *be, void *plan, int rows, const float *dy, float *dx, float dx_beta);
    /* training: batch statistics (written to mean/var, biased variance) normalise x; evaluation:
     * the given running statistics. bn_bwd's y: the forward's output, read only under cfg.relu */
    void *(*bn_plan)(dt_backend *be, const dt_bn_cfg *cfg);
    int (*bn_fwd)(dt_backend *be, void *plan, int rows, int train, const float *x, const float *scale,
                  const float *shift, float *mean, float *var, float *y);
    int (*bn_bwd)(dt_backend *be, void *plan, int rows, const float *x, const float *scale, const float *mean,
                  const float *var, const float *dy, const float *y, float *dx, float dx_beta, float *dscale,
                  float *dshift);
    void *(*lrn_plan)(dt_backend *be, const dt_lrn_cfg *cfg);
    int (*lrn_fwd)(dt_backend *be, void *plan, int rows, int train, const float *x, float *y);
    int (*lrn_bwd)(dt_backend *be, void *plan, int rows, const float *x, const float *dy, float *dx, float dx_beta);
    /* y = the shortcut of x; dx = dx_beta * dx + its transpose applied to dy */
    int (*shortcut_fwd)(dt_backend *be, const dt_shortcut_cfg *cfg, int rows, const float *x, float *y);
    int (*shortcut_bwd)(dt_backend *be, const dt_shortcut_cfg *cfg, int rows, const float *dy, float *dx,
                        float dx_beta);
    void (*plan_free)(dt_backend *be, void *plan);
};

/* ---- the registry (backend.c) ------------------------------------------------------------------ */

/* What creating a backend may need beyond its name. */
typedef struct dt_backend_opts {
    int n_threads; /* host threads for its kernels (the CPU backend's compute threads) */
    int device;    /* which device of its kind (a GPU index, --gpu); -1: the backend's default */
    int local_rank; /* this rank's index among the ranks of its host (MPI's shared-memory split) */
    int tf32;      /* --tf32: a GPU may use TensorFloat-32 in GEMMs and convolutions */
    int exact;     /* --gpu-exact: only convolution algorithms whose sums are as exact as the CPU's */
    long workspace_mb; /* --gpu-workspace: the most a convolution algorithm may use (0: the default) */
    int precision;     /* --precision: DT_PRECISION_*: what a backend's GEMMs and convolutions take as inputs */
    int channels_last; /* CPU: 1 keeps activations of 16k channels NHWC, -1 nChw16c (tests); 0 its own choice */
} dt_backend_opts;

/* --precision: what GEMMs and convolutions multiply in. bf16: inputs rounded to bfloat16 (to
 * nearest even), products summed in fp32, results fp32; weights, optimizer state, activations
 * between layers, batch norm, softmax and the loss stay fp32 (mixed precision, as autocast). A
 * backend may round a convolution's result to bf16 before writing it in fp32 (cuDNN's bf16
 * convolutions do). fp16: the same with IEEE half inputs, which overflow to infinity beyond 65504:
 * the train loop scales the loss (dynamic loss scaling, grad_unscale). The CPU backend refuses it. */
enum { DT_PRECISION_FP32 = 0, DT_PRECISION_BF16 = 1, DT_PRECISION_FP16 = 2 };

/* A backend kind: built in, or a module loaded on first use (dtrain-NAME.so, as Open MPI loads its
 * components), so that a build with CUDA still runs where there is no CUDA. */
typedef struct dt_backend_desc {
    const char *name;
    const char *help;   /* one line */
    int hidden;         /* for tests: accepted by --device, listed only when it loads */
    /* 1 when it can run here; else 0 and why (library missing, no driver, no device) */
    int (*available)(char *why, size_t n);
    int (*create)(dt_backend **out, const dt_backend_opts *o);
    /* one line for the banner and --list-devices: libraries and versions, the device */
    const char *(*describe)(void);
    /* --list-devices: one line per device of this kind (may be NULL) */
    void (*list_devices)(FILE *f);
    /* the most device memory a backend of this kind has held at once, in bytes (may be NULL) */
    size_t (*peak_memory)(const dt_backend *be);
    /* --list-devices: which of its paths have run on the hardware and which were only compiled
     * (a backend CI cannot run: NULL where the tests run all of it) */
    const char *verified;
} dt_backend_desc;

/* The ABI of modules: a module exports `const dt_backend_desc *dtrain_backend_module(int abi)`,
 * which returns NULL when it was built for another ABI. */
#define DT_BACKEND_ABI 18
typedef const dt_backend_desc *(*dt_backend_module_fn)(int abi);

/* Finds NAME's descriptor, loading its module if it is one: NULL with the reason otherwise
 * (unknown name, not built, the module or a library it needs missing). */
const dt_backend_desc *backend_find(const char *name);
/* "cpu, cuda" for messages */
const char *backend_list(void);
/* 1 if NAME is a backend kind (built or not, hidden ones included); loads nothing. */
int backend_known(const char *name);
/* --list-devices: every kind, whether it runs here (or why not), what it is, its devices. */
void backend_list_devices(FILE *f);
/* Creates a backend by name through the registry. */
int backend_create(const char *name, const dt_backend_opts *o, dt_backend **out);
/* --device auto: the name of the best backend that runs here (cuda where it loads and sees a
 * GPU, else cpu), and in why one line saying why not cuda ("" when cuda). */
const char *backend_auto(char *why, size_t n);
/* The most device memory be has held at once (bytes; 0 for host-memory backends). */
size_t backend_peak_memory(const dt_backend *be);
/* Staging memory on the host for be's copies (its host_alloc, else dt_zalloc), and its free. */
void *backend_host_alloc(dt_backend *be, size_t bytes);
void backend_host_free(dt_backend *be, void *p);
/* The same as an allocator for code that cannot see backends (the data loader). */
dt_host_allocator backend_host_allocator(dt_backend *be);
/* A queue for a communication thread (be's queue_create), or be itself where ops are done when they
 * return; and its free (nothing for be itself). */
int backend_queue(dt_backend *be, dt_backend **q);
void backend_queue_free(dt_backend *be, dt_backend *q);
/* The describe line of a backend's kind. */
const char *backend_describe(const dt_backend *be);
/* Adds a kind (tests register the guarded backend this way); at most a few. */
int backend_register(const dt_backend_desc *d);
void backend_destroy(dt_backend *be);

/* The CPU backend (oneDNN for GEMM and the CNN ops, plain vectorised loops for the rest): the
 * registry's "cpu"; exported for the guarded test backend, which wraps its kernels. */
int backend_cpu_create(dt_backend **out, int n_threads);
/* ... with every option of o (n_threads, precision; a CPU without bf16 instructions refuses bf16,
 * every CPU fp16) */
int backend_cpu_create_with(dt_backend **out, const dt_backend_opts *o);
const char *backend_cpu_describe(void);

#endif
