/* The timing model's formulas (netmodel.c): the ring's time (Pipe-SGD eq. 3), the CPU an allreduce
 * takes, and the overlapped iteration: the slower of compute and communication while the
 * communication thread has a core of its own, the CPU both need over the cores when it has not;
 * PS-Sync's iteration, bulk- and stale-synchronous, and its CPU floor where ranks share cores. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "comm/mode.h"
#include "util.h"

static dt_netmodel model(double cores)
{
    dt_netmodel m = {
        .alpha = 50e-6, .beta = 1e-8, .gamma = 2e-9, .beta_stream = 8e-9, .cpu_byte = 3e-9, .cores = cores};
    return m;
}

#define CLOSE(a, b) ck_assert_msg(fabs((a) - (b)) <= 1e-12 + 1e-9 * fabs(b), "%.17g != %.17g", (double)(a), (double)(b))

START_TEST(ring_time)
{
    dt_netmodel m = model(2);
    dt_codec none, q8;
    ck_assert_int_eq(codec_create("none", 0, &none), 0);
    ck_assert_int_eq(codec_create("q8", 0, &q8), 0);
    size_t n = 1000000;
    CLOSE(netmodel_ring(&m, 1, n, &none), 0.0);
    /* 2(P-1) alpha + 2 (P-1)/P bytes beta + (P-1)/P n gamma */
    CLOSE(netmodel_ring(&m, 4, n, &none), 6 * 50e-6 + 2 * 0.75 * 4e6 * 1e-8 + 0.75 * 1e6 * 2e-9);
    /* the codec's bytes travel, not the floats' */
    CLOSE(netmodel_ring(&m, 4, n, &q8), 6 * 50e-6 + 2 * 0.75 * (double)codec_bytes(&q8, n) * 1e-8 + 0.75 * 1e6 * 2e-9);
}
END_TEST

START_TEST(ring_steps)
{
    /* measured chains: 64 B 40 us, 64 KiB 0.5 ms, 256 KiB 2.2 ms, 1 MiB 10 ms (beta of the line 1e-8) */
    dt_netmodel m = model(2);
    const double b[4] = {64, 65536, 262144, 1048576}, t[4] = {40e-6, 0.5e-3, 2.2e-3, 10e-3};
    m.n_steps = 4, m.step_beta = 1e-8;
    for (int i = 0; i < 4; i++) m.step_bytes[i] = b[i], m.step_t[i] = t[i];
    /* at a measured size its time; between two, on the straight line through them; beyond the
     * largest, the line's beta; below the smallest, the smallest's time */
    CLOSE(netmodel_step(&m, 65536), 0.5e-3);
    CLOSE(netmodel_step(&m, 163840), 0.5e-3 + (2.2e-3 - 0.5e-3) * (163840.0 - 65536) / (262144 - 65536));
    CLOSE(netmodel_step(&m, 2097152), 10e-3 + 1048576 * 1e-8);
    CLOSE(netmodel_step(&m, 8), 40e-6);
    /* the ring: 2(P-1) steps of a P-th of the encoded arena (4 ranks, 655360 floats: 655360 B a step) */
    dt_codec none;
    ck_assert_int_eq(codec_create("none", 0, &none), 0);
    size_t n = 655360;
    double step = 2.2e-3 + (10e-3 - 2.2e-3) * (655360.0 - 262144) / (1048576 - 262144);
    CLOSE(netmodel_ring(&m, 4, n, &none), 6 * step + 0.75 * n * 2e-9);
    /* a busy link (netmodel_ring_paced: beta raised to beta_busy) adds its excess per byte */
    m.beta_busy = 1.2e-8;
    CLOSE(netmodel_ring_paced(&m, 4, n, &none, 1.0), 6 * step + 0.75 * n * 2e-9);
    CLOSE(netmodel_ring_paced(&m, 4, n, &none, 0.0), 6 * (step + 655360 * 0.2e-8) + 0.75 * n * 2e-9);
    /* no chains (alpha and beta given): the line */
    m.n_steps = 0;
    CLOSE(netmodel_step(&m, 163840), 50e-6 + 163840 * 1e-8);
}
END_TEST

START_TEST(ring_cpu)
{
    dt_netmodel m = model(2);
    dt_codec none;
    ck_assert_int_eq(codec_create("none", 0, &none), 0);
    CLOSE(netmodel_ring_cpu(&m, 1, 1000, &none), 0.0);
    /* each rank sends 2 (P-1)/P of the encoded arena and receives as much; plus the codec */
    CLOSE(netmodel_ring_cpu(&m, 2, 1000000, &none), 4 * 0.5 * 4e6 * 3e-9 + 0.5 * 1e6 * 2e-9);
}
END_TEST

