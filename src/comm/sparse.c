#include "sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"

struct dt_topk {
    size_t max_n, max_k;
    float *sample;
    dt_pair *cand;
    float *mag;
    size_t cap;
    int scans;
};

/* |v| as an ordered key: its bits, so NaN ranks above infinity above every number, as the GPU's
 * radix sort ranks it (cuda/elementwise.h, ew_topk_key). Among numbers the order of |v| itself; a
 * diverging run's NaN still leaves a total order, and every selection takes exactly k. */
static inline uint32_t mag_key(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7fffffffu;
}

/* "a before b" when a is larger: |v| descending, index ascending */
static inline int before(const dt_pair *a, const dt_pair *b)
{
    uint32_t x = mag_key(a->v), y = mag_key(b->v);
    return x > y || (x == y && a->i < b->i);
}

static inline void swap(dt_pair *a, dt_pair *b)
{
    dt_pair t = *a;
    *a = *b;
    *b = t;
}

void pairs_select(dt_pair *p, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* the k-th boundary lies in [lo, hi) */
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    if (k == 0 || k >= n) return;
    while (hi - lo > 16) {
        /* pivot: median of three at pseudo-random places (no adversarial slowdowns) */
        size_t span = hi - lo;
        size_t a = lo + (size_t)(rng_hash(state, 1) % span), b = lo + (size_t)(rng_hash(state, 2) % span),
               c = lo + (size_t)(rng_hash(state, 3) % span);
        state = rng_hash(state, 4);
        size_t m = before(&p[a], &p[b]) ? (before(&p[b], &p[c]) ? b : (before(&p[a], &p[c]) ? c : a))
                                        : (before(&p[a], &p[c]) ? a : (before(&p[b], &p[c]) ? c : b));
        dt_pair pivot = p[m];
        /* three-way partition: [lo,lt) before pivot, [lt,gt) equal, [gt,hi) after */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (before(&p[i], &pivot)) swap(&p[lt++], &p[i++]);
            else if (before(&pivot, &p[i])) swap(&p[i], &p[--gt]);
            else i++;
        }
        if (k <= lt) hi = lt;
        else if (k >= gt) lo = gt;
        else return; /* the boundary falls among pivot-equal pairs: done */
    }
    for (size_t i = lo + 1; i < hi; i++) /* insertion sort of the last few */
        for (size_t j = i; j > lo && before(&p[j], &p[j - 1]); j--) swap(&p[j], &p[j - 1]);
}

/* The k-th largest of x[0..n) by mag_key (1-based k), reordering x. */
static float kth_largest(float *x, size_t n, size_t k)
{
    size_t lo = 0, hi = n, want = k - 1; /* position of the answer in descending order */
    uint64_t state = 0x2545f4914f6cdd1dULL;
    while (hi - lo > 1) {
        size_t span = hi - lo;
        float a = x[lo + rng_hash(state, 1) % span], b = x[lo + rng_hash(state, 2) % span],
              c = x[lo + rng_hash(state, 3) % span];
        state = rng_hash(state, 4);
        uint32_t ka = mag_key(a), kb = mag_key(b), kc = mag_key(c);
        float pivot = ka > kb ? (kb > kc ? b : (ka > kc ? c : a)) : (ka > kc ? a : (kb > kc ? c : b));
        uint32_t kp = mag_key(pivot);
        size_t lt = lo, i = lo, gt = hi; /* [lo,lt) > pivot, [lt,gt) == pivot, [gt,hi) < pivot */
        while (i < gt) {
            uint32_t ki = mag_key(x[i]);
            if (ki > kp) {
                float t = x[lt];
                x[lt++] = x[i];
                x[i++] = t;
            } else if (ki < kp) {
                float t = x[--gt];
                x[gt] = x[i];
                x[i] = t;
            } else {
                i++;
            }
        }
        if (want < lt) hi = lt;
        else if (want >= gt) lo = gt;
        else return pivot;
    }
    return x[lo];
}

/* From pairs in index order, the k largest |v| (ties to the lower index), still in index order.
 * mag is scratch for n floats. Returns k. */
