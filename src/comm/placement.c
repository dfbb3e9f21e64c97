#include "placement.h"

#include <stdlib.h>
#include <string.h>

#include "../split.h"
#include "../util.h"

static const char *const kinds[] = {"uniform", "round-robin", "greedy"};

const char *placement_list(void) { return "uniform, round-robin, greedy"; }

int placement_exists(const char *kind)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(kinds); i++)
        if (strcmp(kinds[i], kind) == 0) return 1;
    return 0;
}

typedef struct {
    size_t off, n; /* a layer: contiguous in the arena */
} layer_span;

/* layers in arena order: consecutive tensors with the same name prefix */
static int layers_of(const dt_arena *a, layer_span **out, int *n_out)
{
    layer_span *l = calloc((size_t)a->n_tensors + 1, sizeof *l);
    int n = 0;
    if (!l) return dt_fail("out of memory");
    for (int i = 0; i < a->n_tensors; i++) {
        const dt_param *t = a->tensors[i];
        size_t plen = tensor_layer_len(t->name);
        int same = 0;
        if (n > 0) {
            const dt_param *prev = a->tensors[i - 1];
            size_t pl = tensor_layer_len(prev->name);
            same = pl == plen && strncmp(prev->name, t->name, plen) == 0 && l[n - 1].off + l[n - 1].n == t->offset;
        }
        if (same) l[n - 1].n += t->n;
        else l[n++] = (layer_span){t->offset, t->n};
    }
    *out = l;
    *n_out = n;
    return 0;
}

static int add_range(dt_placement *p, int s, size_t off, size_t n, int per_layer)
{
    if (n == 0) return 0;
    int k = p->n_ranges[s];
    if (!per_layer && k > 0 && p->ranges[s][k - 1].off + p->ranges[s][k - 1].n == off) {
        p->ranges[s][k - 1].n += n;
    } else {
        dt_range *g = realloc(p->ranges[s], sizeof *g * (size_t)(k + 1));
        if (!g) return dt_fail("out of memory");
        p->ranges[s] = g;
        g[k] = (dt_range){off, n};
        p->n_ranges[s]++;
    }
    p->total[s] += n;
    return 0;
}

static int by_off(const void *x, const void *y)
{
    const dt_range *a = x, *b = y;
    return (a->off > b->off) - (a->off < b->off);
}

int placement_build(const char *kind, const dt_arena *a, int n_servers, int per_layer, dt_placement **out)
{
    dt_placement *p = calloc(1, sizeof *p);
    layer_span *l = NULL;
    int nl = 0, rc = 0;
    if (!p) return dt_fail("out of memory");
    p->n_servers = n_servers;
    p->n_ranges = calloc((size_t)n_servers, sizeof *p->n_ranges);
    p->ranges = calloc((size_t)n_servers, sizeof *p->ranges);
    p->total = calloc((size_t)n_servers, sizeof *p->total);
    if (!p->n_ranges || !p->ranges || !p->total || layers_of(a, &l, &nl) != 0) {
        placement_destroy(p);
        return dt_fail("out of memory");
    }
    if (strcmp(kind, "uniform") == 0) {
        for (int i = 0; i < nl && rc == 0; i++)
            for (int s = 0; s < n_servers && rc == 0; s++) {
                size_t first, cnt;
                split_range(l[i].n, s, n_servers, &first, &cnt);
                rc = add_range(p, s, l[i].off + first, cnt, per_layer);
            }
    } else if (strcmp(kind, "round-robin") == 0) {
        for (int i = 0; i < nl && rc == 0; i++) rc = add_range(p, i % n_servers, l[i].off, l[i].n, per_layer);
    } else if (strcmp(kind, "greedy") == 0) {
        int *order = malloc(sizeof *order * (size_t)(nl + 1));
        if (!order) rc = dt_fail("out of memory");
        for (int i = 0; i < nl && order; i++) order[i] = i;
        for (int i = 1; i < nl && order; i++) /* by size, largest first; ties in arena order */
            for (int j = i; j > 0 && l[order[j]].n > l[order[j - 1]].n; j--) {
                int tmp = order[j];
                order[j] = order[j - 1];
                order[j - 1] = tmp;
            }
        for (int i = 0; i < nl && rc == 0; i++) {
            int best = 0;
            for (int s = 1; s < n_servers; s++)
                if (p->total[s] < p->total[best]) best = s;
            rc = add_range(p, best, l[order[i]].off, l[order[i]].n, per_layer);
        }
        free(order);
    } else {
        rc = dt_fail("--placement: unknown placement '%s' (expected one of %s)", kind, placement_list());
    }
    free(l);
    if (rc != 0) {
        placement_destroy(p);
        return -1;
    }
    for (int s = 0; s < n_servers; s++) { /* in arena order, adjacent ranges merged (but per layer) */
        int k = 0;
        if (p->n_ranges[s] > 1) qsort(p->ranges[s], (size_t)p->n_ranges[s], sizeof(dt_range), by_off);
        for (int i = 1; i < p->n_ranges[s] && per_layer; i++) p->ranges[s][++k] = p->ranges[s][i];
        for (int i = 1; i < p->n_ranges[s] && !per_layer; i++) {
            if (p->ranges[s][k].off + p->ranges[s][k].n == p->ranges[s][i].off) p->ranges[s][k].n += p->ranges[s][i].n;
            else p->ranges[s][++k] = p->ranges[s][i];
        }
        if (p->n_ranges[s] > 0) p->n_ranges[s] = k + 1;
    }
    *out = p;
    return 0;
}

void placement_destroy(dt_placement *p)
{
    if (!p) return;
    for (int s = 0; p->ranges && s < p->n_servers; s++) free(p->ranges[s]);
    free(p->ranges);
    free(p->n_ranges);
    free(p->total);
    free(p);
}
