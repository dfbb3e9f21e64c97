/* loader — a thread that fills the next training batches while the current one computes.
 *
 * The loader owns a sampler of its own and walks the iterations it0, it0+1, ... in order,
 * filling a ring of `depth` batch slots: the trainer takes slot it % depth when it is ready, and
 * hands it back by asking for the next one. Which samples and which random draws a batch holds
 * depend only on (seed, epoch, iteration, rank), so prefetching changes timing, never results.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "../util.h"
#include "data.h"
#include "sampler.h"

typedef struct slot {
    dt_batch b;
    long it; /* the iteration it holds, -1: empty */
    int failed;      /* filling it failed: err says why */
    char err[512];
} slot;

struct dt_loader {
    const dt_dataset *ds;
    dt_augment aug;
    dt_sampler *sampler;
    int out_h, out_w;
    uint64_t seed;
    long ipe, next_fill, total, taken; /* taken: iterations the trainer has finished with */
    int depth, n_slots, threads;
    dt_host_allocator mem; /* the batches' memory */
    slot *slots;
    pthread_t thread;
    int started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* the samples and draws of iteration it into s; a failure is kept in the slot for loader_next */
static void fill(dt_loader *l, slot *s, long it)
{
    long e = it / l->ipe, i = it % l->ipe;
    const uint32_t *idx;
    if (l->sampler->epoch != (int)e) sampler_epoch(l->sampler, (int)e);
    sampler_slice(l->sampler, i, &idx, &s->b.rows, &s->b.row0, &s->b.global_rows);
    dt_view v = {l->out_h, l->out_w, &l->aug, rng_hash(l->seed ^ rng_stream_id("augment"), (uint64_t)e), l->threads};
    s->failed = dataset_fill_view(l->ds, &l->ds->train, &v, idx, s->b.rows, s->b.x, s->b.y) != 0;
    if (s->failed) snprintf(s->err, sizeof s->err, "%s", dt_errmsg());
    s->it = it;
}

static void *run(void *arg)
{
    dt_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        /* a slot is free when the batch it held was taken: fill up to depth ahead of the trainer */
        while (!l->stop && (l->next_fill >= l->total || l->next_fill >= l->taken + l->n_slots))
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) break;
        long it = l->next_fill;
        slot *s = &l->slots[it % l->n_slots];
        pthread_mutex_unlock(&l->mu);
        fill(l, s, it);
        pthread_mutex_lock(&l->mu);
        l->next_fill++;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int loader_create(dt_loader **out, const dt_dataset *ds, const dt_augment *aug, int out_h, int out_w, int batch,
                  int rank, int size, uint64_t seed, int shuffle, int depth, long it0, long total, int threads,
                  const dt_host_allocator *mem)
{
    dt_loader *l = calloc(1, sizeof *l);
    size_t rows = (size_t)(batch + size - 1) / (size_t)size, d = (size_t)ds->c * out_h * out_w;
    if (!l) return dt_fail("out of memory");
    *out = l;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->ds = ds;
    l->aug = *aug;
    l->out_h = out_h, l->out_w = out_w;
    l->seed = seed;
    l->depth = depth;
    l->threads = threads;
    if (mem) l->mem = *mem;
    l->n_slots = depth + 1; /* the batch in use and depth ahead */
    l->next_fill = l->taken = it0;
    l->total = total;
    if (sampler_create(&l->sampler, ds->train.n, batch, rank, size, seed, shuffle) != 0) return -1;
    l->ipe = l->sampler->iters;
    if (!(l->slots = calloc((size_t)l->n_slots, sizeof *l->slots))) return dt_fail("out of memory");
    for (int i = 0; i < l->n_slots; i++) {
        l->slots[i].it = -1;
        if (!(l->slots[i].b.x = dt_host_alloc(&l->mem, sizeof(float) * d * rows)) ||
            !(l->slots[i].b.y = dt_host_alloc(&l->mem, sizeof(int32_t) * rows)))
            return -1;
    }
    if (depth > 0) {
        if (pthread_create(&l->thread, NULL, run, l) != 0) return dt_fail("cannot start the loader thread");
        l->started = 1;
    }
    return 0;
}

int loader_next(dt_loader *l, long it, dt_batch *b)
{
    if (it >= l->total) return dt_fail("internal: batch %ld asked for, the loader ends at %ld", it, l->total);
    if (!l->started) { /* in the caller */
        slot *s = &l->slots[0];
        fill(l, s, it);
        *b = s->b;
        return s->failed ? dt_fail("%s", s->err) : 0;
    }
    pthread_mutex_lock(&l->mu);
    if (it != l->taken && it != l->taken + 1) {
        pthread_mutex_unlock(&l->mu);
        return dt_fail("internal: batch %ld asked for after %ld (the loader runs in order)", it, l->taken);
    }
    l->taken = it; /* the batch before it is done with: its slot may be refilled */
    pthread_cond_broadcast(&l->cv);
    while (l->next_fill <= it) pthread_cond_wait(&l->cv, &l->mu);
    const slot *s = &l->slots[it % l->n_slots];
    *b = s->b;
    pthread_mutex_unlock(&l->mu);
    return s->failed ? dt_fail("%s", s->err) : 0;
}

void loader_destroy(dt_loader *l)
{
    if (!l) return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    for (int i = 0; l->slots && i < l->n_slots; i++) {
        dt_host_free(&l->mem, l->slots[i].b.x);
        dt_host_free(&l->mem, l->slots[i].b.y);
    }
    free(l->slots);
    sampler_destroy(l->sampler);
    free(l);
}
