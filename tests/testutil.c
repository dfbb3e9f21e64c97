#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/codec.h"
#include "engine/backend.h"
#include "rng.h"

static int worst(const double *diff_scaled, size_t n, size_t *at)
{
    double w = -1.0;
    for (size_t i = 0; i < n; i++)
        if (diff_scaled[i] > w) w = diff_scaled[i], *at = i;
    return w > 1.0;
}

int close_f32_f64(const float *got, const double *ref, size_t n, double atol, double rtol, const char *what,
                  char *msg, size_t msg_n)
{
    double *g = malloc(sizeof *g * (n ? n : 1));
    for (size_t i = 0; i < n; i++) g[i] = got[i];
    int ok = close_f64(g, ref, n, atol, rtol, what, msg, msg_n);
    free(g);
    return ok;
}

int close_f32(const float *got, const float *ref, size_t n, double atol, double rtol, const char *what, char *msg,
              size_t msg_n)
{
    double *r = malloc(sizeof *r * (n ? n : 1));
    for (size_t i = 0; i < n; i++) r[i] = ref[i];
    int ok = close_f32_f64(got, r, n, atol, rtol, what, msg, msg_n);
    free(r);
    return ok;
}

int close_f64(const double *got, const double *ref, size_t n, double atol, double rtol, const char *what, char *msg,
              size_t msg_n)
{
    double *s = malloc(sizeof *s * (n ? n : 1));
    size_t at = 0;
    int bad;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        s[i] = isfinite(got[i]) ? d / (atol + rtol * fabs(ref[i])) : INFINITY;
    }
    bad = n > 0 && worst(s, n, &at);
    if (bad)
        snprintf(msg, msg_n,
                 "%s[%zu]: got %.9g, expected %.9g (|diff| %.3g > atol %.1g + rtol %.1g*|ref|; worst of %zu)", what, at,
                 got[at], ref[at], fabs(got[at] - ref[at]), atol, rtol, n);
    else
        msg[0] = 0;
    free(s);
    return !bad;
}

static char dir[256];

const char *tmpdir_create(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dtrain-test-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(dir)) return NULL;
    return dir;
}

void tmpdir_remove(void)
{
    char cmd[300];
    if (!dir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    dir[0] = 0;
}

const char *write_bytes(const char *name, const void *data, size_t n)
{
    static char paths[8][512];
    static int slot;
    char *p = paths[slot++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return NULL;
    fwrite(data, 1, n, f);
    fclose(f);
    return p;
}

const char *write_text(const char *name, const char *text) { return write_bytes(name, text, strlen(text)); }

float *rand_floats(size_t n, uint64_t seed, uint64_t stream, float lo, float hi)
{
    float *x = malloc(sizeof *x * (n ? n : 1));
    dt_rng r;
    rng_seed(&r, seed, stream);
    for (size_t i = 0; x && i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(&r);
    return x;
}

float *codec_input(size_t n, uint64_t seed)
{
    static const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 65504.0f, 65519.0f, 65520.0f, -7e4f,
                                    6e-8f, 3e-8f, -1e-6f, 6.1e-5f, 1e-40f, -1e-39f, 1e30f, 0.5f, -0.5f,
                                    2e-37f, -3e-37f}; /* q8: 127 / s infinite */
    float *x = rand_floats(n, seed, 13, -1, 1), *e = rand_floats(n, seed, 14, -30, 10);
    for (size_t i = 0; i < n; i++) x[i] *= powf(2.0f, floorf(e[i]));
    for (size_t i = 0; i < n; i += 5) x[i] = special[(i / 5) % (sizeof special / sizeof *special)];
    free(e);
    return x;
}

float *tied_floats(size_t n, uint64_t seed)
{
    float *x = rand_floats(n, seed, 15, -1, 1);
    for (size_t i = 0; i < n; i++) x[i] = (x[i] < 0 ? -1.0f : 1.0f) * (float)(int)(fabsf(x[i]) * 8.0f) / 8.0f;
    return x;
}

int codec_case(int i, int big, const char **name, int *kind, int *block, size_t *n)
{
    static const char *names[] = {"t16", "fp16", "q8"};
    static const int kinds[] = {DT_WIRE_T16, DT_WIRE_FP16, DT_WIRE_Q8};
    static const size_t sizes[] = {1, 3, 7, 33, 1000, 4099, 10007, 1 << 20};
    static const int q8_blocks[] = {DT_CODEC_PER_VECTOR, 1, 7, 256};
    int n_sizes = big ? 8 : 7;
    for (int c = 0; c < 3; c++)
        for (int b = 0; b < (c == 2 ? 4 : 1); b++) {
            if (i < n_sizes) {
                *name = names[c], *kind = kinds[c], *block = c == 2 ? q8_blocks[b] : 0, *n = sizes[i];
                return 1;
            }
            i -= n_sizes;
        }
    return 0;
}

int same_floats(const float *a, const float *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4) != 0 && !(isnan(a[i]) && isnan(b[i]))) return *at = i, 0;
    return 1;
}

void fill_uniform_d(double *x, size_t n, double lo, double hi, uint64_t seed)
{
    dt_rng r;
    rng_seed(&r, seed, 7);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform_d(&r);
}
