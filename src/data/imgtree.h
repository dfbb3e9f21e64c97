/* imgtree — ImageNet-style class folders of JPEG and PNG images (imgtree.c), packed by pack.c. */
#ifndef DT_IMGTREE_H
#define DT_IMGTREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct imgtree {
    char **classes; /* unused by scans; owned lists come from imgtree_classes */
    int n_classes;
    size_t n;       /* images */
    char **files;   /* paths, class by class, sorted */
    uint16_t *labels;
} imgtree;

/* The class folders of ROOT/train, sorted; n at least 1. */
int imgtree_classes(const char *root, char ***classes, int *n);
/* The images of ROOT/SPLIT (train or val) and their labels among classes. */
int imgtree_scan(const char *root, const char *split, char **classes, int n_classes, imgtree **out);
void imgtree_free(imgtree *t);
/* A fingerprint of ROOT/SPLIT: every class folder's name, and its images' names, sizes and
 * modification times (stat, on `threads` threads over the folders); *pngs: whether a name ends in
 * .png. */
int imgtree_fingerprint(const char *root, const char *split, int threads, uint64_t *fp, int *pngs);

#endif
