#include "hostbuf.h"

#include <string.h>

#include "../util.h"

static int make_host(dt_hostbuf *h)
{
    if (h->be->host_memory) {
        h->host = h->dev;
        return 0;
    }
    return (h->host = backend_host_alloc(h->be, h->n * sizeof(float))) ? 0 : -1;
}

int hostbuf_view(dt_hostbuf *h, dt_backend *be, float *dev, size_t n)
{
    memset(h, 0, sizeof *h);
    h->be = be;
    h->dev = dev;
    h->n = n;
    return make_host(h);
}

int hostbuf_alloc(dt_hostbuf *h, dt_backend *be, size_t n)
{
    memset(h, 0, sizeof *h);
    h->be = be;
    h->n = n;
    if (!(h->dev = be->alloc(be, (n ? n : 1) * sizeof(float)))) return -1;
    h->own_dev = 1;
    if (make_host(h) != 0) {
        hostbuf_free(h);
        return -1;
    }
    return 0;
}

void hostbuf_retarget(dt_hostbuf *h, float *dev)
{
    h->dev = dev;
    if (h->be->host_memory) h->host = dev;
}

int hostbuf_pull(const dt_hostbuf *h, size_t off, size_t n)
{
    if (h->host == h->dev || n == 0) return 0;
    return h->be->to_host(h->be, h->host + off, h->dev + off, n * sizeof(float));
}

int hostbuf_push(const dt_hostbuf *h, size_t off, size_t n)
{
    if (h->host == h->dev || n == 0) return 0;
    return h->be->to_device(h->be, h->dev + off, h->host + off, n * sizeof(float));
}

void hostbuf_free(dt_hostbuf *h)
{
    if (!h->be) return;
    if (h->host != h->dev) backend_host_free(h->be, h->host);
    if (h->own_dev) h->be->free(h->be, h->dev);
    memset(h, 0, sizeof *h);
}
