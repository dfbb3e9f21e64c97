#!/bin/sh
# Writes C source holding the text of each net file given, so `--net NAME` works wherever
# the binary is. Usage: embed-nets.sh SRCDIR nets/a.net nets/b.net ... > nets_builtin.c
set -e
srcdir=$1
shift
printf '/* Generated from the nets/ directory by build-aux/embed-nets.sh; do not edit. */\n'
printf '#include "engine/engine.h"\n#include "registry.h"\n\n'
printf 'typedef struct builtin {\n    const char *name;\n    const char *text;\n} builtin;\n\n'
i=0
for f in "$@"; do
    b=$(basename "$f" .net)
    printf 'static const builtin net%d = {"%s",\n' "$i" "$b"
    awk '{ gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "    \"%s\\n\"\n", $0 }' "$srcdir/$f"
    printf '};\n'
    i=$((i + 1))
done
printf '\nstatic const builtin *const nets[] = {'
i=0
for f in "$@"; do printf '%s&net%d' "$([ $i -gt 0 ] && echo ', ')" "$i"; i=$((i + 1)); done
printf '};\n'
cat <<'EOC'
static const dt_registry registry = DT_REGISTRY("net", nets);

int net_builtin_count(void) { return registry.n; }
const char *net_builtin_name(int i) { return registry_name(&registry, i); }

const char *net_builtin_text(const char *name)
{
    const builtin *b = registry_find(&registry, name);
    return b ? b->text : NULL;
}

const char *net_builtin_list(void)
{
    static char buf[1024];
    return buf[0] ? buf : registry_list(&registry, buf, sizeof buf);
}
EOC
