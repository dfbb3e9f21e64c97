/* transport.h over MPI. Errors are returned (MPI_ERRORS_RETURN), with MPI's own error string.
 *
 * Every operation that waits for other ranks (messages and collectives alike) is started
 * non-blocking and waited for here, in one loop with a deadline (--comm-timeout): a peer that is
 * stopped or wedged ends the job with a message naming it, the operation and the iteration,
 * instead of leaving every other rank waiting forever. The loop polls MPI (as MPI_Wait would)
 * and yields the core once a wait has lasted a millisecond.
 *
 * The rank a wait is for is not always the culprit: in a ring, a rank waits for its neighbour,
 * which waits for the stopped rank. So a rank whose wait gives up calls the roll: it pings every
 * other rank on a communicator of its own and names those that do not answer within a grace
 * period. Every wait loop answers pings, so every rank that waits (as all do soon, when one is
 * stopped) answers; a stopped rank does not. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../util.h"
#include "transport.h"

/* How a wait of a sleepy communicator (a communication thread's beside compute) polls: it spins
 * for WAIT_SPIN_S, then sleeps WAIT_SLEEP_US between polls. Open MPI's TCP transport moves data
 * only inside MPI calls, so a poll every 50 us keeps a 1 Gbit/s link busy (6 KB per interval
 * against socket buffers of hundreds of KB) while leaving the core to compute. */
#define WAIT_SPIN_S 20e-6
#define WAIT_SLEEP_US 50

/* what a timed-out wait reports: shared by a communicator and its duplicates */
typedef struct context {
    double timeout; /* seconds; 0: wait forever */
    volatile long iteration; /* the train loop's, -1 before training */
    const char *label;       /* what the job does ("mode dsync") */
    volatile int broken;     /* a wait gave up: the ranks no longer agree on where they are */
    MPI_Comm health;         /* roll calls only */
    int *pong;               /* per rank: the answer to its ping, this rank's stall in ms (answer_pings) */
} context;

/* A rank whose wait went this long between two looks (ms) was not running: stopped (SIGSTOP, and
 * resumed as the job ends: Open MPI sends SIGCONT before it kills) or starved of CPU for that long.
 * Its answer to a roll call does not count as answering. */
#define STALL_MS 1000

enum { TAG_PING = 1, TAG_PONG = 2 };

struct dt_comm {
    MPI_Comm world, local;
    int rank, size, local_rank, local_size;
    int we_initialized, thread_multiple, is_dup;
    int sleepy; /* waits poll MPI every WAIT_SLEEP_US once they have spun WAIT_SPIN_S (comm_set_sleepy) */
    const int *sleep_while; /* ... and only while this is nonzero (NULL: always) */
    context *ctx;
    double sent, recvd;
    MPI_Request req[DT_COMM_MAX_REQ];
    unsigned char req_used[DT_COMM_MAX_REQ], req_is_recv[DT_COMM_MAX_REQ];
    int req_peer[DT_COMM_MAX_REQ];
    const char *req_what[DT_COMM_MAX_REQ];
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

/* MPI_Init and the communicators made from the world: comm_init, under its limit */
static int init(int *argc, char ***argv, dt_comm **out)
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
    if (!(c->ctx = calloc(1, sizeof *c->ctx))) {
        free(c);
        return dt_fail("out of memory");
    }
    c->ctx->timeout = 300.0;
    c->ctx->iteration = -1;
    c->ctx->label = "start-up";
    if (!(c->ctx->pong = calloc((size_t)c->size, sizeof *c->ctx->pong))) {
        free(c->ctx), free(c);
        return dt_fail("out of memory");
    }
    MPI_Comm_dup(c->world, &c->ctx->health);
    MPI_Comm_set_errhandler(c->ctx->health, MPI_ERRORS_RETURN);
    *out = c;
    return 0;
}

