/* SGD (momentum, Nesterov, weight decay) against PyTorch's update rule written out in double;
 * updates of a range leave the rest alone; learning-rate schedules give known values. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/optim.h"
#include "testutil.h"
#include "util.h"

enum { N = 37, STEPS = 4 };

/* torch.optim.SGD, dampening 0 */
static void ref_sgd(double *w, double *v, const double *g, int n, double lr, double m, double wd, int nesterov,
                    int first)
{
    for (int i = 0; i < n; i++) {
        double d = g[i] + wd * w[i];
        if (m != 0) {
            v[i] = first ? d : m * v[i] + d;
            d = nesterov ? d + m * v[i] : v[i];
        }
        w[i] -= lr * d;
    }
}

static const struct {
    double m, wd;
    int nesterov;
} cases[] = {{0.0, 0.0, 0}, {0.9, 0.0, 0}, {0.9, 5e-4, 0}, {0.9, 1e-3, 1}, {0.5, 0.0, 1}};

START_TEST(sgd_matches_pytorch_rule)
{
    dt_backend *be;
    dt_optim *o;
    float w[N], g[N];
    double wr[N], vr[N] = {0}, gr[N];
    char msg[512];
    ck_assert_int_eq(backend_cpu_create(&be, 1), 0);
    ck_assert_int_eq(optim_create(&o, be, N, (float)cases[_i].m, (float)cases[_i].wd, cases[_i].nesterov), 0);
    fill_uniform_d(wr, N, -1, 1, 21);
    for (int i = 0; i < N; i++) w[i] = (float)wr[i];
    for (int s = 0; s < STEPS; s++) {
        fill_uniform_d(gr, N, -1, 1, 30 + (uint64_t)s);
        for (int i = 0; i < N; i++) {
            g[i] = (float)gr[i];
            gr[i] = g[i];
        }
        optim_step(o, w, g, 0.1f, 0, N);
        ref_sgd(wr, vr, gr, N, (double)0.1f, (double)(float)cases[_i].m, (double)(float)cases[_i].wd,
                cases[_i].nesterov, s == 0);
    }
    ck_assert_msg(close_f32_f64(w, wr, N, TOL_F32_ATOL, TOL_F32_RTOL, "w", msg, sizeof msg), "case %d: %s", _i, msg);
    optim_destroy(o);
    backend_destroy(be);
}
END_TEST

START_TEST(range_update_touches_only_the_range)
{
    dt_backend *be;
    dt_optim *o;
    float w[N], g[N];
    ck_assert_int_eq(backend_cpu_create(&be, 1), 0);
    ck_assert_int_eq(optim_create(&o, be, N, 0.9f, 0.0f, 0), 0);
    for (int i = 0; i < N; i++) w[i] = 1.0f, g[i] = 1.0f;
    optim_step(o, w, g, 0.5f, 10, 5);
    for (int i = 0; i < N; i++) ck_assert_float_eq(w[i], i >= 10 && i < 15 ? 0.5f : 1.0f);
    for (int i = 0; i < N; i++) ck_assert_float_eq(o->v[i], i >= 10 && i < 15 ? 1.0f : 0.0f);
    optim_destroy(o);
    backend_destroy(be);
}
END_TEST

