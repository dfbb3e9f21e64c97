/* The timing model of Pipe-SGD eq. 2-5 / PAPERS.md §3 and the start-up probe that measures it.
 *
 * alpha, beta: the cost of one ring step, t(m) = alpha + m beta, from chains of 2(P-1)
 *        neighbour exchanges (every rank sends m bytes right and receives m from the left at
 *        once, step after step, as the ring does), median of 3 chains each after a warm-up:
 *        alpha is a step of 64 bytes, beta the slope between steps of 64 KiB and 1 MiB. (The
 *        intercept of that line scattered from 0 to ~1 ms on tools/netem's links, where a 64 KiB
 *        step rides the token bucket's burst.) The ring's own steps are priced from the chains
 *        themselves (netmodel_step): steps of 64 B, 64 KiB, 256 KiB and 1 MiB, interpolated
 *        between, and the line beyond 1 MiB. On tools/netem's 1 Gbit/s links a q8 ring step of
 *        162 KB (the MNIST MLP, 4 ranks) ran at 9.6 ns per byte where the line gave 10.8, 15-18%
 *        slow on D-Sync+q8 and Pipe-SGD+q8. Chained steps are what the ring pays: on TCP they run ~20%
 *        slower than one isolated exchange of the same size (rendezvous per message, the
 *        links' queues), and a fit to isolated or tiny messages predicts the ring too fast.
 * beta_stream: seconds per byte of one isolated exchange of 4 MiB, less alpha: what one long
 *        transfer pays (PS-Sync's pushes and pulls). On the emulated 1 Gbit/s links it is ~25%
 *        below beta (117 vs 90 MB/s), and the PS model needs it to stay within 20%. With 6 ranks
 *        on 2 cores the median of 3 reads 69-109 MB/s; the fastest of 5 read 104-116, but then
 *        bulk-synchronous PS, whose links carry both directions at once, came out 13-18% fast
 *        (the ps-fashion sweep: 6 of 12 points within 15%, against 9 with the median).
 * gamma: seconds per value of what a reduce step costs this CPU with the codec: encode,
 *        decode-and-add, decode (measured on 2^20 values, in the thread's CPU seconds: with 6
 *        ranks on 2 cores, all measuring at once, the wall clock read 7 and 12 ns per value for
 *        q8 against 1.3-1.9 alone, and the PS model came out 29% and 120% slow).
 * beta_busy: seconds per byte of the same 1 MiB steps chained SUSTAINED_STEPS deep (at least 2(p-1)):
 *        what a link that never idles delivers, as Pipe-SGD's back-to-back allreduces have it when
 *        communication outlasts compute. On tools/netem's 1 Gbit/s links (TCP BBR over a token
 *        bucket) back-to-back allreduces run at ~60 MB/s against ~104 MB/s with idle gaps between.
 * cpu_byte: CPU seconds per byte sent or received, over one more chain of 1 MiB steps (half a
 *        second of them, at most 400), waiting as a communication thread does (comm_set_sleepy):
 *        MPI's calls and the kernel's network stack (on emulated links, both ends' and the
 *        switch's, which all run on this machine's cores). The larger of the thread's CPU time
 *        (maximum over ranks) and the machine's busy time over the bytes its ranks moved (mean
 *        over ranks), see chain_cpu.
 * cores: the cores this machine's ranks may run on (the union of their affinities) over the ranks
 *        on it (comm_machine_ranks): ranks bound a core each have one each, not 1 / P.
 * Every rank takes the maximum over ranks (the minimum of cores), so all ranks predict the same.
 * Flags override. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cpu.h"
#include "../util.h"
#include "mode.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#define TAG_PROBE 201
#define SUSTAINED_STEPS 16
#define CPU_WINDOW 0.5    /* seconds: the chain that measures cpu_byte */
#define CPU_MAX_STEPS 400 /* ... at most so many 1 MiB steps (0.1-0.2 s on shared memory) */

