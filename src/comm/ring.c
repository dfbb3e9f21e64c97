#include "ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../split.h"
#include "../util.h"

struct dt_ring {
    dt_comm *c;
    dt_codec codec;
    int p, rank;
    size_t cap; /* encoded bytes of the largest segment */
    unsigned char *buf[2]; /* host memory (be's page-locked staging on a device) */
    /* ring_create_on: x lives in be's memory; kind: be's codec (0: none); dev: the segment encoded
     * there, and the one received */
    dt_backend *be, *q; /* q: the queue the ring's ops run on */
    int kind;
    void *dev[2];
    void *net; /* be's communicator (--transport nccl): the segments go from device to device */
};

static size_t seg_cap(dt_codec codec, size_t max_n, int p)
{
    return codec_bytes(&codec, max_n / (size_t)p + 1);
}

int ring_wire_kind(const dt_codec *codec)
{
    return codec->desc->lossless ? 0 : codec->desc->wire ? codec->desc->wire : -1;
}

int ring_can_run_on(const dt_backend *be, const dt_codec *codec)
{
    int kind = ring_wire_kind(codec);
    return be && !be->host_memory && kind >= 0 && (kind == 0 || (be->wire_encode && be->wire_decode));
}

static int ring_make(dt_ring **out, dt_comm *c, dt_codec codec, size_t max_n, dt_backend *be, dt_backend *q,
                     void *net)
{
    dt_ring *r = calloc(1, sizeof *r);
    if (!r) return dt_fail("out of memory");
    *out = r;
    r->c = c;
    r->codec = codec;
    r->p = comm_size(c);
    r->rank = comm_rank(c);
    r->cap = seg_cap(codec, max_n, r->p);
    r->be = be;
    r->q = q;
    r->net = net;
    if (!be) {
        if (!(r->buf[0] = dt_alloc(r->cap)) || !(r->buf[1] = dt_alloc(r->cap))) goto fail;
        return 0;
    }
    if (!ring_can_run_on(be, &codec)) {
        dt_fail("internal: the %s backend cannot run the ring with codec %s", be->name, codec.desc->name);
        goto fail;
    }
    r->kind = ring_wire_kind(&codec);
    for (int i = 0; i < 2; i++)
        if ((!net && !(r->buf[i] = backend_host_alloc(be, r->cap))) || !(r->dev[i] = be->alloc(be, r->cap))) goto fail;
    return 0;
fail:
    ring_destroy(r);
    *out = NULL;
    return -1;
}

int ring_create(dt_ring **out, dt_comm *c, dt_codec codec, size_t max_n)
{
    return ring_make(out, c, codec, max_n, NULL, NULL, NULL);
}

int ring_create_on(dt_ring **out, dt_comm *c, dt_codec codec, size_t max_n, dt_backend *be, dt_backend *q,
                   void *net)
{
    return ring_make(out, c, codec, max_n, be, q ? q : be, net);
}

void ring_note_on(const dt_backend *be, const dt_codec *codec, int transport, char *buf, size_t n)
{
    if (transport == DT_TRANSPORT_NCCL && codec->desc->lossless)
        snprintf(buf, n, "the gradients are summed on %s memory by the device's allreduce (NCCL)", be->name);
    else if (transport == DT_TRANSPORT_NCCL)
        snprintf(buf, n, "the ring runs on %s memory: encoded segments go from device to device (NCCL)", be->name);
    else
        snprintf(buf, n, "the ring runs on %s memory: %s segments cross to the host", be->name,
                 codec->desc->lossless ? "its" : "only encoded");
}

void ring_destroy(dt_ring *r)
{
    if (!r) return;
    for (int i = 0; i < 2; i++) {
        if (r->be) {
            if (r->buf[i]) backend_host_free(r->be, r->buf[i]);
            if (r->dev[i]) r->be->free(r->be, r->dev[i]);
        } else {
            dt_free(r->buf[i]);
        }
    }
    free(r);
}

static double seg_bytes(const dt_ring *r, size_t n, int k)
{
    size_t first, cnt;
    split_range(n, ((k % r->p) + r->p) % r->p, r->p, &first, &cnt);
    return (double)codec_bytes(&r->codec, cnt);
}