START_TEST(overlap_own_core)
{
    /* 2 cores per rank, 1 compute thread: the communication thread has a core: max(comp, comm) */
    dt_netmodel m = model(2);
    CLOSE(netmodel_overlap(&m, 1, 0.010, 0.010, 0.006, 0.004), 0.010);
    CLOSE(netmodel_overlap(&m, 1, 0.010, 0.010, 0.025, 0.020), 0.025);
    /* no core count known: the same */
    m.cores = 0;
    CLOSE(netmodel_overlap(&m, 4, 0.010, 0.040, 0.006, 0.004), 0.010);
}
END_TEST

START_TEST(overlap_shared_core)
{
    /* one core per rank: compute and communication CPU add up (the 2-host q8 case of issue 18) */
    dt_netmodel m = model(1);
    CLOSE(netmodel_overlap(&m, 1, 0.009, 0.009, 0.0055, 0.004), 0.013);
    /* ... but never below the link's time */
    CLOSE(netmodel_overlap(&m, 1, 0.009, 0.009, 0.030, 0.004), 0.030);
    /* half a core per rank (4 hosts on 2 cores): twice the CPU */
    m.cores = 0.5;
    CLOSE(netmodel_overlap(&m, 1, 0.018, 0.009, 0.011, 0.0045), 0.027);
    /* 2 compute threads on 2 cores: no core left for communication */
    m.cores = 2;
    CLOSE(netmodel_overlap(&m, 2, 0.005, 0.010, 0.004, 0.004), 0.007);
}
END_TEST

START_TEST(ps_time)
{
    dt_netmodel m = model(2);
    /* 4 workers; the busiest server holds 1e6 values (4 MB pushed by each worker, one message) */
    const double parts[2] = {1e6, 0.5e6}, equal[2] = {1e6, 1e6};
    dt_ps_load l = {.workers = 4, .servers = 2, .n = 1e6, .enc = 4e6, .msgs = 1, .all_n = 1.5e6, .all_enc = 6e6,
                    .in_turn = 1, .part_n = parts};
    double pull = 4e6 * 8e-9, push = 4e6 * 8e-9, serve = 5e6 * 2e-9, comp = 0.005;
    double pull_all = 6e6 * 8e-9, push_all = 6e6 * 8e-9;
    /* bulk-synchronous: server 0 sends to workers 0, 1, 2, 3 in turn (32 ms each), server 1 to 2, 3,
     * 0, 1 (16 ms each): they hold their weights at 48, 64, 96, 128 ms. The last worker's compute and
     * its pushes to both servers; or the busiest server's downlink taking all four pushes from the
     * first ready on (equal here); then serving */
    CLOSE(netmodel_ps(&m, &l, comp), 4 * pull + comp + push_all + serve + 2 * 4 * 50e-6);
    CLOSE(4 * pull + comp + push_all, 0.048 + comp + 4 * push);
    /* a codec: the last worker's own pushes bind */
    dt_ps_load small = l;
    small.enc = 1e6, small.all_enc = 1.5e6;
    CLOSE(netmodel_ps(&m, &small, comp), 4 * pull + comp + 1.5e6 * 8e-9 + serve + 2 * 4 * 50e-6);
    /* equal parts: ready at 96, 128, 96, 128 ms; the server's downlink binds, from 96 ms on */
    dt_ps_load eq = l;
    eq.part_n = equal, eq.all_n = 2e6, eq.all_enc = 8e6;
    CLOSE(netmodel_ps(&m, &eq, comp), 0.096 + comp + 4 * push + serve + 2 * 4 * 50e-6);
    /* without the parts: as if every server held the busiest's */
    eq.part_n = NULL;
    CLOSE(netmodel_ps(&m, &eq, comp), 0.096 + comp + 4 * push + serve + 2 * 4 * 50e-6);
    /* one worker: its own link carries the whole arena both ways, however many servers */
    dt_ps_load one = l;
    one.workers = 1;
    CLOSE(netmodel_ps(&m, &one, comp), pull_all + comp + push_all + 2 * 1e6 * 2e-9 + 2 * 50e-6);
    /* stale-synchronous: the busiest link direction, here the pushes and their serving */
    l.in_turn = 0;
    CLOSE(netmodel_ps(&m, &l, comp), 4 * (push + 50e-6) + serve);
    /* ... or a worker's own round trip over its link, all of the arena, when compute dominates */
    CLOSE(netmodel_ps(&m, &l, 0.5), pull_all + 0.5 + push_all + 2 * 50e-6);
    /* a bigger share on the busiest server costs more */
    dt_ps_load big = l;
    big.n = 1.2e6, big.enc = 4.8e6;
    ck_assert(netmodel_ps(&m, &big, comp) > netmodel_ps(&m, &l, comp));
    /* 6 ranks on 1.5 cores (a quarter core each): the CPU all of them need, compute, serving and
     * 3 ns per byte at each end of every worker's pushes and pulls, spread over the 1.5 cores */
    m.cores = 0.25;
    l.in_turn = 1;
    double big_comp = 0.2, cpu = 4 * big_comp + 2 * serve + 2 * (4 * (6e6 + 6e6)) * 3e-9;
    CLOSE(netmodel_ps(&m, &l, big_comp), cpu / 1.5);
    ck_assert(cpu / 1.5 > 4 * pull + big_comp + push + serve + 2 * 4 * 50e-6); /* the floor is what binds here */
    /* ... and no faster than the busiest server's own quarter core: every worker's push in and pull
     * out at 3 ns per byte, and serving (binds where compute is short) */
    double own = 4 * (4e6 + 4e6) * 3e-9 + serve;
    CLOSE(netmodel_ps(&m, &l, comp), own / 0.25);
    l.in_turn = 0;
    CLOSE(netmodel_ps(&m, &l, comp), own / 0.25);
    /* a codec shrinks what the server receives, not what it sends */
    dt_ps_load q8 = l;
    q8.enc = 1e6, q8.all_enc = 1.5e6;
    CLOSE(netmodel_ps(&m, &q8, comp), (4 * (1e6 + 4e6) * 3e-9 + serve) / 0.25);
}
END_TEST

