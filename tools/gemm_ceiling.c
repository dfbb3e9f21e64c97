/* gemm_ceiling BATCH N0 N1 ... NL [REPEATS] — the sgemm ceiling of one training step of an MLP
 * with layer widths N0..NL: times exactly the GEMMs dtrain's dense layers issue per iteration
 * (forward y = x W^T, backward dW = dy^T x, and dx = dy W for every layer but the first), with
 * the same OpenBLAS kernel dtrain selects and one thread. Prints JSON: seconds per iteration spent
 * in GEMMs alone, the samples/s that would allow, and GFLOP/s.
 *
 * gemm_ceiling --peak THREADS — the best GFLOP/s of a large square sgemm (1536^3) on THREADS
 * threads: the ceiling tools/bench divides a CNN's training FLOPs by. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "cpu.h"
#include "util.h"

static int peak(int threads)
{
    const int n = 1536;
    float *a = dt_zalloc(sizeof(float) * n * n), *b = dt_zalloc(sizeof(float) * n * n),
          *c = dt_zalloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) a[i] = b[i] = 0.001f * (float)(i % 13);
    cpu_set_threads(threads);
    double best = 1e30;
    for (int trial = 0; trial < 7; trial++) {
        double t0 = dt_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double t = dt_now() - t0;
        if (t < best) best = t;
    }
    printf("{\"kernel\":\"%s\",\"threads\":%d,\"gflops\":%.4g}\n", cpu_blas_describe(), threads,
           2.0 * n * n * n / best / 1e9);
    return 0;
}

int main(int argc, char **argv)
{
    int n_args = argc - 1, reps = 300;
    if (n_args == 2 && !strcmp(argv[1], "--peak")) {
        cpu_blas_select(argv);
        cpu_flush_denormals();
        return peak(atoi(argv[2]));
    }
    if (n_args < 3) {
        fprintf(stderr, "usage: gemm_ceiling BATCH N0 N1 ... NL [REPEATS]\n");
        return 2;
    }
    cpu_blas_select(argv);
    cpu_set_threads(1);
    cpu_flush_denormals();
    int b = atoi(argv[1]), nl = n_args - 1;
    int *n = malloc(sizeof *n * (size_t)nl);
    for (int i = 0; i < nl; i++) n[i] = atoi(argv[2 + i]);
    float *x[16], *w[16], *dx[16];
    double flop = 0;
    for (int l = 0; l < nl; l++) {
        x[l] = dt_zalloc(sizeof(float) * (size_t)b * (size_t)n[l]);
        dx[l] = dt_zalloc(sizeof(float) * (size_t)b * (size_t)n[l]);
        if (l + 1 < nl) {
            w[l] = dt_zalloc(sizeof(float) * (size_t)n[l] * (size_t)n[l + 1]);
            for (size_t i = 0; i < (size_t)n[l] * n[l + 1]; i++) w[l][i] = 0.01f * (float)(i % 7);
        }
    }
    for (int l = 0; l + 1 < nl; l++) {
        double mac = (double)b * n[l] * n[l + 1];
        flop += 2 * mac * (l == 0 ? 2 : 3);
    }
    float *dw = dt_zalloc(sizeof(float) * 1024 * 1024 * 4);
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = dt_now();
        for (int r = 0; r < reps; r++) {
            for (int l = 0; l + 1 < nl; l++) /* forward */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, n[l + 1], n[l], 1, x[l], n[l], w[l], n[l], 0,
                            x[l + 1], n[l + 1]);
            for (int l = nl - 2; l >= 0; l--) { /* backward */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n[l + 1], n[l], b, 1, dx[l + 1], n[l + 1], x[l],
                            n[l], 0, dw, n[l]);
                if (l > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, n[l], n[l + 1], 1, dx[l + 1], n[l + 1],
                                w[l], n[l], 0, dx[l], n[l]);
            }
        }
        double t = (dt_now() - t0) / reps;
        if (t < best) best = t;
    }
    printf("{\"kernel\":\"%s\",\"gemm_s_per_iter\":%.6g,\"samples_per_s\":%.6g,\"gflops\":%.4g}\n", cpu_blas_describe(),
           best, b / best, flop / best / 1e9);
    return 0;
}
