/* IDX files (the MNIST family): big-endian header, then unsigned bytes.
 *   magic: 0x00 0x00 TYPE NDIMS, TYPE 0x08 = unsigned byte; then NDIMS uint32 sizes.
 * A .gz file is inflated with zlib in memory, so the same code reads both. Everything is checked:
 * magic, type, number of dimensions, sizes against the bytes actually present, and nothing may
 * follow the data (or the gzip stream). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../util.h"
#include "formats.h"

/* the largest IDX file dtrain inflates (ImageNet-sized IDX sets are below 1 GB) */
#define MAX_INFLATED ((size_t)8 << 30)

/* The size of the IDX file whose first len bytes are buf, as its header says: 0 while the header is
 * not all there, SIZE_MAX where it is no IDX header (idx_parse says why) */
static size_t idx_size(const uint8_t *buf, size_t len)
{
    if (len < 4) return 0;
    if (buf[0] || buf[1] || buf[2] != 0x08 || buf[3] == 0 || buf[3] > 4) return SIZE_MAX;
    size_t hdr = 4 + 4 * (size_t)buf[3], count = 1;
    if (len < hdr) return 0;
    for (int i = 0; i < buf[3]; i++) {
        const uint8_t *p = buf + 4 + 4 * i;
        count *= (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (count > ((size_t)1 << 40)) return SIZE_MAX;
    }
    return hdr + count;
}

/* Inflates the gzip members in[0..n) into *out; anything after the last member that is not
 * another member is an error, not silently ignored. Inflating stops once the output passes what
 * its IDX header announces: a small file that inflates to gigabytes is refused after the header's
 * bytes, not after the gigabytes. */
static int gunzip(const char *path, const uint8_t *in, size_t n, uint8_t **out, size_t *n_out)
{
    size_t cap = DT_MIN(n * 4 + 1024, MAX_INFLATED), len = 0, used = 0, want = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) return dt_fail("out of memory reading %s", path);
    while (used < n) {
        if (n - used < 2 || in[used] != 0x1f || in[used + 1] != 0x8b) {
            free(buf);
            return dt_fail("%s: %zu bytes of trailing data after the gzip stream (expected the end of the file)", path,
                           n - used);
        }
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
            free(buf);
            return dt_fail("out of memory reading %s", path);
        }
        z.next_in = (Bytef *)(in + used);
        int rc = Z_OK;
        size_t avail = n - used;
        while (rc != Z_STREAM_END) {
            if (len == cap) {
                if (cap >= MAX_INFLATED) {
                    inflateEnd(&z);
                    free(buf);
                    return dt_fail("%s: inflates to more than %llu bytes (not an IDX file)", path,
                                   (unsigned long long)MAX_INFLATED);
                }
                uint8_t *g = realloc(buf, cap = DT_MIN(2 * cap, MAX_INFLATED));
                if (!g) {
                    inflateEnd(&z);
                    free(buf);
                    return dt_fail("out of memory reading %s", path);
                }
                buf = g;
            }
            z.avail_in = (uInt)(avail > (1u << 30) ? (1u << 30) : avail);
            z.next_out = buf + len;
            z.avail_out = (uInt)(cap - len > (1u << 30) ? (1u << 30) : cap - len);
            uInt in0 = z.avail_in, out0 = z.avail_out;
            rc = inflate(&z, Z_NO_FLUSH);
            avail -= in0 - z.avail_in;
            len += out0 - z.avail_out;
            if (!want) want = idx_size(buf, len);
            if (want && want != SIZE_MAX && len > want) {
                size_t data = want - (4 + 4 * (size_t)buf[3]);
                inflateEnd(&z);
                free(buf);
                return dt_fail("%s: trailing data (header says %zu data bytes, the gzip stream holds more)", path, data);
            }
            if (rc == Z_BUF_ERROR && avail == 0 && z.avail_out > 0) { /* input ended inside the stream */
                inflateEnd(&z);
                free(buf);
                return dt_fail("%s: the file ends inside the gzip stream (truncated)", path);
            }
            if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
                inflateEnd(&z);
                free(buf);
                return dt_fail("%s: %s (truncated or corrupt gzip data)", path, z.msg ? z.msg : "inflate failed");
            }
        }
        used = n - avail;
        inflateEnd(&z);
    }
    *out = buf;
    *n_out = len;
    return 0;
}

int idx_parse(const char *path, uint8_t *raw, size_t n, int want_dims, uint32_t *dims, uint8_t **data)
{
    uint8_t *buf = raw;
    size_t hdr, count = 1;
    int gz = n >= 2 && raw[0] == 0x1f && raw[1] == 0x8b;
    if (gz) {
        int rc = gunzip(path, raw, n, &buf, &n);
        free(raw);
        if (rc != 0) return -1;
    }
    if (n < 4) {
        free(buf);
        return dt_fail("%s: %s %zu bytes (expected an IDX header of at least 4 bytes)", path,
                       gz ? "decompresses to" : "file has", n);
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

int idx_load(const char *path, int want_dims, uint32_t *dims, uint8_t **data)
{
    char *raw;
    size_t n;
    if (dt_read_file(path, &raw, &n) != 0) return -1;
    return idx_parse(path, (uint8_t *)raw, n, want_dims, dims, data);
}
