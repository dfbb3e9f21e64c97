#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct {
    const char *s, *end, *what;
    int depth;
} parser;

static int perr(parser *p, const char *cur, const char *expected)
{
    return dt_fail("%s: invalid JSON at byte %ld (expected %s)", p->what, (long)(cur - p->s),
                   expected);
}

static void skip_ws(parser *p, const char **c)
{
    while (*c < p->end && (**c == ' ' || **c == '\t' || **c == '\n' || **c == '\r')) (*c)++;
}

static int parse_value(parser *p, const char **c, json *out);

/* the 4 hex digits at q (of a \\u escape) as a number, or -1 and the error ("\\u000g" once read as 'c':
 * a bad digit counted 99, and the sum wrapped past the check) */
static long hex4(parser *p, const char *q)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char h = q + i < p->end ? q[i] : 0;
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) return perr(p, q + i, "4 hex digits");
        v = v * 16 + d;
    }
    return v;
}

/* code point v as UTF-8 at b: its length. A lone low surrogate U+DC80..U+DCFF is the byte it stands
 * for (Python's surrogateescape, as json_write_string writes a byte of no valid UTF-8: a Latin-1 file
 * name comes back as it was); another lone surrogate is U+FFFD */
static int utf8_put(unsigned char *b, long v)
{
    if (v >= 0xdc80 && v <= 0xdcff) return b[0] = (unsigned char)(v & 0xff), 1;
    if (v >= 0xd800 && v < 0xe000) v = 0xfffd;
    if (v < 0x80) return b[0] = (unsigned char)v, 1;
    if (v < 0x800) return b[0] = (unsigned char)(0xc0 | v >> 6), b[1] = (unsigned char)(0x80 | (v & 63)), 2;
    if (v < 0x10000)
        return b[0] = (unsigned char)(0xe0 | v >> 12), b[1] = (unsigned char)(0x80 | (v >> 6 & 63)),
               b[2] = (unsigned char)(0x80 | (v & 63)), 3;
    return b[0] = (unsigned char)(0xf0 | v >> 18), b[1] = (unsigned char)(0x80 | (v >> 12 & 63)),
           b[2] = (unsigned char)(0x80 | (v >> 6 & 63)), b[3] = (unsigned char)(0x80 | (v & 63)), 4;
}

static int parse_string(parser *p, const char **c, char **out)
{
    const char *q = *c + 1;
    size_t cap = 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return dt_fail("out of memory");
    for (;;) {
        if (n + 5 > cap) { /* room for a code point of 4 bytes and the NUL */
            char *g = realloc(buf, cap *= 2);
            if (!g) {
                free(buf);
                return dt_fail("out of memory");
            }
            buf = g;
        }
        if (q >= p->end) {
            free(buf);
            return perr(p, q, "a closing '\"'");
        }
        unsigned char ch = (unsigned char)*q++;
        if (ch == '"') break;
        if (ch < 0x20) {
            free(buf);
            return perr(p, q - 1, "no control characters in strings");
        }
        if (ch == '\\') {
            if (q >= p->end) {
                free(buf);
                return perr(p, q, "an escape");
            }
            char e = *q++;
            switch (e) {
            case '"': ch = '"'; break;
            case '\\': ch = '\\'; break;
            case '/': ch = '/'; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            case 'u': {
                long v = hex4(p, q);
                if (v < 0) {
                    free(buf);
                    return -1;
                }
                q += 4;
                /* a pair of surrogates is one code point beyond U+FFFF */
                if (v >= 0xd800 && v < 0xdc00 && p->end - q >= 6 && q[0] == '\\' && q[1] == 'u') {
                    long lo = hex4(p, q + 2);
                    if (lo < 0) {
                        free(buf);
                        return -1;
                    }
                    if (lo >= 0xdc00 && lo < 0xe000) v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00), q += 6;
                }
                /* a NUL would end the string where its reader looks, so it is refused */
                if (v == 0) {
                    free(buf);
                    return perr(p, q - 6, "a string without \\u0000");
                }
                n += utf8_put((unsigned char *)buf + n, v);
                continue;
            }
            default: free(buf); return perr(p, q - 1, "a valid escape");
            }
        }
        buf[n++] = (char)ch;
    }
    buf[n] = 0;
    *out = buf;
    *c = q;
    return 0;
}

/* appends item (and key) to a container, doubling its arrays when full: a header of a million
 * entries costs a million copies in all, not half a trillion */
