/* The table of modes. A new mode is a new file and one line here. */
#include "mode.h"

#include <stdio.h>
#include <string.h>

#include "../util.h"

extern const dt_mode_desc mode_dsync;

static const dt_mode_desc *const modes[] = {&mode_dsync};

const dt_mode_desc *mode_find(const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(modes); i++)
        if (strcmp(modes[i]->name, name) == 0) return modes[i];
    return NULL;
}

int mode_count(void) { return (int)DT_ARRAY_LEN(modes); }
const dt_mode_desc *mode_at(int i) { return modes[i]; }

const char *mode_list(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(modes); i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", modes[i]->name);
    }
    return buf;
}
