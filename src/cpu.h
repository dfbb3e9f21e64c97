/* cpu — running at this CPU's real speed without the user knowing the traps.
 *
 * OpenBLAS picks its kernel from cpuid at load time and, on these virtual machines, picks one
 * that is ~2-4x slower than the CPU allows (e.g. "Haswell" on an AVX-512 EPYC). It honours
 * OPENBLAS_CORETYPE only when the library loads, so cpu_blas_select sets it and re-executes the
 * program before anything else runs. Denormal floats in momentum buffers slow training by
 * orders of magnitude, so every compute thread flushes them (FTZ/DAZ). Thread counts: OpenBLAS
 * threads and ranks on one machine must not exceed the cores, or they fight.
 */
#ifndef DT_CPU_H
#define DT_CPU_H

/* Compiles a hot loop three times (AVX-512, AVX2, baseline x86-64); the loader picks the best
 * one for the CPU it runs on, so one binary runs everywhere at full vector width. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DT_CLONES
#endif

/* Call first in main. May not return: re-executes the program once with OPENBLAS_CORETYPE set
 * to the best kernel cpuid allows, when OpenBLAS chose a slower one (wrong detection, or an
 * OPENBLAS_CORETYPE naming an older core). DTRAIN_BLAS_KEEP=1 keeps OpenBLAS's choice. */
void cpu_blas_select(char **argv);
/* One line for the banner: "OpenBLAS 0.3.21 SkylakeX kernel (switched from Haswell)". */
const char *cpu_blas_describe(void);
/* Sets FTZ and DAZ on the calling thread. */
void cpu_flush_denormals(void);
/* Cores this process may run on (affinity mask). */
int cpu_count(void);
/* Threads OpenBLAS may use for this process. */
void cpu_set_threads(int n);

#endif
