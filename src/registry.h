/* registry — the tables of things chosen by name: modes, codecs, layer types, nets, datasets,
 * backends. One way to find an entry and to list the names for help and error messages.
 *
 * A table is an array of pointers to descriptors whose first member is their name
 * (`const char *`). The registry only reads it; each module keeps its own table.
 */
#ifndef DT_REGISTRY_H
#define DT_REGISTRY_H

#include <stddef.h>

typedef struct dt_registry {
    const char *what;         /* "mode", "codec", ...: for messages */
    const void *const *items; /* pointers to descriptors, each starting with `const char *name` */
    int n;
} dt_registry;

/* A registry over a table (an array of descriptor pointers). */
#define DT_REGISTRY(what, table) {(what), (const void *const *)(table), (int)(sizeof(table) / sizeof((table)[0]))}

/* The entry called NAME, or NULL. */
const void *registry_find(const dt_registry *r, const char *name);
/* The name of entry i. */
const char *registry_name(const dt_registry *r, int i);
/* "a, b, c" in table order, into buf; returns buf. */
const char *registry_list(const dt_registry *r, char *buf, size_t n);
/* The entry called NAME, or NULL with a message: "ORIGIN: unknown WHAT 'NAME' (expected one of a, b, c)". */
const void *registry_get(const dt_registry *r, const char *name, const char *origin);

#endif
