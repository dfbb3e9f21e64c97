/* Sparse building blocks: the fast top-k equals the full-sort reference exactly (same set, same
 * tie-breaking, sorted by index) on many shapes, ties and densities; the sampled-threshold selection
 * keeps its definition; gTop-k's merge equals a
 * brute-force dense sum and selection; TernGrad's codes take the values they should, are unbiased
 * within the clip, and pack losslessly. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec_tern.h"
#include "comm/sparse.h"
#include "cpu.h"
#include "rng.h"
#include "util.h"

static void fill(float *a, size_t n, uint64_t seed, int kind)
{
    dt_rng r;
    rng_seed(&r, seed, 9);
    for (size_t i = 0; i < n; i++) {
        double x = rng_normal(&r);
        switch (kind) {
        case 0: a[i] = (float)x; break;                                    /* gaussian */
        case 1: a[i] = (float)(x * exp(4 * rng_normal(&r))); break;        /* heavy tails */
        case 2: a[i] = (float)((int)(x * 3)) * 0.5f; break;                /* many exact ties, zeros */
        case 3: a[i] = i % 5 ? 0.0f : (float)x; break;                     /* mostly zeros */
        default: a[i] = (i % 1000 == 0) ? 100.0f : (float)(x * 1e-3); break; /* a few huge */
        }
    }
}

START_TEST(topk_equals_full_sort)
{
    /* the sanitized build stops at 300001 values, and takes only small k beyond 65537: its larger cases
     * are minutes of the same paths there */
    const int sanitized = getenv("DT_SANITIZED") && !strcmp(getenv("DT_SANITIZED"), "yes");
    const size_t sizes[] = {10, 1000, 65537, 300001, 1000003}, n_sizes = sanitized ? 4 : 5;
    const size_t big = sanitized ? 65537 : 300001; /* beyond it only the small densities */
    const double dens[] = {1e-4, 1e-3, 0.01, 0.1, 0.3, 0.7};
    dt_topk *t;
    ck_assert_int_eq(topk_create(&t, 1000003, 700003), 0);
    float *a = malloc(sizeof(float) * 1000003);
    dt_pair *fast = malloc(sizeof(dt_pair) * 700003), *ref = malloc(sizeof(dt_pair) * 700003);
    int cases = 0;
    for (size_t si = 0; si < n_sizes; si++)
        for (int kind = 0; kind < 5; kind++)
            for (size_t di = 0; di < sizeof dens / sizeof *dens; di++) {
                size_t n = sizes[si], k = (size_t)(dens[di] * (double)n);
                if (k < 1) k = 1;
                if (n > big && di > 2) continue; /* the reference sort is slow; large k covered below */
                fill(a, n, 100 + si * 10 + (size_t)kind, kind);
                ck_assert_int_eq(topk_select(t, a, n, k, fast), 0);
                ck_assert_int_eq(topk_select_sort(a, n, k, ref), 0);
                for (size_t j = 0; j < k; j++)
                    ck_assert_msg(fast[j].i == ref[j].i && fast[j].v == ref[j].v,
                                  "n=%zu k=%zu kind=%d: entry %zu is (%u, %g), the reference (%u, %g)", n, k, kind, j,
                                  fast[j].i, fast[j].v, ref[j].i, ref[j].v);
                for (size_t j = 1; j < k; j++) ck_assert(fast[j - 1].i < fast[j].i);
                cases++;
            }
    ck_assert_int_ge(cases, sanitized ? 105 : 120);
    free(a), free(fast), free(ref);
    topk_destroy(t);
}
END_TEST

/* brute force of ⊤: dense sum (receiver's value first), then the k largest, ties to lower index */
static size_t brute_merge(const dt_pair *a, size_t na, const dt_pair *b, size_t nb, size_t k, size_t n, dt_pair *out)
{
    float *d = calloc(n, sizeof *d);
    unsigned char *in = calloc(n, 1);
    for (size_t i = 0; i < na; i++) d[a[i].i] = a[i].v, in[a[i].i] = 1;
    for (size_t i = 0; i < nb; i++) d[b[i].i] = in[b[i].i] ? d[b[i].i] + b[i].v : b[i].v, in[b[i].i] = 1;
    float *dense = malloc(n * sizeof *dense);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) u += in[i];
    /* the union's values at their indices; the rest must never be chosen: mark them out of reach */
    dt_pair *all = malloc(u * sizeof *all);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i]) all[m++] = (dt_pair){(uint32_t)i, d[i]};
    for (size_t i = 0; i < m; i++) dense[i] = all[i].v;
    dt_pair *sel = malloc(u * sizeof *sel);
    size_t kk = k < u ? k : u;
    ck_assert_int_eq(topk_select_sort(dense, m, kk, sel), 0);
    for (size_t j = 0; j < kk; j++) out[j] = all[sel[j].i];
    free(d), free(in), free(dense), free(all), free(sel);
    return kk;
}