START_TEST(schedules)
{
    dt_lr_schedule s;
    const long ipe = 100;
    ck_assert_int_eq(lr_schedule_parse("constant", 0.1, 0, 10, &s), 0);
    ck_assert_double_eq_tol(lr_at(&s, 950, ipe), 0.1, 1e-12);
    ck_assert_int_eq(lr_schedule_parse("step:3,6:0.5", 0.1, 0, 10, &s), 0);
    ck_assert_double_eq_tol(lr_at(&s, 299, ipe), 0.1, 1e-12);
    ck_assert_double_eq_tol(lr_at(&s, 300, ipe), 0.05, 1e-12);
    ck_assert_double_eq_tol(lr_at(&s, 650, ipe), 0.025, 1e-12);
    /* a spec longer than any fixed buffer keeps its gamma */
    ck_assert_int_eq(lr_schedule_parse("step:1.00000000000000000000,2.00000000000000000000,3.00000000000000000000,"
                                       "4.00000000000000000000,5.00000000000000000000,6.00000000000000000000,"
                                       "7.00000000000000000000,8.00000000000000000000,9.00000000000000000000,"
                                       "10.0000000000000000000,11.0000000000000000000,12.0000000000000000000:0.5",
                                       1.0, 0, 20, &s),
                     0);
    ck_assert_int_eq(s.n_milestones, 12);
    ck_assert_double_eq_tol(lr_at(&s, 100, ipe), 0.5, 1e-12);
    ck_assert_int_eq(lr_schedule_parse("step:2", 1.0, 0, 10, &s), 0); /* gamma defaults to 0.1 */
    ck_assert_double_eq_tol(lr_at(&s, 200, ipe), 0.1, 1e-12);
    ck_assert_int_eq(lr_schedule_parse("poly:2", 0.1, 0, 10, &s), 0);
    ck_assert_double_eq_tol(lr_at(&s, 500, ipe), 0.1 * 0.25, 1e-12);
    ck_assert_int_eq(lr_schedule_parse("cosine", 0.1, 0, 10, &s), 0);
    ck_assert_double_eq_tol(lr_at(&s, 500, ipe), 0.05, 1e-12);
    ck_assert_double_eq_tol(lr_at(&s, 1000, ipe), 0.0, 1e-12);
    /* linear warm-up over 2 epochs = 200 iterations: iteration i gets lr*(i+1)/200 */
    ck_assert_int_eq(lr_schedule_parse("constant", 0.2, 2, 10, &s), 0);
    ck_assert_double_eq_tol(lr_at(&s, 0, ipe), 0.2 / 200, 1e-12);
    ck_assert_double_eq_tol(lr_at(&s, 99, ipe), 0.1, 1e-12);
    ck_assert_double_eq_tol(lr_at(&s, 200, ipe), 0.2, 1e-12);
    /* a warm-up shorter than an iteration (or not a whole number of them): never above the rate (it
     * multiplied it by 1 / (warm-up iterations): 5333x the rate at 1e-9 epochs of 187 iterations) */
    ck_assert_int_eq(lr_schedule_parse("constant", 0.2, 1e-9, 10, &s), 0);
    ck_assert_double_eq_tol(lr_at(&s, 0, ipe), 0.2, 1e-12);
    ck_assert_int_eq(lr_schedule_parse("constant", 0.2, 0.025, 10, &s), 0); /* 2.5 iterations */
    ck_assert_double_eq_tol(lr_at(&s, 2, ipe), 0.2, 1e-12);
    ck_assert_double_eq_tol(lr_at(&s, 1, ipe), 0.2 * 2 / 2.5, 1e-12);
}
END_TEST

START_TEST(schedule_errors)
{
    dt_lr_schedule s;
    const struct {
        const char *spec, *expect;
    } bad[] = {
        {"linear", "unknown schedule 'linear' (expected constant, step:E1,E2,...[:GAMMA], poly:POWER or cosine)"},
        {"step:", "expected step:E1,E2,...[:GAMMA]"},
        {"step:5,3", "step epochs must increase, found 3 after 5"},
        {"step:1,,2", "(an empty epoch)"},
        {"step:1,", "(an empty epoch)"},
        {"step::0.5", "(an empty epoch)"},
        {"step:3:2", "step:EPOCHS:GAMMA (GAMMA): expected a number in [0, 1], found 2"},
        {"poly:x", "poly:POWER: expected a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_ne(lr_schedule_parse(bad[i].spec, 0.1, 0, 10, &s), 0);
        ck_assert_msg(strstr(dt_errmsg(), bad[i].expect), "'%s': message '%s' lacks '%s'", bad[i].spec, dt_errmsg(),
                      bad[i].expect);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("sgd");
    tcase_add_loop_test(tc, sgd_matches_pytorch_rule, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, range_update_touches_only_the_range);
    tcase_add_test(tc, schedules);
    tcase_add_test(tc, schedule_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
