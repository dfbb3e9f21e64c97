#!/bin/bash
# The malformed-input corpus (tests/corpus/bad/, written by tests/corpus/make-bad): every file
# through the option that reads it, with the exit status and message listed in
# tests/corpus/bad/EXPECTED; never a crash, a hang or a silent success. Then damaged packs and
# checkpoints, made here from good ones (their checksums are computed by dtrain).
. "$(dirname "$0")/lib.sh"
B=$top_srcdir/tests/corpus/bad
make_idx "$T/good" 2000 200
$PYTHON "$top_srcdir/tests/mkimages.py" cifar10 "$T/c10" 50 10 || fail "could not generate CIFAR files"
$PYTHON "$top_srcdir/tests/mkimages.py" pngtree "$T/tree" 20 10 40 || fail "could not generate the PNG tree"
D="--dataset mnist --data-dir $T/good --progress none --iters 2"
n=0

# check WHAT STATUS MESSAGE CMD...: CMD ends by itself with STATUS and MESSAGE in its output
check() {
    local what=$1 want_rc=$2 want=$3
    shift 3
    timeout 120 "$@" > "$T/out" 2>&1
    local rc=$?
    [ $rc -ne 124 ] || fail "$what: timed out (a hang)"
    [ $rc -lt 128 ] || { cat "$T/out"; fail "$what: killed by signal $((rc - 128))"; }
    [ $rc -eq "$want_rc" ] || { cat "$T/out"; fail "$what: exit status $rc (expected $want_rc)"; }
    grep -qF -- "$want" "$T/out" || { cat "$T/out"; fail "$what: output lacks '$want'"; }
    n=$((n + 1))
}

# a copy of the good data of KIND with FILE in place of the file it replaces; prints its directory
dataset_with() {
    local kind=$1 file=$2 dir=$T/case
    rm -rf "$dir"
    case $kind in
    train-images) cp -r "$T/good" "$dir" && cp "$file" "$dir/train-images-idx3-ubyte.gz" ;;
    train-labels) cp -r "$T/good" "$dir" && cp "$file" "$dir/train-labels-idx1-ubyte.gz" ;;
    cifar) cp -r "$T/c10" "$dir" && cp "$file" "$dir/data_batch_1.bin" ;;
    png) cp -r "$T/tree" "$dir" && cp "$file" "$dir/train/$(ls "$dir/train" | head -n 1)/x.png" ;;
    jpeg) cp -r "$T/tree" "$dir" && cp "$file" "$dir/train/$(ls "$dir/train" | head -n 1)/x.JPEG" ;;
    esac
    echo "$dir"
}