static int push(json *arr, json *item, char *key)
{
    if (arr->n == arr->cap) {
        if (arr->cap > (1 << 29)) return dt_fail("JSON container of more than 2^29 items");
        int cap = arr->cap ? 2 * arr->cap : 8;
        json *g = realloc(arr->items, sizeof *g * (size_t)cap);
        if (!g) return dt_fail("out of memory");
        arr->items = g;
        if (arr->type == JSON_OBJ) {
            char **k = realloc(arr->keys, sizeof *k * (size_t)cap);
            if (!k) return dt_fail("out of memory");
            arr->keys = k;
        }
        arr->cap = cap;
    }
    if (arr->type == JSON_OBJ) arr->keys[arr->n] = key;
    arr->items[arr->n++] = *item;
    return 0;
}

static void free_inner(json *j)
{
    if (j->type == JSON_STR) free(j->str);
    if (j->type == JSON_ARR || j->type == JSON_OBJ) {
        for (int i = 0; i < j->n; i++) {
            free_inner(&j->items[i]);
            if (j->keys) free(j->keys[i]);
        }
        free(j->items);
        free(j->keys);
    }
}

static int parse_container(parser *p, const char **c, json *out, int obj)
{
    const char close = obj ? '}' : ']';
    out->type = obj ? JSON_OBJ : JSON_ARR;
    if (++p->depth > 64) return perr(p, *c, "nesting depth at most 64");
    (*c)++;
    skip_ws(p, c);
    if (*c < p->end && **c == close) {
        (*c)++;
        p->depth--;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        json item;
        memset(&item, 0, sizeof item);
        skip_ws(p, c);
        if (obj) {
            if (*c >= p->end || **c != '"') return perr(p, *c, "a string key");
            if (parse_string(p, c, &key) != 0) return -1;
            skip_ws(p, c);
            if (*c >= p->end || **c != ':') {
                free(key);
                return perr(p, *c, "':'");
            }
            (*c)++;
        }
        if (parse_value(p, c, &item) != 0 || push(out, &item, key) != 0) {
            free(key);
            free_inner(&item);
            return -1;
        }
        skip_ws(p, c);
        if (*c < p->end && **c == ',') {
            (*c)++;
            continue;
        }
        if (*c < p->end && **c == close) {
            (*c)++;
            p->depth--;
            return 0;
        }
        return perr(p, *c, obj ? "',' or '}'" : "',' or ']'");
    }
}

static int parse_value(parser *p, const char **c, json *out)
{
    skip_ws(p, c);
    if (*c >= p->end) return perr(p, *c, "a value");
    switch (**c) {
    case '{': return parse_container(p, c, out, 1);
    case '[': return parse_container(p, c, out, 0);
    case '"': out->type = JSON_STR; return parse_string(p, c, &out->str);
    case 't':
    case 'f':
    case 'n': {
        static const char *words[] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++) {
            size_t l = strlen(words[i]);
            if ((size_t)(p->end - *c) >= l && strncmp(*c, words[i], l) == 0) {
                out->type = i == 2 ? JSON_NULL : JSON_BOOL;
                out->num = i == 0;
                *c += l;
                return 0;
            }
        }
        return perr(p, *c, "true, false or null");
    }
    default: {
        char buf[64], *e;
        size_t l = 0;
        while (*c + l < p->end && l < sizeof buf - 1 && strchr("+-0123456789.eE", (*c)[l])) l++;
        memcpy(buf, *c, l);
        buf[l] = 0;
        if (l == 0) return perr(p, *c, "a value");
        out->type = JSON_NUM;
        out->num = strtod(buf, &e);
        if (*e || !isfinite(out->num)) return perr(p, *c, "a number");
        *c += l;
        return 0;
    }
    }
}

int json_parse(const char *text, size_t len, const char *what, json **out)
{
    parser p = {text, text + len, what, 0};
    const char *c = text;
    json *j = calloc(1, sizeof *j);
    if (!j) return dt_fail("out of memory");
    if (parse_value(&p, &c, j) != 0) {
        json_free(j);
        return -1;
    }
    skip_ws(&p, &c);
    if (c != p.end) {
        json_free(j);
        return perr(&p, c, "the end of the text");
    }
    *out = j;
    return 0;
}

void json_free(json *j)
{
    if (!j) return;
    free_inner(j);
    free(j);
}

const json *json_get(const json *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

int64_t json_int(const json *j)
{
    if (!j || j->type != JSON_NUM || j->num < 0 || j->num > 9007199254740992.0 || j->num != floor(j->num)) return -1;
    return (int64_t)j->num;
}

void json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    while (*s) {
        unsigned char ch = (unsigned char)*s;
        size_t n = dt_utf8_len(s);
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else if (n == 0)
            fprintf(f, "\\udc%02x", ch); /* no UTF-8 (a Latin-1 file name): Python's surrogateescape */
        else
            fwrite(s, 1, n, f);
        s += n ? n : 1;
    }
    fputc('"', f);
}
