/* Codecs: the error of one encode/decode stays within the bound codec.h states, sizes are what
 * the wire format says, decode_add adds exactly the decoded values, the fp16 hardware path gives
 * the same bits as the portable one, and q8 handles short blocks, zeros and extremes. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "rng.h"
#include "util.h"

uint16_t codec_fp16_from_float(float f);
float codec_fp16_to_float(uint16_t h);

/* values over many magnitudes, signs, and a few exact zeros */
static void fill(float *x, size_t n, uint64_t seed)
{
    dt_rng r;
    rng_seed(&r, seed, 1);
    for (size_t i = 0; i < n; i++) {
        double mag = pow(10.0, -8.0 + 12.0 * rng_uniform_d(&r));
        x[i] = (float)((rng_uniform_d(&r) < 0.5 ? -1.0 : 1.0) * mag);
        if (i % 97 == 0) x[i] = 0.0f;
    }
}

static double bound(const dt_codec *c, const float *x, size_t n, size_t i)
{
    const char *name = c->desc->name;
    double a = fabs((double)x[i]);
    if (!strcmp(name, "none")) return 0.0;
    if (!strcmp(name, "t16")) return a * ldexp(1.0, -7);
    if (!strcmp(name, "fp16")) return a * ldexp(1.0, -11) + ldexp(1.0, -25);
    /* q8: max |x| over i's block / 254, plus the fp32 rounding of q * s / 127 */
    size_t b = (size_t)c->block, start = i / b * b, end = start + b < n ? start + b : n;
    double m = 0.0;
    for (size_t k = start; k < end; k++) m = fmax(m, fabs((double)x[k]));
    return m / 254.0 * (1.0 + 1e-6) + m * 1e-7;
}

static const char *names[] = {"none", "t16", "fp16", "q8"};

START_TEST(round_trip_within_bound)
{
    const size_t n = 10007; /* not a multiple of the q8 block */
    dt_codec c;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    ck_assert_int_eq(codec_create(names[_i], 256, &c), 0);
    size_t bytes = codec_bytes(&c, n);
    unsigned char *e = malloc(bytes), *e2 = malloc(bytes);
    fill(x, n, 5 + (uint64_t)_i);
    if (!strcmp(names[_i], "fp16")) /* keep to fp16's range; saturation has its own test */
        for (size_t i = 0; i < n; i++) x[i] = fmaxf(fminf(x[i], 60000.0f), -60000.0f);
    codec_encode(&c, x, n, e);
    codec_encode(&c, x, n, e2);
    ck_assert_int_eq(memcmp(e, e2, bytes), 0); /* a pure function of its input */
    codec_decode(&c, e, n, y);
    size_t worst = 0;
    double worst_ratio = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)y[i] - (double)x[i]), b = bound(&c, x, n, i);
        double ratio = b > 0 ? err / b : (err > 0 ? INFINITY : 0.0);
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    ck_assert_msg(worst_ratio <= 1.0, "%s: x[%zu] = %.9g decoded as %.9g, error %.3g exceeds its bound %.3g", names[_i],
                  worst, x[worst], y[worst], fabs((double)y[worst] - x[worst]), bound(&c, x, n, worst));
    /* decode_add adds exactly what decode gives */
    for (size_t i = 0; i < n; i++) z[i] = 1.5f;
    codec_decode_add(&c, e, n, z);
    for (size_t i = 0; i < n; i++) ck_assert_msg(z[i] == 1.5f + y[i], "%s decode_add at %zu", names[_i], i);
    free(x), free(y), free(z), free(e), free(e2);
}
END_TEST

