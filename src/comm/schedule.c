#include "schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"

int density_sched_parse(const char *spec, double target, dt_density_sched *s)
{
    memset(s, 0, sizeof *s);
    s->target = target;
    if (strcmp(spec, "none") == 0) return 0;
    if (strcmp(spec, "dgc") == 0) {
        const double v[] = {0.25, 0.0625, 0.015625, 0.004};
        s->n = 4;
        memcpy(s->list, v, sizeof v);
        return 0;
    }
    if (strcmp(spec, "gtopk-code") == 0) {
        s->n = 1;
        s->list[0] = 0.004;
        return 0;
    }
    char buf[512], *save = NULL, *tok;
    if (strlen(spec) >= sizeof buf) return dt_fail("'%.32s...' is too long", spec);
    if (dt_list_check(spec, ',') != 0) return -1;
    snprintf(buf, sizeof buf, "%s", spec);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (s->n == (int)DT_ARRAY_LEN(s->list)) return dt_fail("more than %zu densities", DT_ARRAY_LEN(s->list));
        if (dt_parse_double(tok, 1e-9, 1.0, "a density", &s->list[s->n]) != 0)
            return dt_fail_prefix("expected none, dgc, gtopk-code or a list of densities like 0.25,0.06");
        if (s->list[s->n] < target) /* density_at would raise it to the target: the epoch warms nothing */
            return dt_fail("%s: %g is below --density %g (a warm-up epoch sends more than the target, not less)", spec,
                           s->list[s->n], target);
        s->n++;
    }
    if (s->n == 0) return dt_fail("expected none, dgc, gtopk-code or a list of densities, found '%s'", spec);
    return 0;
}

double density_at(const dt_density_sched *s, int epoch)
{
    if (epoch < s->n) return s->list[epoch] > s->target ? s->list[epoch] : s->target;
    return s->target;
}

double density_max(const dt_density_sched *s)
{
    double m = s->target;
    for (int i = 0; i < s->n; i++) m = s->list[i] > m ? s->list[i] : m;
    return m;
}

double chunk_ratio_at(double final_ratio, double warmup_fraction, long it, long total)
{
    double ramp = warmup_fraction * (double)total;
    if (ramp <= 0.0 || (double)it >= ramp) return final_ratio;
    return 1.0 - (1.0 - final_ratio) * ((double)it / ramp);
}

size_t density_k(double density, size_t n)
{
    size_t k = (size_t)floor(density * (double)n);
    return k < 1 ? 1 : k;
}
