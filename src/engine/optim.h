/* optim — SGD with momentum, Nesterov and weight decay over (ranges of) the flat arena, and the
 * learning-rate schedules.
 *
 * Owns the momentum buffer (one fp32 per parameter, device memory, same layout as the arena).
 * The optimizer works on any range [offset, offset+n) so a parameter-server shard or a chunk
 * can be updated alone. PyTorch semantics (dampening 0):
 *   d = g + wd*w;  v = m*v + d;  d = nesterov ? d + m*v : v;  w -= lr*d
 */
#ifndef DT_OPTIM_H
#define DT_OPTIM_H

#include <stddef.h>

#include "backend.h"

typedef struct dt_optim {
    dt_backend *be;
    size_t n;
    float *v; /* momentum buffer, NULL when momentum is 0 */
    float momentum, wd;
    int nesterov;
} dt_optim;

int optim_create(dt_optim **out, dt_backend *be, size_t n, float momentum, float wd, int nesterov);
/* w[offset, offset+n) -= lr * the update from g (backend memory, the arena's layout). */
int optim_step(dt_optim *o, float *w, const float *g, float lr, size_t offset, size_t n);
void optim_destroy(dt_optim *o);

typedef enum { LR_CONSTANT, LR_STEP, LR_POLY, LR_COSINE } dt_lr_kind;

typedef struct dt_lr_schedule {
    dt_lr_kind kind;
    double base;          /* --lr */
    double gamma;         /* step: factor at each milestone */
    int n_milestones;     /* step: epochs at which lr *= gamma */
    double milestones[16];
    double power;         /* poly: lr * (1 - t/T)^power */
    double warmup_epochs; /* linear ramp from base/warm-up-iterations to base */
    double total_epochs;  /* T for poly and cosine */
} dt_lr_schedule;

/* SPEC: constant | step:E1,E2,...[:GAMMA] | poly:POWER | cosine */
int lr_schedule_parse(const char *spec, double base, double warmup_epochs, double total_epochs, dt_lr_schedule *s);
/* Learning rate for global iteration `it` (0-based) with `iters_per_epoch` iterations per epoch. */
double lr_at(const dt_lr_schedule *s, long it, long iters_per_epoch);

#endif
