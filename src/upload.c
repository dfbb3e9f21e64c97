/* upload — the training batches copied to a device ahead of their iteration (upload.h). */
#include <stdlib.h>

#include "comm/worker.h"
#include "upload.h"
#include "util.h"

struct dt_upload {
    dt_backend *be, *q; /* q: the copies' queue */
    dt_loader *loader;
    dt_worker *worker;
    size_t row_floats;
    long total;
    struct slot {
        dt_upload *u;
        float *x;
        int32_t *y;
        dt_batch b; /* its x and y: the loader's, in host memory */
        long it, job;
    } slots[2];
};

/* on the upload thread: iteration s->it's batch from the loader to the device */
static int copy_job(void *arg, dt_times *t)
{
    struct slot *s = arg;
    dt_upload *u = s->u;
    (void)t;
    if (loader_next(u->loader, s->it, &s->b) != 0) return -1;
    size_t rows = s->b.rows > 0 ? (size_t)s->b.rows : 0;
    if (rows && (u->q->to_device(u->q, s->x, s->b.x, rows * u->row_floats * sizeof(float)) != 0 ||
                 u->q->to_device(u->q, s->y, s->b.y, rows * sizeof(int32_t)) != 0))
        return dt_fail_prefix("batch of iteration %ld to the device", s->it);
    return 0;
}

static int start(dt_upload *u, long it)
{
    struct slot *s = &u->slots[it % 2];
    s->it = it;
    s->job = worker_submit(u->worker, copy_job, s);
    return s->job < 0 ? -1 : 0;
}

int upload_create(dt_upload **out, dt_backend *be, dt_loader *loader, size_t row_floats, int max_rows, long total)
{
    *out = NULL;
    if (!UPLOADS(be) || !loader) return 0;
    dt_upload *u = calloc(1, sizeof *u);
    if (!u) return dt_fail("out of memory");
    u->be = be, u->loader = loader, u->row_floats = row_floats, u->total = total;
    for (int k = 0; k < 2; k++) {
        struct slot *s = &u->slots[k];
        s->u = u, s->it = -1, s->job = -1;
        if (!(s->x = be->alloc(be, sizeof(float) * DT_MAX(row_floats * (size_t)max_rows, 1))) ||
            !(s->y = be->alloc(be, sizeof(int32_t) * (size_t)DT_MAX(max_rows, 1)))) {
            upload_destroy(u);
            return -1;
        }
    }
    if (backend_queue(be, &u->q) != 0 || worker_create(&u->worker) != 0) {
        upload_destroy(u);
        return -1;
    }
    *out = u;
    return 0;
}

int upload_next(dt_upload *u, dt_net *net, long it, dt_batch *b)
{
    struct slot *s = &u->slots[it % 2];
    if (s->it != it && start(u, it) != 0) return -1; /* the first batch: nothing was started for it */
    if (worker_wait(u->worker, s->job) != 0) return -1;
    /* the next batch's copy goes into the other buffer, which the device last read an iteration ago
     * (the train loop waits for its queue after forward and after backward) */
    if (it + 1 < u->total && start(u, it + 1) != 0) return -1;
    *b = s->b;
    b->x = NULL, b->y = NULL;
    return net_copy_batch(net, s->x, s->y, s->b.rows);
}

void upload_destroy(dt_upload *u)
{
    if (!u) return;
    worker_destroy(u->worker);
    backend_queue_free(u->be, u->q);
    for (int k = 0; k < 2; k++) {
        if (u->slots[k].x) u->be->free(u->be, u->slots[k].x);
        if (u->slots[k].y) u->be->free(u->be, u->slots[k].y);
    }
    free(u);
}
