#include "ring.h"

#include <stdlib.h>
#include <string.h>

#include "../split.h"
#include "../util.h"

struct dt_ring {
    dt_comm *c;
    dt_codec codec;
    int p, rank;
    size_t cap; /* encoded bytes of the largest segment */
    unsigned char *buf[2];
};

static size_t seg_cap(dt_codec codec, size_t max_n, int p)
{
    return codec_bytes(&codec, max_n / (size_t)p + 1);
}

int ring_create(dt_ring **out, dt_comm *c, dt_codec codec, size_t max_n)
{
    dt_ring *r = calloc(1, sizeof *r);
    if (!r) return dt_fail("out of memory");
    r->c = c;
    r->codec = codec;
    r->p = comm_size(c);
    r->rank = comm_rank(c);
    r->cap = seg_cap(codec, max_n, r->p);
    if (!(r->buf[0] = dt_alloc(r->cap)) || !(r->buf[1] = dt_alloc(r->cap))) {
        ring_destroy(r);
        return -1;
    }
    *out = r;
    return 0;
}

void ring_destroy(dt_ring *r)
{
    if (!r) return;
    dt_free(r->buf[0]);
    dt_free(r->buf[1]);
    free(r);
}

static double seg_bytes(const dt_ring *r, size_t n, int k)
{
    size_t first, cnt;
    split_range(n, ((k % r->p) + r->p) % r->p, r->p, &first, &cnt);
    return (double)codec_bytes(&r->codec, cnt);
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

int ring_allreduce(dt_ring *r, float *x, size_t n, dt_times *t)
{
    const int p = r->p, me = r->rank, right = (me + 1) % p, left = (me - 1 + p) % p;
    const dt_codec *codec = &r->codec;
    double sent0 = comm_bytes_sent(r->c), recv0 = comm_bytes_recv(r->c), te = 0, td = 0, tc = 0, t0;
    unsigned char *sbuf = r->buf[0], *rbuf = r->buf[1];
    if (p == 1 || n == 0) return 0;
    if (seg_cap(*codec, n, p) > r->cap) return dt_fail("internal: ring allreduce of %zu values exceeds its buffers", n);

    /* reduce-scatter: partial sums travel right, re-encoded at every hop */
    for (int s = 0; s < p - 1; s++) {
        size_t sf, sc, rf, rc;
        split_range(n, (me - s + p) % p, p, &sf, &sc);
        split_range(n, (me - s - 1 + p) % p, p, &rf, &rc);
        t0 = dt_now();
        codec_encode(codec, x + sf, sc, sbuf);
        te += dt_now() - t0;
        t0 = dt_now();
        if (comm_sendrecv(r->c, sbuf, codec_bytes(codec, sc), right, rbuf, codec_bytes(codec, rc), left, TAG_RS) != 0)
            return -1;
        tc += dt_now() - t0;
        t0 = dt_now();
        codec_decode_add(codec, rbuf, rc, x + rf);
        td += dt_now() - t0;
    }
    /* this rank now owns the sum of segment me+1: encode it once, keep the decoded form too */
    {
        size_t of, oc;
        split_range(n, (me + 1) % p, p, &of, &oc);
        t0 = dt_now();
        codec_encode(codec, x + of, oc, sbuf);
        te += dt_now() - t0;
        if (!codec->desc->lossless) {
            t0 = dt_now();
            codec_decode(codec, sbuf, oc, x + of);
            td += dt_now() - t0;
        }
    }
    /* all-gather: encoded blocks are forwarded as they are */
    for (int s = 0; s < p - 1; s++) {
        size_t sf, sc, rf, rc;
        split_range(n, (me + 1 - s + p) % p, p, &sf, &sc);
        split_range(n, (me - s + p) % p, p, &rf, &rc);
        t0 = dt_now();
        if (comm_sendrecv(r->c, sbuf, codec_bytes(codec, sc), right, rbuf, codec_bytes(codec, rc), left, TAG_AG) != 0)
            return -1;
        tc += dt_now() - t0;
        t0 = dt_now();
        codec_decode(codec, rbuf, rc, x + rf);
        td += dt_now() - t0;
        unsigned char *tmp = sbuf; /* what came in goes out next */
        sbuf = rbuf;
        rbuf = tmp;
    }
    if (t) {
        t->encode += te;
        t->decode += td;
        t->comm += tc;
        t->bytes_sent += comm_bytes_sent(r->c) - sent0;
        t->bytes_recv += comm_bytes_recv(r->c) - recv0;
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
