/* The CPU backend's CNN ops, on oneDNN (the CPU counterpart of cuDNN).
 *
 * Measured here (tools/bench, issue #3): oneDNN's JIT AVX-512 convolutions run 3-5x faster than
 * im2col + OpenBLAS sgemm on the CIFAR nets' layers, so convolution, pooling and LRN use oneDNN;
 * batch norm's plans live here but its kernels are ours (backend_cpu_bn.c: oneDNN's sums are
 * float), and so are LRN's wherever oneDNN has only its reference code for it (backend_cpu_lrn.c),
 * and pooling's in NCHW, where oneDNN has no JIT kernel, and NHWC max pooling without AVX-512,
 * where its AVX2 kernel is 3-5x slower than a plain loop (backend_cpu_pool.c).
 * Activations whose channels are a multiple of 16 stay in oneDNN's blocked layout
 * (nChw16c) from layer to layer, so no layer pays a reorder in and out the way frameworks that
 * keep NCHW do; under --precision bf16 on a CPU with AMX they stay channels-last (NHWC) instead,
 * the layout oneDNN's AMX convolutions take, and so on CPUs without AVX-512, where oneDNN's
 * pooling has no nChw16c kernel (5x slower cifar-quick on an AVX2 EPYC). Weights stay in the arena in PyTorch's layout
 * and are reordered per call (they are small). Each plan builds its primitives on first use for a number of rows and
 * keeps them (a few: the training batch, the last short batch, evaluation).
 */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu.h"
#include "../util.h"
#include "backend.h"
#include "backend_cpu.h"

#define MAX_ENTRIES 6

static int dn_fail(dnnl_status_t s, const char *what) { return dt_fail("oneDNN: %s: %s", what, dnnl_status2str(s)); }

#define DN(call, what)                                                                                                 \
    do {                                                                                                               \
        dnnl_status_t s_ = (call);                                                                                     \
        if (s_ != dnnl_success) return dn_fail(s_, what);                                                              \
    } while (0)

static dnnl_engine_t eng(dt_backend *be) { return ((cpu_impl *)be->impl)->eng; }
static dnnl_stream_t stream(dt_backend *be) { return ((cpu_impl *)be->impl)->stream; }

/* Where a backward writes dx: dx itself, or (to accumulate into dx, or when there is no dx) a
 * scratch buffer of n floats kept in *tmp; NULL when out of memory. */
static float *dx_target(float *dx, float dx_beta, float **tmp, size_t n)
{
    if (dx && dx_beta == 0.0f) return dx;
    if (!*tmp && !(*tmp = dt_alloc(n * sizeof(float)))) return NULL;
    return *tmp;
}

static void destroy_all(dnnl_primitive_t *ps, size_t n_ps, dnnl_memory_t *ms, size_t n_ms)
{
    for (size_t i = 0; i < n_ps; i++)
        if (ps[i]) dnnl_primitive_destroy(ps[i]);
    for (size_t i = 0; i < n_ms; i++)
        if (ms[i]) dnnl_memory_destroy(ms[i]);
}

static dnnl_format_tag_t tag_of(dt_layout l)
{
    return l == DT_LAYOUT_BLOCK16 ? dnnl_nChw16c : l == DT_LAYOUT_NHWC ? dnnl_nhwc : dnnl_nchw;
}

static void md4t(dnnl_memory_desc_t *md, int n, int c, int h, int w, dt_layout l, dnnl_data_type_t t)
{
    dnnl_dims_t d = {n, c, h, w};
    dnnl_memory_desc_init_by_tag(md, 4, d, t, tag_of(l));
}

static void md4(dnnl_memory_desc_t *md, int n, int c, int h, int w, dt_layout l) { md4t(md, n, c, h, w, l, dnnl_f32); }

/* what a convolution multiplies in: bf16 under --precision bf16 */
static dnnl_data_type_t lo_type(dt_backend *be) { return ((cpu_impl *)be->impl)->bf16 ? dnnl_bf16 : dnnl_f32; }

/* a memory object for an md; its data handle is set before each use */
static int mem(dt_backend *be, dnnl_memory_t *m, const dnnl_memory_desc_t *md)
{
    DN(dnnl_memory_create(m, md, eng(be), DNNL_MEMORY_NONE), "memory");
    return 0;
}

static int run(dt_backend *be, dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args, const char *what)
{
    DN(dnnl_primitive_execute(p, stream(be), n, args), what);
    return 0;
}

static void set(dnnl_memory_t m, const void *ptr) { dnnl_memory_set_data_handle(m, (void *)ptr); }

/* a reorder from one md to another, NULL when they are the same. From fp32 to bf16 in the same
 * layout (the roundings of --precision bf16) it is our loop (cpu_round_bf16) instead of oneDNN's
 * reorder: oneDNN 2.6's jit:uni took 1.2 ms for resnet20's 128x16x32x32 activations, 12% of a bf16
 * iteration in all, and ours rounds as the GEMMs' operands are. */
typedef struct reorder {
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst;
    float *buf; /* the destination, when the op owns it */
    size_t bytes;
    size_t round_rows, round_cols; /* nonzero: rounded to bf16 by cpu_round_bf16, not by prim */
} reorder;

static int reorder_make(dt_backend *be, reorder *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                        int own_dst)
{
    dnnl_primitive_desc_t pd;
    memset(r, 0, sizeof *r);
    if (dnnl_memory_desc_equal(from, to)) return 0;
    dnnl_memory_desc_t as_bf16 = *from;
    as_bf16.data_type = dnnl_bf16;
    if (own_dst && from->data_type == dnnl_f32 && from->ndims > 1 && dnnl_memory_desc_equal(&as_bf16, to)) {
        size_t n = dnnl_memory_desc_get_size(from) / sizeof(float); /* padded channels included */
        r->round_rows = (size_t)from->padded_dims[0], r->round_cols = n / r->round_rows;
        r->bytes = n * sizeof(uint16_t);
        return (r->buf = dt_alloc(r->bytes)) ? 0 : -1;
    }
    DN(dnnl_reorder_primitive_desc_create(&pd, from, eng(be), to, eng(be), NULL), "reorder");
    dnnl_status_t s = dnnl_primitive_create(&r->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) return dn_fail(s, "reorder");
    if (mem(be, &r->src, from) || mem(be, &r->dst, to)) return -1;
    r->bytes = dnnl_memory_desc_get_size(to);
    if (own_dst && !(r->buf = dt_alloc(r->bytes))) return -1;
    return 0;
}

/* runs r (from x into its own buffer or into y); returns where the result is */
static const float *reorder_run(dt_backend *be, reorder *r, const float *x, float *y)
{
    if (r->round_rows) {
        cpu_round_bf16(be->n_threads, (uint16_t *)r->buf, x, r->round_rows, r->round_cols, r->round_cols);
        return r->buf;
    }
    if (!r->prim) return x;
    float *out = r->buf ? r->buf : y;
    set(r->src, x);
    set(r->dst, out);
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, r->src}, {DNNL_ARG_TO, r->dst}};
    return run(be, r->prim, 2, a, "reorder") == 0 ? out : NULL;
}