START_TEST(sizes)
{
    dt_codec c;
    ck_assert_int_eq(codec_create("none", 0, &c), 0);
    ck_assert_uint_eq(codec_bytes(&c, 1001), 4004);
    ck_assert_int_eq(codec_create("t16", 0, &c), 0);
    ck_assert_uint_eq(codec_bytes(&c, 1001), 2002);
    ck_assert_int_eq(codec_create("fp16", 0, &c), 0);
    ck_assert_uint_eq(codec_bytes(&c, 1001), 2002);
    ck_assert_int_eq(codec_create("q8", 256, &c), 0);
    ck_assert_uint_eq(codec_bytes(&c, 1001), 1001 + 4 * 4); /* 4 blocks, the last of 233 */
    ck_assert_int_eq(codec_create("q8", 1000, &c), 0);
    ck_assert_uint_eq(codec_bytes(&c, 1000), 1004);
    ck_assert_int_ne(codec_create("q4", 0, &c), 0);
    ck_assert_ptr_nonnull(strstr(dt_errmsg(), "unknown codec 'q4' (expected one of none, t16, fp16, q8)"));
}
END_TEST

START_TEST(t16_truncates_toward_zero)
{
    dt_codec c;
    ck_assert_int_eq(codec_create("t16", 0, &c), 0);
    float x[4] = {1.0f + 1.0f / 128 + 1.0f / 256, -(1.0f + 1.0f / 128 + 1.0f / 256), 3.0e38f, -0.0f}, y[4];
    uint16_t e[4];
    codec_encode(&c, x, 4, e);
    codec_decode(&c, e, 4, y);
    ck_assert_float_eq(y[0], 1.0f + 1.0f / 128); /* the 1/256 bit dropped, not rounded up */
    ck_assert_float_eq(y[1], -(1.0f + 1.0f / 128));
    ck_assert(y[2] <= x[2] && y[2] > 2.9e38f);
    ck_assert(signbit(y[3]));
}
END_TEST

/* every half value round-trips, and F16C (when present) agrees with the portable conversion */
START_TEST(fp16_exact_values_and_paths)
{
    dt_codec c;
    ck_assert_int_eq(codec_create("fp16", 0, &c), 0);
    enum { N = 65536 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint16_t *e = malloc(N * sizeof *e);
    int n = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00) continue; /* inf and NaN */
        x[n++] = codec_fp16_to_float((uint16_t)h);
    }
    codec_encode(&c, x, (size_t)n, e);
    codec_decode(&c, e, (size_t)n, y);
    for (int i = 0; i < n; i++) ck_assert_msg(y[i] == x[i] && signbit(y[i]) == signbit(x[i]), "half %d", i);
    /* arbitrary floats (incl. ties, subnormals, saturation): vector path vs portable path, bit for bit */
    dt_rng r;
    rng_seed(&r, 3, 3);
    for (int i = 0; i < N; i++) {
        uint32_t bits = (uint32_t)rng_next(&r);
        if ((bits & 0x7f800000u) == 0x7f800000u) bits &= 0xbfffffffu; /* no inf/NaN */
        memcpy(&x[i], &bits, 4);
        if (i % 3 == 0) x[i] = ldexpf((float)(i % 2048) + 0.5f, -24 - (i % 5)); /* ties near subnormals */
        if (i % 7 == 0) x[i] = 65504.0f + (float)(i % 64); /* saturation edge */
    }
    codec_encode(&c, x, N, e);
    for (int i = 0; i < N; i++)
        ck_assert_msg(e[i] == codec_fp16_from_float(x[i]), "x = %a: encoded %04x, portable %04x", (double)x[i], e[i],
                      codec_fp16_from_float(x[i]));
    /* codec_fp16_saturated counts the values sent as +-65504 that lay beyond it (from 65520, which
     * rounds to infinity), on the vector path (the first 8) and the portable one (the rest) alike */
    const float edge[13] = {65503, 65504, 65519, 65520, -1e9f, INFINITY, -INFINITY, NAN,
                            1,     70000, 0,     -65520, 65519.99f};
    uint16_t code[13];
    for (int shift = 0; shift < 13; shift++) {
        float v[13];
        for (int i = 0; i < 13; i++) v[i] = edge[(i + shift) % 13];
        unsigned long long before = codec_fp16_saturated();
        codec_encode(&c, v, 13, code);
        ck_assert_uint_eq(codec_fp16_saturated() - before, 6);
    }
    ck_assert_int_eq(codec_fp16_from_float(1e9f), 0x7bff);   /* saturates, no inf */
    ck_assert_int_eq(codec_fp16_from_float(-1e9f), 0xfbff);
    ck_assert_int_eq(codec_fp16_from_float(ldexpf(1.0f, -25)), 0x0000); /* tie rounds to even: 0 */
    ck_assert_int_eq(codec_fp16_from_float(ldexpf(3.0f, -25)), 0x0002); /* 1.5 ulp rounds to even: 2 */
    free(x), free(y), free(e);
}
END_TEST

