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

/* a key seen earlier in the file: its line */
typedef struct seen {
    char key[64];
    int line;
} seen;

/* a comment's '#': at the start of the line or after a blank, so a value may hold one (a path) */
static char *comment_of(char *line)
{
    for (char *h = strchr(line, '#'); h; h = strchr(h + 1, '#'))
        if (h == line || isspace((unsigned char)h[-1])) return h;
    return NULL;
}

int config_parse(char *text, size_t n, const char *path, int comments, config_apply_fn apply, void *arg)
{
    char *line, *save = NULL, *nul = memchr(text, 0, n);
    int lineno = 0, rc = 0, n_seen = 0;
    seen keys[256];
    if (nul)
        return dt_fail("%s: a NUL byte at offset %zu (expected a text file of key = value lines)", path,
                       (size_t)(nul - text));
    if (n >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) text += 3; /* a UTF-8 byte-order mark, as editors write */
    /* strtok_r would skip empty lines and shift line numbers: split by hand */
    for (line = text; line && rc == 0; line = save) {
        char *nl = strchr(line, '\n'), origin[600], *key, *val, *eq, *hash;
        save = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        lineno++;
        if (comments && (hash = comment_of(line))) *hash = 0;
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
        for (int i = 0; i < n_seen; i++)
            if (strcmp(keys[i].key, key) == 0)
                return dt_fail("%s:%d: %s is set again (first on line %d; expected each key once)", path, lineno, key,
                               keys[i].line);
        if (n_seen == (int)DT_ARRAY_LEN(keys) || strlen(key) >= sizeof keys[0].key)
            return dt_fail("%s:%d: more than %d keys, or a key too long", path, lineno, (int)DT_ARRAY_LEN(keys));
        snprintf(keys[n_seen].key, sizeof keys[0].key, "%s", key);
        keys[n_seen++].line = lineno;
        rc = apply(arg, key, val, origin);
    }
    return rc;
}

int config_load(const char *path, config_apply_fn apply, void *arg)
{
    char *text;
    size_t n;
    if (dt_read_text(path, (size_t)16 << 20, "config file", &text, &n) != 0) return dt_fail_prefix("--config");
    int rc = config_parse(text, n, path, 1, apply, arg);
    free(text);
    return rc;
}