static void reorder_free(reorder *r)
{
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->src) dnnl_memory_destroy(r->src);
    if (r->dst) dnnl_memory_destroy(r->dst);
    dt_free(r->buf);
}

static dnnl_primitive_t prim_of(dnnl_primitive_desc_t pd)
{
    dnnl_primitive_t p = NULL;
    if (dnnl_primitive_create(&p, pd) != dnnl_success) return NULL;
    return p;
}

/* ---- plans: a kind tag, the configuration, entries per row count ---------------------------- */

enum { PLAN_CONV, PLAN_POOL, PLAN_BN, PLAN_LRN, PLAN_REORDER };

/* Under --precision bf16 the primitives take bf16 sources, weights and output gradients and write
 * fp32 outputs and gradients: x and dy are rounded into the entry's own buffers by reorders
 * (x_lo, x_w, dy_lo, dy_w), the weights by theirs. Where a layer's activations are plain (channels
 * not a multiple of 16) on either side and it has 16 input channels or more, the primitives choose
 * their own formats, in either precision (oneDNN's blocked kernels: 1.7x its GEMM-based bf16
 * convolution on lenet's conv2 here, 1.6x its im2col fp32 one), and x, dy are reordered to them and
 * y, dx back (y_out, dx_out). Between blocked or NHWC layers in fp32 these reorders are empty and
 * pass the pointers through.
 * A narrow layer (fewer than 16 input channels, a plain output: lenet's first) multiplies in fp32
 * in either precision, into the primitives' own (blocked) y and dy: oneDNN has no direct kernel
 * for a plain output and falls back on im2col GEMM, and with so few input channels bf16 gains
 * nothing. Measured on lenet's conv1 (1 -> 20 channels, 28x28, batch 100, 2 threads): forward 2.2
 * -> 1.0 ms, weights' gradient 5.1-5.7 -> 0.9 ms, for 2.0 ms of the two reorders. With an NHWC or
 * blocked output the fp32 and bf16 kernels are direct already and the precision decides. */
typedef struct conv_entry {
    int rows;
    dnnl_primitive_t fwd, bwd_data, bwd_w;
    dnnl_memory_t src, wei, bias, dst;               /* fwd */
    dnnl_memory_t d_src, d_wei_w, d_dst;             /* bwd data: weights in its format */
    dnnl_memory_t b_src, d_wei, d_bias, b_d_dst;     /* bwd weights */
    reorder w_fwd, w_bwd, dw_out;                    /* user weights -> fwd / bwd-data formats; dw -> user */
    reorder x_lo, x_w, dy_lo, dy_w;                  /* x -> fwd's, bwd weights' src; dy -> bwd data's, weights' */
    reorder y_out, dx_out;                           /* fwd's dst, bwd data's diff_src -> the layer's layout */
    float *dw_buf;                                   /* the weight gradient in the primitive's format */
    float *y_buf, *dx_buf;                           /* y and dx in the primitives' formats (with y_out, dx_out) */
    float *tmp;                                      /* dx when adding */
    int own_x_w, own_dy_w; /* the weights' pass takes x, dy in formats of its own: through x_w,
                            * dy_w (empty where that is the layer's layout), not x_lo, dy_lo */
    const float *x_lo_of; /* the x whose rounding x_lo's buffer holds from the forward, until the
                           * backward-weights pass takes it (NULL: none) */
} conv_entry;

typedef struct pool_entry {
    int rows;
    dnnl_primitive_t fwd_train, fwd_infer, bwd;
    dnnl_memory_t src, dst, ws, d_src, d_dst;
    float *tmp;
    int32_t *arg; /* NCHW max pooling in our loops: where each max came from (backend_cpu_pool.c) */
} pool_entry;

typedef struct lrn_entry {
    int rows;
    int ours_fwd, ours_bwd; /* oneDNN has only its reference code for it: our loops (backend_cpu_lrn.c) */
    dnnl_primitive_t fwd_train, fwd_infer, bwd;
    dnnl_memory_t src, dst, ws, d_src, d_dst;
    float *tmp;
} lrn_entry;

typedef struct plan {
    int kind, n;
    union {
        dt_conv_cfg conv;
        dt_pool_cfg pool;
        dt_bn_cfg bn;
        dt_lrn_cfg lrn;
    } cfg;
    void *e[MAX_ENTRIES];
} plan;

static plan *plan_new(int kind, const void *cfg, size_t cfg_size)
{
    plan *p = calloc(1, sizeof *p);
    if (!p) {
        dt_fail("out of memory");
        return NULL;
    }
    p->kind = kind;
    memcpy(&p->cfg, cfg, cfg_size);
    return p;
}

static void *find(plan *p, int rows)
{
    for (int i = 0; i < p->n; i++)
        if (*(int *)p->e[i] == rows) return p->e[i];
    return NULL;
}

static int keep(plan *p, void *e)
{
    if (p->n == MAX_ENTRIES) return dt_fail("internal: more than %d batch sizes for one layer", MAX_ENTRIES);
    p->e[p->n++] = e;
    return 0;
}


/* ---- convolution ------------------------------------------------------------------------------- */

static void wei_md(const dt_conv_cfg *c, dnnl_memory_desc_t *md, int any, dnnl_data_type_t t)
{
    if (c->groups == 1) {
        dnnl_dims_t d = {c->o, c->c, c->kh, c->kw};
        dnnl_memory_desc_init_by_tag(md, 4, d, t, any ? dnnl_format_tag_any : dnnl_oihw);
    } else {
        dnnl_dims_t d = {c->groups, c->o / c->groups, c->c / c->groups, c->kh, c->kw};
        dnnl_memory_desc_init_by_tag(md, 5, d, t, any ? dnnl_format_tag_any : dnnl_goihw);
    }
}

/* The formats the convolution's primitives take x, dx, y and dy in (see conv_entry); own: all
 * four chosen by oneDNN */
