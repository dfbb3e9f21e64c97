/* split — balanced splits of n items over p parts, the one rule every module uses to divide
 * work (a global batch over ranks, a test set over workers, a ring's segments, a parameter
 * server's ranges), so they all agree on who holds what. */
#ifndef DT_SPLIT_H
#define DT_SPLIT_H

#include <stddef.h>

/* Rows [first, first+count) of an n-row set assigned to part r of p, balanced (sizes differ by ≤1). */
void split_range(size_t n, int r, int p, size_t *first, size_t *count);

#endif