/* reading the link probe: 1 Gbit/s-like steps, then the probe's noisy cases */
START_TEST(probe_fit)
{
    const double big = 1 << 20, small = 64 << 10, stream = 4 << 20;
    double v[12] = {0};
    /* 20 us a message, 10 ns a byte; the 4 MiB exchange streams at 8 ns a byte */
    netmodel_fit(20e-6 + 64 * 1e-8, 20e-6 + small * 1e-8, 20e-6 + big * 1e-8, 20e-6 + stream * 8e-9,
                 20e-6 + big * 1.2e-8, v);
    CLOSE(v[1], 1e-8);
    CLOSE(v[0], 20e-6);
    CLOSE(v[3], 8e-9);
    CLOSE(v[6], 1.2e-8);
    ck_assert(v[11] == 0);
    /* the 64-byte chain descheduled (alpha read as 2.2 ms, more than the 4 MiB exchange): beta_stream
     * is the whole exchange per byte, not the 1e-12 s over 4 MiB (2.4e-19 s per byte) it was */
    netmodel_fit(2.2e-3, 2e-6 + small * 8e-11, 2e-6 + big * 8e-11, 2e-6 + stream * 7e-11, 2e-6 + big * 9e-11, v);
    CLOSE(v[3], (2e-6 + stream * 7e-11) / stream);
    /* ... and where alpha is below half of it, alpha is taken off */
    netmodel_fit(0.1e-3, 2e-6 + small * 8e-11, 2e-6 + big * 8e-11, 2e-6 + stream * 7e-11, 2e-6 + big * 9e-11, v);
    CLOSE(v[3], (2e-6 + stream * 7e-11 - v[0]) / stream);
    /* 1 MiB steps no slower than 64 KiB ones: beta is the upper bound, the whole 1 MiB step per byte */
    netmodel_fit(20e-6, 1e-3, 0.9e-3, 40e-3, 1e-3, v);
    ck_assert(v[11] == 1);
    CLOSE(v[1], 0.9e-3 / big);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("netmodel");
    TCase *tc = tcase_create("formulas");
    tcase_add_test(tc, ring_time);
    tcase_add_test(tc, ring_steps);
    tcase_add_test(tc, ring_cpu);
    tcase_add_test(tc, overlap_own_core);
    tcase_add_test(tc, overlap_shared_core);
    tcase_add_test(tc, ps_time);
    tcase_add_test(tc, probe_fit);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