static void conv_formats(const dt_conv_cfg *c, int rows, int own, int narrow, dnnl_data_type_t lo,
                         dnnl_memory_desc_t *src_p, dnnl_memory_desc_t *dsrc_p, dnnl_memory_desc_t *dst_p,
                         dnnl_memory_desc_t *ddst_p)
{
    dnnl_dims_t sd = {rows, c->c, c->h, c->w}, dd = {rows, c->o, c->oh, c->ow};
    if (own) { /* the primitives' own formats */
        dnnl_memory_desc_init_by_tag(src_p, 4, sd, lo, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(dsrc_p, 4, sd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(dst_p, 4, dd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(ddst_p, 4, dd, lo, dnnl_format_tag_any);
    } else if (narrow) { /* x as it is, y and dy in the primitives' format */
        md4(src_p, rows, c->c, c->h, c->w, c->in_layout);
        *dsrc_p = *src_p;
        dnnl_memory_desc_init_by_tag(dst_p, 4, dd, dnnl_f32, dnnl_format_tag_any);
        *ddst_p = *dst_p;
    } else if (lo != dnnl_f32 && (c->in_layout == DT_LAYOUT_NHWC || c->out_layout == DT_LAYOUT_NHWC)) {
        /* channels last on both sides: from plain to NHWC (the first layer's 3 channels) oneDNN
         * has no bf16 kernel but its reference one (ref:any in ONEDNN_VERBOSE) */
        md4t(src_p, rows, c->c, c->h, c->w, DT_LAYOUT_NHWC, lo);
        md4t(dsrc_p, rows, c->c, c->h, c->w, DT_LAYOUT_NHWC, dnnl_f32);
        md4t(dst_p, rows, c->o, c->oh, c->ow, DT_LAYOUT_NHWC, c->out_bf16 ? dnnl_bf16 : dnnl_f32);
        md4t(ddst_p, rows, c->o, c->oh, c->ow, DT_LAYOUT_NHWC, lo);
    } else { /* the layer's layouts; the inputs in the type the primitives multiply in */
        md4t(src_p, rows, c->c, c->h, c->w, c->in_layout, lo);
        md4t(ddst_p, rows, c->o, c->oh, c->ow, c->out_layout, lo);
        md4(dsrc_p, rows, c->c, c->h, c->w, c->in_layout); /* dx in fp32, of an in_bf16 x too */
        md4t(dst_p, rows, c->o, c->oh, c->ow, c->out_layout, c->out_bf16 ? dnnl_bf16 : dnnl_f32);
    }
}

/* whether oneDNN chose its reference implementation (orders of magnitude slower than its JIT) */
static int is_ref(dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           (strncmp(impl, "ref", 3) == 0 || strstr(impl, "_ref") != NULL); /* ref:any, lrn_ref:any */
}

static void pd_destroy(dnnl_primitive_desc_t *pd)
{
    if (*pd) dnnl_primitive_desc_destroy(*pd);
    *pd = NULL;
}

/* Whether the weights' gradient multiplies in fp32 under --precision bf16, on x and dy as they
 * are (no rounding; they are the layer's fp32 activations): where oneDNN 2.6's AVX512_BF16
 * backward-weights kernel is slower than its fp32 one. It is for the strided 3x3 layers of the
 * CIFAR ResNets (16 -> 32 channels at 32x32, 32 -> 64 at 16x16), batch 64 and up: ResNet-20's
 * batch 128 took 4.8 ms each in bf16, 1.75 in fp32 (ONEDNN_VERBOSE, 2026-12-02, an EPYC without
 * AMX; tools/bench_convs measures it per shape), while ImageNet's strided layers (64 channels and
 * up) gain 1.5-2x from bf16 there. A fixed rule, not a timing taken at run time, so that runs,
 * reruns and resumes compute the same bits. Not with AMX, whose kernels were not measured so. */
static int weights_in_fp32(const dt_conv_cfg *c, int rows)
{
    return !cpu_has_amx() && (c->sh > 1 || c->sw > 1) && c->kh * c->kw > 1 && c->c >= 16 && c->c <= 32 &&
           c->groups == 1 && rows >= 64;
}

static int conv_entry_make(dt_backend *be, const dt_conv_cfg *c, int rows, conv_entry *e)
{
    dnnl_memory_desc_t src, dsrc, dst, src_p, dst_p, dsrc_p, ddst_p, src_w, ddst_w, wany, wany_lo, wuser, bias;
    dnnl_convolution_desc_t fd, bd, wd;
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL, wpd = NULL;
    dnnl_dims_t st = {c->sh, c->sw}, pl = {c->pt, c->pl}, pr = {c->pb, c->pr}, bdims = {c->o};
    int narrow = c->c < 16 && c->out_layout == DT_LAYOUT_PLAIN;
    dnnl_data_type_t lo = narrow ? dnnl_f32 : lo_type(be);
    int own = c->c >= 16 && (c->in_layout == DT_LAYOUT_PLAIN || c->out_layout == DT_LAYOUT_PLAIN);
    int rc = -1;
    e->rows = rows;
    md4t(&src, rows, c->c, c->h, c->w, c->in_layout, c->in_bf16 ? dnnl_bf16 : dnnl_f32);     /* x */
    md4(&dsrc, rows, c->c, c->h, c->w, c->in_layout);                                        /* dx */
    md4t(&dst, rows, c->o, c->oh, c->ow, c->out_layout, c->out_bf16 ? dnnl_bf16 : dnnl_f32); /* y and dy */
    wei_md(c, &wany, 1, dnnl_f32);
    wei_md(c, &wany_lo, 1, lo);
    wei_md(c, &wuser, 0, dnnl_f32);
    dnnl_memory_desc_init_by_tag(&bias, 1, bdims, dnnl_f32, dnnl_a);
    /* forward: lo x, lo w -> fp32 y; backward data: lo dy, lo w -> fp32 dx; weights: lo x, lo dy -> fp32 dw.
     * Where the layer's formats leave oneDNN only its reference kernels (a plain x of 12 channels
     * into a blocked y), once more on formats of its choosing. */
    for (;;) {
        conv_formats(c, rows, own, narrow, lo, &src_p, &dsrc_p, &dst_p, &ddst_p);
        DN(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src_p, &wany_lo,
                                              c->bias ? &bias : NULL, &dst_p, st, pl, pr),
           "convolution forward");
        DN(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng(be), NULL), "convolution forward");
        DN(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &dsrc_p, &wany_lo, &ddst_p, st, pl,
                                                    pr),
           "convolution backward data");
        if (dnnl_primitive_desc_create(&bpd, &bd, NULL, eng(be), fpd) != dnnl_success) {
            dt_fail("oneDNN: no backward-data convolution for this layer");
            goto out;
        }
        src_w = src_p, ddst_w = ddst_p;
        if (lo != dnnl_f32 && weights_in_fp32(c, rows)) src_w.data_type = ddst_w.data_type = dnnl_f32;
        if (dnnl_convolution_backward_weights_desc_init(&wd, dnnl_convolution_direct, &src_w, &wany,
                                                         c->bias ? &bias : NULL, &ddst_w, st, pl, pr) != dnnl_success ||
            dnnl_primitive_desc_create(&wpd, &wd, NULL, eng(be), fpd) != dnnl_success) {
            dt_fail("oneDNN: no backward-weights convolution for this layer");
            goto out;
        }
        if (own || !(is_ref(fpd) || is_ref(bpd) || is_ref(wpd))) break;
        pd_destroy(&fpd), pd_destroy(&bpd), pd_destroy(&wpd);
        own = 1;
    }
#define Q(pd, what) dnnl_primitive_desc_query_md(pd, what, 0)
    const dnnl_memory_desc_t *fw = Q(fpd, dnnl_query_weights_md), *bw = Q(bpd, dnnl_query_weights_md),
                             *dw = Q(wpd, dnnl_query_diff_weights_md), *fs = Q(fpd, dnnl_query_src_md),
                             *fdst = Q(fpd, dnnl_query_dst_md), *bs = Q(bpd, dnnl_query_diff_src_md),
                             *bdd = Q(bpd, dnnl_query_diff_dst_md), *ws = Q(wpd, dnnl_query_src_md),
                             *wdd = Q(wpd, dnnl_query_diff_dst_md);
#undef Q
    if (!(e->fwd = prim_of(fpd)) || !(e->bwd_data = prim_of(bpd)) || !(e->bwd_w = prim_of(wpd))) {
        dt_fail("oneDNN: cannot create the convolution primitives");
        goto out;
    }
    if (mem(be, &e->src, fs) || mem(be, &e->wei, fw) || mem(be, &e->bias, &bias) || mem(be, &e->dst, fdst) ||
        mem(be, &e->d_src, bs) || mem(be, &e->d_wei_w, bw) || mem(be, &e->d_dst, bdd) || mem(be, &e->b_src, ws) ||
        mem(be, &e->d_wei, dw) || mem(be, &e->d_bias, &bias) || mem(be, &e->b_d_dst, wdd) ||
        reorder_make(be, &e->w_fwd, &wuser, fw, 1) || reorder_make(be, &e->w_bwd, &wuser, bw, 1) ||
        reorder_make(be, &e->dw_out, dw, &wuser, 0) || reorder_make(be, &e->x_lo, &src, fs, 1) ||
        reorder_make(be, &e->dy_lo, &dst, bdd, 1) || reorder_make(be, &e->y_out, fdst, &dst, 0) ||
        reorder_make(be, &e->dx_out, bs, &dsrc, 0))
        goto out;
    /* the weights' pass takes x and dy as the others do (then it reuses their reorders), or its own */
    e->own_x_w = !dnnl_memory_desc_equal(ws, fs), e->own_dy_w = !dnnl_memory_desc_equal(wdd, bdd);
    if ((e->own_x_w && reorder_make(be, &e->x_w, &src, ws, 1)) ||
        (e->own_dy_w && reorder_make(be, &e->dy_w, &dst, wdd, 1)))
        goto out;
    if ((e->dw_out.prim && !(e->dw_buf = dt_alloc(dnnl_memory_desc_get_size(dw)))) ||
        (e->y_out.prim && !(e->y_buf = dt_alloc(dnnl_memory_desc_get_size(fdst)))) ||
        (e->dx_out.prim && !(e->dx_buf = dt_alloc(dnnl_memory_desc_get_size(bs)))))
        goto out;
    rc = 0;
out:
    pd_destroy(&fpd), pd_destroy(&bpd), pd_destroy(&wpd);
    return rc;
}

