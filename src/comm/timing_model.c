/* The timing model of Pipe-SGD eq. 2-5 / PAPERS.md §3 and the start-up probe that measures it.
 *
 * alpha: half a round of 8-byte messages between ring neighbours (every rank sends right and
 *        receives from the left at once, as the ring does), median of 30.
 * beta:  seconds per byte of an 8 MiB neighbour exchange minus alpha (median of 3, after one
 *        warm-up that also drains the burst a token-bucket link lets through).
 * gamma: seconds per value of what a reduce step costs this CPU with the codec: encode,
 *        decode-and-add, decode (measured on 2^20 values).
 * Every rank takes the maximum over ranks, so all ranks predict the same. Flags override. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "mode.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#define TAG_PROBE 201

static int exchange_time(dt_comm *c, void *sbuf, void *rbuf, size_t bytes, int reps, int warm, double *out)
{
    int p = comm_size(c), me = comm_rank(c);
    double t[64];
    for (int i = 0; i < warm + reps; i++) {
        if (comm_barrier(c) != 0) return -1;
        double t0 = dt_now();
        if (comm_sendrecv(c, sbuf, bytes, (me + 1) % p, rbuf, bytes, (me - 1 + p) % p, TAG_PROBE) != 0) return -1;
        if (i >= warm) t[i - warm] = dt_now() - t0;
    }
    *out = median(t, reps);
    return 0;
}

static double codec_gamma(const dt_codec *codec)
{
    const size_t n = 1 << 20;
    float *x = dt_alloc(n * sizeof(float)), *y = dt_alloc(n * sizeof(float));
    void *e = dt_alloc(codec_bytes(codec, n));
    double best = 1e30;
    if (!x || !y || !e) {
        dt_free(x), dt_free(y), dt_free(e);
        return 0.0;
    }
    for (size_t i = 0; i < n; i++) x[i] = y[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (int r = 0; r < 3; r++) {
        double t0 = dt_now();
        codec_encode(codec, x, n, e);
        codec_decode_add(codec, e, n, y);
        codec_decode(codec, e, n, x);
        double t = dt_now() - t0;
        if (t < best) best = t;
    }
    dt_free(x), dt_free(y), dt_free(e);
    return best / (double)n;
}

int netmodel_init(dt_netmodel *m, dt_comm *c, const dt_codec *codec, const dt_comm_opts *o)
{
    const size_t big = 8u << 20;
    double v[3] = {0, 0, 0};
    m->measured = o->model_alpha < 0 || o->model_beta < 0 || o->model_gamma < 0;
    if (comm_size(c) > 1 && (o->model_alpha < 0 || o->model_beta < 0)) {
        char *s = dt_alloc(big), *r = dt_alloc(big);
        double ts, tb;
        int rc = (!s || !r) ? -1 : 0;
        if (rc == 0) {
            memset(s, 1, big);
            rc = exchange_time(c, s, r, 8, 30, 5, &ts);
        }
        if (rc == 0) rc = exchange_time(c, s, r, big, 3, 1, &tb);
        dt_free(s);
        dt_free(r);
        if (rc != 0) return dt_fail_prefix("timing-model probe");
        v[0] = ts;
        v[1] = DT_MAX(tb - ts, 1e-12) / (double)big;
    }
    v[2] = codec_gamma(codec);
    if (comm_allreduce_max_f64(c, v, 3) != 0) return -1;
    m->alpha = o->model_alpha >= 0 ? o->model_alpha : v[0];
    m->beta = o->model_beta >= 0 ? o->model_beta : v[1];
    m->gamma = o->model_gamma >= 0 ? o->model_gamma : v[2];
    return 0;
}

double netmodel_ring(const dt_netmodel *m, int p, size_t n, const dt_codec *codec)
{
    if (p <= 1 || n == 0) return 0.0;
    double f = (double)(p - 1) / p;
    return 2.0 * (p - 1) * m->alpha + 2.0 * f * (double)codec_bytes(codec, n) * m->beta + f * (double)n * m->gamma;
}
