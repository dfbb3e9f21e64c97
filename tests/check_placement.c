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

/* every value on one server; ranges sorted, and merged unless per_layer (then none crosses a
 * layer: layer_end lists the layers' ends in the arena) */
static void covers_once(const dt_placement *p, size_t n, const size_t *layer_end)
{
    unsigned char *seen = calloc(n, 1);
    size_t total = 0;
    for (int s = 0; s < p->n_servers; s++) {
        size_t sum = 0;
        for (int i = 0; i < p->n_ranges[s]; i++) {
            const dt_range *r = &p->ranges[s][i];
            if (i > 0 && !layer_end)
                ck_assert_msg(r->off > p->ranges[s][i - 1].off + p->ranges[s][i - 1].n, "unsorted or unmerged");
            if (i > 0 && layer_end)
                ck_assert_msg(r->off >= p->ranges[s][i - 1].off + p->ranges[s][i - 1].n, "unsorted");
            for (int l = 0; layer_end && layer_end[l]; l++)
                ck_assert_msg(!(r->off < layer_end[l] && r->off + r->n > layer_end[l]), "range %zu+%zu crosses a layer",
                              r->off, r->n);
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
            /* arena order d, c, b, a: layers end at 16, 373, 573, 588 */
            static const size_t ends[] = {16, 373, 573, 588, 0};
            for (int per_layer = 0; per_layer < 2; per_layer++) {
                ck_assert_msg(placement_build(kinds[k], &a, s, per_layer, &p) == 0, "%s", dt_errmsg());
                covers_once(p, a.n, per_layer ? ends : NULL);
                placement_destroy(p);
            }
        }
    }
    /* uniform over 2: each layer halved, so the servers differ by at most one value per layer */
    ck_assert_int_eq(placement_build("uniform", &a, 2, 0, &p), 0);
    ck_assert(p->total[0] + 4 >= p->total[1] && p->total[1] + 4 >= p->total[0]);
    placement_destroy(p);
    /* round-robin over 2, arena order d, c, b, a: server 0 gets d and b (16+200), server 1 c and a (357+15) */
    ck_assert_int_eq(placement_build("round-robin", &a, 2, 0, &p), 0);
    ck_assert_uint_eq(p->total[0], 216);
    ck_assert_uint_eq(p->total[1], 372);
    placement_destroy(p);
    /* greedy over 2: c (357) to 0; b (200) to 1; d (16) to 1; a (15) to 1 */
    ck_assert_int_eq(placement_build("greedy", &a, 2, 0, &p), 0);
    ck_assert_uint_eq(p->total[0], 357);
    ck_assert_uint_eq(p->total[1], 231);
    placement_destroy(p);
    /* one server: one merged range, or one per layer */
    ck_assert_int_eq(placement_build("uniform", &a, 1, 0, &p), 0);
    ck_assert_int_eq(p->n_ranges[0], 1);
    placement_destroy(p);
    ck_assert_int_eq(placement_build("uniform", &a, 1, 1, &p), 0);
    ck_assert_int_eq(p->n_ranges[0], 4);
    ck_assert_uint_eq(p->ranges[0][1].off, 16);
    ck_assert_uint_eq(p->ranges[0][1].n, 357);
    placement_destroy(p);
    ck_assert_int_ne(placement_build("random", &a, 2, 0, &p), 0);
    ck_assert_ptr_nonnull(
        strstr(dt_errmsg(), "unknown placement 'random' (expected one of uniform, round-robin, greedy)"));
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