void comm_set_timeout(dt_comm *c, double seconds) { c->ctx->timeout = seconds; }
double comm_timeout(const dt_comm *c) { return c->ctx->timeout; }
void comm_set_iteration(dt_comm *c, long it) { c->ctx->iteration = it; }
void comm_set_label(dt_comm *c, const char *label) { c->ctx->label = label; }
int comm_broken(const dt_comm *c) { return c->ctx->broken; }

/* Answers every ping that has arrived (from a rank calling the roll) with `stalled`, the seconds
 * this rank's wait went without a look before this one. Matched probes keep two threads that both
 * answer from taking each other's message. */
static void answer_pings(context *x, double stalled)
{
    int ms = stalled * 1e3 < 1e9 ? (int)(stalled * 1e3) : 1000000000;
    for (;;) {
        int flag = 0, from;
        MPI_Message msg;
        MPI_Status st;
        MPI_Request r;
        if (MPI_Improbe(MPI_ANY_SOURCE, TAG_PING, x->health, &flag, &msg, &st) != MPI_SUCCESS || !flag) return;
        if (MPI_Mrecv(&from, 1, MPI_INT, &msg, &st) != MPI_SUCCESS) return;
        x->pong[st.MPI_SOURCE] = ms; /* a send buffer that outlives the freed request */
        if (MPI_Isend(&x->pong[st.MPI_SOURCE], 1, MPI_INT, st.MPI_SOURCE, TAG_PONG, x->health, &r) == MPI_SUCCESS)
            MPI_Request_free(&r);
    }
}

/* Pings every other rank and waits up to `grace` seconds for the answers (answering pings
 * meanwhile); writes the ranks that did not answer, or answered after a stall (STALL_MS), ("rank 2",
 * "ranks 2, 5") to out. Returns their number, or -1 when the roll could not be called. */
static int roll_call(dt_comm *c, double grace, char *out, size_t n)
{
    static int me; /* a send buffer that outlives the freed requests */
    context *x = c->ctx;
    int size = c->size, silent = 0;
    me = c->rank;
    MPI_Request *r = calloc((size_t)size * 2, sizeof *r);
    int *ans = calloc((size_t)size, sizeof *ans), *got = calloc((size_t)size, sizeof *got);
    out[0] = 0;
    if (!r || !ans || !got) {
        free(r), free(ans), free(got);
        return -1;
    }
    for (int p = 0; p < size; p++) {
        r[2 * p] = r[2 * p + 1] = MPI_REQUEST_NULL;
        if (p == me) continue;
        MPI_Irecv(&ans[p], 1, MPI_INT, p, TAG_PONG, x->health, &r[2 * p]);
        MPI_Isend(&me, 1, MPI_INT, p, TAG_PING, x->health, &r[2 * p + 1]);
    }
    got[me] = 1;
    for (double t0 = dt_now(), left = size - 1; left > 0 && dt_now() - t0 < grace;) {
        answer_pings(x, 0.0);
        for (int p = 0; p < size; p++) {
            int flag = 0;
            if (got[p]) continue;
            MPI_Test(&r[2 * p], &flag, MPI_STATUS_IGNORE);
            if (flag) got[p] = ans[p] >= STALL_MS ? 2 : 1, left--; /* 2: it answers, but was stopped */
        }
        sched_yield();
    }
    char list[160] = "";
    for (int p = 0; p < size; p++) {
        if (got[p] == 1) continue;
        size_t len = strlen(list);
        if (len + 16 < sizeof list) snprintf(list + len, sizeof list - len, "%s%d", silent ? ", " : "", p);
        else if (!strstr(list, "...")) strcat(list, ", ...");
        silent++;
    }
    if (silent > 0) snprintf(out, n, "%s %s", silent == 1 ? "rank" : "ranks", list);
    for (int p = 0; p < size; p++) {
        if (p == me) continue;
        if (!got[p]) {
            MPI_Cancel(&r[2 * p]);
            MPI_Wait(&r[2 * p], MPI_STATUS_IGNORE);
        }
        MPI_Request_free(&r[2 * p + 1]);
    }
    free(r), free(ans), free(got);
    return silent;
}

