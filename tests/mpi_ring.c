/* mpi_ring — run under mpirun -np P. dtrain's ring allreduce on per-rank inputs whose exact sum
 * every rank can compute (each rank generates every rank's data from the seed):
 *   none: equals MPI_Allreduce within fp32 rounding, and the exact sum within (P-1) u sum|x|
 *   t16, fp16, q8: within the bound the codec implies, compounded over the ring: a value is
 *     encoded at most P times on its way (P-1 reduce-scatter hops and the final encode), each
 *     time with its codec.h error on a partial sum of at most sum_r |x_r|:
 *       t16  P 2^-7 S + fp32 rounding        fp16  P (2^-11 S + 2^-25) + rounding
 *       q8   P M / 254 + rounding, M = the largest sum_r |x_r| within a block's reach of i
 *   every rank holds the same bits; bytes sent equal the analytic count of ring.h, and the
 *   sum over ranks is 2 (P-1) times the encoded arena.
 * Odd lengths and n < P included. Exit status 0 when everything holds. */
#include <math.h>
#include <stdarg.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/comm.h"
#include "comm/ring.h"
#include "split.h"
#include "rng.h"
#include "util.h"

static float value(int rank, size_t n, size_t i)
{
    uint64_t h = rng_hash((uint64_t)rank * 1000003u + n, i);
    double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
    double mag = pow(10.0, -3.0 + 3.0 * (double)((h >> 3) % 1000) / 1000.0);
    return (float)((u - 0.5) * 2.0 * mag);
}

static int failures;

static void check(int ok, int rank, const char *fmt, ...)
{
    if (ok) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] FAIL: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

int main(int argc, char **argv)
{
    dt_comm *c;
    if (comm_init(&argc, &argv, 0, &c) != 0) {
        fprintf(stderr, "%s\n", dt_errmsg());
        return 2;
    }
    const int p = comm_size(c), me = comm_rank(c);
    const size_t lengths[] = {1, 2, 7, 1000, 12345, 100003};
    const char *codecs[] = {"none", "t16", "fp16", "q8", "q8"}; /* the last q8: one scale per message */
    const int blocks[] = {64, 64, 64, 64, DT_CODEC_PER_VECTOR};
    const double u = ldexp(1.0, -24);
    for (size_t ci = 0; ci < 5; ci++) {
        dt_codec codec;
        codec_create(codecs[ci], blocks[ci], &codec);
        dt_ring *ring;
        if (ring_create(&ring, c, codec, 100003) != 0) {
            fprintf(stderr, "%s\n", dt_errmsg());
            return 2;
        }
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = lengths[li];
            float *x = malloc(n * sizeof *x), *m = malloc(n * sizeof *m);
            double *exact = calloc(n, sizeof *exact), *abs_sum = calloc(n, sizeof *abs_sum);
            for (int r = 0; r < p; r++)
                for (size_t i = 0; i < n; i++) {
                    float v = value(r, n, i);
                    exact[i] += v;
                    abs_sum[i] += fabs(v);
                    if (r == me) x[i] = m[i] = v;
                }
            dt_times t = {0};
            double sent0 = comm_bytes_sent(c);
            if (ring_allreduce(ring, x, n, &t) != 0) {
                fprintf(stderr, "%s\n", dt_errmsg());
                return 2;
            }
            double sent = comm_bytes_sent(c) - sent0;
            MPI_Allreduce(MPI_IN_PLACE, m, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

            double worst = 0.0, all_max = 0.0; /* all_max: the largest sum anywhere (one scale per message) */
            size_t at = 0;
            for (size_t i = 0; i < n; i++) all_max = fmax(all_max, abs_sum[i]);
            for (size_t i = 0; i < n; i++) {
                double S = abs_sum[i], b;
                if (!strcmp(codecs[ci], "none")) b = (p - 1) * u * S * 1.0001 + 1e-30;
                else if (!strcmp(codecs[ci], "t16")) b = p * ldexp(1.0, -7) * S + p * u * S;
                else if (!strcmp(codecs[ci], "fp16")) b = p * (ldexp(1.0, -11) * S + ldexp(1.0, -25)) + p * u * S;
                else {
                    double M = 0.0; /* the largest sum a scale can cover: within a block, or anywhere */
                    size_t lo = i >= 64 ? i - 64 : 0, hi = i + 64 < n ? i + 64 : n;
                    if (blocks[ci] > 0)
                        for (size_t k = lo; k < hi; k++) M = fmax(M, abs_sum[k]);
                    else
                        M = all_max;
                    b = p * M / 254.0 * (1 + 1e-5) + p * u * M;
                }
                double ratio = fabs((double)x[i] - exact[i]) / b;
                if (ratio > worst) worst = ratio, at = i;
                if (!strcmp(codecs[ci], "none"))
                    check(fabs((double)x[i] - (double)m[i]) <= 2 * (p - 1) * u * S * 1.0001 + 1e-30, me,
                          "none n=%zu [%zu]: ring %.9g vs MPI_Allreduce %.9g", n, i, x[i], m[i]);
            }
            check(worst <= 1.0, me, "%s n=%zu [%zu]: %.9g vs exact %.9g is beyond the bound (%.3g of it)", codecs[ci],
                  n, at, x[at], exact[at], worst);

            /* the same bits on every rank */
            uint64_t h = dt_hash64(x, n * sizeof *x, DT_HASH_INIT), h0 = h;
            MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
            check(h == h0, me, "%s n=%zu: this rank's result differs from rank 0's", codecs[ci], n);

            /* bytes: this rank's count, and the total over ranks */
            check(sent == ring_bytes_sent(ring, n) && sent == t.bytes_sent, me,
                  "%s n=%zu: sent %.0f bytes, expected %.0f", codecs[ci], n, sent, ring_bytes_sent(ring, n));
            double total = 0.0, all_segments = 0.0;
            MPI_Allreduce(&sent, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            for (int k = 0; k < p; k++) {
                size_t f, cnt;
                split_range(n, k, p, &f, &cnt);
                all_segments += (double)codec_bytes(&codec, cnt);
            }
            check(total == 2.0 * (p - 1) * all_segments, me, "%s n=%zu: ranks sent %.0f bytes in all, expected %.0f",
                  codecs[ci], n, total, 2.0 * (p - 1) * all_segments);
            if (me == 0 && n == 100003)
                printf("P=%d %-4s n=%zu: worst error %.2f of its bound, %.0f bytes sent by rank 0 (%.3f of fp32 "
                       "2(P-1)/P n)\n",
                       p, codecs[ci], n, worst, sent, p > 1 ? sent / (2.0 * (p - 1) / p * n * 4) : 0.0);
            free(x), free(m), free(exact), free(abs_sum);
        }
        ring_destroy(ring);
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    comm_finalize(c);
    return all ? 1 : 0;
}
