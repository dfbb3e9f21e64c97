/* bench_bn [REPEATS] — dtrain's batch norm (backend_cpu_bn.c: double per-channel sums) against
 * oneDNN's primitive (float sums; what dtrain used before issue 13), on resnet20's layers at
 * batch 128 in the layout training uses (nChw16c), at 1 and 2 threads. Both run forward (training)
 * plus backward on the same data, in turns, REPEATS times each (the machine is noisy: read the
 * ratio). Each is checked against a float64 reference first: the largest norm-wise relative error
 * (max |got - ref| / max |ref|) of y, dx, dweight and dbias.
 *
 * Prints one line per layer and thread count: the error of each, the best time of each, and the
 * ratio oneDNN / dtrain (above 1: dtrain faster).
 *
 * Then batch norm with the relu after it, through the CPU backend in the layout it picks on this
 * CPU (nChw16c with AVX-512, NHWC without): forward (training), relu forward and backward, batch
 * norm backward as separate ops, against the fused op (dt_bn_cfg relu, what a net runs) in turns;
 * the two are checked to give the same bits first.
 *
 * Then the end of a residual block, an add of two inputs and the relu after it: copy, add and relu
 * forward, relu backward and the add's two input gradients as separate ops (each layer on its own,
 * DTRAIN_FUSE=0), against add2 with its relu and one relu backward per input (the fused add layer),
 * in turns, again checked to give the same bits first. */
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/backend_cpu.h"
#include "rng.h"
#include "util.h"

typedef struct layer {
    int n, c, h, w;
} layer;

/* the float64 reference, plain NCHW */
static void ref_bn(const layer *s, const double *x, const double *g, const double *dy, double *y, double *dx,
                   double *dg, double *db)
{
    size_t hw = (size_t)s->h * s->w;
    double m = (double)s->n * hw;
    for (int c = 0; c < s->c; c++) {
        double mu = 0, var = 0, sdy = 0, sdyx = 0;
        for (int n = 0; n < s->n; n++)
            for (size_t i = 0; i < hw; i++) mu += x[((size_t)n * s->c + c) * hw + i];
        mu /= m;
        for (int n = 0; n < s->n; n++)
            for (size_t i = 0; i < hw; i++) {
                double d = x[((size_t)n * s->c + c) * hw + i] - mu;
                var += d * d;
            }
        var /= m;
        double inv = 1.0 / sqrt(var + 1e-5);
        for (int n = 0; n < s->n; n++)
            for (size_t i = 0; i < hw; i++) {
                size_t o = ((size_t)n * s->c + c) * hw + i;
                y[o] = (x[o] - mu) * inv * g[c];
                sdy += dy[o];
                sdyx += dy[o] * (x[o] - mu) * inv;
            }
        dg[c] = sdyx, db[c] = sdy;
        for (int n = 0; n < s->n; n++)
            for (size_t i = 0; i < hw; i++) {
                size_t o = ((size_t)n * s->c + c) * hw + i;
                dx[o] = g[c] * inv * (dy[o] - sdy / m - (x[o] - mu) * inv * sdyx / m);
            }
    }
}

static double relerr(const float *got, const double *ref, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs(got[i] - ref[i])), m = fmax(m, fabs(ref[i]));
    return m > 0 ? e / m : e;
}

/* oneDNN's batch norm, forward training + backward, as backend_cpu_dnnl.c had it */
typedef struct onednn {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_t fwd, bwd;
    dnnl_memory_t src, dst, scale, shift, mean, var, dsrc, ddst, dscale, dshift;
} onednn;

