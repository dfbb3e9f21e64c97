/* gemm_ceiling BATCH N0 N1 ... NL — the sgemm ceiling of one training step of an MLP with layer
 * widths N0..NL: times exactly the GEMMs dtrain's dense layers issue per iteration (forward
 * y = x W^T, backward dW = dy^T x, and dx = dy W for every layer but the first) on one thread,
 * with oneDNN's sgemm (what dtrain calls) and with OpenBLAS at its best kernel for this CPU.
 * Prints JSON: per library the seconds per iteration spent in GEMMs alone and GFLOP/s; the
 * ceiling (samples/s) is the faster of the two.
 *
 * gemm_ceiling --peak THREADS — the best GFLOP/s of a large square sgemm (1536^3) on THREADS
 * threads, the better of the two libraries: the ceiling tools/bench divides a CNN's training
 * FLOPs by. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <dnnl.h>

#include "blas_select.h"
#include "cpu.h"
#include "util.h"

/* row-major C = A op B, through library `lib` (0: oneDNN, 1: OpenBLAS) */
static void sgemm(int lib, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                  float *c, int ldc)
{
    if (lib == 0) dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    else
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
                    lda, b, ldb, 0.0f, c, ldc);
}

static const char *LIB[2] = {"onednn", "openblas"};

static void set_threads(int t)
{
    omp_set_num_threads(t);
    blas_set_threads(t);
}

static int peak(int threads)
{
    const int n = 1536;
    float *a = dt_zalloc(sizeof(float) * n * n), *b = dt_zalloc(sizeof(float) * n * n),
          *c = dt_zalloc(sizeof(float) * n * n);
    double gf[2];
    for (int i = 0; i < n * n; i++) a[i] = b[i] = 0.001f * (float)(i % 13);
    set_threads(threads);
    for (int lib = 0; lib < 2; lib++) {
        double best = 1e30;
        for (int trial = 0; trial < 7; trial++) {
            double t0 = dt_now();
            sgemm(lib, 0, 0, n, n, n, a, n, b, n, c, n);
            double t = dt_now() - t0;
            if (t < best) best = t;
        }
        gf[lib] = 2.0 * n * n * n / best / 1e9;
    }
    printf("{\"kernel\":\"%s\",\"threads\":%d,\"gflops_onednn\":%.4g,\"gflops_openblas\":%.4g,\"gflops\":%.4g}\n",
           blas_describe(), threads, gf[0], gf[1], gf[0] > gf[1] ? gf[0] : gf[1]);
    return 0;
}

int main(int argc, char **argv)
{
    int n_args = argc - 1, reps = 300;
    blas_select(argv);
    cpu_flush_denormals();
    if (n_args == 2 && !strcmp(argv[1], "--peak")) return peak(atoi(argv[2]));
    if (n_args < 3 || n_args > 17) {
        fprintf(stderr, "usage: gemm_ceiling BATCH N0 N1 ... NL (at most 16 widths) | gemm_ceiling --peak THREADS\n");
        return 2;
    }
    set_threads(1);
    int b = atoi(argv[1]), nl = n_args - 1;
    int n[16];
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
    size_t dw_n = 0;
    for (int l = 0; l + 1 < nl; l++)
        if ((size_t)n[l] * n[l + 1] > dw_n) dw_n = (size_t)n[l] * n[l + 1];
    float *dw = dt_zalloc(sizeof(float) * dw_n);
    double best[2] = {1e30, 1e30};
    for (int trial = 0; trial < 5; trial++)
        for (int lib = 0; lib < 2; lib++) { /* in turns, so both see the same machine */
            double t0 = dt_now();
            for (int r = 0; r < reps; r++) {
                for (int l = 0; l + 1 < nl; l++) /* forward */
                    sgemm(lib, 0, 1, b, n[l + 1], n[l], x[l], n[l], w[l], n[l], x[l + 1], n[l + 1]);
                for (int l = nl - 2; l >= 0; l--) { /* backward */
                    sgemm(lib, 1, 0, n[l + 1], n[l], b, dx[l + 1], n[l + 1], x[l], n[l], dw, n[l]);
                    if (l > 0) sgemm(lib, 0, 0, b, n[l], n[l + 1], dx[l + 1], n[l + 1], w[l], n[l], dx[l], n[l]);
                }
            }
            double t = (dt_now() - t0) / reps;
            if (t < best[lib]) best[lib] = t;
        }
    int fast = best[0] <= best[1] ? 0 : 1;
    printf(
        "{\"kernel\":\"%s\",\"gemm_s_onednn\":%.6g,\"gemm_s_openblas\":%.6g,\"gflops_onednn\":%.4g,"
        "\"gflops_openblas\":%.4g,\"best\":\"%s\",\"gemm_s_per_iter\":%.6g,\"samples_per_s\":%.6g,\"gflops\":%.4g}\n",
        blas_describe(), best[0], best[1], flop / best[0] / 1e9, flop / best[1] / 1e9, LIB[fast], best[fast],
        b / best[fast], flop / best[fast] / 1e9);
    return 0;
}
