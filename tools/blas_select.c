#include "blas_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cblas.h>

/* Declared by OpenBLAS's cblas.h on most versions; repeated here for those that do not. */
char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int n);

#define SWITCH_ENV "DTRAIN_BLAS_SWITCHED_FROM"

/* Kernel families OpenBLAS knows, from slowest to fastest for sgemm on x86-64. */
static int core_rank(const char *name)
{
    static const char *tiers[][8] = {
        {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Athlon", "Opteron"},
        {"Barcelona", "Bobcat", "Bulldozer", "Piledriver", "Steamroller", "Excavator", NULL},
        {"Sandybridge", NULL},
        {"Haswell", "Zen", NULL},
        {"SkylakeX", "Cooperlake", "SapphireRapids", NULL},
    };
    for (size_t t = 0; t < sizeof tiers / sizeof tiers[0]; t++)
        for (int i = 0; i < 8 && tiers[t][i]; i++)
            if (strcasecmp(name, tiers[t][i]) == 0) return (int)t;
    return -1;
}

/* The best OpenBLAS kernel family this CPU can run, from cpuid; NULL if not x86 or unknown. */
static const char *best_core(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    int avx2 = 0, avx512 = 0, bf16 = 0, ymm_os = 0, zmm_os = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return NULL;
    int fma = (c >> 12) & 1;
    if ((c >> 27) & 1) { /* OSXSAVE: ask the OS which vector registers it saves */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ymm_os = (lo & 0x6) == 0x6;
        zmm_os = (lo & 0xe6) == 0xe6;
    }
    if (!ymm_os) return NULL;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        avx2 = (b >> 5) & 1;
        /* the SkylakeX kernels use AVX-512 F, DQ, CD, BW and VL */
        avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 28) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) bf16 = (a >> 5) & 1;
    if (avx512 && zmm_os) return bf16 ? "Cooperlake" : "SkylakeX";
    if (avx2 && fma) return "Haswell";
#endif
    return NULL;
}

void blas_select(char **argv)
{
    const char *now, *best, *set = getenv("OPENBLAS_CORETYPE");
    char from[96];
    if (getenv(SWITCH_ENV) || getenv("DTRAIN_BLAS_KEEP")) return; /* switched already, or told not to */
    now = openblas_get_corename();
    best = best_core();
    if (!now || !best || core_rank(best) <= core_rank(now)) return;
    /* OpenBLAS runs a slower kernel than this CPU supports: detected wrongly, or
     * OPENBLAS_CORETYPE names an older core (some images preset it). */
    snprintf(from, sizeof from, "%s%s", now, set ? ", set by OPENBLAS_CORETYPE" : ", detected");
    if (setenv("OPENBLAS_CORETYPE", best, 1) != 0 || setenv(SWITCH_ENV, from, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc?): keep running with the slower kernel; the banner says so */
    if (set) setenv("OPENBLAS_CORETYPE", set, 1);
    else unsetenv("OPENBLAS_CORETYPE");
    setenv(SWITCH_ENV, "-", 1);
}

const char *blas_describe(void)
{
    static char buf[200];
    const char *from = getenv(SWITCH_ENV);
    const char *core = openblas_get_corename();
    if (from && strcmp(from, "-") == 0)
        snprintf(buf, sizeof buf, "OpenBLAS %s kernel (could not switch to %s: re-exec failed)", core,
                 best_core() ? best_core() : "?");
    else if (from)
        snprintf(buf, sizeof buf, "OpenBLAS %s kernel (switched from %s)", core, from);
    else
        snprintf(buf, sizeof buf, "OpenBLAS %s kernel", core);
    return buf;
}

void blas_set_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }
