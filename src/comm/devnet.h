/* devnet — --transport: how gradients that live in a device's memory travel between ranks.
 *
 * Two transports. mpi: the host's (transport.h): device memory is staged through page-locked host
 * buffers and sent by the MPI library. nccl: the device backend's own collectives on device memory
 * (NCCL on CUDA, backend.h's net_* ops): nothing crosses to the host. NCCL needs a device per rank,
 * so the choice is collective: every rank says which device it runs on and whether it can, and all
 * take the same transport. A mode that cannot send over nccl says why (its device_net hook).
 * A communicator is made from an id rank 0 draws and broadcasts over MPI.
 */
#ifndef DT_DEVNET_H
#define DT_DEVNET_H

#include <stddef.h>

#include "../engine/engine.h"
#include "../stats.h"
#include "transport.h"

enum { DT_TRANSPORT_MPI = 0, DT_TRANSPORT_NCCL = 1 };

/* Collective. want: "mpi", "nccl" or "auto"; mode_why: "" where the mode can send over the device's
 * transport, else why not. Sets *out, and line to the banner's words ("nccl (NCCL 2.28.9, a GPU per
 * rank)", "mpi (auto: ranks 0 and 1 share GPU-...)"). "nccl" that cannot be: -1 and why, on every
 * rank. */
int devnet_choose(dt_comm *c, dt_backend *be, const char *want, const char *mode_why, int *out, char *line, size_t n);
/* Collective over c: a communicator of be's between c's ranks (rank 0 draws the id and broadcasts it). */
int devnet_open(dt_comm *c, dt_backend *be, void **net);
void devnet_close(dt_backend *be, void *net);
/* One transfer over a communicator of be's, done when it returns (or after c's --comm-timeout): the
 * bytes at buf to rank peer (send) or from it into buf; its seconds go to t->comm, its bytes to
 * t->bytes_sent or t->bytes_recv. */
int devnet_move(dt_comm *c, dt_backend *be, void *net, void *buf, size_t bytes, int peer, int send, dt_times *t);

#endif