/* y and dy in bf16 (backend.h) where the primitives take the layer's layouts on both sides and
 * multiply in bf16 in every pass at every batch: dy is then in the type bf16 that the backward
 * passes take it in (its rounding, a pass of its own, gone), and the forward's kernel writes y
 * rounded to nearest even (oneDNN's conversion, as ours). Elsewhere a reorder would convert each
 * way and the weights' gradient of weights_in_fp32 would take dy rounded. */
static int cpu_conv_bf16_out(dt_backend *be, const dt_conv_cfg *c)
{
    return ((cpu_impl *)be->impl)->bf16 && c->in_layout != DT_LAYOUT_PLAIN && c->out_layout != DT_LAYOUT_PLAIN &&
           !weights_in_fp32(c, INT_MAX);
}

/* x in bf16 (backend.h) where x is rounded to bf16 in its own layout for every pass (the layer's
 * layouts on both sides; no weights' gradient in fp32): the batch norm before writes that rounding */
static int cpu_conv_bf16_in(dt_backend *be, const dt_conv_cfg *c) { return cpu_conv_bf16_out(be, c); }

static void *cpu_conv_plan(dt_backend *be, const dt_conv_cfg *cfg)
{
    (void)be;
    return plan_new(PLAN_CONV, cfg, sizeof *cfg);
}

static conv_entry *conv_get(dt_backend *be, plan *p, int rows)
{
    conv_entry *e = find(p, rows);
    if (e) return e;
    if (!(e = calloc(1, sizeof *e))) {
        dt_fail("out of memory");
        return NULL;
    }
    if (conv_entry_make(be, &p->cfg.conv, rows, e) != 0 || keep(p, e) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

static int cpu_conv_fwd(dt_backend *be, void *pv, int rows, const float *x, const float *w, const float *b, float *y)
{
    if (rows <= 0) return 0;
    conv_entry *e = conv_get(be, pv, rows);
    if (!e) return -1;
    const float *wf = reorder_run(be, &e->w_fwd, w, NULL), *xl = reorder_run(be, &e->x_lo, x, NULL);
    if (!wf || !xl) return -1;
    e->x_lo_of = e->x_lo.buf ? x : NULL;
    set(e->src, xl), set(e->wei, wf), set(e->dst, e->y_out.prim ? e->y_buf : y);
    if (b) set(e->bias, b);
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei}, {DNNL_ARG_DST, e->dst},
                           {DNNL_ARG_BIAS, e->bias}};
    if (run(be, e->fwd, b ? 4 : 3, a, "convolution forward") != 0) return -1;
    return e->y_out.prim && !reorder_run(be, &e->y_out, e->y_buf, y) ? -1 : 0;
}

static int cpu_conv_bwd(dt_backend *be, void *pv, int rows, const float *x, const float *w, const float *dy, float *dx,
                        float dx_beta, float *dw, float *db)
{
    plan *p = pv;
    const dt_conv_cfg *c = &p->cfg.conv;
    if (rows <= 0) return 0;
    conv_entry *e = conv_get(be, pv, rows);
    if (!e) return -1;
    const float *dyl = reorder_run(be, &e->dy_lo, dy, NULL);
    if (!dyl) return -1;
    if (dx) {
        size_t n = be->act_size(be, c->in_layout, rows, c->c, c->h, c->w);
        float *out = dx_target(dx, dx_beta, &e->tmp, n);
        if (!out) return -1;
        const float *wb = reorder_run(be, &e->w_bwd, w, NULL);
        if (!wb) return -1;
        set(e->d_dst, dyl), set(e->d_wei_w, wb), set(e->d_src, e->dx_out.prim ? e->dx_buf : out);
        dnnl_exec_arg_t a[] = {
            {DNNL_ARG_DIFF_DST, e->d_dst}, {DNNL_ARG_WEIGHTS, e->d_wei_w}, {DNNL_ARG_DIFF_SRC, e->d_src}};
        if (run(be, e->bwd_data, 3, a, "convolution backward data") != 0) return -1;
        if (e->dx_out.prim && !reorder_run(be, &e->dx_out, e->dx_buf, out)) return -1;
        if (dx_beta != 0.0f && be->add(be, dx, e->tmp, n, 1.0f) != 0) return -1;
    }
    if (dw) {
        float *out = e->dw_out.prim ? e->dw_buf : dw;
        /* the forward's rounding of this x where this pass takes x as the forward does: backward
         * follows its forward (backend.h), and a third of the activations' roundings is saved */
        int again = !e->own_x_w && e->x_lo_of == x;
        const float *xw = again ? e->x_lo.buf : reorder_run(be, e->own_x_w ? &e->x_w : &e->x_lo, x, NULL),
                    *dyw = e->own_dy_w ? reorder_run(be, &e->dy_w, dy, NULL) : dyl;
        e->x_lo_of = NULL;
        if (!xw || !dyw) return -1;
        set(e->b_src, xw), set(e->b_d_dst, dyw), set(e->d_wei, out);
        if (db) set(e->d_bias, db);
        dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, e->b_src}, {DNNL_ARG_DIFF_DST, e->b_d_dst},
                               {DNNL_ARG_DIFF_WEIGHTS, e->d_wei}, {DNNL_ARG_DIFF_BIAS, e->d_bias}};
        if (run(be, e->bwd_w, db && c->bias ? 4 : 3, a, "convolution backward weights") != 0) return -1;
        if (e->dw_out.prim && !reorder_run(be, &e->dw_out, e->dw_buf, dw)) return -1;
    }
    return 0;
}

