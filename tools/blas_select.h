/* blas_select — OpenBLAS at this CPU's real speed, for the tools that measure against it.
 *
 * dtrain's own GEMMs run on oneDNN (src/engine/backend_cpu.c); OpenBLAS is the reference the
 * benchmarks compare with (tools/gemm_ceiling; PyTorch's BLAS in tools/bench). OpenBLAS picks its
 * kernel from cpuid at load time and, on these virtual machines, picks one that is ~2-4x slower
 * than the CPU allows (e.g. "Haswell" on an AVX-512 EPYC). It honours OPENBLAS_CORETYPE only when
 * the library loads, so blas_select sets it and re-executes the program before anything else.
 */
#ifndef DT_BLAS_SELECT_H
#define DT_BLAS_SELECT_H

/* Call first in main. May not return: re-executes the program once with OPENBLAS_CORETYPE set
 * to the best kernel cpuid allows, when OpenBLAS chose a slower one (wrong detection, or an
 * OPENBLAS_CORETYPE naming an older core). DTRAIN_BLAS_KEEP=1 keeps OpenBLAS's choice. */
void blas_select(char **argv);
/* "OpenBLAS Cooperlake kernel (switched from Haswell, detected)". */
const char *blas_describe(void);
/* Threads OpenBLAS may use. */
void blas_set_threads(int n);

#endif
