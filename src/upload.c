/* upload — the training batches copied to a device ahead of their iteration (upload.h).
 *
 * One thread of its own, asked for one iteration at a time: it takes that batch from the loader and
 * copies it into the slot of the iteration's parity on the backend's second queue, and says when it
 * is there. An error there (the loader's, the copy's) is kept and raised by the next upload_next. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "upload.h"
#include "util.h"

struct dt_upload {
    dt_backend *be, *q; /* q: the copies' queue */
    dt_loader *loader;
    size_t row_floats;
    long total;
    struct slot {
        float *x;
        int32_t *y;
        dt_batch b; /* its x and y: the loader's, in host memory */
    } slots[2];
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long want;  /* the iteration asked for and not yet taken by the thread, -1: none */
    long asked; /* the last iteration asked for */
    long done;  /* the last iteration whose batch is on the device */
    int failed, stop;
    char err[1024];
};

/* on the upload thread: iteration it's batch from the loader into its slot on the device */
static int copy_batch(dt_upload *u, long it)
{
    struct slot *s = &u->slots[it % 2];
    if (loader_next(u->loader, it, &s->b) != 0) return -1;
    size_t rows = s->b.rows > 0 ? (size_t)s->b.rows : 0;
    if (rows && (u->q->to_device(u->q, s->x, s->b.x, rows * u->row_floats * sizeof(float)) != 0 ||
                 u->q->to_device(u->q, s->y, s->b.y, rows * sizeof(int32_t)) != 0))
        return dt_fail_prefix("batch of iteration %ld to the device", it);
    return 0;
}

static void *upload_thread(void *arg)
{
    dt_upload *u = arg;
    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (u->want < 0 && !u->stop) pthread_cond_wait(&u->cv, &u->mu);
        if (u->stop) break;
        long it = u->want;
        u->want = -1;
        pthread_mutex_unlock(&u->mu);
        int rc = copy_batch(u, it);
        pthread_mutex_lock(&u->mu);
        if (rc != 0 && !u->failed) snprintf(u->err, sizeof u->err, "%s", dt_errmsg()), u->failed = 1;
        u->done = it;
        pthread_cond_broadcast(&u->cv);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* asks the thread for iteration it (with the lock held) */
static void ask(dt_upload *u, long it)
{
    u->want = u->asked = it;
    pthread_cond_broadcast(&u->cv);
}

int upload_create(dt_upload **out, dt_backend *be, dt_loader *loader, size_t row_floats, int max_rows, long total)
{
    *out = NULL;
    if (!UPLOADS(be) || !loader) return 0;
    dt_upload *u = calloc(1, sizeof *u);
    if (!u) return dt_fail("out of memory");
    u->be = be, u->loader = loader, u->row_floats = row_floats, u->total = total;
    u->want = u->asked = u->done = -1;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    for (int k = 0; k < 2; k++) {
        struct slot *s = &u->slots[k];
        if (!(s->x = be->alloc(be, sizeof(float) * DT_MAX(row_floats * (size_t)max_rows, 1))) ||
            !(s->y = be->alloc(be, sizeof(int32_t) * (size_t)DT_MAX(max_rows, 1)))) {
            upload_destroy(u);
            return -1;
        }
    }
    if (backend_queue(be, &u->q) != 0) {
        upload_destroy(u);
        return -1;
    }
    if (pthread_create(&u->thread, NULL, upload_thread, u) != 0) {
        upload_destroy(u);
        return dt_fail("cannot start the thread that copies batches to the device");
    }
    u->started = 1;
    *out = u;
    return 0;
}

int upload_next(dt_upload *u, dt_net *net, long it, dt_batch *b)
{
    pthread_mutex_lock(&u->mu);
    if (u->asked != it && u->done != it) ask(u, it); /* the first batch: nothing was asked for it */
    while (u->done != it && !u->failed) pthread_cond_wait(&u->cv, &u->mu);
    if (u->failed) {
        pthread_mutex_unlock(&u->mu);
        return dt_fail("%s", u->err);
    }
    /* the next batch's copy goes into the other slot, which the device last read an iteration ago (the
     * train loop waits for its queue after forward and after backward) */
    if (it + 1 < u->total) ask(u, it + 1);
    pthread_mutex_unlock(&u->mu);
    const struct slot *s = &u->slots[it % 2];
    *b = s->b;
    b->x = NULL, b->y = NULL;
    return net_copy_batch(net, s->x, s->y, s->b.rows);
}

void upload_destroy(dt_upload *u)
{
    if (!u) return;
    if (u->started) {
        pthread_mutex_lock(&u->mu);
        u->stop = 1;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        pthread_join(u->thread, NULL);
    }
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    backend_queue_free(u->be, u->q);
    for (int k = 0; k < 2; k++) {
        if (u->slots[k].x) u->be->free(u->be, u->slots[k].x);
        if (u->slots[k].y) u->be->free(u->be, u->slots[k].y);
    }
    free(u);
}
