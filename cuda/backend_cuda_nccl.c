/* backend_cuda_nccl — the NCCL transport of the CUDA backend (backend.h's net_* ops, --transport nccl).
 *
 * libnccl.so.2 is opened at the first use (dlopen), not linked: the module, and training over MPI,
 * still load where NCCL is missing, and `--transport nccl` says what is. Each communicator belongs to
 * one GPU and is used by one thread; its transfers run on the stream of the queue they are called
 * through, so they are ordered with that queue's kernels (a ring's encode before its send). net_wait
 * polls the stream and the communicator's asynchronous error, so that a rank that died or stopped
 * ends in an error after the timeout instead of a wait that never returns (the communicator is then
 * aborted, as NCCL requires).
 */
#include "backend_cuda.h"

#if DT_NCCL_BUILT

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nccl.h declares some functions as f() in C */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "util.h"

static struct {
    void *lib;
    char why[256];
    int version;
    ncclResult_t (*get_version)(int *);
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_abort)(ncclComm_t);
    ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t *);
    const char *(*get_error_string)(ncclResult_t);
    const char *(*get_last_error)(ncclComm_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
} nc;
static pthread_once_t nc_once = PTHREAD_ONCE_INIT;

static void nc_load(void)
{
    const char *names[] = {"libnccl.so.2", "libnccl.so"};
    for (size_t i = 0; i < DT_ARRAY_LEN(names) && !nc.lib; i++) nc.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!nc.lib) {
        snprintf(nc.why, sizeof nc.why, "NCCL is not installed here: libnccl.so.2 not found (%s)", dlerror());
        return;
    }
#define SYM(field, name)                                                                                              \
    if (!(*(void **)&nc.field = dlsym(nc.lib, name))) {                                                                \
        snprintf(nc.why, sizeof nc.why, "libnccl.so.2 lacks %s: NCCL 2.7 or newer is needed", name);                  \
        dlclose(nc.lib);                                                                                               \
        nc.lib = NULL;                                                                                                 \
        return;                                                                                                        \
    }
    SYM(get_version, "ncclGetVersion");
    SYM(get_unique_id, "ncclGetUniqueId");
    SYM(comm_init_rank, "ncclCommInitRank");
    SYM(comm_destroy, "ncclCommDestroy");
    SYM(comm_abort, "ncclCommAbort");
    SYM(comm_get_async_error, "ncclCommGetAsyncError");
    SYM(get_error_string, "ncclGetErrorString");
    SYM(group_start, "ncclGroupStart");
    SYM(group_end, "ncclGroupEnd");
    SYM(send, "ncclSend");
    SYM(recv, "ncclRecv");
    SYM(all_reduce, "ncclAllReduce");
    SYM(all_gather, "ncclAllGather");
#undef SYM
    *(void **)&nc.get_last_error = dlsym(nc.lib, "ncclGetLastError"); /* 2.13 and newer */
    if (nc.get_version(&nc.version) != ncclSuccess) nc.version = 0;
}

