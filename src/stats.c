#include "stats.h"

const char *const dt_phase_names[DT_TIMES_N_PHASES] = {"data", "forward", "backward", "encode",
                                                       "comm", "wait",    "decode",   "update"};

double times_phase(const dt_times *t, int i)
{
    const double v[DT_TIMES_N_PHASES] = {t->data, t->forward, t->backward, t->encode,
                                         t->comm, t->wait,    t->decode,   t->update};
    return v[i];
}

double times_total(const dt_times *t)
{
    double s = 0.0;
    for (int i = 0; i < DT_TIMES_N_PHASES; i++) s += times_phase(t, i);
    return s;
}

double times_critical(const dt_times *t, int overlapped)
{
    return overlapped ? t->data + t->forward + t->backward + t->wait + t->update : times_total(t);
}

void times_add(dt_times *a, const dt_times *t)
{
    a->iter += t->iter;
    a->density += t->density;
    a->skipped += t->skipped;
    a->early += t->early;
    a->cpu += t->cpu;
    a->cpu_comm += t->cpu_comm;
    a->data += t->data;
    a->forward += t->forward;
    a->backward += t->backward;
    a->encode += t->encode;
    a->comm += t->comm;
    a->wait += t->wait;
    a->decode += t->decode;
    a->update += t->update;
    a->bytes_sent += t->bytes_sent;
    a->bytes_recv += t->bytes_recv;
}
