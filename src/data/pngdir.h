/* pngdir — ImageNet-style class folders of PNG images (pngdir.c) and their packed form (pack.c). */
#ifndef DT_PNGDIR_H
#define DT_PNGDIR_H

#include <stddef.h>
#include <stdint.h>

typedef struct pngdir {
    char **classes; /* unused by scans; owned lists come from pngdir_classes */
    int n_classes;
    size_t n;       /* images */
    char **files;   /* paths, class by class, sorted */
    uint16_t *labels;
} pngdir;

/* The class folders of ROOT/train, sorted; n at least 1. */
int pngdir_classes(const char *root, char ***classes, int *n);
/* The images of ROOT/SPLIT (train or val) and their labels among classes. */
int pngdir_scan(const char *root, const char *split, char **classes, int n_classes, pngdir **out);
void pngdir_free(pngdir *t);
/* A cheap fingerprint of ROOT/SPLIT: class folder names and modification times. */
int pngdir_fingerprint(const char *root, const char *split, uint64_t *fp);
/* Decodes a PNG and writes its centred square, resampled to side x side, planar (channels 1 or 3). */
int png_load_square(const char *path, int channels, int side, uint8_t *out);

#endif
