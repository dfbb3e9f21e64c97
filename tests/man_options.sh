#!/bin/bash
# Every option in dtrain's option table (as --help prints it) is documented in man/dtrain.1, and
# the man page documents no option the program lacks.
. "$(dirname "$0")/lib.sh"
"$DTRAIN" --help > "$T/help" || fail "--help failed"
sed -n 's/^  --\([a-z0-9-]*\).*/\1/p' "$T/help" | sort -u > "$T/from_help"
# the tags of .TP entries in the OPTIONS section: the line after each .TP or .TQ
awk '/^\.SH OPTIONS/ { on = 1; next } /^\.SH / { on = 0 } on && (prev == ".TP" || prev == ".TQ") { print } { prev = $0 }' \
    "$top_srcdir/man/dtrain.1" | sed -n 's/^\.B[IR]* \\-\\-\([a-z0-9\\-]*\).*/\1/p' | sed 's/\\-/-/g' | sort -u > "$T/from_man"
# a build without the CUDA backend has no GPU options, which the man page documents
if "$DTRAIN" --list-devices 2>/dev/null | grep -q '^cuda .*not built'; then
    grep -v -x -e gpu -e tf32 -e gpu-exact -e gpu-graph -e gpu-workspace "$T/from_man" > "$T/m" && mv "$T/m" "$T/from_man"
fi
[ -s "$T/from_help" ] || fail "no options found in --help"
[ -s "$T/from_man" ] || fail "no options found in man/dtrain.1"
missing=$(comm -23 "$T/from_help" "$T/from_man")
extra=$(comm -13 "$T/from_help" "$T/from_man")
[ -z "$missing" ] || fail "options not documented in man/dtrain.1: $(echo $missing)"
[ -z "$extra" ] || fail "man/dtrain.1 documents options the program does not have: $(echo $extra)"
echo "PASS: $(wc -l < "$T/from_help") options, all in man/dtrain.1 and nothing more"
