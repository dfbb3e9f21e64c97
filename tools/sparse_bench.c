/* sparse_bench encode|sampled D [REPS] | sparse_bench ring D [REPS] — the parts of tools/bench_sparse.
 *
 * encode: on one rank, the time each sparse mode spends per iteration selecting and encoding
 *   (what the log reports as t_encode) for an arena of D values in 8 tensors, with gradients of
 *   several magnitudes: topk/gtopk (residual + top-k at density 0.001), csc (correction, packing,
 *   chunk norms and selection at ratio 0.1, 32768 per chunk), terngrad (scalers, ternarising,
 *   2-bit packing); and the top-k selection against a full sort of the D values.
 * sampled: --topk-select sampled against exact at densities 0.001 and 0.01, on 8 fills each (heavy
 *   tails: normal times lognormal): the best time of each, and how many of the k largest the sampled
 *   selection keeps (mean and least share) and in how many fills it was exact.
 * ring: run under mpirun (tools/netem): the time of one dense fp32 ring allreduce of D values.
 * Prints JSON lines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mode.h"
#include "comm/ring.h"
#include "comm/sparse.h"
#include "cpu.h"
#include "engine/backend.h"
#include "rng.h"
#include "util.h"

#define N_TENSORS 8

static void fill(float *g, size_t n, uint64_t round)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = rng_hash(round, i);
        float u = (float)(h >> 40) * (1.0f / 16777216.0f) - 0.5f;
        g[i] = u * (i % 1000 < 10 ? 10.0f : 0.01f);
    }
}

static double mode_encode(dt_comm *c, dt_backend *be, const char *mode, size_t d, int reps, float *w, float *g,
                          dt_param *params, dt_param **tab)
{
    dt_optim *opt;
    dt_mode_env env;
    void *st;
    memset(&env, 0, sizeof env);
    optim_create(&opt, be, d, 0.9f, 0.0f, 0);
    env.comm = c;
    env.arena = (dt_arena){w, g, d, N_TENSORS, tab, be};
    env.optim = opt;
    env.opts.density = 0.001;
    env.opts.density_warmup = "none";
    env.opts.chunk = 32768;
    env.opts.chunk_ratio = 0.1;
    env.opts.fusion_bytes = INFINITY;
    env.opts.clip = 2.5f;
    env.opts.compress = "fp16";
    codec_create(strcmp(mode, "csc") == 0 ? "fp16" : "none", 256, &env.codec);
    env.iters_per_epoch = env.total_iters = 1000;
    const dt_mode_desc *m = mode_find(mode);
    if (mode_roles(m, &env) != 0 || m->init(&st, &env) != 0) {
        fprintf(stderr, "%s: %s\n", mode, dt_errmsg());
        exit(2);
    }
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        dt_times t = {0};
        fill(g, d, (uint64_t)r + 1);
        dt_iter it = {r, 1, 0.01f, 0};
        if (m->end(st, &env, &it, &t) != 0) {
            fprintf(stderr, "%s: %s\n", mode, dt_errmsg());
            exit(2);
        }
        if (r > 0 && t.encode < best) best = t.encode; /* the first call warms caches and the sample */
    }
    m->finalize(st, &env);
    optim_destroy(opt);
    (void)params;
    return best;
}