static double ring_bytes_recv(const dt_ring *r, size_t n)
{
    double all = 0;
    if (r->p == 1 || n == 0) return 0.0;
    for (int k = 0; k < r->p; k++) all += seg_bytes(r, n, k);
    /* reduce-scatter receives every segment but me, all-gather every segment but me+1 */
    return (all - seg_bytes(r, n, r->rank)) + (all - seg_bytes(r, n, r->rank + 1));
}

double ring_bytes_sent(const dt_ring *r, size_t n)
{
    double all = 0;
    if (r->p == 1 || n == 0) return 0.0;
    for (int k = 0; k < r->p; k++) all += seg_bytes(r, n, k);
    /* reduce-scatter sends every segment but me+1, all-gather every segment but me+2 */
    return (all - seg_bytes(r, n, r->rank + 1)) + (all - seg_bytes(r, n, r->rank + 2));
}

#define TAG_RS 101
#define TAG_AG 102

/* ---- the ring on a device's memory (ring_create_on) ---------------------------------------------- */

/* n values at x (device) encoded into host memory out */
static int dev_encode(dt_ring *r, const float *x, size_t n, void *out)
{
    dt_backend *be = r->q;
    if (r->kind == 0) return be->to_host(be, out, x, n * sizeof *x);
    if (be->wire_encode(be, r->kind, r->codec.block, x, n, r->dev[0]) != 0) return -1;
    return be->to_host(be, out, r->dev[0], codec_bytes(&r->codec, n));
}

/* the encoding of n values in host memory in, decoded into x (device), or added to it */
static int dev_decode(dt_ring *r, const void *in, size_t n, float *x, int add)
{
    dt_backend *be = r->q;
    if (r->kind == 0 && !add) return be->to_device(be, x, in, n * sizeof *x);
    if (be->to_device(be, r->dev[1], in, codec_bytes(&r->codec, n)) != 0) return -1;
    if (r->kind == 0) return be->add(be, x, r->dev[1], n, 1.0f);
    return be->wire_decode(be, r->kind, r->codec.block, r->dev[1], n, x, add);
}

/* The owner's segment after dev_encode put it in out: x becomes its decoded form (lossy codecs),
 * decoded from the device's copy of out */
static int dev_own(dt_ring *r, const void *out, size_t n, float *x)
{
    (void)out;
    return r->q->wire_decode(r->q, r->kind, r->codec.block, r->dev[0], n, x, 0);
}

/* ---- the ring on a device's memory over its own transport (net: NCCL) --------------------------- */

/* the encoded segment stays on the device: out and in are device buffers (dev[0], dev[1]); codec none
 * never comes here (the device's allreduce) */
static int net_encode(dt_ring *r, const float *x, size_t n, void *out)
{
    return r->q->wire_encode(r->q, r->kind, r->codec.block, x, n, out);
}

static int net_decode(dt_ring *r, const void *in, size_t n, float *x, int add)
{
    return r->q->wire_decode(r->q, r->kind, r->codec.block, in, n, x, add);
}

static int net_own(dt_ring *r, const void *out, size_t n, float *x) { return net_decode(r, out, n, x, 0); }

static int net_xfer(dt_ring *r, const void *s, size_t sb, int dst, void *d, size_t rb, int src, int tag)
{
    (void)tag;
    return r->q->net_sendrecv(r->q, r->net, s, sb, dst, d, rb, src);
}

static int mpi_xfer(dt_ring *r, const void *s, size_t sb, int dst, void *d, size_t rb, int src, int tag)
{
    return comm_sendrecv(r->c, s, sb, dst, d, rb, src, tag);
}

/* ---- the ring on host memory ---------------------------------------------------------------------- */

static int host_encode(dt_ring *r, const float *x, size_t n, void *out)
{
    codec_encode(&r->codec, x, n, out);
    return 0;
}

static int host_decode(dt_ring *r, const void *in, size_t n, float *x, int add)
{
    if (add) codec_decode_add(&r->codec, in, n, x);
    else codec_decode(&r->codec, in, n, x);
    return 0;
}

static int host_own(dt_ring *r, const void *out, size_t n, float *x) { return host_decode(r, out, n, x, 0); }