static size_t keep_largest_in_order(const dt_pair *in, size_t n, size_t k, dt_pair *out, float *mag)
{
    if (k >= n) {
        if (out != in) memmove(out, in, n * sizeof *in);
        return n;
    }
    for (size_t i = 0; i < n; i++) mag[i] = fabsf(in[i].v);
    uint32_t thr = mag_key(kth_largest(mag, n, k));
    size_t above = 0;
    for (size_t i = 0; i < n; i++) above += mag_key(in[i].v) > thr;
    size_t ties = k - above, o = 0;
    for (size_t i = 0; i < n && o < k; i++) {
        uint32_t m = mag_key(in[i].v);
        if (m > thr || (m == thr && ties > 0)) {
            if (m == thr) ties--;
            out[o++] = in[i];
        }
    }
    return o;
}

static int by_index(const void *x, const void *y)
{
    const dt_pair *a = x, *b = y;
    return (a->i > b->i) - (a->i < b->i);
}

void pairs_sort_by_index(dt_pair *p, size_t n) { qsort(p, n, sizeof *p, by_index); }

int topk_create(dt_topk **out, size_t max_n, size_t max_k)
{
    dt_topk *t = calloc(1, sizeof *t);
    if (!t) return dt_fail("out of memory");
    t->max_n = max_n;
    t->max_k = max_k;
    t->cap = 4 * max_k + 4096;
    if (!(t->sample = dt_alloc(sizeof(float) * DT_TOPK_MAX_SAMPLE)) ||
        !(t->cand = dt_alloc(sizeof(dt_pair) * t->cap)) || !(t->mag = dt_alloc(sizeof(float) * t->cap))) {
        topk_destroy(t);
        return -1;
    }
    *out = t;
    return 0;
}

void topk_destroy(dt_topk *t)
{
    if (!t) return;
    dt_free(t->sample);
    dt_free(t->cand);
    dt_free(t->mag);
    free(t);
}

int topk_last_scans(const dt_topk *t) { return t->scans; }

/* one scan: pairs with |a| >= thr (by mag_key) into the candidate buffer; returns the count, or cap+1 if more */
static size_t collect(dt_topk *t, const float *a, size_t n, float thr)
{
    size_t c = 0;
    uint32_t kt = mag_key(thr);
    for (size_t i = 0; i < n; i++)
        if (mag_key(a[i]) >= kt) {
            if (c == t->cap) return t->cap + 1;
            t->cand[c].i = (uint32_t)i;
            t->cand[c].v = a[i];
            c++;
        }
    return c;
}

static int exact_over_all(const float *a, size_t n, size_t k, dt_pair *out)
{
    float *mag = dt_alloc(sizeof(float) * n);
    if (!mag) return -1;
    for (size_t i = 0; i < n; i++) mag[i] = fabsf(a[i]);
    uint32_t thr = mag_key(kth_largest(mag, n, k));
    size_t above = 0, o = 0;
    for (size_t i = 0; i < n; i++) above += mag_key(a[i]) > thr;
    size_t ties = k - above;
    for (size_t i = 0; i < n && o < k; i++) {
        uint32_t m = mag_key(a[i]);
        if (m > thr || (m == thr && ties > 0)) {
            if (m == thr) ties--;
            out[o++] = (dt_pair){(uint32_t)i, a[i]};
        }
    }
    dt_free(mag);
    return 0;
}

size_t topk_sample_size(size_t n, size_t k)
{
    if (k == 0 || k >= n || n <= 65536) return 0;
    double rho = (double)k / (double)n;
    size_t m = (size_t)DT_MIN((double)DT_TOPK_MAX_SAMPLE, DT_MAX(4096.0, 64.0 / rho));
    return m >= n / 4 ? 0 : m;
}

size_t topk_sample_index(size_t s, size_t n) { return (size_t)(rng_hash(0x5a17, s) % n); }

