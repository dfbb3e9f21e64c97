/* Helpers the Check suites share: tolerant comparison that reports the worst element, a
 * scratch directory, files written from bytes, deterministic random fills. */
#ifndef DT_TESTUTIL_H
#define DT_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Named tolerances: |got - ref| <= atol + rtol * |ref| */
#define TOL_F32_ATOL 1e-5
#define TOL_F32_RTOL 1e-4
#define TOL_F64_ATOL 1e-9
#define TOL_F64_RTOL 1e-6

/* 1 if all within tolerance; else 0 and a message "what[i]: got G, expected R (worst of n)" in msg. */
int close_f32_f64(const float *got, const double *ref, size_t n, double atol, double rtol, const char *what,
                  char *msg, size_t msg_n);
int close_f32(const float *got, const float *ref, size_t n, double atol, double rtol, const char *what, char *msg,
              size_t msg_n);
int close_f64(const double *got, const double *ref, size_t n, double atol, double rtol, const char *what, char *msg,
              size_t msg_n);

/* A fresh directory under $TMPDIR (or /tmp), removed by tmpdir_remove. */
const char *tmpdir_create(void);
void tmpdir_remove(void);
/* path = tmpdir/name; writes n bytes; returns the path (static buffer per call slot) */
const char *write_bytes(const char *name, const void *data, size_t n);
const char *write_text(const char *name, const char *text);

/* n floats uniform in [lo, hi) from stream `stream` of seed (malloc'd; at least one) */
float *rand_floats(size_t n, uint64_t seed, uint64_t stream, float lo, float hi);
void fill_uniform_d(double *x, size_t n, double lo, double hi, uint64_t seed);
/* n floats for codecs: random over many magnitudes, every fifth a special one (signed zeros, NaN,
 * infinities, fp16's limits and subnormals, fp32 subnormals); malloc'd */
float *codec_input(size_t n, uint64_t seed);
/* n floats in [-1, 1] on 17 levels of |x| (k/8), both signs: many ties for top-k; malloc'd */
float *tied_floats(size_t n, uint64_t seed);
/* The codec cases of the device twin tests, i = 0, 1, ... until it returns 0: each codec a device
 * runs (its --compress name and DT_WIRE_* kind), q8 with a scale per vector (block
 * DT_CODEC_PER_VECTOR) and per 1, 7 and 256 values, over n = 1 ... 10007 (and 2^20 with big). */
int codec_case(int i, int big, const char **name, int *kind, int *block, size_t *n);
/* 1 if a and b are the same bits, a NaN matching any NaN (a GPU's arithmetic makes its own);
 * else 0 and the first difference in *at */
int same_floats(const float *a, const float *b, size_t n, size_t *at);

#endif
