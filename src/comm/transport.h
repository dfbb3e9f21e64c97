/* transport — the ranks of a job and the transport between them (MPI, host memory).
 *
 * Owns the communicators and the rank layout (how many ranks share this host). Gives modes
 * their collectives with errors returned, never aborting on its own, and gives main the two
 * start-up safeguards: every rank agrees whether set-up failed (so one bad rank ends the whole
 * job cleanly instead of leaving the others waiting), and every rank was started with the same
 * configuration. Knows nothing of layers or files.
 */
#ifndef DT_TRANSPORT_H
#define DT_TRANSPORT_H

#include <stddef.h>

typedef struct dt_comm dt_comm;

/* MPI_Init with MPI_THREAD_MULTIPLE where the library offers it (or a single rank without mpirun).
 * It waits for every rank of the job: where they have not all joined after `timeout` seconds (a rank
 * that never started or was stopped), this process says so and exits with status 1; 0: no limit. */
int comm_init(int *argc, char ***argv, double timeout, dt_comm **out);
void comm_finalize(dt_comm *c);
/* Ends every rank of the job at once (an error in the middle of training). */
void comm_abort(dt_comm *c, int code);

int comm_rank(const dt_comm *c);
int comm_size(const dt_comm *c);
/* Ranks on this host, and this rank's index among them. */
int comm_local_size(const dt_comm *c);
int comm_local_rank(const dt_comm *c);
/* "Open MPI v4.1.4" */
const char *comm_library(void);

/* Collective: each rank says whether it failed; returns the lowest failed rank, or -1. */
int comm_agree(dt_comm *c, int failed);
/* Collective: checks that every rank holds the same text (one "key = value" per line). On a
 * difference, the rank that differs from rank 0 gets an error naming the first differing line
 * and -1 is returned there; comm_agree afterwards tells everyone. */
int comm_check_same(dt_comm *c, const char *text, const char *what);

/* In-place sums over all ranks. */
int comm_allreduce_sum_f32(dt_comm *c, float *buf, size_t n);
int comm_allreduce_sum_f64(dt_comm *c, double *buf, size_t n);
int comm_allreduce_max_f64(dt_comm *c, double *buf, size_t n);
int comm_bcast(dt_comm *c, void *buf, size_t bytes, int root);
int comm_barrier(dt_comm *c);
/* Collective: the hosts of the job in rank order, each once with its rank count ("a x2, b x2"). */
int comm_hosts(dt_comm *c, char *buf, size_t n);
/* Collective: how many ranks run on this rank's machine, counted by the kernel's boot id, so that
 * emulated hosts (network namespaces of one machine, tools/netem) count as the one machine they
 * share cores on; where no boot id can be read, the ranks with this rank's host name. *cores (may
 * be NULL): the cores those ranks may run on together, the union of their affinities (mpirun binds
 * each of 2 ranks to a core of its own: 2 cores, where one rank's affinity says 1). */
int comm_machine_ranks(dt_comm *c, int *n, int *cores);
/* This machine's id as comm_machine_ranks counts machines (the boot id, else "host NAME"). */
void comm_machine_id(char *buf, size_t n);
/* What a wait that never ends reports, and when it gives up: seconds (0: never; default 300), the
 * iteration the job is in (-1: not training yet), a label ("mode dsync"). Shared with duplicates. */
void comm_set_timeout(dt_comm *c, double seconds);
double comm_timeout(const dt_comm *c);
void comm_set_iteration(dt_comm *c, long it);
void comm_set_label(dt_comm *c, const char *label);
/* Runs fn(arg), a blocking call into another library that every rank makes together (NCCL's
 * communicator creation), within the timeout: past it, another thread calls the roll, says on
 * stderr which ranks do not answer and ends the job (comm_abort, exit 1). Returns fn's result. */
int comm_bounded(dt_comm *c, const char *op, int (*fn)(void *), void *arg);
/* 1 once a wait gave up: the ranks may be anywhere, so the job can only be aborted. */
int comm_broken(const dt_comm *c);
/* Whether several threads may call the transport at once (needed by modes with a comm thread). */
int comm_thread_multiple(const dt_comm *c);

/* Waits on c spin (the default: the lowest latency, a core busy) or, on, poll with short sleeps
 * (all the time, or only while *only_while is nonzero): for a communication thread whose spinning
 * would take the core its compute thread needs while that computes. */
void comm_set_sleepy(dt_comm *c, int on, const int *only_while);

/* A duplicate of c: the same ranks, a separate message space, its own byte counters; what a
 * communication thread uses so its messages never meet the compute thread's. */
int comm_dup(dt_comm *c, dt_comm **out);
void comm_free(dt_comm *c);

/* Point to point. Requests are small integers (a pool per dt_comm, DT_COMM_MAX_REQ of them). */
#define DT_COMM_ANY (-1)
#define DT_COMM_MAX_REQ 4096
int comm_send(dt_comm *c, const void *buf, size_t bytes, int dst, int tag);
/* Receives up to `bytes` from src (or DT_COMM_ANY); from and got may be NULL. */
int comm_recv(dt_comm *c, void *buf, size_t bytes, int src, int tag, int *from, size_t *got);
int comm_sendrecv(dt_comm *c, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src, int tag);
int comm_isend(dt_comm *c, const void *buf, size_t bytes, int dst, int tag, int *req);
int comm_irecv(dt_comm *c, void *buf, size_t bytes, int src, int tag, int *req);
/* Starts an elementwise max of n ints over all ranks in place, completed by comm_wait: a collective,
 * so every rank starts the same ones in the same order. */
int comm_iallreduce_max_int(dt_comm *c, int *buf, int n, int *req);
/* Waits for one request; for a receive, from and got (may be NULL) say from whom and how much. */
int comm_wait(dt_comm *c, int req, int *from, size_t *got);
/* Waits for one of n requests (entries < 0 are skipped; at least one is not), releases it and
 * says which: its index in reqs. */
int comm_wait_any(dt_comm *c, const int *reqs, int n, int *which);
/* 1 if done (and then the request is released), 0 if not yet. */
int comm_test(dt_comm *c, int req, int *done);

/* Bytes this handle has sent and received (payload), since it was created. */
double comm_bytes_sent(const dt_comm *c);
double comm_bytes_recv(const dt_comm *c);

#endif
