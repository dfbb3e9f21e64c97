#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"

int optim_create(dt_optim **out, dt_backend *be, size_t n, float momentum, float wd, int nesterov)
{
    dt_optim *o = calloc(1, sizeof *o);
    if (!o) return dt_fail("out of memory");
    o->be = be;
    o->n = n;
    o->momentum = momentum;
    o->wd = wd;
    o->nesterov = nesterov;
    if (momentum != 0.0f && !(o->v = be->alloc(be, DT_MAX(n, 1) * sizeof(float)))) {
        free(o);
        return -1;
    }
    *out = o;
    return 0;
}

int optim_step(dt_optim *o, float *w, const float *g, float lr, size_t offset, size_t n)
{
    return o->be->sgd_step(o->be, w + offset, g + offset, o->v ? o->v + offset : NULL, n, lr, o->momentum, o->wd,
                           o->nesterov);
}

void optim_destroy(dt_optim *o)
{
    if (!o) return;
    o->be->free(o->be, o->v);
    free(o);
}

int lr_schedule_parse(const char *spec, double base, double warmup_epochs, double total_epochs, dt_lr_schedule *s)
{
    memset(s, 0, sizeof *s);
    s->base = base;
    s->warmup_epochs = warmup_epochs;
    s->total_epochs = total_epochs;
    s->gamma = 0.1;
    if (strcmp(spec, "constant") == 0) {
        s->kind = LR_CONSTANT;
    } else if (strcmp(spec, "cosine") == 0) {
        s->kind = LR_COSINE;
    } else if (strncmp(spec, "poly:", 5) == 0) {
        s->kind = LR_POLY;
        if (dt_parse_double(spec + 5, 0.0, 100.0, "poly:POWER", &s->power) != 0) return -1;
    } else if (strncmp(spec, "step:", 5) == 0) {
        char *buf = dt_strdup(spec + 5), *tok, *next, *gamma;
        int rc = 0;
        if (!buf) return -1;
        s->kind = LR_STEP;
        if ((gamma = strchr(buf, ':'))) {
            *gamma++ = 0;
            rc = dt_parse_double(gamma, 0.0, 1.0, "step:EPOCHS:GAMMA (GAMMA)", &s->gamma);
        }
        for (tok = buf; rc == 0 && tok; tok = next) { /* every item an epoch: "30,,60" is a mistake */
            double e;
            if ((next = strchr(tok, ','))) *next++ = 0;
            if (s->n_milestones == (int)DT_ARRAY_LEN(s->milestones))
                rc = dt_fail("more than %zu step milestones", DT_ARRAY_LEN(s->milestones));
            else if (!*tok)
                rc =
                    dt_fail("expected step:E1,E2,...[:GAMMA] (e.g. step:30,60:0.1), found '%s' (an empty epoch)", spec);
            else if ((rc = dt_parse_double(tok, 0.0, 1e6, "step:EPOCHS (an epoch)", &e)) == 0 && s->n_milestones &&
                     e <= s->milestones[s->n_milestones - 1])
                rc = dt_fail("step epochs must increase, found %g after %g", e, s->milestones[s->n_milestones - 1]);
            if (rc == 0) s->milestones[s->n_milestones++] = e;
        }
        free(buf);
        if (rc != 0) return -1;
    } else {
        return dt_fail("unknown schedule '%s' (expected constant, step:E1,E2,...[:GAMMA], poly:POWER "
                       "or cosine)",
                       spec);
    }
    return 0;
}

double lr_at(const dt_lr_schedule *s, long it, long ipe)
{
    double t = (double)it / (double)(ipe > 0 ? ipe : 1); /* epochs completed before this step */
    double lr = s->base;
    switch (s->kind) {
    case LR_CONSTANT: break;
    case LR_STEP:
        for (int i = 0; i < s->n_milestones; i++)
            if (t >= s->milestones[i]) lr *= s->gamma;
        break;
    case LR_POLY:
        if (s->total_epochs > 0) lr *= pow(DT_MAX(0.0, 1.0 - t / s->total_epochs), s->power);
        break;
    case LR_COSINE:
        if (s->total_epochs > 0) lr *= 0.5 * (1.0 + cos(3.141592653589793 * DT_MIN(1.0, t / s->total_epochs)));
        break;
    }
    if (s->warmup_epochs > 0) {
        double warm_iters = s->warmup_epochs * (double)ipe;
        /* at most the schedule's rate: a warm-up shorter than an iteration multiplied it */
        if ((double)it < warm_iters) lr *= DT_MIN(1.0, (double)(it + 1) / warm_iters);
    }
    return lr;
}
