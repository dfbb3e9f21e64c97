/* placement — which server of a parameter server holds which part of the arena (thesis §2.3.1).
 *
 *   uniform      every layer is cut evenly over the servers
 *   round-robin  whole layers, in turn (arena order)
 *   greedy       layers by size, largest first, each to the least-loaded server
 * A "layer" is the set of tensors whose names share the part before the first '.'. The result,
 * per server, is a list of arena ranges in increasing order, adjacent ranges merged; or, with
 * per_layer, no range crossing a layer's boundary (a parameter server's message per layer slice).
 */
#ifndef DT_PLACEMENT_H
#define DT_PLACEMENT_H

#include <stddef.h>

#include "../engine/engine.h"

typedef struct dt_range {
    size_t off, n;
} dt_range;

typedef struct dt_placement {
    int n_servers;
    int *n_ranges;
    dt_range **ranges;
    size_t *total; /* values per server */
} dt_placement;

int placement_build(const char *kind, const dt_arena *a, int n_servers, int per_layer, dt_placement **out);
void placement_destroy(dt_placement *p);
/* "uniform, round-robin, greedy" */
const char *placement_list(void);
int placement_exists(const char *kind);

#endif