int main(int argc, char **argv)
{
    dt_comm *c;
    if (argc < 3) {
        fprintf(stderr, "usage: sparse_bench encode|sampled|ring D [REPS]\n");
        return 2;
    }
    cpu_flush_denormals();
    size_t d = (size_t)atoll(argv[2]);
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (comm_init(&argc, &argv, 0, &c) != 0) return 2;
    float *w = dt_zalloc(d * sizeof(float)), *g = dt_alloc(d * sizeof(float));
    if (!w || !g) return 2;
    if (strcmp(argv[1], "sampled") == 0) {
        for (double dens = 0.001; dens < 0.02; dens *= 10) {
            size_t k = (size_t)floor(dens * (double)d), exact = 0;
            double te = 1e30, ts = 1e30, sum = 0.0, least = 1.0;
            dt_topk *t;
            dt_pair *ref = dt_alloc(sizeof(dt_pair) * k), *got = dt_alloc(sizeof(dt_pair) * k);
            if (!ref || !got || topk_create(&t, d, k) != 0) return 2;
            for (int round = 1; round <= 8; round++) {
                dt_rng r;
                rng_seed(&r, (uint64_t)round, 3);
                for (size_t i = 0; i < d; i++) g[i] = (float)(rng_normal(&r) * exp(2.0 * rng_normal(&r)));
                double t0 = dt_now();
                topk_select(t, g, d, k, ref);
                double t1 = dt_now();
                topk_select_sampled(t, g, d, k, got);
                double t2 = dt_now();
                te = fmin(te, t1 - t0), ts = fmin(ts, t2 - t1);
                size_t same = 0;
                for (size_t j = 0, q = 0; j < k; j++) {
                    while (q < k && ref[q].i < got[j].i) q++;
                    same += q < k && ref[q].i == got[j].i;
                }
                sum += (double)same / (double)k, least = fmin(least, (double)same / (double)k), exact += same == k;
            }
            printf("{\"what\":\"sampled\",\"d\":%zu,\"k\":%zu,\"exact_seconds\":%.6g,\"sampled_seconds\":%.6g,"
                   "\"kept_mean\":%.6f,\"kept_least\":%.6f,\"exact_fills\":%zu}\n",
                   d, k, te, ts, sum / 8.0, least, exact);
            topk_destroy(t), dt_free(ref), dt_free(got);
        }
    } else if (strcmp(argv[1], "ring") == 0) {
        dt_codec none;
        dt_ring *r;
        codec_create("none", 0, &none);
        if (ring_create(&r, c, none, d) != 0) return 2;
        fill(g, d, 1);
        ring_allreduce(r, g, d, NULL); /* warm-up */
        double best = 1e30;
        for (int i = 0; i < reps; i++) {
            comm_barrier(c);
            double t0 = dt_now();
            ring_allreduce(r, g, d, NULL);
            double t = dt_now() - t0;
            comm_allreduce_max_f64(c, &t, 1);
            if (t < best) best = t;
        }
        if (comm_rank(c) == 0)
            printf("{\"what\":\"ring\",\"d\":%zu,\"ranks\":%d,\"seconds\":%.6g}\n", d, comm_size(c), best);
        ring_destroy(r);
    } else {
        dt_backend *be;
        dt_param params[N_TENSORS];
        dt_param *tab[N_TENSORS];
        backend_cpu_create(&be, 1);
        for (int i = 0; i < N_TENSORS; i++) {
            size_t a = d * (size_t)i / N_TENSORS, b = d * (size_t)(i + 1) / N_TENSORS;
            memset(&params[i], 0, sizeof params[i]);
            snprintf(params[i].name, sizeof params[i].name, "layer%d.weight", N_TENSORS - i);
            params[i].n_dims = 1;
            params[i].dims[0] = (int)(b - a);
            params[i].n = b - a;
            params[i].offset = a;
            params[i].w = w + a;
            params[i].g = g + a;
            tab[i] = &params[i];
        }
        const char *modes[] = {"topk", "gtopk", "csc", "terngrad"};
        for (int i = 0; i < 4; i++)
            printf("{\"what\":\"encode\",\"mode\":\"%s\",\"d\":%zu,\"seconds\":%.6g}\n", modes[i], d,
                   mode_encode(c, be, modes[i], d, reps, w, g, params, tab));
        /* the selection alone, against a full sort */
        size_t k = (size_t)floor(0.001 * (double)d);
        dt_topk *t;
        dt_pair *out = dt_alloc(sizeof(dt_pair) * k);
        topk_create(&t, d, k);
        fill(g, d, 7);
        topk_select(t, g, d, k, out);
        double best = 1e30;
        for (int i = 0; i < reps; i++) {
            double t0 = dt_now();
            topk_select(t, g, d, k, out);
            best = fmin(best, dt_now() - t0);
        }
        double t0 = dt_now();
        topk_select_sort(g, d, k, out);
        double sort = dt_now() - t0;
        printf("{\"what\":\"select\",\"d\":%zu,\"k\":%zu,\"seconds\":%.6g,\"sort_seconds\":%.6g,\"scans\":%d}\n", d, k,
               best, sort, topk_last_scans(t));
        topk_destroy(t);
        backend_destroy(be);
    }
    comm_finalize(c);
    return 0;
}
