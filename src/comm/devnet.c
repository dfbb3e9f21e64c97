#include "devnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "ring.h"

/* what each rank tells the others before the choice */
typedef struct {
    int can;        /* this rank could use the device's transport */
    char dev[96];   /* the device (be->device_id) */
    char machine[64];
    char why[300];  /* why not (can = 0); the library's version (can = 1) */
} rank_say;

static void local_say(dt_backend *be, const char *mode_why, rank_say *s)
{
    memset(s, 0, sizeof *s);
    comm_machine_id(s->machine, sizeof s->machine);
    if (be->host_memory || !be->device_id) {
        snprintf(s->why, sizeof s->why, "the gradients are in host memory (--device %s)", be->name);
    } else if (!be->net_available) {
        snprintf(s->why, sizeof s->why, "this dtrain's %s backend was built without NCCL", be->name);
    } else if (mode_why && *mode_why) {
        snprintf(s->why, sizeof s->why, "%s", mode_why);
    } else if (be->device_id(be, s->dev, sizeof s->dev) != 0) {
        snprintf(s->why, sizeof s->why, "the device's identity: %s", dt_errmsg());
    } else {
        s->can = be->net_available(be, s->why, sizeof s->why);
    }
}

int devnet_choose(dt_comm *c, dt_backend *be, const char *want, const char *mode_why, int *out, char *line, size_t n)
{
    const int p = comm_size(c);
    char why[400] = "";
    *out = DT_TRANSPORT_MPI;
    if (strcmp(want, "mpi") == 0) {
        snprintf(line, n, "mpi");
        return 0;
    }
    rank_say me, *all = calloc((size_t)p, sizeof *all);
    if (!all) return dt_fail("out of memory");
    local_say(be, mode_why, &me);
    if (ring_allgather(c, &me, sizeof me, all, NULL) != 0) {
        free(all);
        return -1;
    }
    for (int i = 0; i < p && !why[0]; i++)
        if (!all[i].can) {
            if (i == 0) snprintf(why, sizeof why, "%s", all[i].why);
            else snprintf(why, sizeof why, "rank %d: %s", i, all[i].why);
        }
    if (!why[0]) /* NCCL's rule: a device per rank */
        for (int i = 0; i < p && !why[0]; i++)
            for (int j = i + 1; j < p && !why[0]; j++)
                if (strcmp(all[i].dev, all[j].dev) == 0 && strcmp(all[i].machine, all[j].machine) == 0)
                    snprintf(why, sizeof why, "ranks %d and %d share one device (%s), and NCCL needs a device per rank",
                             i, j, all[i].dev);
    if (!why[0]) {
        *out = DT_TRANSPORT_NCCL;
        snprintf(line, n, "nccl (%s, a device per rank: gradients stay in device memory)", all[0].why);
    }
    free(all);
    if (*out == DT_TRANSPORT_NCCL) return 0;
    if (strcmp(want, "nccl") == 0)
        return dt_fail("--transport nccl: %s (--transport mpi sends over MPI, staged through the host)", why);
    snprintf(line, n, "mpi (auto: not nccl: %s)", why);
    return 0;
}

typedef struct {
    dt_backend *be;
    const unsigned char *id;
    int nranks, rank;
    void **net;
} create_args;

static int create(void *p)
{
    create_args *a = p;
    return a->be->net_create(a->be, a->id, a->nranks, a->rank, a->net);
}

int devnet_open(dt_comm *c, dt_backend *be, void **net)
{
    unsigned char id[DT_NET_ID_BYTES] = {0};
    int rc = comm_rank(c) == 0 ? be->net_id(be, id) : 0;
    /* every rank learns whether rank 0 has an id before waiting for it */
    if (comm_agree(c, rc != 0) >= 0) return rc != 0 ? -1 : dt_fail("rank 0 could not make a communicator's id");
    if (comm_bcast(c, id, sizeof id, 0) != 0) return -1;
    /* blocks until every rank joins (ncclCommInitRank): a rank stopped meanwhile ends the job */
    create_args a = {be, id, comm_size(c), comm_rank(c), net};
    rc = comm_bounded(c, "the device communicator's creation", create, &a);
    int bad = comm_agree(c, rc != 0);
    if (bad < 0) return 0;
    if (rc == 0) {
        be->net_free(be, *net);
        *net = NULL;
        return dt_fail("rank %d could not join the device communicator", bad);
    }
    return -1;
}

void devnet_close(dt_backend *be, void *net)
{
    if (net) be->net_free(be, net);
}

int devnet_move(dt_comm *c, dt_backend *be, void *net, void *buf, size_t bytes, int peer, int send, dt_times *t)
{
    double t0 = dt_now();
    if (be->net_sendrecv(be, net, send ? buf : NULL, send ? bytes : 0, peer, send ? NULL : buf, send ? 0 : bytes,
                         peer) != 0 ||
        be->net_wait(be, net, comm_timeout(c)) != 0)
        return -1;
    t->comm += dt_now() - t0;
    *(send ? &t->bytes_sent : &t->bytes_recv) += (double)bytes;
    return 0;
}