static void onednn_make(onednn *o, const layer *s, dnnl_format_tag_t tag)
{
    dnnl_memory_desc_t data, chan;
    dnnl_batch_normalization_desc_t fd, bd;
    dnnl_primitive_desc_t fpd, bpd;
    dnnl_dims_t dims = {s->n, s->c, s->h, s->w}, cd = {s->c};
    unsigned ss = dnnl_use_scale | dnnl_use_shift;
    dnnl_engine_create(&o->eng, dnnl_cpu, 0);
    dnnl_stream_create(&o->st, o->eng, dnnl_stream_default_flags);
    dnnl_memory_desc_init_by_tag(&data, 4, dims, dnnl_f32, tag);
    dnnl_memory_desc_init_by_tag(&chan, 1, cd, dnnl_f32, dnnl_a);
    dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &data, 1e-5f, ss);
    dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &data, &data, 1e-5f, ss);
    dnnl_primitive_desc_create(&fpd, &fd, NULL, o->eng, NULL);
    dnnl_primitive_desc_create(&bpd, &bd, NULL, o->eng, fpd);
    dnnl_primitive_create(&o->fwd, fpd);
    dnnl_primitive_create(&o->bwd, bpd);
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    dnnl_memory_t *dm[] = {&o->src, &o->dst, &o->dsrc, &o->ddst}, *cm[] = {&o->scale, &o->shift, &o->mean,
                                                                           &o->var, &o->dscale, &o->dshift};
    for (int i = 0; i < 4; i++) dnnl_memory_create(dm[i], &data, o->eng, DNNL_MEMORY_NONE);
    for (int i = 0; i < 6; i++) dnnl_memory_create(cm[i], &chan, o->eng, DNNL_MEMORY_NONE);
}

static void onednn_run(onednn *o, const float *x, const float *g, const float *b, float *mean, float *var, float *y,
                       const float *dy, float *dx, float *dg, float *db)
{
    dnnl_memory_set_data_handle(o->src, (void *)x), dnnl_memory_set_data_handle(o->dst, y);
    dnnl_memory_set_data_handle(o->scale, (void *)g), dnnl_memory_set_data_handle(o->shift, (void *)b);
    dnnl_memory_set_data_handle(o->mean, mean), dnnl_memory_set_data_handle(o->var, var);
    dnnl_memory_set_data_handle(o->ddst, (void *)dy), dnnl_memory_set_data_handle(o->dsrc, dx);
    dnnl_memory_set_data_handle(o->dscale, dg), dnnl_memory_set_data_handle(o->dshift, db);
    dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC, o->src},     {DNNL_ARG_DST, o->dst},   {DNNL_ARG_SCALE, o->scale},
                            {DNNL_ARG_SHIFT, o->shift}, {DNNL_ARG_MEAN, o->mean}, {DNNL_ARG_VARIANCE, o->var}};
    dnnl_exec_arg_t ba[] = {{DNNL_ARG_SRC, o->src},           {DNNL_ARG_MEAN, o->mean},
                            {DNNL_ARG_VARIANCE, o->var},      {DNNL_ARG_DIFF_DST, o->ddst},
                            {DNNL_ARG_SCALE, o->scale},       {DNNL_ARG_SHIFT, o->shift},
                            {DNNL_ARG_DIFF_SRC, o->dsrc},     {DNNL_ARG_DIFF_SCALE, o->dscale},
                            {DNNL_ARG_DIFF_SHIFT, o->dshift}};
    dnnl_primitive_execute(o->fwd, o->st, 6, fa);
    dnnl_primitive_execute(o->bwd, o->st, 9, ba);
    dnnl_stream_wait(o->st);
}

static void onednn_free(onednn *o)
{
    dnnl_primitive_destroy(o->fwd), dnnl_primitive_destroy(o->bwd);
    dnnl_memory_t ms[] = {o->src, o->dst, o->scale, o->shift, o->mean, o->var, o->dsrc, o->ddst, o->dscale, o->dshift};
    for (size_t i = 0; i < DT_ARRAY_LEN(ms); i++) dnnl_memory_destroy(ms[i]);
    dnnl_stream_destroy(o->st), dnnl_engine_destroy(o->eng);
}

/* plain NCHW -> nChw16c (c a multiple of 16) */
static void to_blocked(const layer *s, const float *p, float *b)
{
    size_t hw = (size_t)s->h * s->w;
    for (int n = 0; n < s->n; n++)
        for (int c = 0; c < s->c; c++)
            for (size_t i = 0; i < hw; i++)
                b[(((size_t)n * (s->c / 16) + c / 16) * hw + i) * 16 + c % 16] = p[((size_t)n * s->c + c) * hw + i];
}

