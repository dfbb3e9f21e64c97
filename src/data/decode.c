/* decode — one JPEG (libjpeg-turbo) or PNG (libpng) file into the centred square that packing stores.
 *
 * The format is taken from the file's first bytes, not its name (ImageNet has PNGs named .JPEG).
 * Colour: RGB out for channels 3, grey for 1. JPEG: YCbCr and grey through libjpeg's own
 * conversions; CMYK and YCCK (Adobe files, stored inverted) converted as PIL does,
 * R = (255 - C)(255 - K) / 255. PNG: grey repeated over the channels, alpha composited on black,
 * 16-bit reduced. A JPEG whose data end early (the file, or a scan cut short by a marker) is an
 * error (libjpeg would fill the rest with grey); at most 134 megapixels, 32768 on a side;
 * libjpeg's other warnings (extraneous bytes before a marker, and so on) are not, as in PIL. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE and size_t */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h> /* after jpeglib.h: the message codes (JWRN_JPEG_EOF) */
#include <png.h>

#include "../util.h"
#include "image.h"

#define MAX_SIDE 32768
#define MAX_PIXELS (1L << 27) /* 134 megapixels, 512 MB decoded as CMYK: far above any dataset's photos */

/* An image's size, as its header says, before anything is decoded: -1 (and the error) when too large. */
static int check_size(const char *path, unsigned w, unsigned h)
{
    if (w >= 1 && h >= 1 && w <= MAX_SIDE && h <= MAX_SIDE && (long)w * (long)h <= MAX_PIXELS) return 0;
    return dt_fail("%s: %ux%u pixels (expected 1 to %d on each side and at most %ld pixels)", path, w, h, MAX_SIDE,
                   MAX_PIXELS);
}

/* ---- JPEG ----------------------------------------------------------------------------------------- */

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int truncated;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_fatal(j_common_ptr c)
{
    jpeg_err *e = (jpeg_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jump, 1);
}

static void jpeg_note(j_common_ptr c, int level)
{
    jpeg_err *e = (jpeg_err *)c->err;
    /* the data end early (the file, or the scan at a marker): libjpeg would fill the rest with grey */
    if (level < 0 && (c->err->msg_code == JWRN_JPEG_EOF || c->err->msg_code == JWRN_HIT_MARKER)) e->truncated = 1;
    /* other warnings (extraneous bytes before a marker, ...): decoded anyway, as PIL does */
}

/* CMYK (inverted when the file has an Adobe marker, as Adobe's are) to RGB or grey, in place */
static void cmyk_convert(uint8_t *px, size_t n, int inverted, int channels)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = px + 4 * i;
        int k = inverted ? p[3] : 255 - p[3], rgb[3];
        for (int c = 0; c < 3; c++) {
            int v = inverted ? p[c] : 255 - p[c];
            rgb[c] = (v * k + 127) / 255;
        }
        if (channels == 3)
            for (int c = 0; c < 3; c++) px[3 * i + c] = (uint8_t)rgb[c];
        else
            px[i] = (uint8_t)((299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2] + 500) / 1000);
    }
}

/* the decoded pixels, interleaved, channels per pixel (malloc'd) */
static int jpeg_decode(const char *path, FILE *f, int channels, uint8_t **out, int *w_out, int *h_out)
{
    struct jpeg_decompress_struct ci;
    jpeg_err e;
    uint8_t *volatile px = NULL;
    memset(&e, 0, sizeof e);
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jpeg_fatal;
    e.pub.emit_message = jpeg_note;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&ci);
        free(px);
        return dt_fail("%s: a damaged JPEG (libjpeg: %s)", path, e.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_stdio_src(&ci, f);
    jpeg_read_header(&ci, TRUE);
    if (check_size(path, ci.image_width, ci.image_height) != 0) {
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    int cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    ci.out_color_space = cmyk ? JCS_CMYK : channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    ci.dct_method = JDCT_ISLOW; /* PIL's and libjpeg's default: the same pixels as torchvision's loader */
    jpeg_start_decompress(&ci);
    int w = (int)ci.output_width, h = (int)ci.output_height, pc = ci.output_components;
    if (!(px = malloc((size_t)w * h * pc))) {
        jpeg_destroy_decompress(&ci);
        return dt_fail("out of memory decoding %s (%dx%d pixels)", path, w, h);
    }
    while (ci.output_scanline < ci.output_height && !e.truncated) {
        JSAMPROW row = px + (size_t)ci.output_scanline * w * pc;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    int inverted = ci.saw_Adobe_marker;
    if (!e.truncated) jpeg_finish_decompress(&ci); /* may still find the file short */
    jpeg_destroy_decompress(&ci);
    if (e.truncated) {
        free(px);
        return dt_fail("%s: a truncated JPEG (the data end before the image does)", path);
    }
    if (cmyk) cmyk_convert(px, (size_t)w * h, inverted, channels);
    *out = px;
    *w_out = w, *h_out = h;
    return 0;
}

/* ---- PNG ------------------------------------------------------------------------------------------ */

static int png_decode(const char *path, int channels, uint8_t **out, int *w_out, int *h_out)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path)) return dt_fail("%s: a damaged PNG (libpng: %s)", path, im.message);
    if (check_size(path, im.width, im.height) != 0) {
        png_image_free(&im);
        return -1;
    }
    im.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    uint8_t *pix = calloc(1, PNG_IMAGE_SIZE(im));
    if (!pix) {
        png_image_free(&im);
        return dt_fail("out of memory decoding %s", path);
    }
    if (!png_image_finish_read(&im, NULL, pix, 0, NULL)) { /* alpha composites onto the zeros: black */
        dt_fail("%s: a damaged PNG (libpng: %s)", path, im.message);
        free(pix);
        png_image_free(&im);
        return -1;
    }
    *out = pix;
    *w_out = (int)im.width, *h_out = (int)im.height;
    return 0;
}

/* ---- either ---------------------------------------------------------------------------------------- */

int image_decode(const char *path, int channels, uint8_t **out, int *w, int *h)
{
    uint8_t sig[8];
    FILE *f = fopen(path, "rb");
    int rc;
    *out = NULL;
    if (!f) return dt_fail("%s: cannot open (%s)", path, strerror(errno));
    size_t got = fread(sig, 1, 8, f);
    if (got >= 3 && sig[0] == 0xff && sig[1] == 0xd8 && sig[2] == 0xff) {
        rewind(f);
        rc = jpeg_decode(path, f, channels, out, w, h);
        fclose(f);
        return rc;
    }
    fclose(f);
    if (got == 8 && png_sig_cmp(sig, 0, 8) == 0) return png_decode(path, channels, out, w, h);
    return dt_fail("%s: neither a JPEG nor a PNG file (by its first bytes)", path);
}

int image_load_square(const char *path, int channels, int side, uint8_t *out)
{
    uint8_t *pix, *planar;
    int w, h;
    if (image_decode(path, channels, &pix, &w, &h) != 0) return -1;
    if (!(planar = malloc((size_t)channels * w * h))) {
        free(pix);
        return dt_fail("out of memory decoding %s", path);
    }
    for (int c = 0; c < channels; c++)
        for (size_t i = 0; i < (size_t)w * h; i++) planar[(size_t)c * w * h + i] = pix[i * channels + c];
    free(pix);
    int s = w < h ? w : h;
    int rc = image_resample_u8(planar, channels, h, w, (w - s) / 2.0, (h - s) / 2.0, s, s, side, side, NULL, out);
    free(planar);
    return rc;
}
