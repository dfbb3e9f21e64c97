#include "worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cpu.h"
#include "../util.h"

#define QUEUE 64

struct dt_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dt_job_fn fn[QUEUE];
    void *arg[QUEUE];
    long submitted, done; /* jobs [done, submitted) are queued or running */
    int stop, failed;
    int computing; /* 0 while a thread waits in worker_wait */
    char err[1024];
    dt_times times;
};

static void *run(void *p)
{
    dt_worker *w = p;
    cpu_flush_denormals(); /* sums of tiny gradients must not turn slow */
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->done == w->submitted && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (w->done == w->submitted && w->stop) break;
        long id = w->done;
        dt_job_fn fn = w->fn[id % QUEUE];
        void *arg = w->arg[id % QUEUE];
        int failed = w->failed;
        pthread_mutex_unlock(&w->mu);
        dt_times t = {0};
        struct timespec c0, c1; /* the thread's CPU time: what it takes from compute when they share cores */
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        int rc = failed ? -1 : fn(arg, &t); /* after a failure, later jobs are skipped */
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        t.cpu_comm = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
        pthread_mutex_lock(&w->mu);
        if (rc != 0 && !w->failed) {
            w->failed = 1;
            snprintf(w->err, sizeof w->err, "%s", dt_errmsg());
        }
        times_add(&w->times, &t);
        w->done++;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int worker_create(dt_worker **out)
{
    dt_worker *w = calloc(1, sizeof *w);
    if (!w) return dt_fail("out of memory");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->computing = 1;
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        free(w);
        return dt_fail("cannot start the communication thread");
    }
    *out = w;
    return 0;
}

long worker_submit(dt_worker *w, dt_job_fn fn, void *arg)
{
    long id;
    pthread_mutex_lock(&w->mu);
    while (w->submitted - w->done >= QUEUE) pthread_cond_wait(&w->cv, &w->mu);
    id = w->submitted++;
    w->fn[id % QUEUE] = fn;
    w->arg[id % QUEUE] = arg;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return id;
}

int worker_wait(dt_worker *w, long id)
{
    int failed;
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->computing, 0, __ATOMIC_RELAXED);
    while (w->done <= id && !w->failed) pthread_cond_wait(&w->cv, &w->mu);
    __atomic_store_n(&w->computing, 1, __ATOMIC_RELAXED);
    failed = w->failed;
    if (failed) dt_fail("%s", w->err);
    pthread_mutex_unlock(&w->mu);
    return failed ? -1 : 0;
}

int worker_test(dt_worker *w, long id, int *done)
{
    pthread_mutex_lock(&w->mu);
    int failed = w->failed;
    *done = w->done > id;
    if (failed) dt_fail("%s", w->err);
    pthread_mutex_unlock(&w->mu);
    return failed ? -1 : 0;
}

const int *worker_computing(const dt_worker *w) { return &w->computing; }

void worker_take_times(dt_worker *w, dt_times *t)
{
    pthread_mutex_lock(&w->mu);
    times_add(t, &w->times);
    memset(&w->times, 0, sizeof w->times);
    pthread_mutex_unlock(&w->mu);
}

void worker_destroy(dt_worker *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
