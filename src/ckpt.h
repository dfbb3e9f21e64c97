/* ckpt — weight files and checkpoint files in the safetensors layout.
 *
 * Tensor names are the net's ("fc1.weight"), shapes PyTorch's, so a file written here loads
 * with safetensors.torch.load_file or a few lines of NumPy, and the other way round.
 * Loading checks every name, dtype and shape against the net before anything is copied.
 * Works on a host copy of the arena; moving it to the device and to other ranks is the caller's.
 */
#ifndef DT_CKPT_H
#define DT_CKPT_H

#include "engine/net.h"
#include "safetensors.h"

/* Writes the net's weights and state tensors (running statistics, frozen weights) from host
 * copies of the weight arena `w` and the state arena `state`, with metadata. */
int weights_save(const dt_net *net, const float *w, const float *state, const char *path, const char *dataset);
/* Reads a weight file into host arenas w (net->n_params floats) and state (net->n_state). A
 * checkpoint is a weight file too: its other tensors (names with ':') are skipped. */
int weights_read(const dt_net *net, const char *path, float *w, float *state);
/* The same from a file already read (path for messages). */
int weights_from(const dt_net *net, const st_file *f, const char *path, float *w, float *state);

/* Checkpoints: F32 tensors with metadata, plus format, version and a checksum of the data
 * (what run_state.c puts in them is documented there). Written atomically. */
int ckpt_write(const char *path, const st_tensor *t, int n, const char *const *mk, const char *const *mv, int n_meta);
/* Reads and checks format, version and checksum. */
int ckpt_open(const char *path, st_file **out);

#endif