static void to_plain(const layer *s, const float *b, float *p)
{
    size_t hw = (size_t)s->h * s->w;
    for (int n = 0; n < s->n; n++)
        for (int c = 0; c < s->c; c++)
            for (size_t i = 0; i < hw; i++)
                p[((size_t)n * s->c + c) * hw + i] = b[(((size_t)n * (s->c / 16) + c / 16) * hw + i) * 16 + c % 16];
}

/* batch norm + relu as separate ops and fused, on the CPU backend: 0 when both give the same bits */
static int fused_vs_separate(const layer *s, int threads, int reps)
{
    dt_backend *be;
    if (backend_cpu_create(&be, threads) != 0) return -1;
    dt_layout lay = be->layout_for(be, s->c, s->h, s->w);
    size_t na = be->act_size(be, lay, s->n, s->c, s->h, s->w), by = na * sizeof(float), cb = 4 * (size_t)s->c;
    float *x = be->alloc(be, by), *dy = be->alloc(be, by), *t = be->alloc(be, by), *y = be->alloc(be, by);
    float *dr = be->alloc(be, by), *dx = be->alloc(be, by), *y2 = be->alloc(be, by), *dx2 = be->alloc(be, by);
    float *g = be->alloc(be, cb), *b = be->alloc(be, cb), *m = be->alloc(be, cb), *v = be->alloc(be, cb);
    float *dg = be->alloc(be, cb), *db = be->alloc(be, cb);
    dt_rng r;
    rng_seed(&r, 7, 0);
    for (size_t i = 0; i < na; i++)
        x[i] = (float)(2 * rng_uniform_d(&r) - 0.8), dy[i] = (float)(rng_uniform_d(&r) - 0.5);
    for (int c = 0; c < s->c; c++) g[c] = 1.0f + 0.01f * (float)c, b[c] = 0.05f;
    dt_bn_cfg cu = {s->c, s->h, s->w, 1e-5f, lay, 0, 0, 0}, cf = cu;
    cf.relu = 1;
    void *pu = be->bn_plan(be, &cu), *pf = be->bn_plan(be, &cf);
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep <= reps; rep++)
        for (int k = 0; k < 2; k++) {
            double t0 = dt_now();
            if (k == 0) {
                be->bn_fwd(be, pu, s->n, 1, x, g, b, m, v, t);
                be->relu_fwd(be, y, t, na);
                be->relu_bwd(be, dr, dy, y, na, 0.0f);
                be->bn_bwd(be, pu, s->n, x, g, m, v, dr, NULL, dx, 0.0f, dg, db);
            } else {
                be->bn_fwd(be, pf, s->n, 1, x, g, b, m, v, y2);
                be->bn_bwd(be, pf, s->n, x, g, m, v, dy, y2, dx2, 0.0f, dg, db);
            }
            double e = dt_now() - t0;
            if (rep > 0 && e < best[k]) best[k] = e; /* round 0: warm-up */
        }
    int same = memcmp(y, y2, by) == 0 && memcmp(dx, dx2, by) == 0;
    char name[32];
    snprintf(name, sizeof name, "%dx%dx%dx%d", s->n, s->c, s->h, s->w);
    printf("%-14s %-8s %7d %12.3f %10.3f %7.2f %s\n", name, lay == DT_LAYOUT_NHWC ? "NHWC" : lay ? "nChw16c" : "plain",
           threads, best[0] * 1e3, best[1] * 1e3, best[0] / best[1], same ? "same bits" : "DIFFERENT BITS");
    be->plan_free(be, pu), be->plan_free(be, pf);
    float *all[] = {x, dy, t, y, dr, dx, y2, dx2, g, b, m, v, dg, db};
    for (size_t i = 0; i < DT_ARRAY_LEN(all); i++) be->free(be, all[i]);
    backend_destroy(be);
    return same ? 0 : -1;
}