START_TEST(q8_blocks)
{
    dt_codec c;
    ck_assert_int_eq(codec_create("q8", 4, &c), 0);
    float x[10] = {1, -2, 0.5f, 4, 0, 0, 0, 0, -0.25f, 0.125f}, y[10];
    unsigned char e[10 + 3 * 4];
    codec_encode(&c, x, 10, e);
    codec_decode(&c, e, 10, y);
    float s0;
    memcpy(&s0, e, 4);
    ck_assert_float_eq(s0, 4.0f);            /* the block's max |x| */
    ck_assert_float_eq(y[3], 127.0f * (4.0f / 127.0f)); /* the max: q = 127 */
    ck_assert_float_eq(y[1], -64.0f * (4.0f / 127.0f)); /* -63.5 rounds away from zero to -64 */
    ck_assert_float_eq(y[2], 16.0f * (4.0f / 127.0f));  /* 15.875 rounds to 16 */
    for (int i = 4; i < 8; i++) ck_assert_float_eq(y[i], 0.0f); /* an all-zero block */
    float s2;
    memcpy(&s2, e + 2 * (4 + 4), 4);
    ck_assert_float_eq(s2, 0.25f); /* the short last block has its own scale */
    ck_assert_float_eq(y[8], -127.0f * (0.25f / 127.0f));
    ck_assert_float_eq(y[9], 64.0f * (0.25f / 127.0f)); /* 63.5 rounds to 64 */
    /* a block too small to scale (127 / s infinite): codes 0, decoded 0 (converting x * inf to an int is
     * undefined in C: x86 gave 0, a GPU -1 for +inf; check_cuda compares the GPU's on such blocks) */
    float t[4] = {2e-37f, -2e-37f, 1e-37f, -1e-38f}, u[4] = {1, 1, 1, 1};
    unsigned char f[4 + 4];
    codec_encode(&c, t, 4, f);
    for (int i = 4; i < 8; i++) ck_assert_int_eq(f[i], 0);
    codec_decode(&c, f, 4, u);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(u[i], 0.0f);
}
END_TEST

START_TEST(q8_per_vector)
{
    dt_codec c, b;
    ck_assert_int_eq(codec_create("q8", DT_CODEC_PER_VECTOR, &c), 0);
    ck_assert_int_eq(c.block, 0);
    float x[10] = {1, -2, 0.5f, 4, 0, 0, 0, 0, -0.25f, 0.125f}, y[10], z[10];
    unsigned char e[10 + 4], f[10 + 4];
    ck_assert_uint_eq(codec_bytes(&c, 10), 14); /* one scale for the whole vector */
    ck_assert_uint_eq(codec_bytes(&c, 0), 0);
    codec_encode(&c, x, 10, e);
    codec_decode(&c, e, 10, y);
    float s;
    memcpy(&s, e, 4);
    ck_assert_float_eq(s, 4.0f); /* max |x| of the vector */
    ck_assert_float_eq(y[8], -8.0f * (4.0f / 127.0f)); /* -7.9375 rounds to -8 on the vector's scale */
    /* the same as one block as long as the vector */
    ck_assert_int_eq(codec_create("q8", 10, &b), 0);
    codec_encode(&b, x, 10, f);
    codec_decode(&b, f, 10, z);
    ck_assert_mem_eq(e, f, sizeof e);
    ck_assert_mem_eq(y, z, sizeof y);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codecs");
    tcase_add_loop_test(tc, round_trip_within_bound, 0, 4);
    tcase_add_test(tc, sizes);
    tcase_add_test(tc, t16_truncates_toward_zero);
    tcase_add_test(tc, fp16_exact_values_and_paths);
    tcase_add_test(tc, q8_blocks);
    tcase_add_test(tc, q8_per_vector);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