/* the sum by the device's own allreduce (--transport nccl, codec none) */
static int net_allreduce(dt_ring *r, float *x, size_t n, dt_times *t)
{
    double t0 = dt_now();
    if (r->q->net_allreduce(r->q, r->net, x, n) != 0 || r->q->net_wait(r->q, r->net, comm_timeout(r->c)) != 0)
        return -1;
    if (t) {
        t->comm += dt_now() - t0;
        t->bytes_sent += ring_bytes_sent(r, n); /* as a ring would send them: NCCL does not say */
        t->bytes_recv += ring_bytes_recv(r, n);
    }
    return 0;
}

int ring_allreduce(dt_ring *r, float *x, size_t n, dt_times *t)
{
    const int p = r->p, me = r->rank, right = (me + 1) % p, left = (me - 1 + p) % p;
    const dt_codec *codec = &r->codec;
    int (*enc)(dt_ring *, const float *, size_t, void *) = r->net ? net_encode : r->be ? dev_encode : host_encode;
    int (*dec)(dt_ring *, const void *, size_t, float *, int) = r->net ? net_decode : r->be ? dev_decode : host_decode;
    int (*own)(dt_ring *, const void *, size_t, float *) = r->net ? net_own : r->be ? dev_own : host_own;
    int (*xfer)(dt_ring *, const void *, size_t, int, void *, size_t, int, int) = r->net ? net_xfer : mpi_xfer;
    double sent0 = comm_bytes_sent(r->c), recv0 = comm_bytes_recv(r->c), te = 0, td = 0, tc = 0, t0;
    unsigned char *sbuf = r->net ? r->dev[0] : r->buf[0], *rbuf = r->net ? r->dev[1] : r->buf[1];
    if (p == 1 || n == 0) return 0;
    if (seg_cap(*codec, n, p) > r->cap) return dt_fail("internal: ring allreduce of %zu values exceeds its buffers", n);
    if (r->net && r->kind == 0) return net_allreduce(r, x, n, t);

    /* reduce-scatter: partial sums travel right, re-encoded at every hop */
    for (int s = 0; s < p - 1; s++) {
        size_t sf, sc, rf, rc;
        split_range(n, (me - s + p) % p, p, &sf, &sc);
        split_range(n, (me - s - 1 + p) % p, p, &rf, &rc);
        t0 = dt_now();
        if (enc(r, x + sf, sc, sbuf) != 0) return -1;
        te += dt_now() - t0;
        t0 = dt_now();
        if (xfer(r, sbuf, codec_bytes(codec, sc), right, rbuf, codec_bytes(codec, rc), left, TAG_RS) != 0) return -1;
        tc += dt_now() - t0;
        t0 = dt_now();
        if (dec(r, rbuf, rc, x + rf, 1) != 0) return -1;
        td += dt_now() - t0;
    }
    /* this rank now owns the sum of segment me+1: encode it once, keep the decoded form too */
    {
        size_t of, oc;
        split_range(n, (me + 1) % p, p, &of, &oc);
        t0 = dt_now();
        if (enc(r, x + of, oc, sbuf) != 0) return -1;
        te += dt_now() - t0;
        if (!codec->desc->lossless) {
            t0 = dt_now();
            if (own(r, sbuf, oc, x + of) != 0) return -1;
            td += dt_now() - t0;
        }
    }
    /* all-gather: encoded blocks are forwarded as they are */
    for (int s = 0; s < p - 1; s++) {
        size_t sf, sc, rf, rc;
        split_range(n, (me + 1 - s + p) % p, p, &sf, &sc);
        split_range(n, (me - s + p) % p, p, &rf, &rc);
        t0 = dt_now();
        if (xfer(r, sbuf, codec_bytes(codec, sc), right, rbuf, codec_bytes(codec, rc), left, TAG_AG) != 0) return -1;
        tc += dt_now() - t0;
        t0 = dt_now();
        if (dec(r, rbuf, rc, x + rf, 0) != 0) return -1;
        td += dt_now() - t0;
        unsigned char *tmp = sbuf; /* what came in goes out next */
        sbuf = rbuf;
        rbuf = tmp;
    }
    if (r->net) { /* everything above was only queued: it is all communication's time */
        t0 = dt_now();
        if (r->q->net_wait(r->q, r->net, comm_timeout(r->c)) != 0) return -1;
        tc += dt_now() - t0 + te + td;
        te = td = 0;
    } else if (r->q != r->be) { /* the sums final for the other queue */
        t0 = dt_now();
        if (r->q->sync(r->q) != 0) return -1;
        td += dt_now() - t0;
    }
    if (t) {
        t->encode += te;
        t->decode += td;
        t->comm += tc;
        t->bytes_sent += r->net ? ring_bytes_sent(r, n) : comm_bytes_sent(r->c) - sent0;
        t->bytes_recv += r->net ? ring_bytes_recv(r, n) : comm_bytes_recv(r->c) - recv0;
    }
    return 0;
}