static void conv_entry_free(conv_entry *e)
{
    dnnl_primitive_t ps[] = {e->fwd, e->bwd_data, e->bwd_w};
    dnnl_memory_t ms[] = {e->src,   e->wei,   e->bias,  e->dst,    e->d_src,  e->d_wei_w,
                          e->d_dst, e->b_src, e->d_wei, e->d_bias, e->b_d_dst};
    destroy_all(ps, DT_ARRAY_LEN(ps), ms, DT_ARRAY_LEN(ms));
    reorder_free(&e->w_fwd);
    reorder_free(&e->w_bwd);
    reorder_free(&e->dw_out);
    reorder_free(&e->x_lo);
    reorder_free(&e->x_w);
    reorder_free(&e->dy_lo);
    reorder_free(&e->dy_w);
    reorder_free(&e->y_out);
    reorder_free(&e->dx_out);
    dt_free(e->dw_buf);
    dt_free(e->y_buf);
    dt_free(e->dx_buf);
    dt_free(e->tmp);
    free(e);
}

/* ---- pooling ----------------------------------------------------------------------------------- */

/* NCHW pooling, and NHWC max pooling on CPUs without AVX-512, run in our loops (backend_cpu_pool.c
 * says why) */
static int ours(dt_backend *be, const dt_pool_cfg *c)
{
    return c->layout == DT_LAYOUT_PLAIN ||
           (c->layout == DT_LAYOUT_NHWC && c->max && ((cpu_impl *)be->impl)->nhwc_max_ours);
}

static int pool_entry_make(dt_backend *be, const dt_pool_cfg *c, int rows, pool_entry *e)
{
    dnnl_memory_desc_t src, dst;
    dnnl_pooling_desc_t ft, fi, bd;
    dnnl_primitive_desc_t tpd = NULL, ipd = NULL, bpd = NULL;
    dnnl_dims_t st = {c->sh, c->sw}, k = {c->kh, c->kw}, pl = {c->pt, c->pl}, pr = {c->pb, c->pr};
    dnnl_alg_kind_t alg = c->max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    int rc = -1;
    e->rows = rows;
    if (ours(be, c)) { /* our loops */
        if (c->max && !(e->arg = dt_alloc((size_t)rows * c->c * c->oh * c->ow * sizeof *e->arg))) return -1;
        return 0;
    }
    md4(&src, rows, c->c, c->h, c->w, c->layout);
    md4(&dst, rows, c->c, c->oh, c->ow, c->layout);
    DN(dnnl_pooling_forward_desc_init(&ft, dnnl_forward_training, alg, &src, &dst, st, k, pl, pr), "pooling");
    DN(dnnl_pooling_forward_desc_init(&fi, dnnl_forward_inference, alg, &src, &dst, st, k, pl, pr), "pooling");
    DN(dnnl_pooling_backward_desc_init(&bd, alg, &src, &dst, st, k, pl, pr), "pooling backward");
    if (dnnl_primitive_desc_create(&tpd, &ft, NULL, eng(be), NULL) != dnnl_success ||
        dnnl_primitive_desc_create(&ipd, &fi, NULL, eng(be), NULL) != dnnl_success ||
        dnnl_primitive_desc_create(&bpd, &bd, NULL, eng(be), tpd) != dnnl_success) {
        dt_fail("oneDNN: no pooling primitive for this layer");
        goto out;
    }
    if (!(e->fwd_train = prim_of(tpd)) || !(e->fwd_infer = prim_of(ipd)) || !(e->bwd = prim_of(bpd))) {
        dt_fail("oneDNN: cannot create the pooling primitives");
        goto out;
    }
    if (mem(be, &e->src, &src) || mem(be, &e->dst, &dst) || mem(be, &e->d_src, &src) || mem(be, &e->d_dst, &dst))
        goto out;
    if (c->max) {
        const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(tpd, dnnl_query_workspace_md, 0);
        if (dnnl_memory_create(&e->ws, ws, eng(be), DNNL_MEMORY_ALLOCATE) != dnnl_success) {
            dt_fail("oneDNN: pooling workspace");
            goto out;
        }
    }
    rc = 0;
out:
    if (tpd) dnnl_primitive_desc_destroy(tpd);
    if (ipd) dnnl_primitive_desc_destroy(ipd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    return rc;
}

#define GET_ENTRY(type, make, cfgfield)                                                                                \
    type *e = find(p, rows);                                                                                           \
    if (!e) {                                                                                                          \
        if (!(e = calloc(1, sizeof *e))) return dt_fail("out of memory");                                             \
        if (make(be, &p->cfg.cfgfield, rows, e) != 0 || keep(p, e) != 0) {                                            \
            free(e);                                                                                                   \
            return -1;                                                                                                 \
        }                                                                                                              \
    }

static void *cpu_pool_plan(dt_backend *be, const dt_pool_cfg *cfg)
{
    (void)be;
    return plan_new(PLAN_POOL, cfg, sizeof *cfg);
}

static int cpu_pool_fwd(dt_backend *be, void *pv, int rows, int train, const float *x, float *y)
{
    plan *p = pv;
    if (rows <= 0) return 0;
    GET_ENTRY(pool_entry, pool_entry_make, pool)
    if (ours(be, &p->cfg.pool)) /* oneDNN's is its generic simple_nchw, or slow: backend_cpu_pool.c */
        return cpu_pool_forward(&p->cfg.pool, be->n_threads, rows, x, y, train ? e->arg : NULL);
    set(e->src, x), set(e->dst, y);
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_DST, e->dst}, {DNNL_ARG_WORKSPACE, e->ws}};
    return train ? run(be, e->fwd_train, e->ws ? 3 : 2, a, "pooling") : run(be, e->fwd_infer, 2, a, "pooling");
}

static int cpu_pool_bwd(dt_backend *be, void *pv, int rows, const float *dy, float *dx, float dx_beta)
{
    plan *p = pv;
    const dt_pool_cfg *c = &p->cfg.pool;
    if (rows <= 0) return 0;
    GET_ENTRY(pool_entry, pool_entry_make, pool)
    if (ours(be, c)) return dx ? cpu_pool_backward(c, be->n_threads, rows, e->arg, dy, dx, dx_beta) : 0;
    size_t n = be->act_size(be, c->layout, rows, c->c, c->h, c->w);
    float *out = dx_target(dx, dx_beta, &e->tmp, n);
    if (!out) return -1;
    set(e->d_dst, dy), set(e->d_src, out);
    dnnl_exec_arg_t a[] = {{DNNL_ARG_DIFF_DST, e->d_dst}, {DNNL_ARG_DIFF_SRC, e->d_src}, {DNNL_ARG_WORKSPACE, e->ws}};
    if (run(be, e->bwd, e->ws ? 3 : 2, a, "pooling backward") != 0) return -1;
    if (dx_beta != 0.0f && be->add(be, dx, e->tmp, n, 1.0f) != 0) return -1;
    return 0;
}