/* add + relu as separate ops and fused (add2), on the CPU backend: 0 when both give the same bits */
static int add_relu_vs_separate(const layer *s, int threads, int reps)
{
    dt_backend *be;
    if (backend_cpu_create(&be, threads) != 0) return -1;
    dt_layout lay = be->layout_for(be, s->c, s->h, s->w);
    size_t na = be->act_size(be, lay, s->n, s->c, s->h, s->w), by = na * sizeof(float);
    float *u = be->alloc(be, by), *v = be->alloc(be, by), *dy = be->alloc(be, by), *t = be->alloc(be, by);
    float *y = be->alloc(be, by), *dt = be->alloc(be, by), *du = be->alloc(be, by), *dv = be->alloc(be, by);
    float *y2 = be->alloc(be, by), *du2 = be->alloc(be, by), *dv2 = be->alloc(be, by);
    dt_rng r;
    rng_seed(&r, 8, 0);
    for (size_t i = 0; i < na; i++)
        u[i] = (float)(rng_uniform_d(&r) - 0.5), v[i] = (float)(rng_uniform_d(&r) - 0.4),
        dy[i] = (float)(rng_uniform_d(&r) - 0.5);
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep <= reps; rep++)
        for (int k = 0; k < 2; k++) {
            double t0 = dt_now();
            if (k == 0) {
                be->copy(be, t, u, by);
                be->add(be, t, v, na, 1.0f);
                be->relu_fwd(be, y, t, na);
                be->relu_bwd(be, dt, dy, y, na, 0.0f);
                be->add(be, du, dt, na, 0.0f);
                be->add(be, dv, dt, na, 0.0f);
            } else {
                be->add2(be, y2, u, v, na, 1);
                be->relu_bwd(be, du2, dy, y2, na, 0.0f);
                be->relu_bwd(be, dv2, dy, y2, na, 0.0f);
            }
            double e = dt_now() - t0;
            if (rep > 0 && e < best[k]) best[k] = e; /* round 0: warm-up */
        }
    int same = memcmp(y, y2, by) == 0 && memcmp(du, du2, by) == 0 && memcmp(dv, dv2, by) == 0;
    char name[32];
    snprintf(name, sizeof name, "%dx%dx%dx%d", s->n, s->c, s->h, s->w);
    printf("%-14s %-8s %7d %12.3f %10.3f %7.2f %s\n", name, lay == DT_LAYOUT_NHWC ? "NHWC" : lay ? "nChw16c" : "plain",
           threads, best[0] * 1e3, best[1] * 1e3, best[0] / best[1], same ? "same bits" : "DIFFERENT BITS");
    float *all[] = {u, v, dy, t, y, dt, du, dv, y2, du2, dv2};
    for (size_t i = 0; i < DT_ARRAY_LEN(all); i++) be->free(be, all[i]);
    backend_destroy(be);
    return same ? 0 : -1;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    const layer layers[] = {{128, 16, 32, 32}, {128, 32, 16, 16}, {128, 64, 8, 8}};
    if (reps < 1) {
        fprintf(stderr, "usage: bench_bn [REPEATS >= 1]\n");
        return 2;
    }
    printf("batch norm, forward (training) + backward, nChw16c; error: max norm-wise relative error of y, dx, "
           "dweight, dbias against float64\n");
    printf("%-14s %7s %12s %12s %10s %10s %7s\n", "layer", "threads", "err dtrain", "err oneDNN", "dtrain ms",
           "oneDNN ms", "ratio");
    for (size_t li = 0; li < DT_ARRAY_LEN(layers); li++) {
        const layer *s = &layers[li];
        size_t n = (size_t)s->n * s->c * s->h * s->w, c = (size_t)s->c;
        double *x = malloc(n * 8), *dy = malloc(n * 8), *y = malloc(n * 8), *dx = malloc(n * 8), *g = malloc(c * 8),
               *dg = malloc(c * 8), *db = malloc(c * 8);
        float *fx = malloc(n * 4), *fdy = malloc(n * 4), *bx = malloc(n * 4), *bdy = malloc(n * 4),
              *by = malloc(n * 4), *bdx = malloc(n * 4), *tmp = malloc(n * 4), *fg = malloc(c * 4),
              *fb = calloc(c, 4), *m = malloc(c * 4), *v = malloc(c * 4), *fdg = malloc(c * 4), *fdb = malloc(c * 4);
        dt_rng r;
        rng_seed(&r, 42 + li, 0);
        for (size_t i = 0; i < n; i++) {
            fx[i] = (float)(1.5 * (2 * rng_uniform_d(&r) - 1) + 0.8), x[i] = fx[i];
            fdy[i] = (float)(1e-3 * (2 * rng_uniform_d(&r) - 1) + 2e-4), dy[i] = fdy[i];
        }
        for (size_t i = 0; i < c; i++) fg[i] = (float)(1.0 + 0.5 * (2 * rng_uniform_d(&r) - 1)), g[i] = fg[i];
        ref_bn(s, x, g, dy, y, dx, dg, db);
        to_blocked(s, fx, bx), to_blocked(s, fdy, bdy);
        dt_bn_cfg cfg = {s->c, s->h, s->w, 1e-5f, DT_LAYOUT_BLOCK16, 0, 0, 0};
        for (int threads = 1; threads <= 2; threads++) {
            onednn o;
            double err[2], best[2] = {1e30, 1e30};
            omp_set_num_threads(threads);
            onednn_make(&o, s, dnnl_nChw16c);
            for (int k = 0; k < 2; k++) { /* errors: 0 dtrain, 1 oneDNN */
                if (k == 0) {
                    cpu_bn_forward(&cfg, threads, s->n, 1, bx, fg, fb, m, v, by);
                    cpu_bn_backward(&cfg, threads, s->n, bx, fg, m, v, bdy, NULL, bdx, 0.0f, fdg, fdb);
                } else {
                    onednn_run(&o, bx, fg, fb, m, v, by, bdy, bdx, fdg, fdb);
                }
                to_plain(s, by, tmp);
                double e = relerr(tmp, y, n);
                to_plain(s, bdx, tmp);
                e = fmax(e, relerr(tmp, dx, n));
                e = fmax(e, fmax(relerr(fdg, dg, c), relerr(fdb, db, c)));
                err[k] = e;
            }
            for (int rep = 0; rep < reps; rep++)
                for (int k = 0; k < 2; k++) {
                    double t0 = dt_now();
                    if (k == 0) {
                        cpu_bn_forward(&cfg, threads, s->n, 1, bx, fg, fb, m, v, by);
                        cpu_bn_backward(&cfg, threads, s->n, bx, fg, m, v, bdy, NULL, bdx, 0.0f, fdg, fdb);
                    } else {
                        onednn_run(&o, bx, fg, fb, m, v, by, bdy, bdx, fdg, fdb);
                    }
                    double t = dt_now() - t0;
                    if (t < best[k]) best[k] = t;
                }
            onednn_free(&o);
            char name[32];
            snprintf(name, sizeof name, "%dx%dx%dx%d", s->n, s->c, s->h, s->w);
            printf("%-14s %7d %12.1e %12.1e %10.3f %10.3f %7.2f\n", name, threads, err[0], err[1], best[0] * 1e3,
                   best[1] * 1e3, best[1] / best[0]);
        }
        free(x), free(dy), free(y), free(dx), free(g), free(dg), free(db), free(fx), free(fdy), free(bx), free(bdy);
        free(by), free(bdx), free(tmp), free(fg), free(fb), free(m), free(v), free(fdg), free(fdb);
    }
    printf("\nbatch norm + relu, forward (training) + backward: separate ops against the fused one\n");
    printf("%-14s %-8s %7s %12s %10s %7s\n", "layer", "layout", "threads", "separate ms", "fused ms", "ratio");
    int rc = 0;
    for (size_t li = 0; li < DT_ARRAY_LEN(layers); li++)
        for (int threads = 1; threads <= 2; threads++) rc |= fused_vs_separate(&layers[li], threads, reps) != 0;
    printf("\nadd + relu (two inputs), forward + backward: separate ops against add2 and a relu backward per input\n");
    printf("%-14s %-8s %7s %12s %10s %7s\n", "layer", "layout", "threads", "separate ms", "fused ms", "ratio");
    for (size_t li = 0; li < DT_ARRAY_LEN(layers); li++)
        for (int threads = 1; threads <= 2; threads++) rc |= add_relu_vs_separate(&layers[li], threads, reps) != 0;
    return rc;
}
