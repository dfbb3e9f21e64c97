/* upload — the training batches copied to a device ahead of their iteration (a GPU's copy stream).
 *
 * For a backend whose memory is a device's and that has a second queue (backend.h's queue_create:
 * a CUDA stream of its own), a thread takes iteration it + 1's batch from the loader (in the
 * backend's page-locked memory) and copies it on that queue into one of two device buffers while
 * the device computes iteration it; the train loop then finds its batch on the device and copies it
 * into the net's input there. The CPU backend, whose copies are memcpy, has no queue: there
 * upload_create leaves *out NULL and the loop copies from the loader's batch as before.
 */
#ifndef DT_UPLOAD_H
#define DT_UPLOAD_H

#include "data/data.h"
#include "engine/engine.h"

typedef struct dt_upload dt_upload;

/* 1 where the train loop's batches go through an upload on backend be */
#define UPLOADS(be) (!(be)->host_memory && (be)->queue_create != NULL)

/* For batches of up to max_rows rows of row_floats values each, iterations it0 .. total - 1 of loader. */
int upload_create(dt_upload **out, dt_backend *be, dt_loader *loader, size_t row_floats, int max_rows, long total);
/* Iteration it's batch (they come in order) into net's input and labels, on the device's compute queue:
 * waits for its copy, then starts the next iteration's. b: the batch's rows (x and y NULL: not on the host). */
int upload_next(dt_upload *u, dt_net *net, long it, dt_batch *b);
/* Waits for a copy in flight, then frees; before the loader is destroyed. */
void upload_destroy(dt_upload *u);

#endif
