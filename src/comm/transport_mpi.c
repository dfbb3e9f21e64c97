/* comm.h over MPI. Errors are returned (MPI_ERRORS_RETURN), with MPI's own error string. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"
#include "transport.h"

struct dt_comm {
    MPI_Comm world, local;
    int rank, size, local_rank, local_size;
    int we_initialized, thread_multiple, is_dup;
    double sent, recvd;
    MPI_Request req[DT_COMM_MAX_REQ];
    unsigned char req_used[DT_COMM_MAX_REQ], req_is_recv[DT_COMM_MAX_REQ];
};

static int mpi_fail(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    msg[len] = 0;
    return dt_fail("MPI: %s failed: %s", what, msg);
}

#define MPI_CHECK(call, what)                                                                                          \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, what);                                                            \
    } while (0)

int comm_init(int *argc, char ***argv, dt_comm **out)
{
    dt_comm *c = calloc(1, sizeof *c);
    int inited = 0;
    if (!c) return dt_fail("out of memory");
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        /* the comm thread of pipelined modes calls MPI while the compute thread runs */
        if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
            free(c);
            return dt_fail("MPI: MPI_Init_thread failed");
        }
        c->we_initialized = 1;
        c->thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    } else {
        int provided;
        MPI_Query_thread(&provided);
        c->thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->world);
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &c->local);
    MPI_Comm_rank(c->local, &c->local_rank);
    MPI_Comm_size(c->local, &c->local_size);
    *out = c;
    return 0;
}

void comm_finalize(dt_comm *c)
{
    if (!c) return;
    int init = c->we_initialized;
    comm_free(c);
    if (init) MPI_Finalize();
}

int comm_dup(dt_comm *c, dt_comm **out)
{
    dt_comm *d = calloc(1, sizeof *d);
    if (!d) return dt_fail("out of memory");
    *d = *c;
    d->we_initialized = 0;
    d->is_dup = 1;
    d->sent = d->recvd = 0;
    memset(d->req_used, 0, sizeof d->req_used);
    if (MPI_Comm_dup(c->world, &d->world) != MPI_SUCCESS) {
        free(d);
        return dt_fail("MPI: MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(d->world, MPI_ERRORS_RETURN);
    d->local = MPI_COMM_NULL;
    *out = d;
    return 0;
}

void comm_free(dt_comm *c)
{
    if (!c) return;
    for (int i = 0; i < DT_COMM_MAX_REQ; i++)
        if (c->req_used[i]) {
            MPI_Cancel(&c->req[i]);
            MPI_Request_free(&c->req[i]);
        }
    if (c->local != MPI_COMM_NULL && !c->is_dup) MPI_Comm_free(&c->local);
    MPI_Comm_free(&c->world);
    free(c);
}

int comm_thread_multiple(const dt_comm *c) { return c->thread_multiple; }

void comm_abort(dt_comm *c, int code)
{
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(c ? c->world : MPI_COMM_WORLD, code);
}

int comm_rank(const dt_comm *c) { return c->rank; }
int comm_size(const dt_comm *c) { return c->size; }
int comm_local_size(const dt_comm *c) { return c->local_size; }
int comm_local_rank(const dt_comm *c) { return c->local_rank; }

const char *comm_library(void)
{
    static char buf[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (!buf[0]) {
        MPI_Get_library_version(buf, &len);
        buf[len] = 0;
        char *cut = strpbrk(buf, ",\n"); /* "Open MPI v4.1.4, package: ..." → "Open MPI v4.1.4" */
        if (cut) *cut = 0;
    }
    return buf;
}

int comm_agree(dt_comm *c, int failed)
{
    int mine = failed ? c->rank : c->size, lowest = c->size;
    if (MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, c->world) != MPI_SUCCESS) return c->rank;
    return lowest == c->size ? -1 : lowest;
}

/* the line of text containing byte offset i, without its newline */
static void line_at(const char *text, size_t i, char *out, size_t n)
{
    size_t a = i, b = i;
    while (a > 0 && text[a - 1] != '\n') a--;
    while (text[b] && text[b] != '\n') b++;
    snprintf(out, n, "%.*s", (int)(b - a), text + a);
}

int comm_check_same(dt_comm *c, const char *text, const char *what)
{
    long len = (long)strlen(text), len0 = len;
    char *ref;
    MPI_CHECK(MPI_Bcast(&len0, 1, MPI_LONG, 0, c->world), "MPI_Bcast");
    if (!(ref = malloc((size_t)len0 + 1))) return dt_fail("out of memory");
    if (c->rank == 0) memcpy(ref, text, (size_t)len0 + 1);
    if (MPI_Bcast(ref, (int)len0 + 1, MPI_CHAR, 0, c->world) != MPI_SUCCESS) {
        free(ref);
        return dt_fail("MPI: MPI_Bcast of the %s failed", what);
    }
    if (strcmp(ref, text) != 0) {
        size_t i = 0;
        char a[256], b[256];
        while (ref[i] && ref[i] == text[i]) i++;
        line_at(ref, i < (size_t)len0 ? i : (size_t)len0, a, sizeof a);
        line_at(text, i < (size_t)len ? i : (size_t)len, b, sizeof b);
        dt_fail("the %s differs from rank 0's (rank 0: '%s', this rank: '%s'); every rank must be started with the "
                "same options",
                what, a[0] ? a : "(end)", b[0] ? b : "(end)");
        free(ref);
        return -1;
    }
    free(ref);
    return 0;
}

static int allreduce(dt_comm *c, void *buf, size_t n, MPI_Datatype type, size_t elem, MPI_Op op)
{
    char *p = buf;
    while (n > 0) {
        int chunk = n > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)n;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, chunk, type, op, c->world), "MPI_Allreduce");
        p += (size_t)chunk * elem;
        n -= (size_t)chunk;
    }
    return 0;
}

