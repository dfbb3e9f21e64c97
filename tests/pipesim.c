/* pipesim NET DATA_DIR P K WARMUP_EPOCHS EPOCHS BATCH LR MOMENTUM SEED OUT.safetensors
 *
 * Pipe-SGD's semantics, simulated in one process with no threads and no MPI: P ranks' gradients
 * are computed one after the other on their slices of each global batch, summed in the order
 * the ring sums them (segment j: ((g_j + g_j+1) + g_j+2) + ...), and the sum of iteration t is
 * applied at the start of iteration t+K; the first WARMUP_EPOCHS epochs apply each iteration's
 * sum at its end instead (D-Sync), and the K iterations after the switch apply nothing. At the
 * end the sums still in flight are applied, oldest first, at the last learning rate. Writes the
 * final weights: tests/pipesgd.sh compares them bit for bit with `dtrain --mode pipesgd`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"
#include "cpu.h"
#include "data/data.h"
#include "data/sampler.h"
#include "engine/backend.h"
#include "engine/net.h"
#include "engine/optim.h"
#include "rng.h"
#include "util.h"

#define DIE()                                                                                                          \
    do {                                                                                                               \
        fprintf(stderr, "pipesim: %s\n", dt_errmsg());                                                                \
        return 2;                                                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    if (argc < 12 || argc > 14) {
        fprintf(stderr, "usage: pipesim NET DATA_DIR P K WARMUP_EPOCHS EPOCHS BATCH LR MOMENTUM SEED OUT "
                        "[LR_SCHEDULE [apply|compute]]\n");
        return 2;
    }
    const char *net_name = argv[1], *dir = argv[2], *out = argv[11];
    int p = atoi(argv[3]), k = atoi(argv[4]), epochs = atoi(argv[6]), batch = atoi(argv[7]);
    double warm = atof(argv[5]);
    float lr = (float)atof(argv[8]), mom = (float)atof(argv[9]);
    /* the learning rate of iteration it (--lr-schedule), and which one a stale gradient gets (--stale-lr) */
    dt_lr_schedule sched;
    int computed = argc > 13 && !strcmp(argv[13], "compute");
    if (lr_schedule_parse(argc > 12 ? argv[12] : "constant", atof(argv[8]), 0.0, atof(argv[6]), &sched) != 0) DIE();
    uint64_t seed = (uint64_t)atoll(argv[10]);

    dt_backend *be;
    dt_net *net;
    dt_dataset *ds;
    dt_optim *opt;
    if (backend_cpu_create(&be, 1) != 0 || net_load(net_name, &net) != 0 || dataset_open("mnist", dir, &ds) != 0) DIE();
    int local = (batch + p - 1) / p;
    size_t n = 0, d = (size_t)ds->c * ds->h * ds->w;
    if (net_alloc(net, be, local) != 0 || net_init_params(net, seed) != 0) DIE();
    n = net->n_params;
    if (optim_create(&opt, be, n, mom, 0.0f, 0) != 0) DIE();
    dt_sampler **smp = calloc((size_t)p, sizeof *smp);
    float **g = calloc((size_t)p, sizeof *g), **sum = calloc((size_t)k, sizeof *sum);
    int *pending = calloc((size_t)k, sizeof *pending);
    float *slot_lr = calloc((size_t)k, sizeof *slot_lr);
    long *pend_it = calloc((size_t)k, sizeof *pend_it);
    float *x = malloc(sizeof(float) * d * (size_t)local);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)local);
    for (int r = 0; r < p; r++) {
        if (sampler_create(&smp[r], ds->train.n, batch, r, p, seed, 1) != 0) DIE();
        g[r] = dt_alloc(n * sizeof(float));
    }
    for (int i = 0; i < k; i++) sum[i] = dt_alloc(n * sizeof(float));
    long ipe = smp[0]->iters, start = (long)ceil(warm * (double)ipe), it = 0;

    for (int e = 0; e < epochs; e++) {
        for (int r = 0; r < p; r++) sampler_epoch(smp[r], e);
        for (long i = 0; i < ipe; i++, it++) {
            int slot = (int)(it % k);
            lr = (float)lr_at(&sched, it, ipe);
            if (it >= start && pending[slot]) { /* apply gsum[it-K] */
                optim_step(opt, net->w, sum[slot], computed ? slot_lr[slot] : lr, 0, n);
                pending[slot] = 0;
            }
            for (int r = 0; r < p; r++) { /* every rank's gradient, with the weights of iteration it */
                const uint32_t *idx;
                int rows, global_rows;
                int64_t row0;
                sampler_slice(smp[r], i, &idx, &rows, &row0, &global_rows);
                dataset_fill(ds, &ds->train, idx, rows, x, y);
                net_set_input(net, x, rows);
                net_set_labels(net, y, rows);
                net_set_grad_arena(net, g[r]);
                dt_pass pass = {.rows = rows,
                                .train = 1,
                                .labels = net->labels,
                                .rng_key = rng_hash(seed, (uint64_t)it),
                                .row0 = row0,
                                .grad_scale = 1.0f / (float)global_rows};
                if (net_forward(net, &pass) != 0) DIE();
                if (net_backward(net, &pass, NULL, NULL) != 0) DIE();
            }
            for (int j = 0; j < p; j++) { /* the ring's association order, segment by segment */
                size_t first, cnt;
                split_range(n, j, p, &first, &cnt);
                float *s = sum[slot] + first;
                memcpy(s, g[j] + first, cnt * sizeof(float));
                for (int step = 1; step < p; step++) {
                    const float *a = g[(j + step) % p] + first;
                    for (size_t q = 0; q < cnt; q++) s[q] = a[q] + s[q];
                }
            }
            pending[slot] = 1;
            pend_it[slot] = it;
            slot_lr[slot] = lr;
            if (it < start) { /* warm-up: D-Sync */
                optim_step(opt, net->w, sum[slot], lr, 0, n);
                pending[slot] = 0;
            }
        }
    }
    for (;;) { /* flush, oldest first */
        int oldest = -1;
        for (int i = 0; i < k; i++)
            if (pending[i] && (oldest < 0 || pend_it[i] < pend_it[oldest])) oldest = i;
        if (oldest < 0) break;
        optim_step(opt, net->w, sum[oldest], computed ? slot_lr[oldest] : lr, 0, n); /* lr: the last iteration's */
        pending[oldest] = 0;
    }
    if (weights_save(net, net->w, net->state, out, "mnist", 0) != 0) DIE();
    printf("pipesim: P=%d K=%d, %ld iterations, pipeline from iteration %ld\n", p, k, it, start);
    for (int r = 0; r < p; r++) {
        sampler_destroy(smp[r]);
        dt_free(g[r]);
    }
    for (int i = 0; i < k; i++) dt_free(sum[i]);
    free(smp), free(g), free(sum), free(pending), free(pend_it), free(slot_lr), free(x), free(y);
    optim_destroy(opt);
    net_destroy(net);
    dataset_close(ds);
    backend_destroy(be);
    return 0;
}
