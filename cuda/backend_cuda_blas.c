/* backend_cuda_blas — GEMM on cuBLAS, the twin of the CPU backend's oneDNN sgemm.
 *
 * The backend's matrices are row-major; cuBLAS's are column-major. A row-major m x n matrix is
 * its column-major transpose, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the
 * operands swap places and m and n swap, with each operand's own transpose flag kept. fp32
 * (CUBLAS_PEDANTIC_MATH) unless --tf32.
 *
 * --precision bf16 (as the CPU's cpu_gemm_bf16): op(A) and op(B) as stored are rounded to bfloat16
 * (ew_bf16, the CPU's rounding) into the backend's bf16 memory, densely, and cublasGemmEx multiplies
 * them on tensor cores, summing in fp32 into the fp32 C with alpha and beta as before. --precision
 * fp16: the same with IEEE half operands (ew_half: beyond 65504 infinite, which loss scaling skips).
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
    if (k <= 0) { /* C = beta C, which a GEMM with k = 0 means; beta 0: zeros, whatever C held (NaN too) */
        if (beta == 0.0f) {
            CU(cudaMemset2DAsync(c, (size_t)ldc * sizeof(float), 0, (size_t)n * sizeof(float), (size_t)m, cu->stream),
               what);
            return 0;
        }
        float zero = 0.0f;
        CB(cublasSgeam(cu->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, &beta, c, ldc, &zero, c, ldc, c, ldc), what);
        return 0;
    }
    if (cu->precision) {
        /* stored shapes: A is m x k (k x m transposed), B k x n (n x k) */
        size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        size_t b_at = cuda_lowp_bytes(ar * ac);
        if (cuda_lowp(be, b_at + cuda_lowp_bytes(br * bc)) != 0) return -1;
        uint16_t *a16 = cu->lowp, *b16 = (uint16_t *)((char *)cu->lowp + b_at);
        if (cuda_launched(cuk_to_lowp(cu->stream, CUDA_FP16(cu), a, ar, ac, (size_t)lda, a16), "16-bit rounding", "%s",
                          what) != 0 ||
            cuda_launched(cuk_to_lowp(cu->stream, CUDA_FP16(cu), b, br, bc, (size_t)ldb, b16), "16-bit rounding", "%s",
                          what) != 0)
            return -1;
        CB(cublasGemmEx(cu->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b16,
                        CUDA_LOWP_TYPE(cu), (int)bc, a16, CUDA_LOWP_TYPE(cu), (int)ac, &beta, c, CUDA_R_32F, ldc,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           what);
        return 0;
    }
    CB(cublasSgemm(cu->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                   a, lda, &beta, c, ldc),
       what);
    return 0;
}

void cuda_blas_init(dt_backend *be) { be->gemm = cu_gemm; }
