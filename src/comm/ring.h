/* ring — dtrain's own ring allreduce (sum), optionally compressed (Pipe-SGD §3.2, Fig. 3).
 *
 * The n values are cut into P segments. Reduce-scatter: in P-1 steps each rank sends one
 * segment to its right neighbour, encoded, and adds the decoded segment from its left neighbour
 * into its fp32 copy, so partial sums travel around the ring and are re-encoded at every hop.
 * After it, rank r holds the full sum of segment (r+1) mod P; it encodes it once, and the
 * all-gather forwards these encoded blocks unchanged around the ring. Every rank, the owner
 * included, ends with decode(encode(sum)): identical bits on every rank.
 * Bytes sent per rank: 2 (P-1) segments, encoded (2 (P-1)/P of the encoded arena).
 * With codec none the result equals MPI_Allreduce's up to the order of fp32 additions.
 */
#ifndef DT_RING_H
#define DT_RING_H

#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"
#include "../stats.h"
#include "codec.h"
#include "devnet.h"
#include "transport.h"

typedef struct dt_ring dt_ring;

/* For allreduces of up to max_n values over comm c. */
int ring_create(dt_ring **out, dt_comm *c, dt_codec codec, size_t max_n);
/* 1 if be's memory is a device's (not the host's) and be codes there itself (its wire_encode; or
 * the codec is none): then the ring can run on that memory (ring_create_on). */
int ring_can_run_on(const dt_backend *be, const dt_codec *codec);
/* the backend's code for a codec (engine/backend.h's DT_WIRE_*; 0: lossless, sent as floats; -1: none) */
int ring_wire_kind(const dt_codec *codec);
/* A ring whose ring_allreduce takes x in be's memory: each step's segment is encoded there, and
 * only the encoded bytes cross to the host (page-locked staging) and back, where they are decoded
 * and added. The same bytes on the wire and the same sums as the host ring (be's codecs give the
 * CPU codecs' bytes and floats). Its buffers are be's; its ops run on queue q (be, or
 * backend_queue's for a communication thread: then x must be final on the device when the
 * allreduce starts, and the sums are when it returns).
 * With net, a communicator of be's (devnet_open, --transport nccl), nothing crosses to the host:
 * the encoded segments go from device to device, and codec none is the device's own allreduce
 * (its order of additions, not the ring's); the sums are final when ring_allreduce returns. */
int ring_create_on(dt_ring **out, dt_comm *c, dt_codec codec, size_t max_n, dt_backend *be, dt_backend *q,
                   void *net);
/* The banner's line for a mode whose ring runs on be's memory over transport (DT_TRANSPORT_*). */
void ring_note_on(const dt_backend *be, const dt_codec *codec, int transport, char *buf, size_t n);
void ring_destroy(dt_ring *r);
/* Sums x[0..n) over all ranks in place. Adds encode, decode and comm (wire + waiting for the
 * neighbours) times and the bytes to t. */
int ring_allreduce(dt_ring *r, float *x, size_t n, dt_times *t);
/* Bytes one rank sends for an allreduce of n values (what ring_allreduce sends). */
double ring_bytes_sent(const dt_ring *r, size_t n);

/* Ring allgather: every rank contributes `bytes` (mine); all[r * bytes ...] receives rank r's
 * block on every rank. P-1 steps, (P-1) bytes sent per rank. Adds comm time and bytes to t. */
int ring_allgather(dt_comm *c, const void *mine, size_t bytes, void *all, dt_times *t);
/* Ring allreduce (sum) of int8 values, for ternary sums |x| <= P <= 127. 2(P-1)/P n bytes. */
int ring_allreduce_i8(dt_comm *c, int8_t *x, size_t n, int8_t *tmp, dt_times *t);
/* The bytes rank me of p sends and receives in ring_allreduce_i8 of n values (for the log of a device
 * transport that does the same sum and does not say what it sent). */
void ring_i8_bytes(size_t n, int p, int me, double *sent, double *recv);

#endif
