/* IDX files (the MNIST family): big-endian header, then unsigned bytes.
 *   magic: 0x00 0x00 TYPE NDIMS, TYPE 0x08 = unsigned byte; then NDIMS uint32 sizes.
 * Read through zlib, so the same code reads raw and .gz files. Everything is checked: magic,
 * type, number of dimensions, sizes against the bytes actually present. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../util.h"
#include "formats.h"

/* Reads the whole (decompressed) stream. */
static int read_all(const char *path, uint8_t **out, size_t *n_out)
{
    gzFile f = gzopen(path, "rb");
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf;
    int err;
    if (!f) return dt_fail("%s: cannot open (%s)", path, errno ? strerror(errno) : "zlib could not allocate");
    gzbuffer(f, 1 << 17);
    if (!(buf = malloc(cap))) {
        gzclose(f);
        return dt_fail("out of memory");
    }
    for (;;) {
        if (n == cap) {
            uint8_t *g = realloc(buf, cap *= 2);
            if (!g) {
                free(buf);
                gzclose(f);
                return dt_fail("out of memory reading %s", path);
            }
            buf = g;
        }
        size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
        int r = gzread(f, buf + n, (unsigned)want);
        if (r < 0) {
            const char *msg = gzerror(f, &err);
            dt_fail("%s: %s (%s)", path, err == Z_ERRNO ? strerror(errno) : msg,
                    err == Z_DATA_ERROR ? "corrupt gzip data" : "read error");
            free(buf);
            gzclose(f);
            return -1;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    gzerror(f, &err);
    if (err != Z_OK && err != Z_STREAM_END) {
        dt_fail("%s: %s", path, gzerror(f, &err));
        free(buf);
        gzclose(f);
        return -1;
    }
    if (gzclose(f) != Z_OK) {
        free(buf);
        return dt_fail("%s: truncated or corrupt gzip stream (expected a complete file)", path);
    }
    *out = buf;
    *n_out = n;
    return 0;
}

int idx_load(const char *path, int want_dims, uint32_t *dims, uint8_t **data)
{
    uint8_t *buf = NULL;
    size_t n = 0, hdr, count = 1;
    if (read_all(path, &buf, &n) != 0) return -1;
    if (n < 4) {
        free(buf);
        return dt_fail("%s: file has %zu bytes (expected an IDX header of at least 4 bytes)", path, n);
    }
    if (buf[0] != 0 || buf[1] != 0) {
        dt_fail("%s: bad magic %02x %02x %02x %02x (expected 00 00 08 %02x: an IDX file)", path, buf[0], buf[1],
                buf[2], buf[3], want_dims);
        goto fail;
    }
    if (buf[2] != 0x08) {
        dt_fail("%s: IDX data type 0x%02x (expected 0x08, unsigned bytes)", path, buf[2]);
        goto fail;
    }
    if (buf[3] != want_dims) {
        dt_fail("%s: IDX file has %d dimensions (expected %d: %s)", path, buf[3], want_dims,
                want_dims == 3 ? "images N x rows x cols" : "labels N");
        goto fail;
    }
    hdr = 4 + 4 * (size_t)want_dims;
    if (n < hdr) {
        dt_fail("%s: truncated header (%zu bytes, expected %zu)", path, n, hdr);
        goto fail;
    }
    for (int i = 0; i < want_dims; i++) {
        const uint8_t *p = buf + 4 + 4 * i;
        dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (dims[i] == 0) {
            dt_fail("%s: dimension %d is 0 (expected a positive size)", path, i);
            goto fail;
        }
        count *= dims[i];
        if (count > ((size_t)1 << 40)) {
            dt_fail("%s: sizes in the header are implausibly large", path);
            goto fail;
        }
    }
    if (n - hdr != count) {
        dt_fail("%s: %s (header says %zu data bytes, found %zu)", path, n - hdr < count ? "truncated" : "trailing data",
                count, n - hdr);
        goto fail;
    }
    memmove(buf, buf + hdr, count);
    *data = buf;
    return 0;
fail:
    free(buf);
    return -1;
}