static void pool_entry_free(pool_entry *e)
{
    dnnl_primitive_t ps[] = {e->fwd_train, e->fwd_infer, e->bwd};
    dnnl_memory_t ms[] = {e->src, e->dst, e->ws, e->d_src, e->d_dst};
    destroy_all(ps, DT_ARRAY_LEN(ps), ms, DT_ARRAY_LEN(ms));
    dt_free(e->tmp);
    dt_free(e->arg);
    free(e);
}

/* ---- batch normalisation ------------------------------------------------------------------------ */

static void *cpu_bn_plan(dt_backend *be, const dt_bn_cfg *cfg)
{
    (void)be;
    return plan_new(PLAN_BN, cfg, sizeof *cfg);
}

static int cpu_bn_fwd(dt_backend *be, void *pv, int rows, int train, const float *x, const float *scale,
                      const float *shift, float *mean, float *var, float *y)
{
    plan *p = pv;
    if (rows <= 0) return 0;
    return cpu_bn_forward(&p->cfg.bn, be->n_threads, rows, train, x, scale, shift, mean, var, y);
}

static int cpu_bn_bwd(dt_backend *be, void *pv, int rows, const float *x, const float *scale, const float *mean,
                      const float *var, const float *dy, const float *y, float *dx, float dx_beta, float *dscale,
                      float *dshift)
{
    plan *p = pv;
    if (rows <= 0) return 0;
    return cpu_bn_backward(&p->cfg.bn, be->n_threads, rows, x, scale, mean, var, dy, y, dx, dx_beta, dscale, dshift);
}

/* ---- local response normalisation --------------------------------------------------------------- */

static int lrn_entry_make(dt_backend *be, const dt_lrn_cfg *c, int rows, lrn_entry *e)
{
    dnnl_memory_desc_t data;
    dnnl_lrn_desc_t ft, fi, bd;
    dnnl_primitive_desc_t tpd = NULL, ipd = NULL, bpd = NULL;
    int rc = -1;
    e->rows = rows;
    md4(&data, rows, c->c, c->h, c->w, c->layout);
    DN(dnnl_lrn_forward_desc_init(&ft, dnnl_forward_training, dnnl_lrn_across_channels, &data, c->size, c->alpha,
                                  c->beta, c->k),
       "LRN");
    DN(dnnl_lrn_forward_desc_init(&fi, dnnl_forward_inference, dnnl_lrn_across_channels, &data, c->size, c->alpha,
                                  c->beta, c->k),
       "LRN");
    DN(dnnl_lrn_backward_desc_init(&bd, dnnl_lrn_across_channels, &data, &data, c->size, c->alpha, c->beta, c->k),
       "LRN backward");
    if (dnnl_primitive_desc_create(&tpd, &ft, NULL, eng(be), NULL) != dnnl_success ||
        dnnl_primitive_desc_create(&ipd, &fi, NULL, eng(be), NULL) != dnnl_success ||
        dnnl_primitive_desc_create(&bpd, &bd, NULL, eng(be), tpd) != dnnl_success) {
        dt_fail("oneDNN: no LRN primitive for this layer");
        goto out;
    }
    if (!(e->fwd_train = prim_of(tpd)) || !(e->fwd_infer = prim_of(ipd)) || !(e->bwd = prim_of(bpd))) {
        dt_fail("oneDNN: cannot create the LRN primitives");
        goto out;
    }
    /* a forward in our loops leaves oneDNN's backward without its workspace */
    e->ours_fwd = is_ref(tpd) || is_ref(ipd);
    e->ours_bwd = e->ours_fwd || is_ref(bpd);
    if (mem(be, &e->src, &data) || mem(be, &e->dst, &data) || mem(be, &e->d_src, &data) || mem(be, &e->d_dst, &data))
        goto out;
    const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(tpd, dnnl_query_workspace_md, 0);
    if (ws && ws->ndims > 0 && dnnl_memory_create(&e->ws, ws, eng(be), DNNL_MEMORY_ALLOCATE) != dnnl_success) {
        dt_fail("oneDNN: LRN workspace");
        goto out;
    }
    rc = 0;
out:
    if (tpd) dnnl_primitive_desc_destroy(tpd);
    if (ipd) dnnl_primitive_desc_destroy(ipd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    return rc;
}

static void *cpu_lrn_plan(dt_backend *be, const dt_lrn_cfg *cfg)
{
    (void)be;
    return plan_new(PLAN_LRN, cfg, sizeof *cfg);
}

/* oneDNN's JIT kernels where it has them (its forward in NHWC ran 2.5x as fast as our loops on an
 * AVX2 EPYC), our loops where it has only its reference code (backend_cpu_lrn.c) */
static int cpu_lrn_fwd(dt_backend *be, void *pv, int rows, int train, const float *x, float *y)
{
    plan *p = pv;
    if (rows <= 0) return 0;
    GET_ENTRY(lrn_entry, lrn_entry_make, lrn)
    if (e->ours_fwd) return cpu_lrn_forward(&p->cfg.lrn, be->n_threads, rows, x, y);
    set(e->src, x), set(e->dst, y);
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_DST, e->dst}, {DNNL_ARG_WORKSPACE, e->ws}};
    return train ? run(be, e->fwd_train, e->ws ? 3 : 2, a, "LRN") : run(be, e->fwd_infer, 2, a, "LRN");
}

static int cpu_lrn_bwd(dt_backend *be, void *pv, int rows, const float *x, const float *dy, float *dx, float dx_beta)
{
    plan *p = pv;
    const dt_lrn_cfg *c = &p->cfg.lrn;
    if (rows <= 0 || !dx) return 0;
    GET_ENTRY(lrn_entry, lrn_entry_make, lrn)
    if (e->ours_bwd) return cpu_lrn_backward(c, be->n_threads, rows, x, dy, dx, dx_beta);
    size_t n = be->act_size(be, c->layout, rows, c->c, c->h, c->w);
    float *out = dx_target(dx, dx_beta, &e->tmp, n);
    if (!out) return -1;
    set(e->src, x), set(e->d_dst, dy), set(e->d_src, out);
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_DIFF_DST, e->d_dst}, {DNNL_ARG_DIFF_SRC, e->d_src},
                           {DNNL_ARG_WORKSPACE, e->ws}};
    if (run(be, e->bwd, e->ws ? 4 : 3, a, "LRN backward") != 0) return -1;
    if (dx_beta != 0.0f && be->add(be, dx, e->tmp, n, 1.0f) != 0) return -1;
    return 0;
}

static void lrn_entry_free(lrn_entry *e)
{
    dnnl_primitive_t ps[] = {e->fwd_train, e->fwd_infer, e->bwd};
    dnnl_memory_t ms[] = {e->src, e->dst, e->ws, e->d_src, e->d_dst};
    destroy_all(ps, DT_ARRAY_LEN(ps), ms, DT_ARRAY_LEN(ms));
    dt_free(e->tmp);
    free(e);
}

/* ---- layouts ------------------------------------------------------------------------------------ */

