#!/bin/bash
# Includes point one way (STYLE.md, DESIGN.md): base <- data, engine <- comm <- ckpt, log <- run,
# train <- cli <- main. Each module is reached from outside only through its public header
# (engine/engine.h, comm/comm.h, data/data.h). Lists every include that breaks a rule, and fails
# on any. Run by hand it is the include-graph evidence of the layout.
. "$(dirname "$0")/lib.sh"
cd "$top_srcdir/src" || fail "no src directory"
bad=0
# includes FILE: the quoted includes of FILE, as paths relative to src/
includes() {
    local dir
    dir=$(dirname "$1")
    sed -n 's/^#include "\([^"]*\)".*/\1/p' "$1" | while read -r inc; do
        if [ -f "$dir/$inc" ]; then realpath -m --relative-to=. "$dir/$inc"; else echo "$inc"; fi
    done
}
# forbid FILES... -- PATTERN WHY: no file of FILES includes a header matching PATTERN
forbid() {
    local files=() pattern why
    while [ "$1" != "--" ]; do files+=("$1"); shift; done
    pattern=$2 why=$3
    for f in "${files[@]}"; do
        [ -f "$f" ] || continue
        for inc in $(includes "$f"); do
            if echo "$inc" | grep -Eq "$pattern"; then
                echo "  $f includes $inc: $why"
                bad=$((bad + 1))
            fi
        done
    done
}
base=(util.[ch] split.[ch] rng.[ch] cpu.[ch] json.[ch] stats.[ch] registry.[ch] opt.h safetensors.[ch] config.[ch])
above='^(cli|options|run|train|ckpt|weights|log)\.h$'
forbid "${base[@]}" -- '/|^(cli|options|run|train|ckpt|weights|log)\.h$' "the base floor includes only the base"
forbid data/* -- '^(engine|comm)/|'"$above" "data knows neither the engine nor the comm subsystem"
forbid engine/* -- '^(data|comm)/|'"$above" "the engine knows nothing of data, MPI or the run"
forbid comm/* -- '^data/|'"$above" "the comm subsystem sees the arena, not data or the run"
forbid ckpt.[ch] weights.[ch] log.[ch] run_state.c -- '^(cli|options|run|train)\.h$' "checkpoints and logs know nothing of the run"
forbid run.[ch] train.[ch] -- '^cli\.h$' "the run reads options, it does not parse them"
forbid config.[ch] -- '^cli\.h$' "the config reader takes a callback"
# outside a module: its public header only
outside() { # MODULE PUBLIC
    for f in *.[ch] $(ls -d */ | grep -v "^$1/" | sed 's|/$||' | while read -r d; do ls "$d"/*.[ch] 2>/dev/null; done); do
        for inc in $(includes "$f"); do
            case "$inc" in "$1"/*) [ "$inc" = "$2" ] || { echo "  $f includes $inc: outside $1/ only $2"; bad=$((bad + 1)); } ;; esac
        done
    done
}
outside engine engine/engine.h
outside comm comm/comm.h
outside data data/data.h
n=$(ls ./*.[ch] ./*/*.[ch] | wc -l)
[ "$bad" -eq 0 ] || fail "$bad includes point the wrong way"
echo "PASS: the includes of $n files point one way; modules are reached through their public headers"