/* A wait of `waited` seconds for `who` in `op` that gives up: marks the job broken, calls the roll
 * and returns an error naming the operation, where the job was and the ranks that do not answer. */
static int give_up(dt_comm *c, double waited, const char *who, const char *op)
{
    char when[64] = "", silent[200];
    if (c->ctx->iteration >= 0) snprintf(when, sizeof when, ", iteration %ld", c->ctx->iteration + 1);
    c->ctx->broken = 1;
    /* a rank that computes answers once it waits too: give it up to the timeout, at most 10 s */
    double grace = c->ctx->timeout < 10.0 ? c->ctx->timeout : 10.0;
    int k = c->size > 1 ? roll_call(c, grace < 1.0 ? 1.0 : grace, silent, sizeof silent) : 0;
    const char *why = k > 0    ? silent
                      : k == 0 ? "every rank answers a ping, so the ranks wait for each other in different operations"
                               : "is a rank stopped, wedged or gone";
    return dt_fail("waited %.0f s for %s in %s (%s%s) and gave up (--comm-timeout %g): %s%s", waited, who, op,
                   c->ctx->label, when, c->ctx->timeout, why,
                   k > 0   ? (k == 1 ? " does not answer (stopped, wedged or gone?)"
                                     : " do not answer (stopped, wedged or gone?)")
                   : k < 0 ? "?"
                           : "");
}

/* Waits for all n requests, or with `any` for one of them (its index there); on the deadline,
 * gives up (give_up) naming the peer (-1: a collective of all ranks, or several peers). */
static int wait_reqs(dt_comm *c, int n, MPI_Request *r, MPI_Status *st, int *any, const char *op, int peer)
{
    int done = 0, rc = any ? MPI_Testany(n, r, any, &done, st) : MPI_Testall(n, r, &done, st);
    double t0 = 0.0, prev = 0.0;
    for (unsigned spins = 0; rc == MPI_SUCCESS && !done; spins++) {
        if ((spins & 127) == 127) {
            double now = dt_now();
            if (t0 == 0.0) t0 = now;
            if (c->size > 1) answer_pings(c->ctx, prev > 0.0 ? now - prev : 0.0);
            prev = now;
            if (c->ctx->timeout > 0 && now - t0 > c->ctx->timeout) {
                char who[48];
                if (peer >= 0) snprintf(who, sizeof who, "rank %d", peer);
                else snprintf(who, sizeof who, "the other ranks");
                return give_up(c, now - t0, who, op);
            }
            int sleep = c->sleepy && (!c->sleep_while || __atomic_load_n(c->sleep_while, __ATOMIC_RELAXED));
            if (sleep && now - t0 > WAIT_SPIN_S) {
                struct timespec ts = {0, 1000L * WAIT_SLEEP_US};
                nanosleep(&ts, NULL); /* leave the core to the compute thread, wake up before it can miss much */
            } else if (now - t0 > 1e-3)
                sched_yield(); /* a long wait: let compute threads have the core */
        }
        rc = any ? MPI_Testany(n, r, any, &done, st) : MPI_Testall(n, r, &done, st);
    }
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, op);
}

/* comm_bounded's watch: answers pings while the call runs; past the deadline, gives up and ends
 * the job from this thread (the calling one is inside the other library, out of reach). Without a
 * communicator (MPI's own start-up: nothing to ping or abort with) it ends this process. */
typedef struct {
    dt_comm *c;
    double timeout; /* where c is NULL; else c's, as it is now */
    const char *op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} bound;

