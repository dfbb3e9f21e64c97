#include "safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "util.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

/* safetensors' own limit on the header (the Rust library refuses more: HeaderTooLarge) */
#define MAX_HEADER 100000000u

static size_t dtype_size(const char *d)
{
    static const struct {
        const char *name;
        size_t size;
    } t[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
             {"I8", 1},  {"U8", 1},  {"U16", 2}, {"U32", 4},  {"U64", 8}, {"BOOL", 1}};
    for (size_t i = 0; i < DT_ARRAY_LEN(t); i++)
        if (strcmp(t[i].name, d) == 0) return t[i].size;
    return 0;
}

void st_shape_format(int n_dims, const int64_t *shape, char *buf, size_t n)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < n_dims && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (off < n) snprintf(buf + off, n - off, "]");
}

void st_close(st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->e[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->e);
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->raw);
    free(f);
}

static const char *duplicate_key(const json *obj);

/* The first 8 bytes of a file of n bytes: a header length that fits it (error set otherwise) */
static int check_head(const char *path, const uint8_t *b, size_t n, uint64_t *hlen_out)
{
    uint64_t hlen = 0;
    if (n < 8)
        return dt_fail("%s: %zu bytes (expected a safetensors file: 8-byte header length, JSON header, data)", path, n);
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
    if (hlen > MAX_HEADER)
        return dt_fail("%s: a header of %llu bytes, over safetensors' limit of %u (not a weight file, or a hostile one)",
                       path, (unsigned long long)hlen, MAX_HEADER);
    if (hlen < 2 || hlen > n - 8)
        return dt_fail("%s: header length %llu does not fit a file of %zu bytes (not a safetensors file, or truncated)",
                       path, (unsigned long long)hlen, n);
    *hlen_out = hlen;
    return 0;
}

static int parse_entry(const char *path, const char *name, const json *v, size_t data_bytes, st_entry *e)
{
    const json *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
    uint64_t count = 1;
    size_t esz;
    if (v->type != JSON_OBJ || !dt || dt->type != JSON_STR || !sh || sh->type != JSON_ARR || !off ||
        off->type != JSON_ARR)
        return dt_fail("%s: tensor '%s': expected {\"dtype\", \"shape\", \"data_offsets\"}", path, name);
    if (!(esz = dtype_size(dt->str)) || strlen(dt->str) >= sizeof e->dtype)
        return dt_fail("%s: tensor '%s': unknown dtype '%s'", path, name, dt->str);
    const char *dup = duplicate_key(v); /* json_get finds the first: a second one would be passed over unseen */
    if (dup) return dt_fail("%s: tensor '%s': names '%s' twice (expected each field once)", path, name, dup);
    strcpy(e->dtype, dt->str);
    if (sh->n > ST_MAX_DIMS) return dt_fail("%s: tensor '%s': %d dims (at most %d)", path, name, sh->n, ST_MAX_DIMS);
    e->n_dims = sh->n;
    for (int i = 0; i < sh->n; i++) {
        int64_t d = json_int(&sh->items[i]);
        if (d < 0) return dt_fail("%s: tensor '%s': shape entries must be non-negative integers", path, name);
        e->shape[i] = d;
        if (d && count > UINT64_MAX / (uint64_t)d) return dt_fail("%s: tensor '%s': shape too large", path, name);
        count *= (uint64_t)d;
    }
    if (count > UINT64_MAX / esz) return dt_fail("%s: tensor '%s': shape too large", path, name); /* bytes wrap */
    int64_t b = off->n == 2 ? json_int(&off->items[0]) : -1, en = off->n == 2 ? json_int(&off->items[1]) : -1;
    if (b < 0 || en < b)
        return dt_fail("%s: tensor '%s': data_offsets must be [begin, end] with begin ≤ end", path, name);
    if ((uint64_t)en > data_bytes)
        return dt_fail("%s: tensor '%s' ends at byte %lld of the data, but the file has %zu data bytes (truncated?)",
                       path, name, (long long)en, data_bytes);
    if ((uint64_t)(en - b) != count * esz)
        return dt_fail("%s: tensor '%s': %lld data bytes for shape of %llu %s elements (expected %llu)", path, name,
                       (long long)(en - b), (unsigned long long)count, e->dtype, (unsigned long long)(count * esz));
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    return 0;
}