/* seconds per step of a chain of `steps` neighbour exchanges of `bytes` (median over reps) */
static int chain_time(dt_comm *c, void *sbuf, void *rbuf, size_t bytes, int steps, int reps, double *out)
{
    int p = comm_size(c), me = comm_rank(c);
    double t[16];
    for (int i = 0; i < reps + 1; i++) { /* the first chain warms the connections up */
        if (comm_barrier(c) != 0) return -1;
        double t0 = dt_now();
        for (int s = 0; s < steps; s++)
            if (comm_sendrecv(c, sbuf, bytes, (me + 1) % p, rbuf, bytes, (me - 1 + p) % p, TAG_PROBE) != 0) return -1;
        if (i > 0) t[i - 1] = (dt_now() - t0) / steps;
    }
    *out = median(t, reps);
    return 0;
}

/* CPU seconds per byte moved by `steps` neighbour exchanges of `bytes`, waiting with sleeps: the
 * rank's thread's (*thread), and the machine's busy cores' over the bytes of the on_machine ranks
 * sending there (*machine; -1 where /proc/stat cannot be read): on tools/netem's hosts the
 * emulated links' queues and the receivers' softirqs run in no rank's thread (6 ranks on 2 cores:
 * the thread's own 1.6-1.7 ns per byte, the machine's 1.75-2.1). /proc/stat counts in ticks of
 * 10 ms: the caller makes the chain long enough for them not to matter. */
static int chain_cpu(dt_comm *c, void *sbuf, void *rbuf, size_t bytes, int steps, int sleepy_after, int on_machine,
                     double *thread, double *machine)
{
    int p = comm_size(c), me = comm_rank(c), rc = comm_barrier(c);
    comm_set_sleepy(c, 1, NULL);
    double c0 = cpu_thread_seconds(), b0 = cpu_busy_seconds();
    for (int s = 0; rc == 0 && s < steps; s++)
        rc = comm_sendrecv(c, sbuf, bytes, (me + 1) % p, rbuf, bytes, (me - 1 + p) % p, TAG_PROBE);
    double moved = 2.0 * (double)bytes * steps; /* sent and received by this rank */
    *thread = (cpu_thread_seconds() - c0) / moved;
    if (rc == 0) rc = comm_barrier(c);
    double b1 = cpu_busy_seconds();
    *machine = rc == 0 && b0 >= 0 && b1 >= b0 ? (b1 - b0) / (moved * on_machine) : -1.0;
    comm_set_sleepy(c, sleepy_after, NULL);
    return rc;
}