int comm_allreduce_sum_f32(dt_comm *c, float *buf, size_t n) { return allreduce(c, buf, n, MPI_FLOAT, 4, MPI_SUM); }
int comm_allreduce_sum_f64(dt_comm *c, double *buf, size_t n) { return allreduce(c, buf, n, MPI_DOUBLE, 8, MPI_SUM); }
int comm_allreduce_max_f64(dt_comm *c, double *buf, size_t n) { return allreduce(c, buf, n, MPI_DOUBLE, 8, MPI_MAX); }

int comm_bcast(dt_comm *c, void *buf, size_t bytes, int root)
{
    char *p = buf;
    while (bytes > 0) {
        int chunk = bytes > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)bytes;
        MPI_CHECK(MPI_Bcast(p, chunk, MPI_BYTE, root, c->world), "MPI_Bcast");
        p += chunk;
        bytes -= (size_t)chunk;
    }
    return 0;
}

int comm_barrier(dt_comm *c)
{
    MPI_CHECK(MPI_Barrier(c->world), "MPI_Barrier");
    return 0;
}

static int check_bytes(size_t bytes)
{
    if (bytes > (size_t)INT_MAX) return dt_fail("message of %zu bytes is larger than MPI's int count", bytes);
    return 0;
}

int comm_send(dt_comm *c, const void *buf, size_t bytes, int dst, int tag)
{
    if (check_bytes(bytes) != 0) return -1;
    MPI_CHECK(MPI_Send(buf, (int)bytes, MPI_BYTE, dst, tag, c->world), "MPI_Send");
    c->sent += (double)bytes;
    return 0;
}

int comm_recv(dt_comm *c, void *buf, size_t bytes, int src, int tag, int *from, size_t *got)
{
    MPI_Status st;
    int n;
    if (check_bytes(bytes) != 0) return -1;
    MPI_CHECK(MPI_Recv(buf, (int)bytes, MPI_BYTE, src == DT_COMM_ANY ? MPI_ANY_SOURCE : src, tag, c->world, &st),
              "MPI_Recv");
    MPI_Get_count(&st, MPI_BYTE, &n);
    c->recvd += n;
    if (from) *from = st.MPI_SOURCE;
    if (got) *got = (size_t)n;
    return 0;
}

int comm_sendrecv(dt_comm *c, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src, int tag)
{
    MPI_Status st;
    int n;
    if (check_bytes(sbytes) != 0 || check_bytes(rbytes) != 0) return -1;
    MPI_CHECK(MPI_Sendrecv(sbuf, (int)sbytes, MPI_BYTE, dst, tag, rbuf, (int)rbytes, MPI_BYTE, src, tag, c->world, &st),
              "MPI_Sendrecv");
    MPI_Get_count(&st, MPI_BYTE, &n);
    c->sent += (double)sbytes;
    c->recvd += n;
    return 0;
}

static int req_slot(dt_comm *c)
{
    for (int i = 0; i < DT_COMM_MAX_REQ; i++)
        if (!c->req_used[i]) return i;
    return dt_fail("more than %d messages in flight", DT_COMM_MAX_REQ);
}

int comm_isend(dt_comm *c, const void *buf, size_t bytes, int dst, int tag, int *req)
{
    int i = req_slot(c);
    if (i < 0 || check_bytes(bytes) != 0) return -1;
    MPI_CHECK(MPI_Isend(buf, (int)bytes, MPI_BYTE, dst, tag, c->world, &c->req[i]), "MPI_Isend");
    c->req_used[i] = 1;
    c->req_is_recv[i] = 0;
    c->sent += (double)bytes;
    *req = i;
    return 0;
}

int comm_irecv(dt_comm *c, void *buf, size_t bytes, int src, int tag, int *req)
{
    int i = req_slot(c);
    if (i < 0 || check_bytes(bytes) != 0) return -1;
    MPI_CHECK(MPI_Irecv(buf, (int)bytes, MPI_BYTE, src == DT_COMM_ANY ? MPI_ANY_SOURCE : src, tag, c->world, &c->req[i]),
              "MPI_Irecv");
    c->req_used[i] = 1;
    c->req_is_recv[i] = 1;
    *req = i;
    return 0;
}

static void finish_req(dt_comm *c, int i, const MPI_Status *st, int *from, size_t *got)
{
    if (c->req_is_recv[i]) {
        int n;
        MPI_Get_count(st, MPI_BYTE, &n);
        c->recvd += n;
        if (from) *from = st->MPI_SOURCE;
        if (got) *got = (size_t)n;
    }
    c->req_used[i] = 0;
}

int comm_wait(dt_comm *c, int req, int *from, size_t *got)
{
    MPI_Status st;
    if (req < 0 || req >= DT_COMM_MAX_REQ || !c->req_used[req]) return dt_fail("internal: wait on a free request %d", req);
    MPI_CHECK(MPI_Wait(&c->req[req], &st), "MPI_Wait");
    finish_req(c, req, &st, from, got);
    return 0;
}

int comm_test(dt_comm *c, int req, int *done)
{
    MPI_Status st;
    if (req < 0 || req >= DT_COMM_MAX_REQ || !c->req_used[req]) return dt_fail("internal: test of a free request %d", req);
    MPI_CHECK(MPI_Test(&c->req[req], done, &st), "MPI_Test");
    if (*done) finish_req(c, req, &st, NULL, NULL);
    return 0;
}

double comm_bytes_sent(const dt_comm *c) { return c->sent; }
double comm_bytes_recv(const dt_comm *c) { return c->recvd; }
