/* formats — the readers dataset.c opens datasets with (idx.c, cifar.c, pack.c/imgtree.c).
 * Internal to the data module. */
#ifndef DT_FORMATS_H
#define DT_FORMATS_H

#include <stdint.h>

#include "data.h"

/* Records path as a file the dataset was read from (dataset_file_named). */
void dataset_note_file(dt_dataset *ds, const char *path);
/* IDX (MNIST-family) files, raw or gzip: want_dims 3 (images N x rows x cols) or 1 (labels). */
int idx_load(const char *path, int want_dims, uint32_t *dims, uint8_t **data);
/* The same from a whole file in memory (malloc'd: taken, also on failure); path for messages. */
int idx_parse(const char *path, uint8_t *raw, size_t n, int want_dims, uint32_t *dims, uint8_t **data);
/* CIFAR-10 (fine = 0) or CIFAR-100 (fine = 1) binary files of DIR into the splits. */
int cifar_open(dt_dataset *ds, const char *dir, int hundred);
/* ImageNet-style: DIR/train/CLASS/IMAGE.png and DIR/val/CLASS/IMAGE.png, packed on first use. */
int imagenet_open(dt_dataset *ds, const char *dir, const dt_data_opts *o);
/* Synthetic sample i of split s: its c*h*w pixels and its label (synthetic.c). */
void synthetic_sample(const dt_dataset *ds, const dt_split *s, uint32_t i, uint8_t *px, uint16_t *label);
/* The checksum of one packed image's pixels. */
uint64_t pack_image_sum(const uint8_t *p, size_t n);

#endif