static void *bound_watch(void *arg)
{
    bound *b = arg;
    dt_comm *c = b->c;
    double t0 = dt_now();
    pthread_mutex_lock(&b->mu);
    while (!b->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L; /* a ping waits at most this long for its answer */
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        if (b->done) break;
        pthread_mutex_unlock(&b->mu);
        double now = dt_now();
        if (!c && now - t0 > b->timeout) {
            fprintf(stderr,
                    "dtrain: %s did not finish within %g s (--comm-timeout): a rank of the job never started or was "
                    "stopped (the others wait for it in MPI_Init)\n",
                    b->op, b->timeout);
            _exit(1);
        }
        if (c && now - t0 > c->ctx->timeout) {
            if (c->thread_multiple) give_up(c, now - t0, "the other ranks", b->op);
            else
                dt_fail("waited %.0f s for the other ranks in %s (%s) and gave up (--comm-timeout %g): is a rank "
                        "stopped, wedged or gone?",
                        now - t0, b->op, c->ctx->label, c->ctx->timeout);
            fprintf(stderr, "dtrain: [rank %d] %s\n", c->rank, dt_errmsg());
            comm_abort(c, 1);
        }
        if (c && c->thread_multiple && c->size > 1) answer_pings(c->ctx, 0.0);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static int run_bounded(dt_comm *c, double timeout, const char *op, int (*fn)(void *), void *arg)
{
    bound b = {.c = c, .timeout = timeout, .op = op};
    pthread_t t;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    if (pthread_create(&t, NULL, bound_watch, &b) != 0) {
        pthread_mutex_destroy(&b.mu);
        pthread_cond_destroy(&b.cv);
        return dt_fail("%s: cannot start a thread to bound it by --comm-timeout", op);
    }
    int rc = fn(arg);
    pthread_mutex_lock(&b.mu);
    b.done = 1;
    pthread_cond_signal(&b.cv);
    pthread_mutex_unlock(&b.mu);
    pthread_join(t, NULL);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    return rc;
}

int comm_bounded(dt_comm *c, const char *op, int (*fn)(void *), void *arg)
{
    return c->ctx->timeout > 0 ? run_bounded(c, c->ctx->timeout, op, fn, arg) : fn(arg);
}

typedef struct {
    int *argc;
    char ***argv;
    dt_comm **out;
} init_args;

static int init_call(void *arg)
{
    init_args *a = arg;
    return init(a->argc, a->argv, a->out);
}

int comm_init(int *argc, char ***argv, double timeout, dt_comm **out)
{
    init_args a = {argc, argv, out};
    return timeout > 0 ? run_bounded(NULL, timeout, "MPI's start-up", init_call, &a) : init(argc, argv, out);
}

static int wait_all(dt_comm *c, int n, MPI_Request *r, MPI_Status *st, const char *op, int peer)
{
    return wait_reqs(c, n, r, st, NULL, op, peer);
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
    *d = *c; /* the context is shared: a comm thread's waits report the same iteration */
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
    if (!c->is_dup) {
        MPI_Comm_free(&c->ctx->health);
        free(c->ctx->pong);
        free(c->ctx);
    }
    MPI_Comm_free(&c->world);
    free(c);
}

int comm_thread_multiple(const dt_comm *c) { return c->thread_multiple; }

void comm_set_sleepy(dt_comm *c, int on, const int *only_while)
{
    c->sleepy = on;
    c->sleep_while = only_while;
}

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
    MPI_Request r;
    if (MPI_Iallreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, c->world, &r) != MPI_SUCCESS ||
        wait_all(c, 1, &r, MPI_STATUS_IGNORE, "an agreement of all ranks", -1) != 0)
        return c->rank;
    return lowest == c->size ? -1 : lowest;
}

/* the line of text containing byte offset i, without its newline; a line longer than out holds
 * shown around i, with "..." where it is cut (a net's layer lines may be long) */
