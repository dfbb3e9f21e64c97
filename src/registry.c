#include "registry.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

/* item i and its name, read without assuming the table's pointer type */
static const void *item(const dt_registry *r, int i)
{
    const void *p;
    memcpy(&p, (const char *)r->items + (size_t)i * sizeof p, sizeof p);
    return p;
}

const char *registry_name(const dt_registry *r, int i)
{
    const char *name;
    memcpy(&name, item(r, i), sizeof name);
    return name;
}

const void *registry_find(const dt_registry *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(registry_name(r, i), name) == 0) return item(r, i);
    return NULL;
}

const char *registry_list(const dt_registry *r, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < r->n && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "", registry_name(r, i));
    return buf;
}

const void *registry_get(const dt_registry *r, const char *name, const char *origin)
{
    const void *p = registry_find(r, name);
    char list[1024];
    if (!p)
        dt_fail("%s: unknown %s '%s' (expected one of %s)", origin, r->what, name, registry_list(r, list, sizeof list));
    return p;
}
