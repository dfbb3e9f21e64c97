/* The guarded test backend (backend_guarded.c): the CPU backend's kernels on memory that host
 * code cannot touch outside the backend's own ops. */
#ifndef DT_BACKEND_GUARDED_H
#define DT_BACKEND_GUARDED_H

#include "engine/backend.h"

extern const dt_backend_desc backend_guarded_desc;
/* the module entry point (dtrain-cpu-guarded.so) */
const dt_backend_desc *dtrain_backend_module(int abi);

#endif
