/* cpu — running at this CPU's real speed without the user knowing the traps.
 *
 * Denormal floats in momentum buffers slow training by orders of magnitude, so every compute
 * thread flushes them (FTZ/DAZ; threads started later inherit it). Threads times ranks on one
 * machine must not exceed its cores, or they fight. (OpenBLAS's kernel detection, wrong on
 * these VMs, no longer concerns the program: its GEMMs run on oneDNN; tools/blas_select.c
 * handles it for the benchmarks.)
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

/* No contraction of a * b + c into one fused multiply-add in the function that follows, whose bits
 * must equal a reference's (or the GPU twin's) that rounds the product. GCC: for that function.
 * Clang has no such attribute: its pragma turns contraction off from there to the end of the file
 * (the optimize attribute was ignored there, with a warning). */
#if defined(__clang__)
#define DT_NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define DT_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif

/* A function whose math calls (powf) need not set errno, so that GCC vectorizes them; clang has no
 * such attribute (it ignored it with a warning): there it changes nothing. */
#if defined(__clang__)
#define DT_NO_MATH_ERRNO
#else
#define DT_NO_MATH_ERRNO __attribute__((optimize("no-math-errno")))
#endif

/* Sets FTZ and DAZ on the calling thread. */
void cpu_flush_denormals(void);
/* Raises the niceness of the calling thread and of the OpenMP pool's threads to at least nice
 * (never lowers it: that needs privileges). Threads started later by them inherit it. */
void cpu_lower_priority(int nice);
/* Cores this process may run on (affinity mask). */
int cpu_count(void);
/* Seconds those cores have spent busy since boot, whatever ran there (user, system, interrupts and
 * softirqs: the network stack's work that no thread is charged for), from /proc/stat; -1 where
 * it cannot be read. */
double cpu_busy_seconds(void);
/* CPU seconds the calling thread has used. */
double cpu_thread_seconds(void);

#endif
