#!/bin/sh
# Writes C source holding the text of each net file given, so `--net NAME` works wherever
# the binary is. Usage: embed-nets.sh SRCDIR nets/a.net nets/b.net ... > nets_builtin.c
set -e
srcdir=$1
shift
printf '/* Generated from the nets/ directory by build-aux/embed-nets.sh; do not edit. */\n'
printf '#include <stdio.h>\n#include <string.h>\n\n#include "engine/net.h"\n\n'
printf 'static const char *const names[] = {\n'
for f in "$@"; do b=$(basename "$f" .net); printf '    "%s",\n' "$b"; done
printf '};\n\nstatic const char *const texts[] = {\n'
for f in "$@"; do
    awk '{ gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "    \"%s\\n\"\n", $0 }' "$srcdir/$f"
    printf '    ,\n'
done
cat <<'EOC'
};

int net_builtin_count(void) { return (int)(sizeof names / sizeof names[0]); }
const char *net_builtin_name(int i) { return names[i]; }

const char *net_builtin_text(const char *name)
{
    for (int i = 0; i < net_builtin_count(); i++)
        if (strcmp(names[i], name) == 0) return texts[i];
    return NULL;
}

const char *net_builtin_list(void)
{
    static char buf[1024];
    if (!buf[0]) {
        size_t off = 0;
        for (int i = 0; i < net_builtin_count() && off < sizeof buf; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", names[i]);
    }
    return buf;
}
EOC
