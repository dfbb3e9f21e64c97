/* mpi_sparse — run under mpirun -np P (the suite runs P = 1..6). The sparse modes on per-rank
 * gradients every rank can construct, so each rank computes the exact expected result itself:
 *   gtopk:    the update equals a brute-force gTop-k with the same tree (fold the ranks beyond a
 *             power of two, then pairwise rounds; dense sums, full sorts) bit for bit; what a rank
 *             sent and was used is gone from its residual, everything else stays: residual +
 *             used = accumulated gradient, exactly
 *   topk:     the update equals the dense sum (in rank order) of every rank's top-k, exactly; so
 *             with DGC's per-tensor top-k and local clipping, of the clipped gradients' per-tensor top-k
 *   csc:      every rank selects the same chunks; chunks not allreduced stay in the residual
 *             exactly (nothing lost); allreduced chunks leave it
 *   terngrad: every aggregated value is an integer multiple j s of its tensor's shared scaler
 *             (the maximum of the ranks' clipped maxima), |j| <= P; the last layer in fp32 when
 *             asked equals the plain sum
 * The weights start at 0 and one step with lr 1 and no momentum makes them minus the update. */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec_tern.h"
#include "comm/mode.h"
#include "comm/sparse.h"
#include "engine/backend.h"
#include "engine/net.h"
#include "rng.h"
#include "util.h"

static int failures, me, p;

static void check(int ok, const char *fmt, ...)
{
    if (ok) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[P=%d rank %d] FAIL: ", p, me);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

/* rank r's gradient: gaussian-ish, with spikes shared by every rank (they meet in the merges) and
 * exact ties */
static float grad(int r, size_t i, int round)
{
    if (i % 61 == 0) return 3.0f + (float)(i % 7);
    if (i % 97 == 0) return -2.5f;
    uint64_t h = rng_hash((uint64_t)(r * 7919 + round * 104729), i);
    double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0, v = (double)((h >> 3) & 0xffff) / 65536.0;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307 * v));
}

typedef struct {
    dt_backend *be;
    dt_net *net;
    dt_optim *opt;
    dt_mode_env env;
    const dt_mode_desc *m;
    void *st;
} harness;

static void setup(harness *h, dt_comm *c, const char *mode, dt_comm_opts o)
{
    memset(h, 0, sizeof *h);
    const char *text = "input shape=20\ndense name=a out=30\nrelu\ndense name=b out=7\nsoftmax_xent\n";
    if (backend_cpu_create(&h->be, 1) || net_parse(text, "s.net", "s", &h->net) || net_alloc(h->net, h->be, 1) ||
        optim_create(&h->opt, h->be, h->net->n_params, 0.0f, 0.0f, 0)) {
        fprintf(stderr, "setup: %s\n", dt_errmsg());
        exit(2);
    }
    h->env.comm = c;
    h->env.arena = net_arena(h->net);
    h->env.optim = h->opt;
    h->env.opts = o;
    codec_create(o.compress ? o.compress : "none", 256, &h->env.codec);
    h->env.iters_per_epoch = 10;
    h->env.total_iters = 10;
    h->env.seed = 1;
    h->m = mode_find(mode);
    if (mode_roles(h->m, &h->env) || h->m->init(&h->st, &h->env)) {
        fprintf(stderr, "init %s: %s\n", mode, dt_errmsg());
        exit(2);
    }
}

static void step(harness *h, int round)
{
    size_t n = h->env.arena.n;
    for (size_t i = 0; i < n; i++) h->env.arena.g[i] = grad(me, i, round);
    dt_iter it = {round, 0, 1.0f, 0};
    dt_times t = {0};
    if (h->m->end(h->st, &h->env, &it, &t) != 0) {
        fprintf(stderr, "%s: %s\n", h->m->name, dt_errmsg());
        exit(2);
    }
}

static float *state_of(harness *h, const char *name)
{
    dt_state_tensor s[8];
    int k = h->m->state ? h->m->state(h->st, &h->env, s, 8) : 0;
    for (int i = 0; i < k; i++)
        if (!strcmp(s[i].name, name)) return s[i].data;
    return NULL;
}