START_TEST(merge_equals_brute_force)
{
    const size_t n = 5000;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    dt_pair *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb), *out = malloc(2 * n * sizeof *out),
            *ref = malloc(2 * n * sizeof *ref), *tmp = malloc(2 * n * sizeof *tmp);
    for (int trial = 0; trial < 40; trial++) {
        size_t k = 1 + (size_t)trial * 37 % 700;
        fill(a, n, 500 + (uint64_t)trial, trial % 5);
        fill(b, n, 900 + (uint64_t)trial, (trial + 2) % 5);
        if (trial % 3 == 0) memcpy(b, a, n * sizeof *b); /* identical inputs: every index meets */
        ck_assert_int_eq(topk_select_sort(a, n, k, pa), 0);
        ck_assert_int_eq(topk_select_sort(b, n, k, pb), 0);
        size_t got = sparse_merge_topk(pa, k, pb, k, k, out, tmp);
        size_t want = brute_merge(pa, k, pb, k, k, n, ref);
        ck_assert_uint_eq(got, want);
        for (size_t j = 0; j < got; j++)
            ck_assert_msg(out[j].i == ref[j].i && out[j].v == ref[j].v, "trial %d entry %zu: (%u, %g) vs (%u, %g)",
                          trial, j, out[j].i, out[j].v, ref[j].i, ref[j].v);
        for (size_t j = 1; j < got; j++) ck_assert(out[j - 1].i < out[j].i);
    }
    free(a), free(b), free(pa), free(pb), free(out), free(ref), free(tmp);
}
END_TEST

/* the timing model's costs: measured, positive, and growing with the work (a selection over 16x
 * the values takes longer; a merge costs well under a microsecond per pair on any CPU that trains) */
START_TEST(costs_measured)
{
    double sel_small, sel_big, merge;
    ck_assert_int_eq(sparse_costs(1 << 16, 64, 0, &sel_small, &merge), 0);
    ck_assert_int_eq(sparse_costs(1 << 20, 1024, 0, &sel_big, &merge), 0);
    ck_assert_msg(sel_small > 0 && sel_big > sel_small, "selection: %g s for 2^16, %g s for 2^20", sel_small, sel_big);
    ck_assert_msg(merge > 0 && merge < 1e-6, "merge: %g s per pair", merge);
    double sel_sampled; /* --topk-select sampled is priced by its own selection */
    ck_assert_int_eq(sparse_costs(1 << 20, 1024, 1, &sel_sampled, &merge), 0);
    ck_assert_msg(sel_sampled > 0, "sampled selection: %g s for 2^20", sel_sampled);
}
END_TEST

START_TEST(tern_values_and_packing)
{
    const size_t n = 10001;
    float g[10001];
    int8_t t[10001], back[10001] = {0};
    uint8_t codes[(10001 + 3) / 4];
    fill(g, n, 3, 1);
    float s = tern_scaler(g, n, 2.5f);
    ck_assert(s > 0);
    tern_ternarize(g, n, s, s, 42, t);
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert(t[i] == 0 || t[i] == 1 || t[i] == -1);
        if (t[i]) ck_assert_int_eq(t[i] > 0, g[i] > 0); /* the sign is the gradient's */
        nonzero += t[i] != 0;
    }
    ck_assert_int_gt(nonzero, 0);
    tern_pack(t, n, codes);
    tern_unpack_add(codes, n, back);
    ck_assert_int_eq(memcmp(t, back, n), 0);
    /* the clip: max |clipped| is at most 2.5 sigma */
    double sum = 0, sq = 0, mx = 0;
    for (size_t i = 0; i < n; i++) sum += g[i], sq += (double)g[i] * g[i], mx = fmax(mx, fabs(g[i]));
    double sigma = sqrt(sq / n - (sum / n) * (sum / n));
    ck_assert(s <= 2.5 * sigma * 1.0001 && s <= mx);
}
END_TEST

/* tern_scaler's sums in their one order (codec_tern.c), written out plainly: the same bits from the
 * vectorised clone that runs here, for lengths around the lanes and blocks */
DT_NO_CONTRACT static float scaler_ref(const float *g, size_t n, float c)
{
    double sum = 0, sq = 0;
    float mx = 0;
    for (size_t a = 0; a < n; a += 4096) {
        size_t len = n - a < 4096 ? n - a : 4096;
        float s[16] = {0}, q[16] = {0};
        for (size_t i = 0; i < len; i++) {
            float v = g[a + i];
            s[i % 16] += v;
            q[i % 16] += v * v;
            mx = fmaxf(mx, fabsf(v));
        }
        for (int w = 8; w > 0; w /= 2)
            for (int j = 0; j < w; j++) s[j] += s[j + w], q[j] += q[j + w];
        sum += s[0], sq += q[0];
    }
    double mean = sum / (double)n, var = sq / (double)n - mean * mean;
    float cs = c * (float)sqrt(var > 0 ? var : 0);
    return cs > 0 && cs < mx ? cs : mx;
}

