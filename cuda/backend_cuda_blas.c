/* backend_cuda_blas — GEMM on cuBLAS, the twin of the CPU backend's oneDNN sgemm.
 *
 * The backend's matrices are row-major; cuBLAS's are column-major. A row-major m x n matrix is
 * its column-major transpose, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the
 * operands swap places and m and n swap, with each operand's own transpose flag kept. fp32
 * (CUBLAS_PEDANTIC_MATH) unless --tf32.
 */
#include "backend_cuda.h"

#include "util.h"

static int cu_gemm(dt_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                   const float *b, int ldb, float beta, float *c, int ldc)
{
    cuda_impl *cu = cuda_of(be);
    char what[160];
    if (m <= 0 || n <= 0) return 0;
    if (cuda_enter(be) != 0) return -1;
    snprintf(what, sizeof what, "GEMM %c%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n,
             k, lda, ldb, ldc);
    if (k <= 0) { /* C = beta C, which a GEMM with k = 0 means */
        float zero = 0.0f;
        CB(cublasSgeam(cu->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, &beta, c, ldc, &zero, c, ldc, c, ldc), what);
        return 0;
    }
    CB(cublasSgemm(cu->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                   a, lda, &beta, c, ldc),
       what);
    return 0;
}

void cuda_blas_init(dt_backend *be) { be->gemm = cu_gemm; }