static void line_at(const char *text, size_t i, char *out, size_t n)
{
    size_t a = i, b = i;
    while (a > 0 && text[a - 1] != '\n') a--;
    while (text[b] && text[b] != '\n') b++;
    if (b - a < n) {
        snprintf(out, n, "%.*s", (int)(b - a), text + a);
        return;
    }
    size_t keep = n / 2 - 8, from = i - a > keep ? i - keep : a, to = b - i > keep ? i + keep : b;
    snprintf(out, n, "%s%.*s%s", from > a ? "..." : "", (int)(to - from), text + from, to < b ? "..." : "");
}

int comm_check_same(dt_comm *c, const char *text, const char *what)
{
    long len = (long)strlen(text), len0 = len;
    char *ref;
    if (comm_bcast(c, &len0, sizeof len0, 0) != 0) return -1;
    if (!(ref = malloc((size_t)len0 + 1))) return dt_fail("out of memory");
    if (c->rank == 0) memcpy(ref, text, (size_t)len0 + 1);
    if (comm_bcast(c, ref, (size_t)len0 + 1, 0) != 0) {
        free(ref);
        return dt_fail_prefix("the %s", what);
    }
    if (strcmp(ref, text) != 0) {
        size_t i = 0;
        char a[256], b[256];
        while (ref[i] && ref[i] == text[i]) i++;
        line_at(ref, i < (size_t)len0 ? i : (size_t)len0, a, sizeof a);
        line_at(text, i < (size_t)len ? i : (size_t)len, b, sizeof b);
        dt_fail("the %s differs from rank 0's (rank 0: '%s', this rank: '%s'); every rank must be started with the "
                "same options and data",
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
        MPI_Request r;
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, p, chunk, type, op, c->world, &r), "MPI_Iallreduce");
        if (wait_all(c, 1, &r, MPI_STATUS_IGNORE, "an allreduce of all ranks", -1) != 0) return -1;
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
        MPI_Request r;
        MPI_CHECK(MPI_Ibcast(p, chunk, MPI_BYTE, root, c->world, &r), "MPI_Ibcast");
        if (wait_all(c, 1, &r, MPI_STATUS_IGNORE, "a broadcast from rank 0", c->rank == root ? -1 : root) != 0)
            return -1;
        p += chunk;
        bytes -= (size_t)chunk;
    }
    return 0;
}

int comm_hosts(dt_comm *c, char *buf, size_t n)
{
    enum { NAME = 64 };
    char me[MPI_MAX_PROCESSOR_NAME + 1] = "", *all = calloc((size_t)c->size, NAME);
    int len = 0;
    size_t off = 0;
    MPI_Request r;
    if (!all) return dt_fail("out of memory");
    MPI_Get_processor_name(me, &len);
    me[NAME - 1] = 0;
    if (MPI_Iallgather(me, NAME, MPI_CHAR, all, NAME, MPI_CHAR, c->world, &r) != MPI_SUCCESS ||
        wait_all(c, 1, &r, MPI_STATUS_IGNORE, "gathering host names", -1) != 0) {
        free(all);
        return dt_fail_prefix("host names");
    }
    buf[0] = 0;
    for (int i = 0; i < c->size; i++) { /* each host once, in rank order, with its rank count */
        const char *h = all + (size_t)i * NAME;
        int k = 0, seen = 0;
        for (int j = 0; j < c->size; j++)
            if (strcmp(h, all + (size_t)j * NAME) == 0) k++, seen |= j < i;
        if (!seen && off < n)
            off += (size_t)snprintf(buf + off, n - off, "%s%s x%d", off ? ", " : "", h, k);
    }
    free(all);
    return 0;
}

void comm_machine_id(char *buf, size_t n)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    buf[0] = 0;
    if (!f || !fgets(buf, (int)n, f)) {
        int len = 0;
        char name[MPI_MAX_PROCESSOR_NAME + 1] = "";
        MPI_Get_processor_name(name, &len);
        snprintf(buf, n, "host %s", name);
    }
    if (f) fclose(f);
    buf[strcspn(buf, "\n")] = 0;
}

