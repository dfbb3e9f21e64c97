/* mode — how the ranks turn their local gradients into the next weights (--mode).
 *
 * One file per mode (mode_dsync.c, ...), one descriptor each, listed in one table (mode.c):
 * unknown names are an error listing the valid ones; `dtrain --list-modes` prints the table.
 * A mode sees the arenas and their tensor table (engine/tensor.h), the optimizer and the
 * transport; it never sees layers. It fills the comm part of the time split.
 */
#ifndef DT_MODE_H
#define DT_MODE_H

#include "../engine/optim.h"
#include "../engine/tensor.h"
#include "../stats.h"
#include "comm.h"

typedef struct dt_mode_env {
    dt_comm *comm;
    dt_arena arena;
    dt_optim *optim;
} dt_mode_env;

typedef struct dt_mode_desc {
    const char *name;
    const char *help; /* one line */
    int (*init)(void **state, dt_mode_env *env);
    /* Called after backward of every iteration: from this rank's gradient arena (already scaled
     * by 1/global batch) and every other rank's, produce the next weights on every rank with
     * learning rate lr. Fills encode/comm/wait/decode/update and the byte counts of t. */
    int (*step)(void *state, dt_mode_env *env, float lr, dt_times *t);
    void (*finalize)(void *state, dt_mode_env *env);
} dt_mode_desc;

const dt_mode_desc *mode_find(const char *name);
int mode_count(void);
const dt_mode_desc *mode_at(int i);
/* "dsync" — the names, comma separated */
const char *mode_list(void);

#endif
