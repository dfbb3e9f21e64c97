/* decode — one JPEG (libjpeg-turbo) or PNG (libpng) file into the centred square that packing stores.
 *
 * The format is taken from the file's first bytes, not its name (ImageNet has PNGs named .JPEG).
 * Colour as PIL's convert("RGB") (torchvision's loader) or convert("L") gives it: RGB out for
 * channels 3, grey for 1 (from RGB by PIL's formula). JPEG: YCbCr and grey through libjpeg's own
 * conversions; CMYK and YCCK (Adobe files, stored inverted) converted as PIL does,
 * R = (255 - C)(255 - K) / 255. PNG: grey repeated over the channels, alpha and transparency
 * dropped, 16-bit samples by their high byte. A JPEG whose data end early (the file, or a scan cut
 * short by a marker) is an error (libjpeg would fill the rest with grey); at most 134 megapixels,
 * 32768 on a side, 100 progressive scans; libjpeg's other warnings (extraneous bytes before a
 * marker, and so on) are not, as in PIL. */
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

/* the most scans of a progressive JPEG: real ones have about 10; each scan passes over the whole
 * image, so a 130 KB file of one scan repeated 2000 times took 23 s to decode, a larger one hours
 * (libjpeg-turbo's fuzzers and TurboJPEG's TJPARAM_SCANLIMIT stop such files the same way) */
#define MAX_SCANS 100

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int truncated, scans;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_progress(j_common_ptr c)
{
    if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > MAX_SCANS) {
        jpeg_err *e = (jpeg_err *)c->err;
        e->scans = ((j_decompress_ptr)c)->input_scan_number;
        longjmp(e->jump, 1);
    }
}

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

/* PIL's grey of an RGB pixel (its L24): what convert("L") makes of it */
static inline uint8_t pil_grey(const uint8_t *rgb)
{
    return (uint8_t)((19595u * rgb[0] + 38470u * rgb[1] + 7471u * rgb[2] + 0x8000u) >> 16);
}

/* CMYK (inverted when the file has an Adobe marker, as Adobe's are) to RGB or grey, in place */
static void cmyk_convert(uint8_t *px, size_t n, int inverted, int channels)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = px + 4 * i;
        int k = inverted ? p[3] : 255 - p[3];
        uint8_t rgb[3];
        for (int c = 0; c < 3; c++) {
            int v = inverted ? p[c] : 255 - p[c];
            rgb[c] = (uint8_t)((v * k + 127) / 255);
        }
        if (channels == 3) memcpy(px + 3 * i, rgb, 3);
        else px[i] = pil_grey(rgb);
    }
}

/* the decoded pixels, interleaved, channels per pixel (malloc'd) */
static int jpeg_decode(const char *path, FILE *f, int channels, uint8_t **out, int *w_out, int *h_out)
{
    struct jpeg_decompress_struct ci;
    struct jpeg_progress_mgr progress = {.progress_monitor = jpeg_progress};
    jpeg_err e;
    uint8_t *volatile px = NULL;
    memset(&e, 0, sizeof e);
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jpeg_fatal;
    e.pub.emit_message = jpeg_note;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&ci);
        free(px);
        if (e.scans)
            return dt_fail("%s: a progressive JPEG of more than %d scans (a damaged or hostile file: real ones have "
                           "about 10)", path, MAX_SCANS);
        return dt_fail("%s: a damaged JPEG (libjpeg: %s)", path, e.msg);
    }
    jpeg_create_decompress(&ci);
    ci.progress = &progress;
    jpeg_stdio_src(&ci, f);
    jpeg_read_header(&ci, TRUE);
    if (check_size(path, ci.image_width, ci.image_height) != 0) {
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    int cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    /* grey from a colour image as PIL makes it: from the decoded RGB (libjpeg's Y skips the RGB
     * clipping, up to 20 levels off at saturated colours) */
    int rgb = channels == 3 || ci.jpeg_color_space != JCS_GRAYSCALE;
    ci.out_color_space = cmyk ? JCS_CMYK : rgb ? JCS_RGB : JCS_GRAYSCALE;
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
    else if (channels == 1 && pc == 3)
        for (size_t i = 0; i < (size_t)w * h; i++) px[i] = pil_grey(px + 3 * i); /* in place: i <= 3 i */
    *out = px;
    *w_out = w, *h_out = h;
    return 0;
}

