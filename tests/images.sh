#!/bin/bash
# Image datasets end to end, on files generated in the true formats (tests/mkimages.py):
#  - CIFAR-10 binary files, cifar-quick, 2 ranks, default augmentation (crop 4 + flip): the
#    generated classes (colour x stripe direction) are learnt: test accuracy >= 0.9 in 3 epochs
#  - CIFAR-100 files, cifar-quick-convex: only ip2 trains; the frozen layers' weights are
#    bit-identical before and after
#  - an ImageNet-style PNG tree: packed once by one rank, then memory-mapped by both; a small CNN
#    on 32x32 random resized crops learns it (>= 0.9); a second run reuses the pack; an image
#    rewritten in place makes the next run pack again
. "$(dirname "$0")/lib.sh"
need_mpirun
$PYTHON "$top_srcdir/tests/mkimages.py" cifar10 "$T/c10" 3000 500 || fail "could not generate CIFAR-10 files"

mpi -np 2 "$DTRAIN" --net cifar-quick --dataset cifar10 --data-dir "$T/c10" --epochs 3 --batch 100 --lr 0.01 \
    --log "$T/c10.jsonl" --progress lines > "$T/c10.txt" 2>&1 || { cat "$T/c10.txt"; fail "cifar-quick training failed"; }
cat "$T/c10.txt"
grep -q "augmentation: random crop, padding 4, flip" "$T/c10.txt" || fail "the CIFAR default augmentation is not in use"
acc=$(json_last "$T/c10.jsonl" epoch test_acc)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' || fail "cifar-quick test accuracy $acc < 0.9"
note "cifar-quick on generated CIFAR-10: test accuracy $acc"

$PYTHON "$top_srcdir/tests/mkimages.py" cifar100 "$T/c100" 600 100 || fail "could not generate CIFAR-100 files"
C100="--net cifar-quick-convex --dataset cifar100 --data-dir $T/c100 --progress none --batch 50"
"$DTRAIN" $C100 --epochs 0 --save "$T/before.st" > /dev/null 2>&1 || fail "could not save the initial weights"
mpi -np 2 "$DTRAIN" $C100 --epochs 1 --lr 0.01 --save "$T/after.st" > "$T/c100.txt" 2>&1 ||
    { cat "$T/c100.txt"; fail "cifar-quick-convex training failed"; }
grep -q "151428 parameters, 6500 trained" "$T/c100.txt" || { cat "$T/c100.txt"; fail "the banner does not count frozen parameters"; }
"$DTRAIN" $C100 --dry-run > "$T/c100dry.txt" 2>&1 && grep -q "net cifar-quick-convex: 151428 parameters (6500 trained)," "$T/c100dry.txt" ||
    { cat "$T/c100dry.txt"; fail "the dry run does not count frozen parameters as the banner does"; }
$PYTHON - "$T/before.st" "$T/after.st" <<'PY' || fail "frozen layers changed, or the trained one did not"
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
frozen = [k for k in a if not k.startswith("ip2.")]
assert len(frozen) == 8, frozen
bad = [k for k in frozen if a[k] != b[k]]
assert not bad, "changed: %s" % bad
assert a["ip2.weight"] != b["ip2.weight"], "ip2 did not train"
PY
# evaluating a weight file (--epochs 0) takes any --batch, also one larger than the training set:
# the same test loss at 7, 1000 and on 2 ranks
$PYTHON "$top_srcdir/tests/mkimages.py" cifar100 "$T/c100s" 40 30 || fail "could not generate small CIFAR-100 files"
for b in "7" "1000" "1000 2"; do
    set -- $b
    mpi -np "${2:-1}" "$DTRAIN" --net cifar-quick-convex --dataset cifar100 --data-dir "$T/c100s" --epochs 0 \
        --load "$T/after.st" --batch "$1" --progress none > "$T/ev.txt" 2>&1 || { cat "$T/ev.txt"; fail "--epochs 0 --batch $b failed"; }
    grep "^test accuracy" "$T/ev.txt" >> "$T/ev.all"
done
[ "$(sort -u "$T/ev.all" | wc -l)" -eq 1 ] || { cat "$T/ev.all"; fail "--epochs 0: the evaluation depends on --batch"; }

$PYTHON "$top_srcdir/tests/mkimages.py" pngtree "$T/tree" 1000 200 40 || fail "could not generate the PNG tree"
TREE="--net $top_srcdir/tests/nets/tiny-images.net --dataset imagenet --data-dir $T/tree --batch 50 --lr 0.1 --progress lines"
mpi -np 2 "$DTRAIN" $TREE --epochs 6 --log "$T/tree.jsonl" > "$T/tree.txt" 2>&1 || { cat "$T/tree.txt"; fail "training on the PNG tree failed"; }
cat "$T/tree.txt"
[ "$(grep -c 'packing train: 1000/1000' "$T/tree.txt")" -eq 1 ] || fail "the training images were not packed exactly once"
[ -f "$T/tree/.dtrain-pack/train-37-3.pack" ] || fail "no pack at $T/tree/.dtrain-pack/train-37-3.pack"
grep -q "3x37x37 cropped to 32x32" "$T/tree.txt" || fail "the banner does not show the crop"
acc=$(json_last "$T/tree.jsonl" epoch test_acc)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' || fail "test accuracy on the PNG tree $acc < 0.9"
mpi -np 2 "$DTRAIN" $TREE --epochs 1 > "$T/again.txt" 2>&1 || { cat "$T/again.txt"; fail "the second run failed"; }
grep -q packing "$T/again.txt" && fail "the second run packed again"
# an image rewritten in place under its own name (its folder's time unchanged): packed again, the new
# pixels in the pack (the old pack was used: training on pixels the tree no longer held)
first=$(find "$T/tree/train" -name '*.png' | sort | head -n 1)
before=$(md5sum < "$T/tree/.dtrain-pack/train-37-3.pack")
dirtime=$(stat -c %y "$(dirname "$first")")
cp "$(find "$T/tree/train" -name '*.png' | sort | tail -n 1)" "$first" && touch -d "$dirtime" "$(dirname "$first")"
"$DTRAIN" $TREE --iters 1 > "$T/rewritten.txt" 2>&1 || { cat "$T/rewritten.txt"; fail "the run after an image was rewritten failed"; }
grep -q 'packing train: 1000/1000' "$T/rewritten.txt" && [ "$before" != "$(md5sum < "$T/tree/.dtrain-pack/train-37-3.pack")" ] ||
    { cat "$T/rewritten.txt"; fail "an image rewritten in place: the tree was not packed again"; }
# a class folder added to train/ only (first in order, so every label moves): val's images are the same,
# but its pack's labels number the old classes; packed again (every later run stopped, "the train pack
# has 11 classes, the val pack 10", until the packs were deleted by hand)
first_class=$(ls "$T/tree/train" | head -n 1)
mkdir "$T/tree/train/a0000000" && cp "$T/tree/train/$first_class"/*.png "$T/tree/train/a0000000/"
sed 's/name=fc out=10/name=fc out=11/' "$top_srcdir/tests/nets/tiny-images.net" > "$T/tiny11.net"
"$DTRAIN" $TREE --net "$T/tiny11.net" --iters 1 > "$T/added.txt" 2>&1 && grep -q 'packing val: 200/200' "$T/added.txt" ||
    { cat "$T/added.txt"; fail "a class folder added to train/: val was not packed again"; }
echo "PASS: CIFAR-10 (acc $(json_last "$T/c10.jsonl" epoch test_acc)), CIFAR-100 frozen layers, PNG tree (acc $acc)"