#define TAG_GATHER 103
#define TAG_I8_RS 104
#define TAG_I8_AG 105

int ring_allgather(dt_comm *c, const void *mine, size_t bytes, void *all, dt_times *t)
{
    const int p = comm_size(c), me = comm_rank(c), right = (me + 1) % p, left = (me - 1 + p) % p;
    unsigned char *a = all;
    double s0 = comm_bytes_sent(c), r0 = comm_bytes_recv(c), t0 = dt_now();
    if (a + (size_t)me * bytes != mine) memcpy(a + (size_t)me * bytes, mine, bytes);
    for (int s = 0; s < p - 1; s++) {
        int send = (me - s + p) % p, recv = (me - s - 1 + p) % p;
        if (comm_sendrecv(c, a + (size_t)send * bytes, bytes, right, a + (size_t)recv * bytes, bytes, left,
                          TAG_GATHER) != 0)
            return -1;
    }
    if (t) {
        t->comm += dt_now() - t0;
        t->bytes_sent += comm_bytes_sent(c) - s0;
        t->bytes_recv += comm_bytes_recv(c) - r0;
    }
    return 0;
}

void ring_i8_bytes(size_t n, int p, int me, double *sent, double *recv)
{
    size_t f, c;
    *sent = *recv = 0.0;
    for (int s = 0; s < p - 1; s++) { /* ring_allreduce_i8's steps: reduce-scatter, then all-gather */
        split_range(n, (me - s + p) % p, p, &f, &c), *sent += (double)c;
        split_range(n, (me - s - 1 + p) % p, p, &f, &c), *recv += (double)c;
        split_range(n, (me + 1 - s + p) % p, p, &f, &c), *sent += (double)c;
        split_range(n, (me - s + p) % p, p, &f, &c), *recv += (double)c;
    }
}

int ring_allreduce_i8(dt_comm *c, int8_t *x, size_t n, int8_t *tmp, dt_times *t)
{
    const int p = comm_size(c), me = comm_rank(c), right = (me + 1) % p, left = (me - 1 + p) % p;
    double s0 = comm_bytes_sent(c), r0 = comm_bytes_recv(c), t0 = dt_now();
    if (p == 1 || n == 0) return 0;
    for (int s = 0; s < p - 1; s++) {
        size_t sf, sc, rf, rc;
        split_range(n, (me - s + p) % p, p, &sf, &sc);
        split_range(n, (me - s - 1 + p) % p, p, &rf, &rc);
        if (comm_sendrecv(c, x + sf, sc, right, tmp, rc, left, TAG_I8_RS) != 0) return -1;
        for (size_t i = 0; i < rc; i++) x[rf + i] = (int8_t)(x[rf + i] + tmp[i]);
    }
    for (int s = 0; s < p - 1; s++) {
        size_t sf, sc, rf, rc;
        split_range(n, (me + 1 - s + p) % p, p, &sf, &sc);
        split_range(n, (me - s + p) % p, p, &rf, &rc);
        if (comm_sendrecv(c, x + sf, sc, right, x + rf, rc, left, TAG_I8_AG) != 0) return -1;
    }
    if (t) {
        t->comm += dt_now() - t0;
        t->bytes_sent += comm_bytes_sent(c) - s0;
        t->bytes_recv += comm_bytes_recv(c) - r0;
    }
    return 0;
}