static void teardown(harness *h)
{
    h->m->finalize(h->st, &h->env);
    optim_destroy(h->opt);
    net_destroy(h->net);
    backend_destroy(h->be);
}

/* a rank's top-k of its round-0 gradient, by the reference sort */
static void local_topk(int r, size_t n, size_t k, dt_pair *out)
{
    float *g = malloc(n * sizeof *g);
    for (size_t i = 0; i < n; i++) g[i] = grad(r, i, 0);
    topk_select_sort(g, n, k, out);
    free(g);
}

/* brute-force ⊤: the receiver's values plus the sender's where indices meet, the k largest */
static size_t brute_merge(const dt_pair *a, size_t na, const dt_pair *b, size_t nb, size_t k, size_t n, dt_pair *out)
{
    float *d = calloc(n, sizeof *d), *u = calloc(n, sizeof *u);
    unsigned char *in = calloc(n, 1);
    uint32_t *where = malloc(n * sizeof *where);
    dt_pair *sel = malloc(n * sizeof *sel);
    for (size_t i = 0; i < na; i++) d[a[i].i] = a[i].v, in[a[i].i] = 1;
    for (size_t i = 0; i < nb; i++) d[b[i].i] = in[b[i].i] ? d[b[i].i] + b[i].v : b[i].v, in[b[i].i] = 1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i]) where[m] = (uint32_t)i, u[m++] = d[i];
    size_t kk = k < m ? k : m;
    topk_select_sort(u, m, kk, sel);
    for (size_t j = 0; j < kk; j++) out[j] = (dt_pair){where[sel[j].i], d[where[sel[j].i]]};
    free(d), free(u), free(in), free(where), free(sel);
    return kk;
}

static void test_gtopk(dt_comm *c)
{
    dt_comm_opts o = {.density = 0.05, .density_warmup = "none"};
    harness h;
    setup(&h, c, "gtopk", o);
    size_t n = h.env.arena.n, k = (size_t)floor(0.05 * (double)n);
    step(&h, 0);
    /* the same tree, brute force */
    dt_pair *L = malloc(sizeof(dt_pair) * k * (size_t)p), *tmp = malloc(sizeof(dt_pair) * 2 * k);
    size_t *len = malloc(sizeof(size_t) * (size_t)p);
    for (int r = 0; r < p; r++) local_topk(r, n, k, L + (size_t)r * k), len[r] = k;
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    for (int r = p2; r < p; r++) {
        len[r - p2] = brute_merge(L + (size_t)(r - p2) * k, len[r - p2], L + (size_t)r * k, len[r], k, n, tmp);
        memcpy(L + (size_t)(r - p2) * k, tmp, len[r - p2] * sizeof(dt_pair));
    }
    for (int s = 1; s < p2; s *= 2)
        for (int r = 0; r + s < p2; r += 2 * s) {
            len[r] = brute_merge(L + (size_t)r * k, len[r], L + (size_t)(r + s) * k, len[r + s], k, n, tmp);
            memcpy(L + (size_t)r * k, tmp, len[r] * sizeof(dt_pair));
        }
    float *want = calloc(n, sizeof *want);
    unsigned char *inJ = calloc(n, 1);
    for (size_t j = 0; j < len[0]; j++) want[L[j].i] = -L[j].v, inJ[L[j].i] = 1;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (h.env.arena.w[i] != want[i] && !bad++) first = i;
    check(!bad, "gtopk: %zu weights differ from the brute-force tree, first at %zu: %g vs %g", bad, first,
          h.env.arena.w[first], want[first]);
    /* put-back: residual + used = accumulated gradient */
    const float *res = state_of(&h, "residual");
    dt_pair *mine = malloc(sizeof(dt_pair) * k);
    local_topk(me, n, k, mine);
    unsigned char *sent = calloc(n, 1);
    for (size_t j = 0; j < k; j++) sent[mine[j].i] = 1;
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float a = grad(me, i, 0), used = sent[i] && inJ[i] ? a : 0.0f;
        if (res[i] + used != a || (used != 0.0f && res[i] != 0.0f)) bad++;
    }
    check(!bad, "gtopk: residual + used differs from the accumulated gradient at %zu values", bad);
    free(L), free(tmp), free(len), free(want), free(inJ), free(mine), free(sent);
    teardown(&h);
}

