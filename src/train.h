/* train — the training driver: epochs of iterations, evaluation, the checkpoint policy, the
 * log records and the summary, then the weights (train.c).
 *
 * Errors are returned: when all ranks know of one (a collective step, a diverged loss),
 * r->failed_rank names the rank holding the message; when only this rank does, it is -1 and
 * main ends the job (the others may be waiting in a collective).
 */
#ifndef DT_TRAIN_H
#define DT_TRAIN_H

#include "run.h"

/* Collective: trains from r->it0 on, evaluates after every epoch, checkpoints, saves. */
int train_run(dt_run *r);

#endif