static int by_name(const void *a, const void *b, void *keys)
{
    return strcmp(((char **)keys)[*(const int *)a], ((char **)keys)[*(const int *)b]);
}

/* the first key of obj that appears twice, or NULL */
static const char *duplicate_key(const json *obj)
{
    const char *dup = NULL;
    int *order = malloc(sizeof *order * (size_t)(obj->n + 1));
    if (!order) return NULL;
    for (int i = 0; i < obj->n; i++) order[i] = i;
    qsort_r(order, (size_t)obj->n, sizeof *order, by_name, obj->keys);
    for (int i = 1; i < obj->n && !dup; i++)
        if (strcmp(obj->keys[order[i - 1]], obj->keys[order[i]]) == 0) dup = obj->keys[order[i]];
    free(order);
    return dup;
}

static int by_begin(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* The tensors tile the data section, as the format requires (the Rust library refuses a file
 * otherwise: InvalidOffset, MetadataIncompleteBuffer): no overlap, no gap, no bytes after the last. */
static int check_layout(const char *path, st_file *f)
{
    if (f->n == 0)
        return f->data_bytes == 0 ? 0
                                  : dt_fail("%s: %zu data bytes but no tensor (a damaged file)", path, f->data_bytes);
    const st_entry **s = malloc(sizeof *s * (size_t)f->n);
    int rc = 0;
    if (!s) return dt_fail("out of memory");
    for (int i = 0; i < f->n; i++) s[i] = &f->e[i];
    qsort(s, (size_t)f->n, sizeof *s, by_begin);
    if (s[0]->begin != 0)
        rc = dt_fail("%s: the data section's first %llu bytes belong to no tensor (the first, '%s', begins there; a "
                     "damaged file)",
                     path, (unsigned long long)s[0]->begin, s[0]->name);
    for (int i = 1; i < f->n && rc == 0; i++)
        if (s[i]->begin < s[i - 1]->end)
            rc = dt_fail("%s: tensors '%s' (bytes %llu-%llu) and '%s' (bytes %llu-%llu) overlap (a damaged or hostile "
                         "file)",
                         path, s[i - 1]->name, (unsigned long long)s[i - 1]->begin, (unsigned long long)s[i - 1]->end,
                         s[i]->name, (unsigned long long)s[i]->begin, (unsigned long long)s[i]->end);
        else if (s[i]->begin > s[i - 1]->end)
            rc = dt_fail("%s: bytes %llu-%llu of the data, between tensors '%s' and '%s', belong to no tensor (a "
                         "damaged file)",
                         path, (unsigned long long)s[i - 1]->end, (unsigned long long)s[i]->begin, s[i - 1]->name,
                         s[i]->name);
    if (rc == 0 && s[f->n - 1]->end != f->data_bytes)
        rc = dt_fail("%s: %llu bytes after the last tensor ('%s', which ends at byte %llu of %zu; a damaged file, or "
                     "one with something appended)",
                     path, (unsigned long long)(f->data_bytes - s[f->n - 1]->end), s[f->n - 1]->name,
                     (unsigned long long)s[f->n - 1]->end, f->data_bytes);
    free(s);
    return rc;
}

int st_parse(void *raw, size_t n, const char *path, st_file **out)
{
    uint64_t hlen = 0;
    json *hdr = NULL;
    const char *dup;
    st_file *f;
    if (!(f = calloc(1, sizeof *f))) {
        free(raw);
        return dt_fail("out of memory");
    }
    f->raw = raw;
    if (check_head(path, (const uint8_t *)raw, n, &hlen) != 0) goto fail;
    const char *text = (const char *)raw + 8;
    if (text[0] != '{') {
        dt_fail("%s: the header does not start with '{' (not a safetensors file)", path);
        goto fail;
    }
    size_t bad = dt_utf8_invalid(text, (size_t)hlen); /* the format's header is UTF-8 JSON; names end up in messages */
    if (bad < (size_t)hlen) {
        dt_fail("%s: the header is not UTF-8 text (byte %zu of it, 0x%02x; not a safetensors file, or a damaged one)",
                path, bad, (unsigned char)text[bad]);
        goto fail;
    }
    if (json_parse(text, (size_t)hlen, path, &hdr) != 0) goto fail;
    if (hdr->type != JSON_OBJ) {
        dt_fail("%s: the header is not a JSON object", path);
        goto fail;
    }
    if ((dup = duplicate_key(hdr))) {
        dt_fail("%s: the header names '%s' twice (expected every tensor once)", path, dup);
        goto fail;
    }
    f->data = (uint8_t *)raw + 8 + hlen;
    f->data_bytes = n - 8 - (size_t)hlen;
    if (!(f->e = calloc((size_t)hdr->n + 1, sizeof *f->e))) {
        dt_fail("out of memory");
        goto fail;
    }
    for (int i = 0; i < hdr->n; i++) {
        const json *v = &hdr->items[i];
        if (strcmp(hdr->keys[i], "__metadata__") == 0) {
            if (v->type != JSON_OBJ) {
                dt_fail("%s: __metadata__ must be an object of strings", path);
                goto fail;
            }
            if ((dup = duplicate_key(v))) {
                dt_fail("%s: __metadata__ names '%s' twice", path, dup);
                goto fail;
            }
            /* sized by the metadata's own entries (unique keys: __metadata__ comes once) */
            f->meta_keys = calloc((size_t)v->n + 1, sizeof(char *));
            f->meta_vals = calloc((size_t)v->n + 1, sizeof(char *));
            if (!f->meta_keys || !f->meta_vals) {
                dt_fail("out of memory");
                goto fail;
            }
            for (int k = 0; k < v->n; k++) {
                if (v->items[k].type != JSON_STR) {
                    dt_fail("%s: __metadata__ value of '%s' is not a string", path, v->keys[k]);
                    goto fail;
                }
                if (!(f->meta_keys[f->n_meta] = dt_strdup(v->keys[k])) ||
                    !(f->meta_vals[f->n_meta] = dt_strdup(v->items[k].str))) {
                    free(f->meta_keys[f->n_meta]);
                    goto fail;
                }
                f->n_meta++;
            }
            continue;
        }
        st_entry *e = &f->e[f->n];
        if (!(e->name = dt_strdup(hdr->keys[i]))) goto fail;
        f->n++;
        if (parse_entry(path, hdr->keys[i], v, f->data_bytes, e) != 0) goto fail;
    }
    if (check_layout(path, f) != 0) goto fail;
    json_free(hdr);
    *out = f;
    return 0;
fail:
    json_free(hdr);
    st_close(f);
    return -1;
}

int st_read(const char *path, st_file **out)
{
    char *raw;
    size_t n;
    uint8_t first[8];
    uint64_t hlen;
    mode_t kind;
    struct stat st;
    FILE *f = dt_fopen_regular(path, &kind); /* the first 8 bytes against the size before reading it all: a */
    if (f) {                                 /* file of gigabytes that is no weight file is refused at once */
        size_t got = fread(first, 1, sizeof first, f);
        int bad = fstat(fileno(f), &st) == 0 && check_head(path, first, got < 8 ? got : (size_t)st.st_size, &hlen) != 0;
        fclose(f);
        if (bad) return -1;
    }
    if (dt_read_file(path, &raw, &n) != 0) return -1;
    return st_parse(raw, n, path, out);
}

const st_entry *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) return &f->e[i];
    return NULL;
}