static void test_topk(dt_comm *c)
{
    dt_comm_opts o = {.density = 0.05, .density_warmup = "none"};
    harness h;
    setup(&h, c, "topk", o);
    size_t n = h.env.arena.n, k = (size_t)floor(0.05 * (double)n);
    step(&h, 0);
    float *sum = calloc(n, sizeof *sum);
    unsigned char *seen = calloc(n, 1);
    dt_pair *l = malloc(sizeof(dt_pair) * k);
    for (int r = 0; r < p; r++) {
        local_topk(r, n, k, l);
        for (size_t j = 0; j < k; j++) {
            sum[l[j].i] = seen[l[j].i] ? sum[l[j].i] + l[j].v : l[j].v;
            seen[l[j].i] = 1;
        }
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += h.env.arena.w[i] != -sum[i];
    check(!bad, "topk: %zu weights differ from minus the dense sum of every rank's top-k", bad);
    const float *res = state_of(&h, "residual");
    local_topk(me, n, k, l);
    memset(seen, 0, n);
    for (size_t j = 0; j < k; j++) seen[l[j].i] = 1;
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += res[i] != (seen[i] ? 0.0f : grad(me, i, 0));
    check(!bad, "topk: the residual is wrong at %zu values", bad);
    free(sum), free(seen), free(l);
    teardown(&h);
}

/* DGC's variants: --topk-scope layer takes floor(0.05 n_t) (at least 1) of each tensor, --clip-norm
 * scales each rank's gradient to norm 4/sqrt(P) first; the update is minus the dense sum (rank
 * order) of every rank's per-tensor top-k of its clipped gradient, exactly */
static void clipped(int r, size_t n, double max_norm, float *g)
{
    double sq = 0.0, limit = max_norm / sqrt((double)p);
    for (size_t i = 0; i < n; i++) g[i] = grad(r, i, 0), sq += (double)g[i] * (double)g[i];
    if (sq > limit * limit) {
        float f = (float)(limit / sqrt(sq));
        for (size_t i = 0; i < n; i++) g[i] *= f;
    }
}

static void test_topk_layer(dt_comm *c)
{
    dt_comm_opts o = {.density = 0.05, .density_warmup = "none", .topk_scope = "layer", .clip_norm = 4.0};
    harness h;
    setup(&h, c, "topk", o);
    size_t n = h.env.arena.n;
    const dt_arena *a = &h.env.arena;
    step(&h, 0);
    float *sum = calloc(n, sizeof *sum), *g = malloc(n * sizeof *g);
    unsigned char *seen = calloc(n, 1), *mine = calloc(n, 1);
    dt_pair *l = malloc(sizeof(dt_pair) * n);
    for (int r = 0; r < p; r++) {
        clipped(r, n, 4.0, g);
        for (int t = 0; t < a->n_tensors; t++) { /* each tensor's own top-k (order of the sum: rank order) */
            const dt_param *q = a->tensors[t];
            size_t kt = (size_t)floor(0.05 * (double)q->n);
            kt = kt < 1 ? 1 : kt;
            topk_select_sort(g + q->offset, q->n, kt, l);
            for (size_t j = 0; j < kt; j++) {
                size_t i = q->offset + l[j].i;
                sum[i] = seen[i] ? sum[i] + l[j].v : l[j].v;
                seen[i] = 1;
                if (r == me) mine[i] = 1;
            }
        }
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += a->w[i] != -sum[i];
    check(!bad, "topk layer scope + clipping: %zu weights differ from minus the dense sum of the per-tensor top-k",
          bad);
    const float *res = state_of(&h, "residual");
    clipped(me, n, 4.0, g);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += res[i] != (mine[i] ? 0.0f : g[i]);
    check(!bad, "topk layer scope + clipping: the residual is wrong at %zu values", bad);
    free(sum), free(g), free(seen), free(mine), free(l);
    teardown(&h);
}

static void test_csc(dt_comm *c)
{
    dt_comm_opts o = {.compress = "none", .chunk = 50, .chunk_ratio = 0.3, .fusion_bytes = INFINITY};
    harness h;
    setup(&h, c, "csc", o);
    size_t n = h.env.arena.n, nc = (n + 49) / 50;
    step(&h, 0); /* the first iteration is dense */
    const float *imp = state_of(&h, "important"), *res = state_of(&h, "residual");
    size_t bad = 0, chosen = 0;
    for (size_t i = 0; i < n; i++) bad += res[i] != 0.0f;
    check(!bad, "csc: after the dense first iteration the residual should be empty (%zu values are not)", bad);
    for (int round = 1; round <= 3; round++) {
        float *before = malloc(n * sizeof *before), *sel = malloc(nc * sizeof *sel);
        imp = state_of(&h, "important"); /* listing the state refreshes it */
        memcpy(before, res, n * sizeof *before);
        memcpy(sel, imp, nc * sizeof *sel); /* the selection this round uses */
        uint64_t hsh = dt_hash64(sel, nc * sizeof *sel, DT_HASH_INIT), h0 = hsh;
        MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        check(hsh == h0, "csc round %d: this rank selected other chunks than rank 0", round);
        chosen = 0;
        for (size_t ch = 0; ch < nc; ch++) chosen += sel[ch] != 0.0f;
        check(chosen == (size_t)llround(0.3 * (double)nc), "csc round %d: %zu of %zu chunks selected", round, chosen,
              nc);
        step(&h, round);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            float corrected = grad(me, i, round) + before[i];
            bad += sel[i / 50] != 0.0f ? res[i] != 0.0f : res[i] != corrected;
        }
        check(!bad, "csc round %d: %zu values lost or kept wrongly (unselected chunks must stay whole)", round, bad);
        free(before), free(sel);
    }
    teardown(&h);
}

/* csc's loss scaling, dense (ratio 1) so the update is -(sum of the gradients) after one step:
 *   a power-of-two scale with no codec changes nothing, bit for bit;
 *   gradients of 1e-9 vanish in fp16 unscaled (below its smallest subnormal) but arrive within
 *   fp16's precision scaled by 2^24;
 *   dynamic scaling of gradients up to 9 on the fp16 wire overflows at 65536: the step is skipped
 *   (weights untouched, every gradient kept as residual, one skipped step) and the scale halved
 * (the fp16 cases from 2 ranks on: one rank sends nothing) */
static float csc_scaled_step(dt_comm *c, const char *compress, const char *scale, float mult, float *w, float *res,
                             double *skipped)
{
    dt_comm_opts o = {.compress = (char *)compress, .chunk = 50, .chunk_ratio = 1.0, .fusion_bytes = INFINITY,
                      .loss_scale = (char *)scale};
    harness h;
    setup(&h, c, "csc", o);
    size_t n = h.env.arena.n;
    for (size_t i = 0; i < n; i++) h.env.arena.g[i] = mult * grad(me, i, 0), h.env.arena.w[i] = 0.0f;
    dt_iter it = {0, 0, 1.0f, 0};
    dt_times t = {0};
    if (h.m->end(h.st, &h.env, &it, &t) != 0) {
        fprintf(stderr, "csc: %s\n", dt_errmsg());
        exit(2);
    }
    memcpy(w, h.env.arena.w, n * sizeof *w);
    memcpy(res, state_of(&h, "residual"), n * sizeof *res);
    const float *ls = state_of(&h, "loss_scale");
    float sc = ls ? ls[0] : 0.0f;
    *skipped = t.skipped;
    teardown(&h);
    return sc;
}

static void test_csc_loss_scale(dt_comm *c)
{
    size_t n = 847, bad = 0, zero = 0; /* the harness net's arena */
    float *w0 = malloc(n * 4), *w1 = malloc(n * 4), *r = malloc(n * 4), *want = calloc(n, 4);
    double skipped;
    csc_scaled_step(c, "none", "none", 1.0f, w0, r, &skipped);
    csc_scaled_step(c, "none", "1024", 1.0f, w1, r, &skipped);
    check(!memcmp(w0, w1, n * 4), "csc --loss-scale 1024 without a codec changed the update");
    if (p == 1) { /* one rank sends nothing: no fp16 on any wire */
        free(w0), free(w1), free(r), free(want);
        return;
    }
    csc_scaled_step(c, "fp16", "none", 1e-9f, w0, r, &skipped);
    csc_scaled_step(c, "fp16", "16777216", 1e-9f, w1, r, &skipped);
    for (size_t i = 0; i < n; i++) { /* fp16's error: 2^-11 of each term, or 2^-24 absolute below 2^-14 */
        double sum = 0, mag = 0;
        for (int q = 0; q < p; q++) sum += (double)(1e-9f * grad(q, i, 0)), mag += fabs(1e-9f * grad(q, i, 0));
        zero += w0[i] == 0.0f;
        bad += fabs(w1[i] + sum) > 1e-3 * mag + p * 6e-8 / 16777216.0;
    }
    check(zero == n, "csc fp16 without loss scaling: %zu of %zu updates of 1e-9 gradients survived fp16", n - zero, n);
    check(!bad, "csc fp16 --loss-scale 2^24: %zu updates differ from the gradients' sum beyond fp16 precision", bad);
    float sc = csc_scaled_step(c, "fp16", "dynamic", 1.0f, w1, r, &skipped);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += w1[i] != 0.0f || r[i] != grad(me, i, 0);
    check(skipped == 1 && sc == 32768.0f && !bad,
          "csc dynamic loss scale on an fp16 overflow: skipped %g (expected 1), scale %g (32768), %zu weights moved or "
          "gradients lost",
          skipped, (double)sc, bad);
    free(w0), free(w1), free(r), free(want);
}

static void test_terngrad(dt_comm *c, int skip_last)
{
    dt_comm_opts o = {.clip = 2.5f, .tern_skip_last = skip_last};
    harness h;
    setup(&h, c, "terngrad", o);
    const dt_arena *a = &h.env.arena;
    step(&h, 0);
    for (int t = 0; t < a->n_tensors; t++) {
        const dt_param *tp = a->tensors[t];
        int last = !strncmp(tp->name, "b.", 2); /* b is the last layer: first in the arena */
        if (skip_last && last) {                /* fp32: the plain sum, up to the ring's rounding */
            for (size_t j = 0; j < tp->n; j++) {
                double s = 0, sa = 0;
                for (int r = 0; r < p; r++) s += grad(r, tp->offset + j, 0), sa += fabs(grad(r, tp->offset + j, 0));
                check(fabs(-a->w[tp->offset + j] - s) <= p * 6e-8 * sa + 1e-30, "terngrad fp32 %s[%zu]", tp->name, j);
            }
            continue;
        }
        float sc = 0.0f, *g = malloc(tp->n * sizeof *g);
        for (int r = 0; r < p; r++) {
            for (size_t j = 0; j < tp->n; j++) g[j] = grad(r, tp->offset + j, 0);
            sc = fmaxf(sc, tern_scaler(g, tp->n, 2.5f));
        }
        size_t bad = 0;
        for (size_t j = 0; j < tp->n; j++) {
            float v = -a->w[tp->offset + j];
            double q = v / sc;
            long jn = lround(q);
            if (labs(jn) > p || v != sc * (float)jn) bad++;
        }
        check(!bad, "terngrad %s: %zu values are not j s with |j| <= P (s = %g)", tp->name, bad, sc);
        free(g);
    }
    teardown(&h);
}

int main(int argc, char **argv)
{
    dt_comm *c;
    if (comm_init(&argc, &argv, 0, &c) != 0) return 2;
    me = comm_rank(c);
    p = comm_size(c);
    test_gtopk(c);
    test_topk(c);
    test_topk_layer(c);
    test_csc_loss_scale(c);
    test_csc(c);
    test_terngrad(c, 0);
    test_terngrad(c, 1);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0 && !all) printf("P=%d: gtopk, topk, csc, terngrad as expected\n", p);
    comm_finalize(c);
    return all ? 1 : 0;
}
