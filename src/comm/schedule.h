/* schedule — warm-up schedules of the sparse modes (DESIGN.md: "schedule").
 *
 * Density (topk, gtopk; --density-warmup): the density of epoch e is the schedule's value for e,
 * but never below the target --density; after the schedule, the target.
 *   none        the target from the start
 *   dgc         0.25, 0.0625, 0.015625, 0.004 for epochs 0-3 (Lin et al., DGC; gTop-k §IV)
 *   gtopk-code  0.004 for epoch 0 (the gTop-k authors' code)
 *   R1,R2,...   an explicit list, one density per epoch
 * Sparsity (csc; --sparsity-warmup F): the selected fraction of chunks ramps linearly from 1
 * (dense) at the first iteration to --chunk-ratio after F of all iterations.
 */
#ifndef DT_SCHEDULE_H
#define DT_SCHEDULE_H

#include <stddef.h>

typedef struct dt_density_sched {
    int n;
    double list[32];
    double target;
} dt_density_sched;

int density_sched_parse(const char *spec, double target, dt_density_sched *s);
double density_at(const dt_density_sched *s, int epoch);
/* The largest density any epoch uses (to size buffers). */
double density_max(const dt_density_sched *s);
/* k = floor(density * n), at least 1. */
size_t density_k(double density, size_t n);

/* Fraction of chunks selected at iteration it of total. */
double chunk_ratio_at(double final_ratio, double warmup_fraction, long it, long total);

#endif
