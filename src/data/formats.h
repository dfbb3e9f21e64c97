/* formats — the readers dataset.c opens datasets with (idx.c, cifar.c, pack.c/pngdir.c).
 * Internal to the data module. */
#ifndef DT_FORMATS_H
#define DT_FORMATS_H

#include <stdint.h>

#include "data.h"

/* IDX (MNIST-family) files, raw or gzip. kind: "images" (3 dims) or "labels" (1 dim). */
int idx_load(const char *path, int want_dims, uint32_t *dims, uint8_t **data);
/* CIFAR-10 (fine = 0) or CIFAR-100 (fine = 1) binary files of DIR into the splits. */
int cifar_open(dt_dataset *ds, const char *dir, int hundred);
/* ImageNet-style: DIR/train/CLASS/IMAGE.png and DIR/val/CLASS/IMAGE.png, packed on first use. */
int imagenet_open(dt_dataset *ds, const char *dir, const dt_data_opts *o);

#endif