/* the sample's position of the k-th largest over all n */
static size_t sample_rank(size_t m, size_t n, size_t k)
{
    return (size_t)DT_MIN((double)m, DT_MAX(1.0, (double)k / (double)n * (double)m));
}

float topk_sample_threshold(float *sample, size_t m, size_t n, size_t k)
{
    return kth_largest(sample, m, sample_rank(m, n, k));
}

size_t topk_count_above(const float *a, size_t n, float thr)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += fabsf(a[i]) >= thr;
    return c;
}

/* topk_take_above where the count c of values reaching thr is known */
static void take_above_counted(const float *a, size_t n, size_t k, float thr, size_t c, dt_pair *out)
{
    size_t rest = k - DT_MIN(k, c), o = 0;
    for (size_t i = 0; i < n && o < k; i++) {
        int above = fabsf(a[i]) >= thr;
        if (above || rest > 0) {
            rest -= !above;
            out[o++] = (dt_pair){(uint32_t)i, a[i]};
        }
    }
}

void topk_take_above(const float *a, size_t n, size_t k, float thr, dt_pair *out)
{
    take_above_counted(a, n, k, thr, topk_count_above(a, n, thr), out);
}

int topk_select_sampled(dt_topk *t, const float *a, size_t n, size_t k, dt_pair *out)
{
    size_t m = topk_sample_size(n, k);
    if (!m) return topk_select(t, a, n, k, out);
    if (k > t->max_k || n > t->max_n) return dt_fail("internal: top-%zu of %zu beyond the workspace", k, n);
    for (size_t s = 0; s < m; s++) t->sample[s] = fabsf(a[topk_sample_index(s, n)]);
    float thr = topk_sample_threshold(t->sample, m, n, k);
    size_t c = 0;
    for (size_t i = 0; i < n; i++) /* the candidates, as topk_select collects them */
        if (fabsf(a[i]) >= thr) {
            if (c < t->cap) t->cand[c] = (dt_pair){(uint32_t)i, a[i]};
            c++;
        }
    t->scans = 1;
    if (c < k) {
        take_above_counted(a, n, k, thr, c, out);
        return 0;
    }
    if (c > t->cap) return topk_select(t, a, n, k, out); /* the k largest all the same, by topk_select's way */
    keep_largest_in_order(t->cand, c, k, out, t->mag);
    return 0;
}

int topk_select(dt_topk *t, const float *a, size_t n, size_t k, dt_pair *out)
{
    t->scans = 0;
    if (k == 0) return 0;
    if (k > t->max_k || n > t->max_n) return dt_fail("internal: top-%zu of %zu beyond the workspace", k, n);
    /* a fixed pseudo-random sample; enough of it lies above the k-th value for a stable quantile */
    double rho = (double)k / (double)n;
    size_t m = topk_sample_size(n, k);
    if (!m) { /* small, or the sample would not be: select over everything */
        t->scans = 1;
        return exact_over_all(a, n, k, out);
    }
    for (size_t s = 0; s < m; s++) t->sample[s] = fabsf(a[topk_sample_index(s, n)]);
    /* aim for ~1.5 k candidates: below the k-th value with high probability, far from 4k */
    size_t at = (size_t)DT_MIN((double)m, DT_MAX(1.0, 1.5 * rho * (double)m));
    float thr = kth_largest(t->sample, m, at), thr_k = 0.0f;
    int have_thr_k = 0;
    for (int attempt = 0; attempt < 6; attempt++) {
        t->scans++;
        size_t c = collect(t, a, n, thr);
        if (c > t->cap) { /* far too many pass: raise the threshold toward the k-th sample value */
            if (!have_thr_k) {
                thr_k = kth_largest(t->sample, m, sample_rank(m, n, k));
                have_thr_k = 1;
            }
            thr = thr_k > thr ? thr_k : nextafterf(thr, INFINITY) * 1.5f;
            continue;
        }
        if (c < k) { /* too few: lower it */
            thr = thr > 0 ? thr * 0.5f : 0.0f;
            if (thr < 1e-30f) thr = 0.0f;
            continue;
        }
        /* exact among the candidates, which hold every value >= thr, in index order */
        keep_largest_in_order(t->cand, c, k, out, t->mag);
        return 0;
    }
    t->scans++;
    return exact_over_all(a, n, k, out);
}