const char *st_meta(const st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}

/* JSON header into a memory stream */
static char *build_header(const st_tensor *t, int n, const char *const *mk, const char *const *mv, int n_meta,
                          size_t *len)
{
    char *buf = NULL;
    size_t sz = 0;
    uint64_t off = 0;
    FILE *m = open_memstream(&buf, &sz);
    if (!m) return NULL;
    fputc('{', m);
    if (n_meta) {
        fputs("\"__metadata__\":{", m);
        for (int i = 0; i < n_meta; i++) {
            if (i) fputc(',', m);
            json_write_string(m, mk[i]);
            fputc(':', m);
            json_write_string(m, mv[i]);
        }
        fputc('}', m);
    }
    for (int i = 0; i < n; i++) {
        uint64_t count = 1;
        if (i || n_meta) fputc(',', m);
        uint64_t size = t[i].i64 ? 8 : 4;
        json_write_string(m, t[i].name);
        fprintf(m, ":{\"dtype\":\"%s\",\"shape\":[", t[i].i64 ? "I64" : "F32");
        for (int d = 0; d < t[i].n_dims; d++) {
            fprintf(m, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
            count *= (uint64_t)t[i].shape[d];
        }
        fprintf(m, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                (unsigned long long)(off + size * count));
        off += size * count;
    }
    fputc('}', m);
    while ((ftell(m) & 7) != 0) fputc(' ', m); /* data section 8-byte aligned, as the format asks */
    fclose(m);
    *len = sz;
    return buf;
}

int st_write(const char *path, const st_tensor *t, int n, const char *const *mk, const char *const *mv, int n_meta)
{
    size_t hlen;
    char *hdr = build_header(t, n, mk, mv, n_meta, &hlen);
    unsigned char len8[8];
    dt_atomic a;
    int ok = 1;
    if (!hdr) return dt_fail("out of memory");
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    if (dt_atomic_open(&a, path) != 0) {
        free(hdr);
        return -1;
    }
    ok = fwrite(len8, 1, 8, a.f) == 8 && fwrite(hdr, 1, hlen, a.f) == hlen;
    for (int i = 0; i < n && ok; i++) {
        size_t count = 1;
        for (int d = 0; d < t[i].n_dims; d++) count *= (size_t)t[i].shape[d];
        if (t[i].i64) { /* little-endian, as the format says */
            for (size_t k = 0; k < count && ok; k++) {
                unsigned char b[8];
                for (int j = 0; j < 8; j++) b[j] = (unsigned char)((uint64_t)t[i].i64[k] >> (8 * j));
                ok = fwrite(b, 1, 8, a.f) == 8;
            }
        } else {
            ok = fwrite(t[i].data, sizeof(float), count, a.f) == count;
        }
    }
    free(hdr);
    if (!ok) {
        dt_fail("%s: write failed (%s)", path, strerror(errno));
        dt_atomic_commit(&a, 0);
        return -1;
    }
    return dt_atomic_commit(&a, 1);
}

/* FNV-1a over 32-bit words: the data of F32 tensors is a whole number of them */
static uint64_t fnv_words(uint64_t h, const uint8_t *p, size_t bytes)
{
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        uint32_t w;
        memcpy(&w, p + i, 4);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

/* one tensor's name, shape and data into the checksum */
static uint64_t sum_tensor(uint64_t h, const char *name, int n_dims, const int64_t *shape, const uint8_t *data,
                           size_t bytes)
{
    h = dt_hash64(name, strlen(name) + 1, h);
    h = dt_hash64(&n_dims, sizeof n_dims, h);
    h = dt_hash64(shape, sizeof *shape * (size_t)n_dims, h);
    return fnv_words(h, data, bytes);
}

uint64_t st_checksum_tensors(uint64_t h, const st_tensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        size_t count = 1;
        for (int d = 0; d < t[i].n_dims; d++) count *= (size_t)t[i].shape[d];
        h = sum_tensor(h, t[i].name, t[i].n_dims, t[i].shape,
                       t[i].i64 ? (const uint8_t *)t[i].i64 : (const uint8_t *)t[i].data, count * (t[i].i64 ? 8 : 4));
    }
    return h;
}

uint64_t st_checksum_file(uint64_t h, const st_file *f)
{
    for (int i = 0; i < f->n; i++) {
        const st_entry *e = &f->e[i];
        h = sum_tensor(h, e->name, e->n_dims, e->shape, f->data + e->begin, (size_t)(e->end - e->begin));
    }
    return h;
}
