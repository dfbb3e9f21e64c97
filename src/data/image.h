/* image — decoding JPEG and PNG files (decode.c) and resampling planar uint8 images (image.c),
 * shared by packing (pack.c) and augmentation.
 *
 * An antialiased triangle ("bilinear") filter whose support widens with the scale factor when
 * shrinking, as PIL's BILINEAR and torchvision's resize: every source pixel under an output pixel
 * contributes, so shrinking a 500-pixel photo to 256 does not alias. Pixels outside the image
 * repeat the edge. */
#ifndef DT_IMAGE_H
#define DT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Memory a resampling works in, kept between calls (one per thread): zero-initialised, grown as
 * needed, released by image_scratch_free. */
typedef struct image_scratch {
    void *mem;
    size_t cap;
} image_scratch;
void image_scratch_free(image_scratch *s);

/* Resamples the region [x0, x0 + rw) x [y0, y0 + rh) (pixels; fractional allowed) of a planar
 * C x H x W image to C x oh x ow, writing out[c][i][j] = a[c] * value + b[c] as floats (value in
 * 0..255), mirrored left-right (out[c][i][ow-1-j]) when flip. scr: the scratch to work in (NULL:
 * memory of its own). Returns -1 (and sets the error) when out of memory. */
int image_resample_f(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh, int oh,
                     int ow, const float *a, const float *b, int flip, image_scratch *scr, float *out);
/* The same into uint8 (rounded, clamped). */
int image_resample_u8(const uint8_t *src, int c, int h, int w, double x0, double y0, double rw, double rh, int oh,
                      int ow, image_scratch *scr, uint8_t *out);

/* Decodes the JPEG or PNG file at path (told apart by its first bytes) into interleaved pixels of
 * channels 1 (grey) or 3 (RGB), *w x *h (malloc'd into *out). -1 with the error naming the file. */
int image_decode(const char *path, int channels, uint8_t **out, int *w, int *h);
/* Decodes an image and writes its centred square, resampled to side x side, planar. */
int image_load_square(const char *path, int channels, int side, uint8_t *out);

#endif