static int larger_first(const void *x, const void *y)
{
    const dt_pair *a = x, *b = y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

int topk_select_sort(const float *a, size_t n, size_t k, dt_pair *out)
{
    dt_pair *all = dt_alloc(sizeof(dt_pair) * (n ? n : 1));
    if (!all) return -1;
    for (size_t i = 0; i < n; i++) all[i] = (dt_pair){(uint32_t)i, a[i]};
    qsort(all, n, sizeof *all, larger_first);
    memcpy(out, all, sizeof(dt_pair) * k);
    pairs_sort_by_index(out, k);
    dt_free(all);
    return 0;
}

size_t sparse_merge_topk(const dt_pair *a, size_t na, const dt_pair *b, size_t nb, size_t k, dt_pair *out,
                         dt_pair *tmp)
{
    size_t x = 0, y = 0, u = 0;
    while (x < na || y < nb) {
        if (y == nb || (x < na && a[x].i < b[y].i)) tmp[u++] = a[x++];
        else if (x == na || b[y].i < a[x].i) tmp[u++] = b[y++];
        else {
            tmp[u] = a[x++];
            tmp[u++].v += b[y++].v;
        }
    }
    if (k >= u) { /* everything stays: the union is sorted by index already */
        memcpy(out, tmp, sizeof(dt_pair) * u);
        return u;
    }
    /* the magnitudes go into out's space as scratch only when it is large enough; else allocate */
    float *mag = malloc(sizeof(float) * u);
    if (!mag) { /* out of memory: fall back to the in-place selection */
        pairs_select(tmp, u, k);
        memcpy(out, tmp, sizeof(dt_pair) * k);
        pairs_sort_by_index(out, k);
        return k;
    }
    size_t o = keep_largest_in_order(tmp, u, k, out, mag);
    free(mag);
    return o;
}

int sparse_costs(size_t n, size_t k, int sampled, double *select_s, double *merge_pair_s)
{
    dt_topk *t = NULL;
    float *a = dt_alloc(n * sizeof(float));
    dt_pair *x = dt_alloc(5 * k * sizeof(dt_pair) + sizeof(dt_pair)); /* x, y, out: k each; tmp: 2 k */
    int rc = a && x ? topk_create(&t, n, k) : -1;
    *select_s = *merge_pair_s = 0.0;
    if (rc == 0 && k > 0) {
        dt_pair *y = x + k, *out = x + 2 * k, *tmp = x + 3 * k;
        for (size_t i = 0; i < n; i++) { /* |a| = u^-1 over a fixed sequence: a few large among many small */
            double u = ((double)(rng_hash(0xc057, i) >> 11) + 0.5) / 9007199254740992.0;
            a[i] = (float)((i & 1 ? -1.0 : 1.0) * (1.0 / u));
        }
        double best_sel = 1e30, best_merge = 1e30;
        for (int rep = 0; rc == 0 && rep < 3; rep++) {
            double t0 = dt_now();
            rc = (sampled ? topk_select_sampled : topk_select)(t, a, n, k, x);
            double t1 = dt_now();
            if (rc != 0) break;
            memcpy(y, x, k * sizeof(dt_pair));
            for (size_t i = 0; i < k; i++) y[i].i = x[i].i + 1; /* a neighbour's: some indices meet */
            double t2 = dt_now();
            sparse_merge_topk(x, k, y, k, k, out, tmp);
            double t3 = dt_now();
            best_sel = DT_MIN(best_sel, t1 - t0);
            best_merge = DT_MIN(best_merge, t3 - t2);
        }
        if (rc == 0) *select_s = best_sel, *merge_pair_s = best_merge / (double)(2 * k);
    }
    topk_destroy(t);
    dt_free(a);
    dt_free(x);
    return rc == 0 ? 0 : dt_fail_prefix("timing the top-k selection");
}
