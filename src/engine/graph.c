/* graph — forward and backward of a training pass as one recording of the backend's (graph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "graph.h"

#define GRAPH_KEYS 8

typedef struct {
    int rows;
    const float *g;   /* the gradient arena */
    float grad_scale;
    int seen;         /* passes of this key so far */
    void *graph;      /* its recording, NULL: none yet */
} graph_key;

struct dt_graphs {
    graph_key key[GRAPH_KEYS];
    int n_keys;
    int off;          /* a recording failed: op by op from then on */
    char note[512];
    int noted;        /* the note was taken */
    long recorded, launched;
};

const char *graphs_unsupported(const dt_backend *be, const dt_net *net)
{
    if (!be->graph_begin) return "the backend records no graphs";
    for (int i = 0; i < net->n_layers; i++)
        if (strcmp(net->layers[i]->ops->type, "dropout") == 0)
            return "the net has dropout, whose mask changes every iteration";
    return NULL;
}

int graphs_create(dt_graphs **out)
{
    if (!(*out = calloc(1, sizeof **out))) return dt_fail("out of memory");
    (*out)->noted = 1;
    return 0;
}

void graphs_destroy(dt_graphs *gs, dt_backend *be)
{
    if (!gs) return;
    for (int i = 0; i < gs->n_keys; i++)
        if (gs->key[i].graph) be->graph_free(be, gs->key[i].graph);
    free(gs);
}

static int op_by_op(dt_net *net, dt_pass *p)
{
    return net_forward(net, p) != 0 || net_backward(net, p, NULL, NULL) != 0 ? -1 : 0;
}

static graph_key *find_key(dt_graphs *gs, const dt_net *net, const dt_pass *p)
{
    for (int i = 0; i < gs->n_keys; i++) {
        graph_key *k = &gs->key[i];
        if (k->rows == p->rows && k->g == net->g && k->grad_scale == p->grad_scale) return k;
    }
    if (gs->n_keys == GRAPH_KEYS) return NULL; /* more shapes than that: the rest op by op */
    graph_key *k = &gs->key[gs->n_keys++];
    *k = (graph_key){p->rows, net->g, p->grad_scale, 0, NULL};
    return k;
}

/* graphs end for the run: k's recording goes, the note says why (once), passes run op by op */
static void graphs_off(dt_graphs *gs, dt_backend *be, graph_key *k, const char *what, int rows, const char *why)
{
    if (k->graph) be->graph_free(be, k->graph);
    k->graph = NULL;
    gs->off = 1;
    snprintf(gs->note, sizeof gs->note, "--gpu-graph: %s of %d rows failed (%s): op by op from now on", what, rows,
             why[0] ? why : "no reason given");
    gs->noted = 0;
}

/* records the pass into k->graph; a failure ends graphs (the pass then runs op by op) */
static int record(dt_graphs *gs, graph_key *k, dt_net *net, dt_pass *p)
{
    dt_backend *be = net->be;
    double loss = p->loss_sum;
    int64_t correct = p->n_correct;
    int rc = be->graph_begin(be);
    char why[400] = "";
    if (rc == 0) {
        rc = op_by_op(net, p);
        if (rc != 0) snprintf(why, sizeof why, "%s", dt_errmsg());
        if (be->graph_end(be, &k->graph) != 0 && rc == 0) {
            rc = -1;
            snprintf(why, sizeof why, "%s", dt_errmsg());
        }
    } else {
        snprintf(why, sizeof why, "%s", dt_errmsg());
    }
    if (rc == 0 && k->graph) {
        gs->recorded++;
        return 0;
    }
    graphs_off(gs, be, k, "recording a pass", p->rows, why);
    p->loss_sum = loss, p->n_correct = correct; /* nothing of the recording ran */
    return 1;
}

int graphs_pass(dt_graphs *gs, dt_net *net, dt_pass *p)
{
    dt_backend *be = net->be;
    graph_key *k = gs->off ? NULL : find_key(gs, net, p);
    if (!k || k->seen++ == 0) return op_by_op(net, p); /* the first pass of a key: buffers reach their size */
    for (int tries = 0; tries < 2; tries++) {
        if (!k->graph) {
            int rc = record(gs, k, net, p);
            if (rc != 0) return op_by_op(net, p);
        }
        int rc = be->graph_launch(be, k->graph, &p->loss_sum, &p->n_correct);
        if (rc < 0) return -1;
        if (rc == 0) {
            gs->launched++;
            return 0;
        }
        if (rc == 2) { /* refused before any of it ran: this pass and the rest op by op */
            graphs_off(gs, be, k, "launching a recording", p->rows, dt_errmsg());
            return op_by_op(net, p);
        }
        be->graph_free(be, k->graph); /* the backend's buffers moved: record it anew */
        k->graph = NULL;
    }
    return op_by_op(net, p); /* moved again right after it was recorded: let ops grow them first */
}

const char *graphs_note(dt_graphs *gs)
{
    if (gs->noted) return "";
    gs->noted = 1;
    return gs->note;
}

void graphs_counts(const dt_graphs *gs, long *recorded, long *launched)
{
    *recorded = gs->recorded;
    *launched = gs->launched;
}
