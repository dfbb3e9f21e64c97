/* worker — the communication thread of pipelined modes (Pipe-SGD, lazy allreduce).
 *
 * Runs submitted jobs one at a time, in order, on its own thread, while the compute thread
 * goes on. Jobs are numbered from 0; worker_wait(id) blocks until job id has run. A job that
 * fails stops the worker: every later wait returns -1 with the job's message. The time a job
 * reports is kept apart (worker_take_times): it overlaps the compute thread's.
 */
#ifndef DT_WORKER_H
#define DT_WORKER_H

#include "../stats.h"

typedef int (*dt_job_fn)(void *arg, dt_times *t);
typedef struct dt_worker dt_worker;

int worker_create(dt_worker **out);
/* Queues fn(arg); returns the job's id, or -1 with an error. */
long worker_submit(dt_worker *w, dt_job_fn fn, void *arg);
/* Blocks until job id (and every job before it) has run. */
int worker_wait(dt_worker *w, long id);
/* Whether job id has run (*done), without waiting; -1 where a job failed, as worker_wait. */
int worker_test(dt_worker *w, long id, int *done);
/* Nonzero while no thread waits in worker_wait: the submitter is computing. */
const int *worker_computing(const dt_worker *w);
/* Adds the jobs' times since the last call to *t. */
void worker_take_times(dt_worker *w, dt_times *t);
/* Waits for the queued jobs, then ends the thread. */
void worker_destroy(dt_worker *w);

#endif
