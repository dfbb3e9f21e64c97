/* The timing model's formulas (netmodel.c): the ring's time (Pipe-SGD eq. 3), the CPU an allreduce
 * takes, and the overlapped iteration: the slower of compute and communication while the
 * communication thread has a core of its own, the CPU both need over the cores when it has not. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "comm/mode.h"
#include "util.h"

static dt_netmodel model(double cores)
{
    dt_netmodel m = {.alpha = 50e-6, .beta = 1e-8, .gamma = 2e-9, .beta_stream = 8e-9, .cpu_byte = 3e-9, .cores = cores};
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

int main(void)
{
    Suite *s = suite_create("netmodel");
    TCase *tc = tcase_create("formulas");
    tcase_add_test(tc, ring_time);
    tcase_add_test(tc, ring_cpu);
    tcase_add_test(tc, overlap_own_core);
    tcase_add_test(tc, overlap_shared_core);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
