/* weights — weight files in the safetensors layout.
 *
 * Tensor names are the net's ("fc1.weight"), shapes PyTorch's, so a file written here loads
 * with safetensors.torch.load_file or a few lines of NumPy, and the other way round.
 * Loading checks every name, dtype and shape against the net before anything is copied.
 * Works on a host copy of the arena; moving it to the device and to other ranks is the caller's.
 */
#ifndef DT_WEIGHTS_H
#define DT_WEIGHTS_H

#include "engine/engine.h"
#include "safetensors.h"

/* The "format" metadata of weight files and of checkpoints (which are weight files too). */
#define WEIGHTS_FORMAT "dtrain-weights"
#define WEIGHTS_CKPT_FORMAT "dtrain-checkpoint"

/* Writes the net's weights and state tensors (running statistics, frozen weights) from host
 * copies of the weight arena `w` and the state arena `state`, with metadata, and for each
 * batch-norm layer PyTorch's NAME.num_batches_tracked (I64, shape []) = batches, so that
 * load_state_dict(strict=True) takes the file. */
int weights_save(const dt_net *net, const float *w, const float *state, const char *path, const char *dataset,
                 int64_t batches);
/* Reads a weight file into host arenas w (net->n_params floats) and state (net->n_state):
 * F32, F16, BF16 or F64 tensors (converted), the batch-norm counters PyTorch writes (the largest
 * into *batches when not NULL). Every name the net lacks or the file lacks is listed in one error.
 * A checkpoint is a weight file too: its other tensors (names with ':') are skipped. */
int weights_read(const dt_net *net, const char *path, float *w, float *state, int64_t *batches);
/* The same from a file already read (path for messages). */
int weights_from(const dt_net *net, const st_file *f, const char *path, float *w, float *state, int64_t *batches);
/* Host arenas as read: an error naming the first tensor holding NaN or infinity (and how many)
 * when there is one; `path` names the file. */
int weights_check_finite(const dt_net *net, const float *w, const float *state, const char *path);

#endif