static dt_layout cpu_layout_for(dt_backend *be, int c, int h, int w)
{
    (void)h, (void)w;
    if (c % 16) return DT_LAYOUT_PLAIN;
    return ((cpu_impl *)be->impl)->nhwc ? DT_LAYOUT_NHWC : DT_LAYOUT_BLOCK16;
}

static size_t cpu_act_size(dt_backend *be, dt_layout l, int rows, int c, int h, int w)
{
    (void)be;
    size_t cp = l == DT_LAYOUT_BLOCK16 ? ((size_t)c + 15) / 16 * 16 : (size_t)c;
    return (size_t)rows * cp * (size_t)h * (size_t)w;
}

/* element (n, c, h, w) of a [rows][C][H][W] tensor in layout l */
static size_t at(dt_layout l, int n, int c, int h, int w, int C, int H, int W)
{
    if (l == DT_LAYOUT_BLOCK16) {
        size_t cb = (size_t)(C + 15) / 16;
        return ((((size_t)n * cb + (size_t)c / 16) * H + h) * W + w) * 16 + (size_t)c % 16;
    }
    if (l == DT_LAYOUT_NHWC) return (((size_t)n * H + h) * W + w) * C + c;
    return (((size_t)n * C + c) * H + h) * W + w;
}

/* from a pixel to the next (w + 1) in layout l, channel fixed: at(l, n, c, h, w) is
 * at(l, n, c, 0, 0) + (h W + w) pixel_step */
static size_t pixel_step(dt_layout l, int C)
{
    return l == DT_LAYOUT_BLOCK16 ? 16 : l == DT_LAYOUT_NHWC ? (size_t)C : 1;
}

/* layout l <-> plain without oneDNN objects: an index permutation, y = beta y + x */
static void relayout(dt_layout l, int to_plain, const float *x, float *y, int rows, int c, int h, int w, float beta)
{
    const size_t hw = (size_t)h * w, step = pixel_step(l, c);
    for (int n = 0; n < rows; n++)
        for (int ch = 0; ch < c; ch++) {
            const size_t plain = ((size_t)n * c + ch) * hw, other = at(l, n, ch, 0, 0, c, h, w);
            for (size_t s = 0; s < hw; s++) {
                size_t pi = plain + s, oi = other + s * step;
                if (to_plain) y[pi] = beta == 0.0f ? x[oi] : y[pi] + x[oi];
                else y[oi] = beta == 0.0f ? x[pi] : y[oi] + x[pi];
            }
        }
}

static int cpu_to_plain(dt_backend *be, dt_layout from, const float *x, float *y, int rows, int c, int h, int w)
{
    if (from == DT_LAYOUT_PLAIN) return be->copy(be, y, x, sizeof(float) * (size_t)rows * c * h * w);
    relayout(from, 1, x, y, rows, c, h, w, 0.0f);
    return 0;
}

static int cpu_from_plain(dt_backend *be, dt_layout to, const float *x, float *y, int rows, int c, int h, int w,
                          float beta)
{
    if (to == DT_LAYOUT_PLAIN) return be->add(be, y, x, (size_t)rows * c * h * w, beta);
    relayout(to, 0, x, y, rows, c, h, w, beta);
    return 0;
}

/* the shortcut's rows on the backend's threads: each writes its own */
static int shortcut_threads(dt_backend *be, const dt_shortcut_cfg *s, int rows)
{
    return cpu_threads_for(be->n_threads, (size_t)rows * s->c * s->oh * s->ow);
}

static int cpu_shortcut_fwd(dt_backend *be, const dt_shortcut_cfg *s, int rows, const float *x, float *y)
{
    memset(y, 0, be->act_size(be, s->out_layout, rows, s->o, s->oh, s->ow) * sizeof(float));
    const uint16_t *xh = (const uint16_t *)(const void *)x; /* in_bf16: the stream's bf16 */
    int nt = shortcut_threads(be, s, rows);
    const size_t xs = pixel_step(s->in_layout, s->c), ys = pixel_step(s->out_layout, s->o);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int n = 0; n < rows; n++)
        for (int c = 0; c < s->c; c++) {
            const size_t xb = at(s->in_layout, n, c, 0, 0, s->c, s->h, s->w),
                         yb = at(s->out_layout, n, c + s->front, 0, 0, s->o, s->oh, s->ow);
            for (int i = 0; i < s->oh; i++)
                for (int j = 0; j < s->ow; j++) {
                    size_t k = xb + ((size_t)i * s->stride * s->w + (size_t)j * s->stride) * xs;
                    y[yb + ((size_t)i * s->ow + j) * ys] = s->in_bf16 ? cpu_float_of_bf16(xh[k]) : x[k];
                }
        }
    return 0;
}

static int cpu_shortcut_bwd(dt_backend *be, const dt_shortcut_cfg *s, int rows, const float *dy, float *dx,
                            float dx_beta)
{
    if (dx_beta == 0.0f) memset(dx, 0, be->act_size(be, s->in_layout, rows, s->c, s->h, s->w) * sizeof(float));
    int nt = shortcut_threads(be, s, rows);
    const size_t xs = pixel_step(s->in_layout, s->c), ys = pixel_step(s->out_layout, s->o);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int n = 0; n < rows; n++)
        for (int c = 0; c < s->c; c++) {
            const size_t xb = at(s->in_layout, n, c, 0, 0, s->c, s->h, s->w),
                         yb = at(s->out_layout, n, c + s->front, 0, 0, s->o, s->oh, s->ow);
            for (int i = 0; i < s->oh; i++)
                for (int j = 0; j < s->ow; j++)
                    dx[xb + ((size_t)i * s->stride * s->w + (size_t)j * s->stride) * xs] +=
                        dy[yb + ((size_t)i * s->ow + j) * ys];
        }
    return 0;
}

static void cpu_plan_free(dt_backend *be, void *pv)
{
    plan *p = pv;
    (void)be;
    if (!p) return;
    for (int i = 0; i < p->n; i++) switch (p->kind) {
        case PLAN_CONV: conv_entry_free(p->e[i]); break;
        case PLAN_POOL: pool_entry_free(p->e[i]); break;
        case PLAN_LRN: lrn_entry_free(p->e[i]); break;
        }
    free(p);
}

/* ---- GEMM in bf16 (--precision bf16) ------------------------------------------------------------ */

/* oneDNN's matmul on bf16 operands with an fp32 result: alpha as its output scale, beta as a sum
 * post-op. A primitive per shape, kept (a net has a few dozen GEMM shapes); the operands are
 * rounded into one buffer of the backend, op(A) and op(B) expressed as strides. */
#define GEMM_KEEP 64

typedef struct gemm_bf16 {
    int ta, tb, m, n, k, ldc;
    float alpha, beta;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} gemm_bf16;

static void gemm_entry_free(gemm_bf16 *g)
{
    dnnl_primitive_t ps[] = {g->prim};
    dnnl_memory_t ms[] = {g->a, g->b, g->c};
    destroy_all(ps, 1, ms, 3);
    memset(g, 0, sizeof *g);
}