/* the library's version as "2.28.9" (codes: 2.9 and newer major*10000 + minor*100 + patch, older *1000) */
static void nc_version(char *buf, size_t n)
{
    int v = nc.version;
    if (v >= 20900) snprintf(buf, n, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else snprintf(buf, n, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}

typedef struct cuda_net {
    ncclComm_t comm;
    int dev, rank, nranks, aborted;
} cuda_net;

static int nc_fail(const char *call, const char *what, ncclResult_t e, cuda_net *net)
{
    const char *last = net && nc.get_last_error ? nc.get_last_error(net->comm) : NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s%s", nc.get_error_string(e), last && *last ? ": " : "", last ? last : "");
    return cuda_fail("NCCL", call, what, msg);
}

#define NC(call, what, net)                                                                                            \
    do {                                                                                                               \
        ncclResult_t e_ = (call);                                                                                      \
        if (e_ != ncclSuccess) return nc_fail(#call, what, e_, net);                                                  \
    } while (0)

int cuda_net_available(dt_backend *be, char *why, size_t n)
{
    (void)be;
    pthread_once(&nc_once, nc_load);
    if (!nc.lib) {
        snprintf(why, n, "%s", nc.why);
        return 0;
    }
    char v[32];
    nc_version(v, sizeof v);
    snprintf(why, n, "NCCL %s", v);
    return 1;
}

static int nc_ready(dt_backend *be)
{
    char why[256];
    return cuda_net_available(be, why, sizeof why) ? 0 : dt_fail("%s", why);
}

int cuda_net_id(dt_backend *be, void *id)
{
    if (nc_ready(be) != 0) return -1;
    ncclUniqueId u;
    NC(nc.get_unique_id(&u), "a communicator's id", NULL);
    memcpy(id, &u, sizeof u);
    return 0;
}

int cuda_net_create(dt_backend *be, const void *id, int nranks, int rank, void **out)
{
    if (nc_ready(be) != 0 || cuda_enter(be) != 0) return -1;
    cuda_net *net = calloc(1, sizeof *net);
    if (!net) return dt_fail("out of memory");
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    net->dev = cuda_of(be)->dev, net->rank = rank, net->nranks = nranks;
    ncclResult_t e = nc.comm_init_rank(&net->comm, nranks, u, rank);
    if (e != ncclSuccess) {
        char what[96];
        snprintf(what, sizeof what, "rank %d of %d joining a communicator on GPU %d", rank, nranks, net->dev);
        free(net);
        return nc_fail("ncclCommInitRank", what, e, NULL);
    }
    *out = net;
    return 0;
}

void cuda_net_free(dt_backend *be, void *p)
{
    cuda_net *net = p;
    if (!net) return;
    cudaSetDevice(cuda_of(be)->dev);
    if (!net->aborted) nc.comm_destroy(net->comm);
    free(net);
}

int cuda_net_sendrecv(dt_backend *q, void *p, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes,
                      int src)
{
    cuda_net *net = p;
    cudaStream_t s = cuda_of(q)->stream;
    char what[96];
    if (cuda_enter(q) != 0) return -1;
    snprintf(what, sizeof what, "a ring step: %zu bytes to rank %d, %zu from rank %d", sbytes, dst, rbytes, src);
    if (net->aborted) return dt_fail("NCCL: %s on a communicator aborted before", what);
    NC(nc.group_start(), what, net);
    /* the group ends whatever failed in it: an open group would take in the thread's later calls */
    ncclResult_t e = sbytes ? nc.send(sbuf, sbytes, ncclInt8, dst, net->comm, s) : ncclSuccess;
    if (e == ncclSuccess && rbytes) e = nc.recv(rbuf, rbytes, ncclInt8, src, net->comm, s);
    ncclResult_t end = nc.group_end();
    if (e != ncclSuccess) return nc_fail(sbytes && rbytes ? "ncclSend, ncclRecv" : sbytes ? "ncclSend" : "ncclRecv",
                                         what, e, net);
    NC(end, what, net);
    return 0;
}

/* a sum over the ranks of n values of type t in place */
static int allreduce_of(dt_backend *q, cuda_net *net, void *x, size_t n, ncclDataType_t t, const char *of)
{
    char what[64];
    if (cuda_enter(q) != 0) return -1;
    snprintf(what, sizeof what, "an allreduce of %zu %s", n, of);
    if (net->aborted) return dt_fail("NCCL: %s on a communicator aborted before", what);
    NC(nc.all_reduce(x, x, n, t, ncclSum, net->comm, cuda_of(q)->stream), what, net);
    return 0;
}

int cuda_net_allreduce(dt_backend *q, void *p, float *x, size_t n)
{
    return allreduce_of(q, p, x, n, ncclFloat32, "floats");
}

int cuda_net_allreduce_i8(dt_backend *q, void *p, int8_t *x, size_t n)
{
    return allreduce_of(q, p, x, n, ncclInt8, "int8 values");
}

int cuda_net_allgather(dt_backend *q, void *p, const void *sbuf, size_t bytes, void *rbuf)
{
    cuda_net *net = p;
    char what[64];
    if (cuda_enter(q) != 0) return -1;
    snprintf(what, sizeof what, "an allgather of %zu bytes a rank", bytes);
    if (net->aborted) return dt_fail("NCCL: %s on a communicator aborted before", what);
    NC(nc.all_gather(sbuf, rbuf, bytes, ncclInt8, net->comm, cuda_of(q)->stream), what, net);
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int cuda_net_wait(dt_backend *q, void *p, double timeout)
{
    cuda_net *net = p;
    cudaStream_t s = cuda_of(q)->stream;
    double t0 = now();
    long polls = 0;
    if (cuda_enter(q) != 0) return -1;
    if (net->aborted) return dt_fail("NCCL: a wait on a communicator aborted before");
    for (;;) {
        cudaError_t ce = cudaStreamQuery(s);
        if (ce == cudaSuccess) return 0;
        /* cleared either way: a query's "not ready" stays the thread's last error otherwise, and the next
         * kernel's launch check (cudaGetLastError, CUB's cudaPeekAtLastError) would fail with it */
        (void)cudaGetLastError();
        if (ce != cudaErrorNotReady)
            return cuda_fail("CUDA", "cudaStreamQuery", "waiting for NCCL", cudaGetErrorString(ce));
        ncclResult_t ae = ncclSuccess;
        if (nc.comm_get_async_error(net->comm, &ae) == ncclSuccess && ae != ncclSuccess && ae != ncclInProgress) {
            nc.comm_abort(net->comm);
            net->aborted = 1;
            return nc_fail("ncclCommGetAsyncError", "a transfer of the communicator (a rank died?)", ae, NULL);
        }
        if (timeout > 0 && now() - t0 > timeout) {
            nc.comm_abort(net->comm);
            net->aborted = 1;
            return dt_fail("NCCL: rank %d of %d: no transfer finished in %.0f s (--comm-timeout): a rank stopped or "
                           "died; the communicator was aborted",
                           net->rank, net->nranks, timeout);
        }
        if (++polls > 1000) { /* after a short spin, poll gently: the compute thread may need the core */
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

#endif
