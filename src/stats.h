/* stats — the honest split of where an iteration's time went (DESIGN.md principle 4).
 * The train loop fills data/forward/backward, the comm mode fills encode/comm/wait/decode/update
 * and the byte counts. Sums over a window of iterations; log.c turns them into per-iteration
 * averages. */
#ifndef DT_STATS_H
#define DT_STATS_H

typedef struct dt_times {
    double data, forward, backward, encode, comm, wait, decode, update;
    double bytes_sent, bytes_recv;
    double early; /* bytes handed to the transport while backward was still running (wait-free pushes) */
    double iter; /* wall time of the iteration as the train loop saw it */
    double density; /* fraction of the arena a sparse mode sent (sum over iterations) */
    double skipped; /* updates skipped (loss scaling found a non-finite sum), a count */
    double cpu;      /* CPU seconds the whole rank used in the iteration (all its threads) */
    double cpu_comm; /* CPU seconds the communication thread used (modes that overlap) */
    double sync;     /* the timing model's input only: mean seconds per iteration by which the slowest rank's
                        compute (data, forward, backward) exceeded this rank's */
} dt_times;

#define DT_TIMES_N_PHASES 8
/* Phase names in order, as the log keys without "t_": data, forward, ... update. */
extern const char *const dt_phase_names[DT_TIMES_N_PHASES];
double times_phase(const dt_times *t, int i);
double times_total(const dt_times *t);
/* Phases on the compute thread's critical path when encode/comm/decode run on a comm thread. */
double times_critical(const dt_times *t, int overlapped);
void times_add(dt_times *acc, const dt_times *t);

#endif