START_TEST(tern_scaler_order)
{
    static const size_t ns[] = {1, 15, 16, 17, 4095, 4096, 4097, 8192 + 33, 100003};
    float *g = malloc(100003 * sizeof *g);
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        fill(g, ns[k], 7 + (int)k, 1);
        for (size_t i = 0; i < ns[k]; i++) g[i] = g[i] * 1e-3f + 3e-4f; /* a mean, so the order shows */
        float got = tern_scaler(g, ns[k], 2.5f), want = scaler_ref(g, ns[k], 2.5f);
        ck_assert_msg(memcmp(&got, &want, 4) == 0, "n = %zu: tern_scaler %.9g, in its order %.9g", ns[k], got, want);
    }
    free(g);
}
END_TEST

/* E[s t] = clipped g: with 20000 independent draws the mean is within 5 standard errors */
START_TEST(tern_unbiased_within_clip)
{
    const size_t n = 64;
    const int draws = 20000;
    float g[64];
    double mean[64] = {0};
    int8_t t[64];
    for (size_t i = 0; i < n; i++) g[i] = (float)(((double)i - 31.5) / 10.0); /* -3.15 .. 3.15 */
    const float clip = 2.0f, s = 2.0f;                                       /* scaler = the clip */
    for (int d = 0; d < draws; d++) {
        tern_ternarize(g, n, clip, s, rng_hash(7, (uint64_t)d), t);
        for (size_t i = 0; i < n; i++) mean[i] += s * t[i];
    }
    for (size_t i = 0; i < n; i++) {
        double m = mean[i] / draws, want = fmax(-clip, fmin(clip, g[i]));
        double p = fabs(want) / s, se = s * sqrt(p * (1 - p) / draws) + 1e-9;
        ck_assert_msg(fabs(m - want) <= 5 * se + 1e-6, "value %zu: mean %.5f, clipped gradient %.5f (5 se = %.5f)", i,
                      m, want, 5 * se);
    }
}
END_TEST

/* --topk-select sampled: where topk_select would sample, the k largest when k or more values reach the
 * sample's threshold, else those that do and the first of the rest in index order; exactly k pairs
 * sorted by index either way; elsewhere the exact selection. How close it comes to the k largest is
 * measured (tools/bench_sparse), not asserted beyond a floor that a broken threshold misses. */
START_TEST(topk_sampled)
{
    const size_t n = 1000003;
    dt_topk *t;
    ck_assert_int_eq(topk_create(&t, n, 20000), 0);
    float *a = malloc(sizeof(float) * n), *sample = malloc(sizeof(float) * DT_TOPK_MAX_SAMPLE);
    dt_pair *got = malloc(sizeof(dt_pair) * 20000), *ref = malloc(sizeof(dt_pair) * 20000);
    /* small: exact */
    fill(a, 60000, 7, 1);
    ck_assert_int_eq(topk_sample_size(60000, 600), 0);
    ck_assert_int_eq(topk_select_sampled(t, a, 60000, 600, got), 0);
    ck_assert_int_eq(topk_select_sort(a, 60000, 600, ref), 0);
    ck_assert(!memcmp(got, ref, 600 * sizeof *got));
    int exact = 0, short_of = 0;
    for (int run = 0; run < 10; run++) {
        int kind = run % 5;
        size_t k = run >= 5 ? 20000 : 1000 + (size_t)run * 7, m = topk_sample_size(n, k), same = 0;
        fill(a, n, 200 + (size_t)run, kind);
        ck_assert(m >= 4096 && m < n / 4);
        for (size_t s = 0; s < m; s++) sample[s] = fabsf(a[topk_sample_index(s, n)]);
        float thr = topk_sample_threshold(sample, m, n, k);
        ck_assert_int_eq(topk_select_sampled(t, a, n, k, got), 0);
        ck_assert_int_eq(topk_select_sort(a, n, k, ref), 0);
        size_t passed = topk_count_above(a, n, thr), passed_in = 0;
        if (passed >= k) {
            exact++;
            ck_assert_msg(!memcmp(got, ref, k * sizeof *got), "run %d: %zu reach the threshold, not the k largest", run,
                          passed);
            continue;
        }
        short_of++;
        for (size_t j = 0, r = 0; j < k; j++) {
            ck_assert(got[j].i < n && memcmp(&got[j].v, &a[got[j].i], 4) == 0);
            if (j) ck_assert(got[j - 1].i < got[j].i);
            passed_in += fabsf(got[j].v) >= thr;
            while (r < k && ref[r].i < got[j].i) r++;
            same += r < k && ref[r].i == got[j].i;
        }
        ck_assert_msg(passed_in == passed, "run %d: %zu of the %zu that reach the threshold", run, passed_in, passed);
        /* far fewer than k of the largest: the threshold is not the sample's estimate */
        ck_assert_msg(same >= k / 2, "run %d: %zu of the %zu largest selected", run, same, k);
    }
    ck_assert_msg(exact > 0 && short_of > 0, "the threshold was always %s the k-th value", exact ? "below" : "above");
    /* too few pass: all that do and the first of the rest, in index order */
    for (size_t i = 0; i < 100; i++) a[i] = i == 40 || i == 70 ? 5.0f : 1.0f;
    ck_assert_int_eq(topk_count_above(a, 100, 2.0f), 2);
    topk_take_above(a, 100, 4, 2.0f, got);
    ck_assert(got[0].i == 0 && got[1].i == 1 && got[2].i == 40 && got[3].i == 70);
    free(a), free(sample), free(got), free(ref);
    topk_destroy(t);
}
END_TEST

