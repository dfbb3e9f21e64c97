/* hostbuf — a host view of backend memory, for host code that must read or write it.
 *
 * The comm modes work on gradients and weights with host code (codecs, selections, MPI), but
 * the arenas are backend memory, which may be a GPU's. A host view pairs a backend buffer with
 * host memory of the same size: pull copies backend → host, push host → backend, for a range.
 * For a backend whose memory is host memory (cpu) the view is the buffer itself and pull and
 * push do nothing, so the CPU path pays nothing. The host memory is allocated once, when the
 * view is made, from the backend's staging memory (page-locked on a GPU: backend_host_alloc).
 * This is the one way host code reaches backend memory; the guarded test backend
 * proves no path goes around it.
 */
#ifndef DT_HOSTBUF_H
#define DT_HOSTBUF_H

#include <stddef.h>

#include "backend.h"

typedef struct dt_hostbuf {
    dt_backend *be;
    float *dev;  /* backend memory */
    float *host; /* its host view: dev itself when the backend's memory is host memory */
    size_t n;    /* floats */
    int own_dev; /* dev was allocated by hostbuf_alloc */
} dt_hostbuf;

/* A view of n floats of existing backend memory dev. */
int hostbuf_view(dt_hostbuf *h, dt_backend *be, float *dev, size_t n);
/* New zeroed backend memory of n floats, with its view. */
int hostbuf_alloc(dt_hostbuf *h, dt_backend *be, size_t n);
/* Points an existing view at other backend memory of the same size (its host memory stays). */
void hostbuf_retarget(dt_hostbuf *h, float *dev);
/* dev[off, off+n) → host[off, off+n) */
int hostbuf_pull(const dt_hostbuf *h, size_t off, size_t n);
/* host[off, off+n) → dev[off, off+n) */
int hostbuf_push(const dt_hostbuf *h, size_t off, size_t n);
/* Frees the host memory (and the backend memory hostbuf_alloc made); a zeroed view is fine. */
void hostbuf_free(dt_hostbuf *h);

#endif
