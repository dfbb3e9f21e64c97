/* The backend contract, on the guarded test backend (backend_guarded.c): its memory faults when
 * host code touches it outside a backend op; every layer type, the net's passes, the optimizer
 * and the host views work on it and give exactly the CPU backend's numbers (the same kernels);
 * the registry finds backends by name and says why one is missing. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "backend_guarded.h"
#include "engine/engine.h"
#include "engine/hostbuf.h"
#include "rng.h"
#include "util.h"

static dt_backend *make(const char *name)
{
    dt_backend *be = NULL;
    dt_backend_opts o = {.n_threads = 1, .device = -1};
    const dt_backend_desc *d = strcmp(name, "cpu-guarded") == 0 ? &backend_guarded_desc : backend_find(name);
    ck_assert_msg(d && d->create(&be, &o) == 0, "%s: %s", name, dt_errmsg());
    return be;
}

START_TEST(host_access_faults)
{
    dt_backend *be = make("cpu-guarded");
    float *p = be->alloc(be, 100 * sizeof(float)), one = 1.0f, back = 0.0f;
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(be->to_device(be, p + 3, &one, sizeof one), 0); /* through an op: fine */
    ck_assert_int_eq(be->to_host(be, &back, p + 3, sizeof back), 0);
    ck_assert(back == 1.0f);
    p[3] = 2.0f; /* host code writing backend memory: the handler aborts */
}
END_TEST

/* Every layer type in one net: dense, conv (groups, bias), batch norm, lrn, relu, max and average
 * pooling, add (with the relu it is fused with), shortcut, flatten, dropout, softmax_xent. */
static const char *ALL_LAYERS = "input shape=3x8x8\n"
                                "conv name=c1 out=16 k=3 pad=1 bias=0\n"
                                "batchnorm name=bn1\n"
                                "relu name=r1\n"
                                "conv name=c2 out=16 k=3 pad=1 groups=2\n"
                                "lrn name=n2 size=3\n"
                                "add name=sum in=n2,r1\n"
                                "relu name=rs\n"
                                "shortcut name=sc out=32 stride=2\n"
                                "maxpool name=mp k=2 stride=1\n"
                                "avgpool name=ap k=3 stride=1 pad=1\n"
                                "flatten name=fl\n"
                                "dense name=fc1 out=24\n"
                                "relu\n"
                                "dropout name=drop p=0.25\n"
                                "dense name=fc2 out=5\n"
                                "softmax_xent\n";

#define ROWS 6

typedef struct run {
    dt_backend *be;
    dt_net *net;
    dt_optim *opt;
    double loss;
    int64_t correct;
} run;

static void host_copy(dt_backend *be, float *dst, const float *src, size_t n)
{
    ck_assert_msg(be->to_host(be, dst, src, n * sizeof(float)) == 0, "%s", dt_errmsg());
}

/* builds the net on backend `name`, and runs a training step and an evaluation pass */
static void step(run *r, const char *name)
{
    float x[ROWS * 3 * 8 * 8];
    int32_t y[ROWS];
    dt_rng rng;
    rng_seed(&rng, 5, 0);
    for (size_t i = 0; i < DT_ARRAY_LEN(x); i++) x[i] = (float)(2.0 * rng_uniform_d(&rng) - 1.0);
    for (int i = 0; i < ROWS; i++) y[i] = i % 5;
    r->be = make(name);
    ck_assert_msg(net_parse(ALL_LAYERS, "all.net", "all", &r->net) == 0, "%s", dt_errmsg());
    ck_assert_msg(net_alloc(r->net, r->be, ROWS) == 0, "%s", dt_errmsg());
    ck_assert_msg(net_init_params(r->net, 11) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(optim_create(&r->opt, r->be, r->net->n_params, 0.9f, 1e-4f, 1), 0);
    ck_assert_int_eq(net_set_input(r->net, x, ROWS), 0);
    ck_assert_int_eq(net_set_labels(r->net, y, ROWS), 0);
    dt_pass p = {.rows = ROWS, .train = 1, .labels = r->net->labels, .rng_key = 99, .grad_scale = 1.0f / ROWS};
    ck_assert_msg(net_forward(r->net, &p) == 0, "%s", dt_errmsg());
    ck_assert_msg(net_backward(r->net, &p, NULL, NULL) == 0, "%s", dt_errmsg());
    ck_assert_msg(optim_step(r->opt, r->net->w, r->net->g, 0.1f, 0, r->net->n_params) == 0, "%s", dt_errmsg());
    dt_pass e = {.rows = ROWS, .train = 0, .labels = r->net->labels, .grad_scale = 1.0f};
    ck_assert_msg(net_forward(r->net, &e) == 0, "%s", dt_errmsg());
    ck_assert_int_eq(r->be->sync(r->be), 0);
    r->loss = p.loss_sum + e.loss_sum;
    r->correct = p.n_correct + e.n_correct;
}

static void compare(run *a, run *b, const float *(*pick)(const dt_param *), const char *what, int trainable)
{
    dt_net *na = a->net, *nb = b->net;
    int n = trainable ? na->n_tensors : na->n_states;
    for (int t = 0; t < n; t++) {
        const dt_param *pa = trainable ? na->tensors[t] : na->states[t],
                       *pb = trainable ? nb->tensors[t] : nb->states[t];
        float *ha = malloc(pa->n * sizeof(float)), *hb = malloc(pa->n * sizeof(float));
        host_copy(a->be, ha, pick(pa), pa->n);
        host_copy(b->be, hb, pick(pb), pb->n);
        ck_assert_msg(memcmp(ha, hb, pa->n * sizeof(float)) == 0, "%s of %s differ between cpu and cpu-guarded", what,
                      pa->name);
        free(ha);
        free(hb);
    }
}

static const float *pick_w(const dt_param *p) { return p->w; }
static const float *pick_g(const dt_param *p) { return p->g; }

START_TEST(every_layer_equals_cpu)
{
    run a, b;
    step(&a, "cpu");
    step(&b, "cpu-guarded");
    ck_assert_msg(a.loss == b.loss, "loss %.17g (cpu) vs %.17g (guarded)", a.loss, b.loss);
    ck_assert_int_eq(a.correct, b.correct);
    compare(&a, &b, pick_g, "gradients", 1);
    compare(&a, &b, pick_w, "weights after the step", 1);
    compare(&a, &b, pick_w, "running statistics", 0);
    for (int i = 0; i < a.net->n_layers; i++) { /* every activation of the evaluation pass */
        const dt_layer *la = a.net->layers[i], *lb = b.net->layers[i];
        size_t n = layer_act_size(la, a.be, ROWS);
        float *ha = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float));
        host_copy(a.be, ha, la->y, n);
        host_copy(b.be, hb, lb->y, n);
        ck_assert_msg(memcmp(ha, hb, n * sizeof(float)) == 0, "output of layer %s differs", la->name);
        free(ha);
        free(hb);
    }
    for (int k = 0; k < 2; k++) {
        run *r = k ? &b : &a;
        optim_destroy(r->opt);
        net_destroy(r->net);
        backend_destroy(r->be);
    }
}
END_TEST