/* A diverging run's gradient holds NaN and infinities: every selection still takes exactly k valid
 * pairs, ranked as the GPU's radix sort ranks them (the bits of |v|: NaN above infinity above the
 * rest; ties to the lower index). */
static uint32_t key_of(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7fffffffu;
}

static const float *key_base;
static int key_desc(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y, ka = key_of(key_base[a]), kb = key_of(key_base[b]);
    return ka != kb ? (ka > kb ? -1 : 1) : (a > b) - (a < b);
}

static int by_i(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

START_TEST(topk_nonfinite)
{
    const size_t sizes[] = {1000, 300001}, ks[] = {3, 40, 900};
    dt_topk *t;
    ck_assert_int_eq(topk_create(&t, 300001, 900), 0);
    float *a = malloc(sizeof(float) * 300001);
    uint32_t *ix = malloc(sizeof(uint32_t) * 300001);
    dt_pair *got = malloc(sizeof(dt_pair) * 1800), *tmp = malloc(sizeof(dt_pair) * 2700);
    for (size_t si = 0; si < 2; si++)
        for (size_t ki = 0; ki < 3; ki++)
            for (int sampled = 0; sampled < 2; sampled++) {
                size_t n = sizes[si], k = ks[ki];
                fill(a, n, 40 + si, 0);
                for (size_t i = 7; i < n; i += n / 9) a[i] = i % 2 ? NAN : -NAN; /* 9 or 10 of them */
                a[n / 3] = INFINITY, a[n / 2] = -INFINITY;
                for (size_t j = 0; j < 2 * k; j++) got[j] = (dt_pair){0xffffffffu, 0.0f};
                if (sampled) ck_assert_int_eq(topk_select_sampled(t, a, n, k, got), 0);
                else ck_assert_int_eq(topk_select(t, a, n, k, got), 0);
                for (size_t j = 0; j < k; j++) {
                    ck_assert_msg(got[j].i < n, "n %zu k %zu%s: pair %zu of %zu not set", n, k,
                                  sampled ? " sampled" : "", j, k);
                    if (j) ck_assert(got[j - 1].i < got[j].i);
                }
                if (sampled) continue; /* its selection is only close to the k largest by definition */
                for (size_t i = 0; i < n; i++) ix[i] = (uint32_t)i;
                key_base = a;
                qsort(ix, n, sizeof *ix, key_desc);
                qsort(ix, k, sizeof *ix, by_i);
                for (size_t j = 0; j < k; j++)
                    ck_assert_msg(got[j].i == ix[j], "n %zu k %zu: pair %zu is index %u, not %u", n, k, j, got[j].i,
                                  ix[j]);
                /* gTop-k's merge of two such lists: min(k, union) pairs, NaN sums first */
                size_t m = sparse_merge_topk(got, k, got, k, k, tmp, tmp + k);
                ck_assert_uint_eq(m, k);
                for (size_t j = 0; j < k; j++) ck_assert(tmp[j].i == ix[j]);
            }
    free(a), free(ix), free(got), free(tmp);
    topk_destroy(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sparse");
    TCase *tc = tcase_create("sparse");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, topk_equals_full_sort);
    tcase_add_test(tc, topk_sampled);
    tcase_add_test(tc, topk_nonfinite);
    tcase_add_test(tc, merge_equals_brute_force);
    tcase_add_test(tc, costs_measured);
    tcase_add_test(tc, tern_values_and_packing);
    tcase_add_test(tc, tern_scaler_order);
    tcase_add_test(tc, tern_unbiased_within_clip);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