while IFS='|' read -r path status message; do
    case $path in '#'* | '') continue ;; esac
    kind=${path%%/*}
    file=$B/$path
    [ -f "$file" ] || fail "EXPECTED lists $path, which is not in the corpus (run tests/corpus/make-bad)"
    message=${message//@FILE@/$file}
    case $kind in
    net) check "$path" "$status" "$message" "$DTRAIN" --net "$file" $D ;;
    conf) check "$path" "$status" "$message" "$DTRAIN" --config "$file" $D ;;
    load) check "$path" "$status" "$message" "$DTRAIN" $D --load "$file" ;;
    train-images | train-labels)
        dir=$(dataset_with "$kind" "$file")
        check "$path" "$status" "$message" "$DTRAIN" --dataset mnist --data-dir "$dir" --progress none --iters 2 ;;
    cifar)
        dir=$(dataset_with cifar "$file")
        check "$path" "$status" "$message" "$DTRAIN" --net cifar-quick --dataset cifar10 --data-dir "$dir" --progress none --iters 2 ;;
    png | jpeg)
        dir=$(dataset_with "$kind" "$file")
        check "$path" "$status" "$message" "$DTRAIN" --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet \
            --image-size 36 --batch 10 --data-dir "$dir" --progress none --iters 2 ;;
    *) fail "EXPECTED: unknown kind '$kind' in $path" ;;
    esac
done < "$B/EXPECTED"
[ "$(find "$B" -type f ! -name EXPECTED | wc -l)" -eq $n ] || fail "$n cases in EXPECTED, but the corpus has $(find "$B" -type f ! -name EXPECTED | wc -l) files"
note "$n corpus files"

# image trees with what is not an image where images or class folders belong: named, never skipped
tree_with() { # WHAT MESSAGE COMMAND-THAT-SPOILS-$dir
    local what=$1 want=$2 dir=$T/case
    rm -rf "$dir" && cp -r "$T/tree" "$dir" && class=$(ls "$dir/train" | head -n 1)
    eval "$3" || fail "$what: could not make the tree"
    check "image tree: $what" 1 "$want" "$DTRAIN" --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet \
        --image-size 36 --batch 10 --data-dir "$dir" --progress none --iters 2
}
tree_with "a dangling link" "/x.png: cannot read (No such file or directory)" 'ln -s "$T/nonexistent" "$dir/train/$class/x.png"'
tree_with "a folder in a class folder" "x: not a file (expected only" 'mkdir "$dir/train/$class/x"'
tree_with "a file beside the class folders" "train/notes.txt: not a folder (expected only class folders" \
    'echo hi > "$dir/train/notes.txt"'
tree_with "one class" "--dataset imagenet has 1 class (expected at least 2" \
    'for s in train val; do for c in $(ls "$dir/$s" | tail -n +2); do rm -r "$dir/$s/$c"; done; done'

# a progressive JPEG whose last scan is repeated 150 times (libjpeg only warns; each scan passes over
# the whole image, so a large one took hours): refused past 100 scans
$PYTHON - "$T/scans.JPEG" <<'EOF2' || fail "could not write the JPEG of many scans"
import io, sys
from PIL import Image
b = io.BytesIO()
Image.new("L", (64, 64), 128).save(b, "JPEG", progressive=True, quality=90)
j = b.getvalue()
last, eoi = j.rindex(b"\xff\xda"), j.rindex(b"\xff\xd9")
open(sys.argv[1], "wb").write(j[:eoi] + j[last:eoi] * 150 + j[eoi:])
EOF2
dir=$(dataset_with jpeg "$T/scans.JPEG")
check "a JPEG of 150 scans" 1 "x.JPEG: a progressive JPEG of more than 100 scans" "$DTRAIN" \
    --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet --image-size 36 --batch 10 --data-dir "$dir" \
    --progress none --iters 2

# packs: made by dtrain from the PNG tree, then damaged
P="--net $top_srcdir/tests/nets/tiny-images.net --dataset imagenet --image-size 36 --batch 10 --progress none --iters 2"
"$DTRAIN" $P --data-dir "$T/tree" > "$T/out" 2>&1 || { cat "$T/out"; fail "packing the PNG tree failed"; }
pack=$(ls "$T/tree/.dtrain-pack"/train-*.pack)
damage() { # NAME OFFSET BYTES: a copy of the packs with BYTES written at OFFSET of the train pack
    rm -rf "$T/packs" && cp -r "$T/tree/.dtrain-pack" "$T/packs"
    printf "$3" | dd of="$T/packs/$(basename "$pack")" bs=1 seek="$2" conv=notrunc status=none
}
damage magic 0 'XXXXXXXX'
check "pack: bad magic" 1 "not a dtrain pack" "$DTRAIN" $P --data-dir "$T/packs"
damage version 8 '\003\000\000\000' # found by tools/fuzz: the message read the header after unmapping it
check "pack: another version" 1 "is a version 3 pack, this dtrain makes version 2" "$DTRAIN" $P --data-dir "$T/packs"
damage count 16 '\377\377\377\377\377\377\377\177'
check "pack: huge image count" 1 "$(basename "$pack")" "$DTRAIN" $P --data-dir "$T/packs"
damage pixels $(( $(stat -c %s "$pack") - 100 )) '\001\002\003\004'
check "pack: damaged pixels" 1 "checksum" "$DTRAIN" $P --data-dir "$T/packs" --iters 20
rm -rf "$T/packs" && cp -r "$T/tree/.dtrain-pack" "$T/packs" && truncate -s 5000 "$T/packs/$(basename "$pack")"
check "pack: truncated" 1 "$(basename "$pack")" "$DTRAIN" $P --data-dir "$T/packs"
rm -rf "$T/packs" && cp -r "$T/tree/.dtrain-pack" "$T/packs" && rm "$T/packs/$(basename "$pack")" &&
    mkfifo "$T/packs/$(basename "$pack")"
check "pack: a named pipe" 1 "$(basename "$pack"): a pipe (expected a dtrain pack" "$DTRAIN" $P --data-dir "$T/packs"

# checkpoints: a good one, then damaged in the header, the metadata and the data
"$DTRAIN" $D --checkpoint "$T/good.ckpt" > "$T/out" 2>&1 || { cat "$T/out"; fail "writing a checkpoint failed"; }
size=$(stat -c %s "$T/good.ckpt")
for at in 3 100 $((size / 2)) $((size - 3)); do
    cp "$T/good.ckpt" "$T/bad.ckpt"
    printf '\252' | dd of="$T/bad.ckpt" bs=1 seek=$at conv=notrunc status=none
    check "checkpoint damaged at byte $at" 1 "--resume: $T/bad.ckpt" "$DTRAIN" $D --iters 4 --resume "$T/bad.ckpt"
done
cp "$T/good.ckpt" "$T/bad.ckpt" && truncate -s $((size - 1000)) "$T/bad.ckpt"
check "checkpoint truncated" 1 "--resume: $T/bad.ckpt" "$DTRAIN" $D --iters 4 --resume "$T/bad.ckpt"
# a momentum tensor's dtype edited (the checksum covers names, shapes and data, not dtypes): refused, not read as floats
$PYTHON - "$T/good.ckpt" "$T/dtype.ckpt" <<'EOF2' || fail "could not edit the checkpoint's dtype"
import sys
b = bytearray(open(sys.argv[1], "rb").read())
old = b'"optim:momentum:fc1.bias":{"dtype":"F32"'
at = b.index(old)
b[at:at + len(old)] = old.replace(b"F32", b"I32")
open(sys.argv[2], "wb").write(b)
EOF2
check "a checkpoint's momentum of another dtype" 1 "tensor 'optim:momentum:fc1.bias' is I32 of 500 values" \
    "$DTRAIN" $D --iters 4 --resume "$T/dtype.ckpt"
# a NaN in a weight or a momentum, the checksum made again (a file edited so that no checksum catches
# it): refused at its tensor, as --load refuses one (a NaN momentum turned the weights into NaN later)
for t in fc1.bias optim:momentum:fc1.bias; do
    $PYTHON "$top_srcdir/tests/ckpt_edit.py" "$T/good.ckpt" "$T/nan.ckpt" "$t" 0 nan || fail "could not edit $t"
    check "a checkpoint with a NaN in $t" 1 "nan.ckpt: tensor '$t' holds a non-finite value ([0] is nan" \
        "$DTRAIN" $D --iters 4 --resume "$T/nan.ckpt"
done
# a rank's own tensor (Top-k's residual) of another dtype: refused, not read as floats
"$DTRAIN" $D --mode topk --checkpoint "$T/topk.ckpt" > "$T/out" 2>&1 || { cat "$T/out"; fail "writing a topk checkpoint failed"; }
sed 's/"comm:0:residual":{"dtype":"F32"/"comm:0:residual":{"dtype":"I32"/' "$T/topk.ckpt" > "$T/topk-i32.ckpt"
cmp -s "$T/topk.ckpt" "$T/topk-i32.ckpt" && fail "the topk checkpoint has no comm:0:residual to edit"
check "a checkpoint's residual of another dtype" 1 "tensor 'comm:0:residual' is I32 in" \
    "$DTRAIN" $D --mode topk --iters 4 --resume "$T/topk-i32.ckpt"
check "a directory as the checkpoint" 2 "--resume: $T: " "$DTRAIN" $D --iters 4 --resume "$T"
check "a device as the checkpoint" 2 "--resume: /dev/zero: " "$DTRAIN" $D --iters 4 --resume /dev/zero
# a named pipe as an input, or as the log with no process reading it: refused at once (open() waited for
# the other end forever, and a SIGTERM did not end it)
mkfifo "$T/fifo"
for f in net load resume config rerun; do
    check "a named pipe as --$f" 2 "--$f: $T/fifo: a pipe (expected a file)" "$DTRAIN" $D --iters 4 --$f "$T/fifo"
done
check "a named pipe nobody reads as --log" 2 "--log $T/fifo: a named pipe that no process reads" \
    "$DTRAIN" $D --iters 4 --log "$T/fifo"
rm -f "$T/fifo"
# an 8 GB file (sparse) that is no weight file, checkpoint or net: refused by its first bytes or its size
# at once, not after reading it all into memory (51 s and 8 GB before; here under a 4 GB address space,
# where reading it all fails with "out of memory"; not in the sanitized build, whose shadow memory
# alone reserves terabytes of address space)
truncate -s 8G "$T/big" && printf XXXXXXXX | dd of="$T/big" conv=notrunc status=none
limit="ulimit -v 4000000 &&"
[ "${DT_SANITIZED:-no}" = yes ] && limit=
for f in load resume; do
    check "an 8 GB file as --$f" 1 "--$f: $T/big: a header of 6365935209750747224 bytes, over" \
        bash -c "$limit"' exec "$@"' - "$DTRAIN" $D --iters 4 --$f "$T/big"
done
check "an 8 GB file as --net" 1 "--net: $T/big: 8589.9 MB, larger than any net file can be" "$DTRAIN" $D --net "$T/big"
check "an 8 GB file as --config" 2 "--config: $T/big: 8589.9 MB, larger than any config file can be" \
    "$DTRAIN" $D --config "$T/big"
rm -f "$T/big"
# a named pipe as a data file: a CIFAR batch, a pack, an image of a tree (open() waited there too)
rm -rf "$T/case" && cp -r "$T/c10" "$T/case" && rm "$T/case/data_batch_1.bin" && mkfifo "$T/case/data_batch_1.bin"
check "a named pipe as a CIFAR file" 1 "data_batch_1.bin: a pipe (expected a CIFAR-10 binary file)" \
    "$DTRAIN" --net cifar-quick --dataset cifar10 --data-dir "$T/case" --progress none --iters 2
tree_with "a named pipe as an image" "x.png: " 'mkfifo "$dir/train/$class/x.png"'
# weights with an infinity (the message names the file and the tensor)
"$DTRAIN" $D --save "$T/good.st" > "$T/out" 2>&1 || { cat "$T/out"; fail "could not save weights"; }
$PYTHON - "$T/good.st" "$T/inf.st" <<'EOF2' || fail "could not write the weights with an infinity"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
b[8 + n + 4:8 + n + 8] = struct.pack("<f", float("inf"))  # the second value of the first tensor
open(sys.argv[2], "wb").write(b)
EOF2
check "weights with an infinity" 1 "--load: $T/inf.st: tensor '" "$DTRAIN" $D --load "$T/inf.st"
echo "PASS: $n malformed inputs, each refused with its message and exit status, none a crash or a hang"
