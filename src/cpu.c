#include "cpu.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

void cpu_flush_denormals(void)
{
#if defined(__SSE__) || defined(__x86_64__)
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) | DAZ (bit 6) */
#endif
}

int cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

double cpu_thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cpu_busy_seconds(void)
{
    cpu_set_t set;
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");
    if (!f || hz <= 0 || sched_getaffinity(0, sizeof set, &set) != 0) {
        if (f) fclose(f);
        return -1.0;
    }
    char line[512];
    unsigned long long busy = 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        int cpu;
        unsigned long long user, nice, sys, idle, iowait, irq, softirq;
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu", &cpu, &user, &nice, &sys, &idle, &iowait, &irq,
                   &softirq) != 8)
            continue; /* the "cpu " total line and everything after the per-core lines */
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)) continue;
        busy += user + nice + sys + irq + softirq;
        found++;
    }
    fclose(f);
    return found ? (double)busy / (double)hz : -1.0;
}

static void raise_nice(int nice)
{
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && now < nice) setpriority(PRIO_PROCESS, tid, nice); /* best effort: a failure changes nothing */
}

void cpu_lower_priority(int nice)
{
    raise_nice(nice);
#pragma omp parallel
    raise_nice(nice);
}