int comm_machine_ranks(dt_comm *c, int *n, int *cores)
{
    enum { ID = 64, ROW = ID + sizeof(cpu_set_t) }; /* a rank's machine id, then its affinity */
    char me[ROW], *all = calloc((size_t)c->size, ROW);
    cpu_set_t mine, machine;
    MPI_Request r;
    int short_of = comm_agree(c, !all); /* all go on or none: a rank that left would leave the others waiting */
    if (short_of >= 0) {
        free(all);
        return dt_fail("rank %d is out of memory (the machine ids of %d ranks)", short_of, c->size);
    }
    memset(me, 0, sizeof me);
    comm_machine_id(me, ID);
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine); /* unknown: the count below */
    memcpy(me + ID, &mine, sizeof mine);
    if (MPI_Iallgather(me, ROW, MPI_CHAR, all, ROW, MPI_CHAR, c->world, &r) != MPI_SUCCESS ||
        wait_all(c, 1, &r, MPI_STATUS_IGNORE, "gathering machine ids", -1) != 0) {
        free(all);
        return dt_fail_prefix("machine ids");
    }
    *n = 0;
    CPU_ZERO(&machine);
    for (int i = 0; i < c->size; i++) {
        const char *row = all + (size_t)i * ROW;
        if (strncmp(me, row, ID) != 0) continue;
        cpu_set_t theirs;
        memcpy(&theirs, row + ID, sizeof theirs);
        CPU_OR(&machine, &machine, &theirs);
        (*n)++;
    }
    free(all);
    if (cores) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        *cores = CPU_COUNT(&machine) > 0 ? CPU_COUNT(&machine) : online > 0 ? (int)online : 1;
    }
    return 0;
}

int comm_barrier(dt_comm *c)
{
    MPI_Request r;
    MPI_CHECK(MPI_Ibarrier(c->world, &r), "MPI_Ibarrier");
    return wait_all(c, 1, &r, MPI_STATUS_IGNORE, "a barrier", -1);
}

static int check_bytes(size_t bytes)
{
    if (bytes > (size_t)INT_MAX) return dt_fail("message of %zu bytes is larger than MPI's int count", bytes);
    return 0;
}

int comm_send(dt_comm *c, const void *buf, size_t bytes, int dst, int tag)
{
    MPI_Request r;
    if (check_bytes(bytes) != 0) return -1;
    MPI_CHECK(MPI_Isend(buf, (int)bytes, MPI_BYTE, dst, tag, c->world, &r), "MPI_Isend");
    if (wait_all(c, 1, &r, MPI_STATUS_IGNORE, "a send", dst) != 0) return -1;
    c->sent += (double)bytes;
    return 0;
}

int comm_recv(dt_comm *c, void *buf, size_t bytes, int src, int tag, int *from, size_t *got)
{
    MPI_Status st;
    MPI_Request r;
    int n;
    if (check_bytes(bytes) != 0) return -1;
    MPI_CHECK(MPI_Irecv(buf, (int)bytes, MPI_BYTE, src == DT_COMM_ANY ? MPI_ANY_SOURCE : src, tag, c->world, &r),
              "MPI_Irecv");
    if (wait_all(c, 1, &r, &st, "a receive", src == DT_COMM_ANY ? -1 : src) != 0) return -1;
    MPI_Get_count(&st, MPI_BYTE, &n);
    c->recvd += n;
    if (from) *from = st.MPI_SOURCE;
    if (got) *got = (size_t)n;
    return 0;
}

int comm_sendrecv(dt_comm *c, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src, int tag)
{
    MPI_Status st[2];
    MPI_Request r[2];
    int n;
    if (check_bytes(sbytes) != 0 || check_bytes(rbytes) != 0) return -1;
    MPI_CHECK(MPI_Irecv(rbuf, (int)rbytes, MPI_BYTE, src, tag, c->world, &r[0]), "MPI_Irecv");
    MPI_CHECK(MPI_Isend(sbuf, (int)sbytes, MPI_BYTE, dst, tag, c->world, &r[1]), "MPI_Isend");
    if (wait_all(c, 2, r, st, "an exchange with the ring's neighbours", src) != 0) return -1;
    MPI_Get_count(&st[0], MPI_BYTE, &n);
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
    c->req_peer[i] = dst;
    c->req_what[i] = "a send";
    c->req_is_recv[i] = 0;
    c->sent += (double)bytes;
    *req = i;
    return 0;
}