/* ---- PNG ------------------------------------------------------------------------------------------ */

typedef struct png_err {
    jmp_buf jump;
    char msg[200];
} png_err;

static void png_error_fn(png_structp png, png_const_charp msg)
{
    png_err *e = png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    longjmp(e->jump, 1);
}

static void png_warning_fn(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* As PIL's Image.open(path).convert("RGB") (torchvision's loader) or convert("L"): no gamma, 16-bit
 * samples by their high byte (PIL's RGB;16B), alpha and a palette's transparency dropped, grey from
 * RGB by PIL's L = (19595 R + 38470 G + 7471 B + 2^15) >> 16. (libpng's simplified API took 16-bit
 * samples and alpha as linear light: a 16-bit mid-grey came out 186, not 128.) */
static int png_decode(const char *path, int channels, uint8_t **out, int *w_out, int *h_out)
{
    png_err e = {.msg = ""};
    png_structp png = NULL;
    png_infop info = NULL;
    uint8_t *volatile pix = NULL;
    png_bytep *volatile rows = NULL;
    mode_t kind;
    FILE *f = dt_fopen_regular(path, &kind);
    if (!f && kind) return dt_fail("%s: %s (expected an image file)", path, dt_file_kind(kind));
    if (!f) return dt_fail("%s: cannot open (%s)", path, strerror(errno));
    if (!(png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &e, png_error_fn, png_warning_fn)) ||
        !(info = png_create_info_struct(png))) {
        png_destroy_read_struct(&png, NULL, NULL);
        fclose(f);
        return dt_fail("out of memory decoding %s", path);
    }
    if (setjmp(e.jump)) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(f);
        free(pix), free(rows);
        return e.msg[0] == '!' ? -1 : dt_fail("%s: a damaged PNG (libpng: %s)", path, e.msg);
    }
    png_init_io(png, f);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if (check_size(path, w, h) != 0) {
        snprintf(e.msg, sizeof e.msg, "!"); /* said: no libpng message to add */
        longjmp(e.jump, 1);                 /* ours (libpng's png_longjmp needs its own setjmp) */
    }
    int type = png_get_color_type(png, info);
    if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int have = png_get_channels(png, info); /* 1 or 3, 8 bits each */
    size_t row = png_get_rowbytes(png, info);
    if (!(pix = malloc((size_t)h * row + 1)) || !(rows = malloc(h * sizeof *rows))) {
        dt_fail("out of memory decoding %s (%ux%u pixels)", path, (unsigned)w, (unsigned)h);
        snprintf(e.msg, sizeof e.msg, "!");
        longjmp(e.jump, 1);
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pix + y * row;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    free(rows);
    uint8_t *img = malloc((size_t)w * h * (size_t)channels);
    if (!img) {
        free(pix);
        return dt_fail("out of memory decoding %s", path);
    }
    size_t n = (size_t)w * h;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = pix + i * (size_t)have;
        if (channels == have) memcpy(img + i * (size_t)channels, p, (size_t)channels);
        else if (channels == 3) img[3 * i] = img[3 * i + 1] = img[3 * i + 2] = p[0];
        else img[i] = pil_grey(p);
    }
    free(pix);
    *out = img;
    *w_out = (int)w, *h_out = (int)h;
    return 0;
}

/* ---- either ---------------------------------------------------------------------------------------- */

int image_decode(const char *path, int channels, uint8_t **out, int *w, int *h)
{
    uint8_t sig[8];
    mode_t kind;
    FILE *f = dt_fopen_regular(path, &kind); /* a named pipe refused, not waited on */
    int rc;
    *out = NULL;
    if (!f && kind) return dt_fail("%s: %s (expected an image file)", path, dt_file_kind(kind));
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