static int gemm_entry_make(dt_backend *be, gemm_bf16 *g)
{
    dnnl_memory_desc_t a, b, c;
    dnnl_matmul_desc_t d;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_dims_t ad = {g->m, g->k}, bd = {g->k, g->n}, cd = {g->m, g->n};
    /* A and B are rounded as stored (A: m x k, or k x m when transposed), densely */
    dnnl_dims_t as = {g->ta ? 1 : g->k, g->ta ? g->m : 1}, bs = {g->tb ? 1 : g->n, g->tb ? g->k : 1},
                cs = {g->ldc, 1};
    int rc = -1;
    DN(dnnl_memory_desc_init_by_strides(&a, 2, ad, dnnl_bf16, as), "bf16 GEMM");
    DN(dnnl_memory_desc_init_by_strides(&b, 2, bd, dnnl_bf16, bs), "bf16 GEMM");
    DN(dnnl_memory_desc_init_by_strides(&c, 2, cd, dnnl_f32, cs), "bf16 GEMM");
    DN(dnnl_matmul_desc_init(&d, &a, &b, NULL, &c), "bf16 GEMM");
    DN(dnnl_primitive_attr_create(&attr), "bf16 GEMM");
    if (dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g->alpha) != dnnl_success) goto fail;
    if (g->beta != 0.0f) {
        if (dnnl_post_ops_create(&po) != dnnl_success || dnnl_post_ops_append_sum(po, g->beta) != dnnl_success ||
            dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success)
            goto fail;
    }
    if (dnnl_primitive_desc_create(&pd, &d, attr, eng(be), NULL) != dnnl_success || !(g->prim = prim_of(pd))) goto fail;
    if (mem(be, &g->a, &a) || mem(be, &g->b, &b) || mem(be, &g->c, &c)) goto out;
    rc = 0;
    goto out;
fail:
    dt_fail("oneDNN: no bf16 matmul for %c%c m=%d n=%d k=%d ldc=%d", g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->m, g->n,
            g->k, g->ldc);
out:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (rc != 0) gemm_entry_free(g);
    return rc;
}

static gemm_bf16 *gemm_get(dt_backend *be, int ta, int tb, int m, int n, int k, float alpha, float beta, int ldc)
{
    cpu_impl *ci = be->impl;
    if (!ci->gemm && !(ci->gemm = calloc(GEMM_KEEP, sizeof *ci->gemm))) {
        dt_fail("out of memory");
        return NULL;
    }
    gemm_bf16 *g = ci->gemm, *slot = NULL;
    for (int i = 0; i < GEMM_KEEP; i++) {
        if (!g[i].prim) {
            if (!slot) slot = &g[i];
            continue;
        }
        if (g[i].ta == ta && g[i].tb == tb && g[i].m == m && g[i].n == n && g[i].k == k && g[i].ldc == ldc &&
            g[i].alpha == alpha && g[i].beta == beta)
            return &g[i];
    }
    if (!slot) { /* full: start again (a run's shapes repeat, so this happens only with very many) */
        for (int i = 0; i < GEMM_KEEP; i++) gemm_entry_free(&g[i]);
        slot = g;
    }
    *slot = (gemm_bf16){.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .ldc = ldc, .alpha = alpha, .beta = beta};
    return gemm_entry_make(be, slot) == 0 ? slot : NULL;
}

int cpu_gemm_bf16(dt_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
    cpu_impl *ci = be->impl;
    size_t na = (size_t)m * k, nb = (size_t)k * n;
    gemm_bf16 *g = gemm_get(be, ta, tb, m, n, k, alpha, beta, ldc);
    if (!g) return -1;
    if (ci->ab16_n < na + nb) {
        uint16_t *p = dt_alloc((na + nb) * sizeof *p);
        if (!p) return -1;
        dt_free(ci->ab16);
        ci->ab16 = p, ci->ab16_n = na + nb;
    }
    uint16_t *a16 = ci->ab16, *b16 = ci->ab16 + na;
    cpu_round_bf16(be->n_threads, a16, a, ta ? k : m, ta ? m : k, lda);
    cpu_round_bf16(be->n_threads, b16, b, tb ? n : k, tb ? k : n, ldb);
    set(g->a, a16), set(g->b, b16), set(g->c, c);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, g->a}, {DNNL_ARG_WEIGHTS, g->b}, {DNNL_ARG_DST, g->c}};
    if (dnnl_primitive_execute(g->prim, stream(be), 3, args) != dnnl_success)
        return dt_fail("oneDNN: bf16 GEMM %c%c m=%d n=%d k=%d failed", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
    return 0;
}

const char *backend_cpu_describe(void)
{
    static char buf[96];
    const dnnl_version_t *v = dnnl_version();
    const char *isa;
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: isa = "SSE4.1"; break;
    case dnnl_cpu_isa_avx: isa = "AVX"; break;
    case dnnl_cpu_isa_avx2: isa = "AVX2"; break;
    case dnnl_cpu_isa_avx2_vnni: isa = "AVX2-VNNI"; break;
    case dnnl_cpu_isa_avx512_core: isa = "AVX-512"; break;
    case dnnl_cpu_isa_avx512_core_vnni: isa = "AVX-512 VNNI"; break;
    case dnnl_cpu_isa_avx512_core_bf16: isa = "AVX-512 BF16"; break;
    case dnnl_cpu_isa_avx512_core_amx: isa = "AVX-512 AMX"; break;
    default: isa = "generic"; break;
    }
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d, %s kernels", v->major, v->minor, v->patch, isa);
    return buf;
}

int backend_cpu_dnnl_init(dt_backend *be)
{
    cpu_impl *c = be->impl;
    DN(dnnl_engine_create(&c->eng, dnnl_cpu, 0), "engine");
    DN(dnnl_stream_create(&c->stream, c->eng, dnnl_stream_default_flags), "stream");
    be->layout_for = cpu_layout_for;
    be->act_size = cpu_act_size;
    be->to_plain = cpu_to_plain;
    be->from_plain = cpu_from_plain;
    be->conv_plan = cpu_conv_plan;
    be->conv_bf16_out = cpu_conv_bf16_out;
    be->conv_bf16_in = cpu_conv_bf16_in;
    be->conv_fwd = cpu_conv_fwd;
    be->conv_bwd = cpu_conv_bwd;
    be->pool_plan = cpu_pool_plan;
    be->pool_fwd = cpu_pool_fwd;
    be->pool_bwd = cpu_pool_bwd;
    be->bn_plan = cpu_bn_plan;
    be->bn_fwd = cpu_bn_fwd;
    be->bn_bwd = cpu_bn_bwd;
    be->lrn_plan = cpu_lrn_plan;
    be->lrn_fwd = cpu_lrn_fwd;
    be->lrn_bwd = cpu_lrn_bwd;
    be->plan_free = cpu_plan_free;
    be->shortcut_fwd = cpu_shortcut_fwd;
    be->shortcut_bwd = cpu_shortcut_bwd;
    return 0;
}

void backend_cpu_dnnl_fini(dt_backend *be)
{
    cpu_impl *c = be->impl;
    if (c->gemm)
        for (int i = 0; i < GEMM_KEEP; i++) gemm_entry_free(&c->gemm[i]);
    free(c->gemm);
    dt_free(c->ab16);
    if (c->stream) dnnl_stream_destroy(c->stream);
    if (c->eng) dnnl_engine_destroy(c->eng);
}
