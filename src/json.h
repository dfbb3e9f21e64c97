/* json — a small, strict JSON reader (safetensors headers) and string escaping for writers.
 * Parse errors give the byte offset and what was expected. Numbers are doubles; integers are
 * exact up to 2^53 (json_int checks). */
#ifndef DT_JSON_H
#define DT_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ } json_type;

typedef struct json {
    json_type type;
    double num; /* JSON_NUM, JSON_BOOL (0/1) */
    char *str;  /* JSON_STR */
    int n;      /* JSON_ARR, JSON_OBJ: number of items */
    int cap;    /* items (and keys) allocated: grows geometrically */
    struct json *items;
    char **keys; /* JSON_OBJ */
} json;

/* Parses text[0..len); `what` names the source in messages. */
int json_parse(const char *text, size_t len, const char *what, json **out);
void json_free(json *j);
const json *json_get(const json *obj, const char *key);
/* The value as a non-negative integer < 2^53, or -1 if it is not one. */
int64_t json_int(const json *j);
/* Writes s as a JSON string literal with quotes. */
void json_write_string(FILE *f, const char *s);

#endif