START_TEST(host_views)
{
    dt_backend *be = make("cpu-guarded"), *cpu = make("cpu");
    dt_hostbuf h, v, c;
    ck_assert_int_eq(hostbuf_alloc(&h, be, 10), 0);
    ck_assert_ptr_ne(h.host, h.dev); /* a device backend: the view is a host copy */
    for (int i = 0; i < 10; i++) h.host[i] = (float)i;
    ck_assert_int_eq(hostbuf_push(&h, 2, 5), 0); /* only [2, 7) reaches the device */
    memset(h.host, 0, 10 * sizeof(float));
    ck_assert_int_eq(hostbuf_pull(&h, 0, 10), 0);
    for (int i = 0; i < 10; i++) ck_assert(h.host[i] == (i >= 2 && i < 7 ? (float)i : 0.0f));
    ck_assert_int_eq(hostbuf_view(&v, be, h.dev + 4, 3), 0); /* a view of part of it */
    ck_assert_int_eq(hostbuf_pull(&v, 0, 3), 0);
    ck_assert(v.host[0] == 4.0f && v.host[2] == 6.0f);
    hostbuf_free(&v);
    hostbuf_free(&h);
    ck_assert_int_eq(hostbuf_alloc(&c, cpu, 4), 0); /* host memory: the view is the memory itself */
    ck_assert_ptr_eq(c.host, c.dev);
    ck_assert_int_eq(hostbuf_push(&c, 0, 4), 0);
    hostbuf_free(&c);
    backend_destroy(be);
    backend_destroy(cpu);
}
END_TEST

/* Staging memory (a GPU's page-locked host memory): zeroed and aligned from every backend; the
 * guarded backend counts it, so a path that frees it otherwise, or not at all, aborts its test. */
START_TEST(staging)
{
    dt_backend *be = make("cpu-guarded"), *cpu = make("cpu");
    dt_backend *both[2] = {be, cpu};
    for (int k = 0; k < 2; k++) {
        unsigned char *p = backend_host_alloc(both[k], 1000);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 64, 0);
        for (int i = 0; i < 1000; i++) ck_assert_uint_eq(p[i], 0);
        p[999] = 1; /* host memory: host code may write it */
        backend_host_free(both[k], p);
    }
    dt_host_allocator a = backend_host_allocator(be);
    void *q = dt_host_alloc(&a, 64);
    ck_assert_ptr_nonnull(q);
    dt_host_free(&a, q);
    backend_destroy(be);
    backend_destroy(cpu);
}
END_TEST

START_TEST(staging_leak_aborts)
{
    dt_backend *be = make("cpu-guarded");
    ck_assert_ptr_nonnull(backend_host_alloc(be, 100));
    backend_destroy(be); /* with a staging buffer still allocated: the guarded backend aborts */
}
END_TEST

START_TEST(registry)
{
    dt_backend *be;
    dt_backend_opts o = {.n_threads = 1, .device = -1};
    ck_assert_int_eq(backend_create("cpu", &o, &be), 0);
    ck_assert_str_eq(be->name, "cpu");
    ck_assert_int_eq(be->host_memory, 1);
    backend_destroy(be);
    ck_assert_int_ne(backend_create("tpu", &o, &be), 0);
    ck_assert_msg(strstr(dt_errmsg(), "unknown backend 'tpu' (expected one of cpu, cuda)"), "%s", dt_errmsg());
    if (!backend_find("cuda")) /* not built, or its module cannot load here: the reason is given */
        ck_assert_msg(strstr(dt_errmsg(), "backend cuda: "), "%s", dt_errmsg());
    ck_assert_int_eq(backend_register(&backend_guarded_desc), 0);
    ck_assert_int_eq(backend_create("cpu-guarded", &o, &be), 0);
    ck_assert_int_eq(be->host_memory, 0);
    backend_destroy(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("guarded");
    TCase *tf = tcase_create("fault"), *tc = tcase_create("contract");
    tcase_add_test_raise_signal(tf, host_access_faults, SIGABRT);
    tcase_add_test_raise_signal(tf, staging_leak_aborts, SIGABRT);
    suite_add_tcase(s, tf);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_layer_equals_cpu);
    tcase_add_test(tc, host_views);
    tcase_add_test(tc, staging);
    tcase_add_test(tc, registry);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