double netmodel_codec_gamma(const dt_codec *codec)
{
    const size_t n = 1 << 20;
    float *x = dt_alloc(n * sizeof(float)), *y = dt_alloc(n * sizeof(float));
    void *e = dt_alloc(codec_bytes(codec, n));
    double best = 1e30;
    if (!x || !y || !e) {
        dt_free(x), dt_free(y), dt_free(e);
        return 0.0;
    }
    for (size_t i = 0; i < n; i++) x[i] = y[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (int r = 0; r < 3; r++) {
        double t0 = cpu_thread_seconds();
        codec_encode(codec, x, n, e);
        codec_decode_add(codec, e, n, y);
        codec_decode(codec, e, n, x);
        double t = cpu_thread_seconds() - t0;
        if (t < best) best = t;
    }
    dt_free(x), dt_free(y), dt_free(e);
    return best / (double)n;
}

/* the probe's message sizes: the four chains' steps and the one long exchange */
static const size_t tiny = 64, small = 64u << 10, mid = 256u << 10, big = 1u << 20, stream = 4u << 20;

void netmodel_fit(double tt, double ts, double tb, double tl, double tbusy, double v[12])
{
    /* still no slope: an upper bound, the whole 1 MiB step as bytes (a beta of 1e-18 s per byte made
     * every link look free to --mode auto) */
    v[11] = tb <= ts;
    v[1] = v[11] ? tb / (double)big : (tb - ts) / (double)(big - small);
    v[0] = DT_MAX(tt - (double)tiny * v[1], 1e-7);
    /* alpha over half the 4 MiB exchange: the tiny chain was descheduled (2.2 ms once, on a busy
     * machine, which left 2.4e-19 s per byte); the whole exchange as bytes, an upper bound */
    v[3] = (tl - v[0] > 0.5 * tl ? tl - v[0] : tl) / (double)stream;
    v[6] = DT_MAX(tbusy - v[0], 1e-12) / (double)big;
}

int netmodel_init(dt_netmodel *m, dt_comm *c, const dt_codec *codec, const dt_comm_opts *o)
{
    double v[12] = {0}; /* alpha, beta, gamma, beta_stream, cpu_byte, -cores, beta_busy, the 4 steps, no slope */
    int p = comm_size(c), on_machine = 1;
    m->note[0] = 0;
    m->measured = o->model_alpha < 0 || o->model_beta < 0 || o->model_gamma < 0;
    int machine_cores = 1;
    if (comm_machine_ranks(c, &on_machine, &machine_cores) != 0) return -1;
    if (p > 1 && (o->model_alpha < 0 || o->model_beta < 0)) {
        char *s = dt_alloc(stream), *r = dt_alloc(stream);
        double tt, ts, tm, tb, tl, tbusy;
        int rc = 0, steps = 2 * (p - 1);
        /* every rank goes on only where all have the buffers: one that left alone would leave the
         * others in a chain it never joins (exit 15 on 2 ranks, a wait for --comm-timeout on 3) */
        int short_of = comm_agree(c, !s || !r); /* the lowest rank without them, or -1 */
        if (short_of >= 0) {
            dt_free(s);
            dt_free(r);
            return dt_fail("timing-model probe: rank %d is out of memory (2 x %zu bytes)", short_of, (size_t)stream);
        }
        memset(s, 1, stream);
        rc = chain_time(c, s, r, tiny, steps, 3, &tt);
        if (rc == 0) rc = chain_time(c, s, r, small, steps, 3, &ts);
        if (rc == 0) rc = chain_time(c, s, r, mid, steps, 3, &tm);
        if (rc == 0) rc = chain_time(c, s, r, big, steps, 3, &tb);
        /* 1 MiB steps no slower than 64 KiB ones (a rank descheduled in the small chain): measured again,
         * longer; the retry's outcome is every rank's, so all take the same path */
        double again = rc == 0 && tb <= ts;
        if (rc == 0) rc = comm_allreduce_max_f64(c, &again, 1);
        if (rc == 0 && again > 0) rc = chain_time(c, s, r, small, steps, 7, &ts);
        if (rc == 0 && again > 0) rc = chain_time(c, s, r, big, steps, 7, &tb);
        if (rc == 0) rc = chain_time(c, s, r, stream, 1, 3, &tl);
        if (rc == 0) rc = chain_time(c, s, r, big, DT_MAX(steps, SUSTAINED_STEPS), 1, &tbusy);
        /* cpu_byte's chain lasts CPU_WINDOW: at 2(p-1) steps (~50 ms on 1 Gbit/s links) one tick of
         * /proc/stat was a tenth of it, and the maximum over ranks read 2.4-3.6 ns per byte on one
         * machine from one run to the next */
        double want = CPU_WINDOW / DT_MAX(tb, 1e-6), mach = -1.0, mean[2];
        if (rc == 0) rc = comm_allreduce_max_f64(c, &want, 1);
        int csteps = (int)DT_MIN(DT_MAX(want, (double)steps), (double)CPU_MAX_STEPS);
        if (rc == 0) rc = chain_cpu(c, s, r, big, csteps, strcmp(o->comm_wait, "sleep") == 0, on_machine, &v[4], &mach);
        /* the machine's figure is the same quantity on every rank: their mean, not the noisiest */
        mean[0] = mach >= 0 ? mach : 0.0, mean[1] = mach >= 0;
        if (rc == 0) rc = comm_allreduce_sum_f64(c, mean, 2);
        if (rc == 0 && mean[1] > 0) v[4] = DT_MAX(v[4], mean[0] / mean[1]);
        dt_free(s);
        dt_free(r);
        if (rc != 0) return dt_fail_prefix("timing-model probe");
        netmodel_fit(tt, ts, tb, tl, tbusy, v);
        v[7] = tt, v[8] = ts, v[9] = tm, v[10] = tb;
    }
    v[2] = netmodel_codec_gamma(codec);
    v[5] = -(double)machine_cores / on_machine;
    if (comm_allreduce_max_f64(c, v, 12) != 0) return -1;
    if (v[11] > 0)
        snprintf(m->note, sizeof m->note,
                 "the link probe's 1 MiB steps ran no slower than its 64 KiB ones twice (a busy machine?): beta is "
                 "the upper bound %.3g ns per byte; --model-beta gives it",
                 1e9 * v[1]);
    m->n_steps = 0;
    if (p > 1 && o->model_alpha < 0 && o->model_beta < 0) { /* each step no faster than a smaller one */
        const double bytes[DT_NETMODEL_STEPS] = {(double)tiny, (double)small, (double)mid, (double)big};
        for (int i = 0; i < DT_NETMODEL_STEPS; i++) {
            m->step_bytes[i] = bytes[i];
            m->step_t[i] = i ? DT_MAX(v[7 + i], m->step_t[i - 1]) : v[7];
        }
        m->n_steps = DT_NETMODEL_STEPS;
        m->step_beta = v[1];
    }
    m->alpha = o->model_alpha >= 0 ? o->model_alpha : v[0];
    m->beta = o->model_beta >= 0 ? o->model_beta : v[1];
    m->beta_stream = o->model_beta >= 0 ? o->model_beta : v[3];
    m->beta_busy = o->model_beta >= 0 ? o->model_beta : DT_MAX(v[6], m->beta);
    m->gamma = o->model_gamma >= 0 ? o->model_gamma : v[2];
    m->cpu_byte = v[4];
    m->cores = o->model_cores > 0 ? o->model_cores : -v[5];
    return 0;
}

double netmodel_step(const dt_netmodel *m, double bytes)
{
    int k = m->n_steps, i = 1;
    if (k == 0) return m->alpha + bytes * m->beta;
    /* the chains' time (their line's slope beyond the largest), and the excess per byte where
     * netmodel_ring_paced raised beta above theirs */
    double t, excess = bytes * (m->beta - m->step_beta);
    if (bytes >= m->step_bytes[k - 1])
        t = m->step_t[k - 1] + (bytes - m->step_bytes[k - 1]) * m->step_beta;
    else if (bytes <= m->step_bytes[0])
        t = m->step_t[0];
    else {
        while (bytes > m->step_bytes[i]) i++;
        double x0 = m->step_bytes[i - 1], x1 = m->step_bytes[i], y0 = m->step_t[i - 1], y1 = m->step_t[i];
        t = y0 + (y1 - y0) * (bytes - x0) / (x1 - x0);
    }
    return t + excess;
}

double netmodel_ring(const dt_netmodel *m, int p, size_t n, const dt_codec *codec)
{
    if (p <= 1 || n == 0) return 0.0;
    double f = (double)(p - 1) / p;
    return 2.0 * (p - 1) * netmodel_step(m, (double)codec_bytes(codec, n) / p) + f * (double)n * m->gamma;
}

double netmodel_ring_paced(const dt_netmodel *m, int p, size_t n, const dt_codec *codec, double comp)
{
    double t = netmodel_ring(m, p, n, codec);
    if (t <= comp) return t;
    dt_netmodel busy = *m;
    busy.beta = busy.beta_busy;
    return netmodel_ring(&busy, p, n, codec);
}

double netmodel_ring_cpu(const dt_netmodel *m, int p, size_t n, const dt_codec *codec)
{
    if (p <= 1 || n == 0) return 0.0;
    double f = (double)(p - 1) / p; /* each rank sends and receives 2 f of the encoded arena */
    return 4.0 * f * (double)codec_bytes(codec, n) * m->cpu_byte + f * (double)n * m->gamma;
}

double netmodel_overlap(const dt_netmodel *m, int threads, double comp, double comp_cpu, double comm, double comm_cpu)
{
    double t = comp > comm ? comp : comm;
    if (threads < 1) threads = 1;
    if (m->cores <= 0 || m->cores >= threads + 1) return t; /* a core for each thread */
    double shared = (comp_cpu + comm_cpu) / m->cores;
    return shared > t ? shared : t;
}

/* bulk-synchronous PS: when worker v holds every server's part of the weights (seconds into the
 * iteration), each server sending in turn from worker k W/S on, one long transfer per worker */
static double ps_ready(const dt_netmodel *m, const dt_ps_load *l, int v)
{
    int w = (int)l->workers, s = (int)l->servers;
    double r = 0.0;
    for (int k = 0; k < s; k++) {
        int turn = ((v - k * w / s) % w + w) % w + 1;
        r = DT_MAX(r, turn * (l->part_n ? l->part_n[k] : l->n) * sizeof(float) * m->beta_stream);
    }
    return r;
}

double netmodel_ps(const dt_netmodel *m, const dt_ps_load *l, double comp)
{
    double w = l->workers, n = l->n;
    /* one worker's part to the busiest server, each a single long transfer; and all its parts, which
     * its own link carries whatever the servers */
    double push = l->enc * m->beta_stream, pull = n * sizeof(float) * m->beta_stream;
    double push_all = l->all_enc * m->beta_stream, pull_all = l->all_n * sizeof(float) * m->beta_stream;
    double serve = w * n * m->gamma + n * m->gamma; /* decode-add each push, then the update */
    double t;
    if (l->in_turn) { /* pulls one worker after the other: server k sends each worker its part in turn,
                       * beginning with worker k W/S (mode_ps.c), so no two send to one worker at
                       * once; a worker holds its weights after the last of its parts (and no sooner
                       * than its link takes the whole arena). Then it computes and pushes; the
                       * iteration ends when the last worker's pushes (its own link: all its parts)
                       * and the busiest server's downlink (every worker's part, from the first ready
                       * on) are through, and the server has served. Measured on 1 Gbit/s hosts, 4
                       * workers, 2 servers, 61% of the arena on one, q8: 70 ms (this 72); without a
                       * codec 99 (91); equal parts, q8 61 (64). */
        double last = 0.0, down = 0.0;
        for (int v = 0; v < (int)w; v++) {
            double r = ps_ready(m, l, v), ahead = 0.0; /* the pushes still to come once v is ready */
            for (int u = 0; u < (int)w; u++) ahead += ps_ready(m, l, u) >= r;
            last = DT_MAX(last, r);
            down = DT_MAX(down, r + comp + ahead * push);
        }
        t = DT_MAX(DT_MAX(last, pull_all) + comp + push_all, down) + serve + 2 * w * l->msgs * m->alpha;
    }
    else /* stale-synchronous: no worker waits for the others within the bound, so in the steady state
          * the busiest server's link, each direction carrying every worker's messages, or one worker's
          * own link: its pull, compute and push of the whole arena, whichever is slower */
        t = DT_MAX(DT_MAX(w * (pull + l->msgs * m->alpha), w * (push + l->msgs * m->alpha) + serve),
                   pull_all + comp + push_all + 2 * l->msgs * m->alpha);
    /* and no faster than the CPU it all needs where ranks share cores (tools/netem's hosts): every
     * worker's compute, every server's serving, and per byte moved (every worker's whole arena,
     * pushed and pulled) the sender's and the receiver's network stack */
    if (m->cores > 0 && m->cores < 1 && m->cpu_byte > 0) {
        double moved = w * (l->all_enc + l->all_n * sizeof(float));
        double cpu = w * comp + l->servers * serve + 2 * moved * m->cpu_byte;
        t = DT_MAX(t, cpu / (m->cores * (w + l->servers)));
        /* nor faster than the busiest server's own share of them: it receives every worker's push
         * and sends every pull, and serves, on its rank's share of the cores while the workers keep
         * theirs busy (6 ranks on 2 cores, stale-synchronous, no codec: measured 72 ms an
         * iteration, the links 45 ms, the machine's CPU over both cores 48 ms, this 71) */
        double own = w * (l->enc + n * sizeof(float)) * m->cpu_byte + serve;
        t = DT_MAX(t, own / m->cores);
    }
    return t;
}
