/* Config files: "key = value" per line, '#' comments (dtrain.conf(5)). Errors name file:line. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

static char *trim(char *s)
{
    char *e;
    while (isspace((unsigned char)*s)) s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

int config_load(const char *path, config_apply_fn apply, void *arg)
{
    char *text, *line, *save = NULL;
    int lineno = 0, rc = 0;
    if (dt_read_file(path, &text, NULL) != 0) return dt_fail_prefix("--config");
    /* strtok_r would skip empty lines and shift line numbers: split by hand */
    for (line = text; line && rc == 0; line = save) {
        char *nl = strchr(line, '\n'), origin[600], *key, *val, *eq, *hash;
        save = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        lineno++;
        if ((hash = strchr(line, '#'))) *hash = 0;
        key = trim(line);
        if (!*key) continue;
        if (!(eq = strchr(key, '='))) {
            rc = dt_fail("%s:%d: expected 'key = value', found '%s'", path, lineno, key);
            break;
        }
        *eq = 0;
        key = trim(key);
        val = trim(eq + 1);
        snprintf(origin, sizeof origin, "%s:%d: %s", path, lineno, key);
        if (strncmp(key, "--", 2) == 0) {
            rc = dt_fail("%s:%d: write '%s' without the dashes", path, lineno, key);
            break;
        }
        rc = apply(arg, key, val, origin);
    }
    free(text);
    return rc;
}
