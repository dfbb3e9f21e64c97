/* Parameter-server placement: every arena value belongs to exactly one server, ranges are sorted
 * and merged, and each strategy does what the thesis (§2.3.1) says. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "comm/placement.h"
#include "engine/net.h"
#include "util.h"

static dt_net *net4(void)
{
    /* layers of 4*3+3=15, 3*50+50=200, 50*7+7=357 and 7*2+2=16 values */
    static const char *text = "input shape=4\ndense name=a out=3\nrelu\ndense name=b out=50\nrelu\n"
                              "dense name=c out=7\nrelu\ndense name=d out=2\nsoftmax_xent\n";
    dt_net *net;
    ck_assert_msg(net_parse(text, "p.net", "p", &net) == 0, "%s", dt_errmsg());
    return net;
}

static void covers_once(const dt_placement *p, size_t n)
{
    unsigned char *seen = calloc(n, 1);
    size_t total = 0;
    for (int s = 0; s < p->n_servers; s++) {
        size_t sum = 0;
        for (int i = 0; i < p->n_ranges[s]; i++) {
            const dt_range *r = &p->ranges[s][i];
            if (i > 0) ck_assert_msg(r->off > p->ranges[s][i - 1].off + p->ranges[s][i - 1].n, "unsorted or unmerged");
            for (size_t k = r->off; k < r->off + r->n; k++) {
                ck_assert_msg(!seen[k], "value %zu placed twice", k);
                seen[k] = 1;
            }
            sum += r->n;
        }
        ck_assert_uint_eq(sum, p->total[s]);
        total += sum;
    }
    ck_assert_uint_eq(total, n);
    free(seen);
}

START_TEST(strategies)
{
    dt_net *net = net4();
    dt_arena a = net_arena(net);
    dt_placement *p;
    ck_assert_uint_eq(a.n, 588);
    for (int s = 1; s <= 5; s++) {
        const char *kinds[] = {"uniform", "round-robin", "greedy"};
        for (int k = 0; k < 3; k++) {
            ck_assert_msg(placement_build(kinds[k], &a, s, &p) == 0, "%s", dt_errmsg());
            covers_once(p, a.n);
            placement_destroy(p);
        }
    }
    /* uniform over 2: each layer halved, so the servers differ by at most one value per layer */
    ck_assert_int_eq(placement_build("uniform", &a, 2, &p), 0);
    ck_assert(p->total[0] + 4 >= p->total[1] && p->total[1] + 4 >= p->total[0]);
    placement_destroy(p);
    /* round-robin over 2, arena order d, c, b, a: server 0 gets d and b (16+200), server 1 c and a (357+15) */
    ck_assert_int_eq(placement_build("round-robin", &a, 2, &p), 0);
    ck_assert_uint_eq(p->total[0], 216);
    ck_assert_uint_eq(p->total[1], 372);
    placement_destroy(p);
    /* greedy over 2: c (357) to 0; b (200) to 1; d (16) to 1; a (15) to 1 */
    ck_assert_int_eq(placement_build("greedy", &a, 2, &p), 0);
    ck_assert_uint_eq(p->total[0], 357);
    ck_assert_uint_eq(p->total[1], 231);
    placement_destroy(p);
    ck_assert_int_ne(placement_build("random", &a, 2, &p), 0);
    ck_assert_ptr_nonnull(strstr(dt_errmsg(), "unknown placement 'random' (expected one of uniform, round-robin, greedy)"));
    net_destroy(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("placement");
    TCase *tc = tcase_create("placement");
    tcase_add_test(tc, strategies);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