int comm_irecv(dt_comm *c, void *buf, size_t bytes, int src, int tag, int *req)
{
    int i = req_slot(c);
    if (i < 0 || check_bytes(bytes) != 0) return -1;
    MPI_CHECK(
        MPI_Irecv(buf, (int)bytes, MPI_BYTE, src == DT_COMM_ANY ? MPI_ANY_SOURCE : src, tag, c->world, &c->req[i]),
        "MPI_Irecv");
    c->req_used[i] = 1;
    c->req_peer[i] = src == DT_COMM_ANY ? -1 : src;
    c->req_what[i] = "a receive";
    c->req_is_recv[i] = 1;
    *req = i;
    return 0;
}

int comm_iallreduce_max_int(dt_comm *c, int *buf, int n, int *req)
{
    int i = req_slot(c);
    if (i < 0) return -1;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_INT, MPI_MAX, c->world, &c->req[i]), "MPI_Iallreduce");
    c->req_used[i] = 1;
    c->req_peer[i] = -1;
    c->req_what[i] = "an allreduce of all ranks";
    c->req_is_recv[i] = 0;
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
    if (req < 0 || req >= DT_COMM_MAX_REQ || !c->req_used[req])
        return dt_fail("internal: wait on a free request %d", req);
    if (wait_all(c, 1, &c->req[req], &st, c->req_what[req], c->req_peer[req]) != 0)
        return -1;
    finish_req(c, req, &st, from, got);
    return 0;
}

int comm_wait_any(dt_comm *c, const int *reqs, int n, int *which)
{
    MPI_Request r[DT_COMM_MAX_REQ];
    int at[DT_COMM_MAX_REQ], live = 0, peer = -2, k = MPI_UNDEFINED, recvs = 1;
    MPI_Status st;
    for (int i = 0; i < n; i++) {
        if (reqs[i] < 0) continue;
        if (reqs[i] >= DT_COMM_MAX_REQ || !c->req_used[reqs[i]] || live == DT_COMM_MAX_REQ)
            return dt_fail("internal: wait on a free request %d", reqs[i]);
        peer = peer == -2 || peer == c->req_peer[reqs[i]] ? c->req_peer[reqs[i]] : -1;
        recvs &= c->req_is_recv[reqs[i]];
        r[live] = c->req[reqs[i]];
        at[live++] = i;
    }
    if (live == 0) return dt_fail("internal: wait for any of no requests");
    const char *what = live == 1 ? c->req_what[reqs[at[0]]] : recvs ? "several receives" : "several messages";
    if (wait_reqs(c, live, r, &st, &k, what, peer) != 0) return -1;
    if (k == MPI_UNDEFINED) return dt_fail("internal: wait for any of inactive requests");
    c->req[reqs[at[k]]] = r[k]; /* MPI_REQUEST_NULL now */
    finish_req(c, reqs[at[k]], &st, NULL, NULL);
    *which = at[k];
    return 0;
}

int comm_test(dt_comm *c, int req, int *done)
{
    MPI_Status st;
    if (req < 0 || req >= DT_COMM_MAX_REQ || !c->req_used[req])
        return dt_fail("internal: test of a free request %d", req);
    MPI_CHECK(MPI_Test(&c->req[req], done, &st), "MPI_Test");
    if (*done) finish_req(c, req, &st, NULL, NULL);
    return 0;
}

double comm_bytes_sent(const dt_comm *c) { return c->sent; }
double comm_bytes_recv(const dt_comm *c) { return c->recvd; }
