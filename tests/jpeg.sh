#!/bin/bash
# ImageNet-style JPEG trees (tests/mkjpeg.py writes them with PIL):
#  - a truncated JPEG stops packing with exit 1, naming the file and --on-bad-image skip
#  - --pack-only --on-bad-image skip on 2 ranks packs once (progress lines), leaves the truncated
#    image out and counts it; the packs hold every other image in order with its label, and each
#    square image's pixels are PIL's decoding of it: baseline, progressive, CMYK (Adobe), grey, a
#    PNG named .JPEG, and PNGs with alpha, grey and alpha, a palette with transparency, 16-bit RGB
#    and grey, exactly (CMYK within 2 levels); for a net of one channel, PIL's convert("L")
#  - training on the tree reuses the packs, says how many images were left out, and logs
#    skipped_images in the summary
#  - a file that is neither JPEG nor PNG, a non-image file, a class all of whose images are skipped,
#    --pack-only of a dataset that is not an image tree: clear errors
#  - --save, --log or --checkpoint among the tree's images: refused (exit 2), nothing written
. "$(dirname "$0")/lib.sh"
need_mpirun
$PYTHON -c "import PIL" 2> /dev/null || { echo "SKIP: python3-pil missing (tools/setup installs it)"; exit $SKIP; }
$PYTHON "$top_srcdir/tests/mkjpeg.py" tree "$T/tree" 240 60 40 || fail "could not generate the JPEG tree"
NET="--net $top_srcdir/tests/nets/tiny-images.net --dataset imagenet --data-dir $T/tree --image-size 40"

"$DTRAIN" $NET --pack-only > "$T/stop.out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$T/stop.out"; fail "a truncated JPEG: exit $rc (expected 1)"; }
grep -q "zz-truncated.JPEG: a truncated JPEG .*--on-bad-image skip" "$T/stop.out" ||
    { cat "$T/stop.out"; fail "a truncated JPEG: the message does not name the file and --on-bad-image skip"; }
[ -e "$T/tree/.dtrain-pack/train-40-3.pack" ] && fail "a pack was left after packing failed"
ls "$T/tree/.dtrain-pack" | grep -q tmp && fail "a temporary file was left after packing failed"
note "a truncated JPEG stops packing: $(grep -o 'zz-truncated.JPEG: a truncated JPEG' "$T/stop.out")"

mpi -np 2 "$DTRAIN" $NET --pack-only --on-bad-image skip --threads 2 --progress lines > "$T/pack.out" 2>&1 ||
    { cat "$T/pack.out"; fail "--pack-only --on-bad-image skip failed"; }
cat "$T/pack.out"
[ "$(grep -c 'packing train: 241/241 images' "$T/pack.out")" -eq 1 ] || fail "the training images were not packed exactly once, with progress"
grep -q "skipping an unreadable image: .*zz-truncated.JPEG" "$T/pack.out" || fail "the skipped image is not named"
grep -q "^packed $T/tree for 3x40x40 images: train 240 images (.*), 1 left out as unreadable; val 60 images" "$T/pack.out" ||
    fail "--pack-only did not say what it packed"
for s in train val; do
    $PYTHON "$top_srcdir/tests/mkjpeg.py" check "$T/tree" "$T/tree/.dtrain-pack/$s-40-3.pack" $s ||
        fail "the $s pack does not hold PIL's decoding of the tree"
done
# a net of one channel: the packs hold PIL's convert("L") of every kind
sed 's/shape=3x/shape=1x/' "$top_srcdir/tests/nets/tiny-images.net" > "$T/grey.net"
"$DTRAIN" --net "$T/grey.net" --dataset imagenet --data-dir "$T/tree" --image-size 40 --pack-only --on-bad-image skip \
    > "$T/grey.out" 2>&1 || { cat "$T/grey.out"; fail "--pack-only for one channel failed"; }
for s in train val; do
    $PYTHON "$top_srcdir/tests/mkjpeg.py" check "$T/tree" "$T/tree/.dtrain-pack/$s-40-1.pack" $s ||
        fail "the $s pack of one channel does not hold PIL's grey of the tree"
done

mpi -np 2 "$DTRAIN" $NET --epochs 2 --batch 40 --lr 0.05 --log "$T/train.jsonl" --progress none > "$T/train.out" 2>&1 ||
    { cat "$T/train.out"; fail "training on the JPEG tree failed"; }
grep -q packing "$T/train.out" && { cat "$T/train.out"; fail "training packed again"; }
grep -q "on imagenet (240 train / 60 test, 3x40x40 cropped to 32x32, 10 classes" "$T/train.out" || { cat "$T/train.out"; fail "no banner for the tree"; }
grep -q "images left out of the packs as unreadable (--on-bad-image skip): 1 train, 0 val" "$T/train.out" ||
    { cat "$T/train.out"; fail "the banner does not count the image left out"; }
[ "$(json_last "$T/train.jsonl" summary skipped_images)" = 1 ] || fail "the summary does not log skipped_images 1"
note "trained 2 epochs on the packed JPEG tree: test accuracy $(json_last "$T/train.jsonl" epoch test_acc)"

# files that are not images
mkdir -p "$T/bad/train/a" "$T/bad/val/a"
echo hello > "$T/bad/train/a/x.JPEG"
cp "$T/tree/val/n00000000/"val_00000.JPEG "$T/bad/val/a/"
"$DTRAIN" --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet --data-dir "$T/bad" --image-size 40 \
    --pack-only > "$T/bad.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "x.JPEG: neither a JPEG nor a PNG file" "$T/bad.out" || { cat "$T/bad.out"; fail "a text file named .JPEG: exit $rc"; }
echo notes > "$T/bad/train/a/notes.txt"
"$DTRAIN" --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet --data-dir "$T/bad" --image-size 40 \
    --pack-only > "$T/bad.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "notes.txt: not an image file by its name" "$T/bad.out" || { cat "$T/bad.out"; fail "a .txt file in a class folder: exit $rc"; }
# --on-bad-image skip where every image of a class is unreadable: refused as an empty class folder is
# (the class trained with no images, said only as a count)
mkdir -p "$T/gone/train/a" "$T/gone/train/b" "$T/gone/val/a"
cp "$T/tree/val/n00000000/"val_00000.JPEG "$T/gone/train/a/" && cp "$T/tree/val/n00000000/"val_00000.JPEG "$T/gone/val/a/"
echo hello > "$T/gone/train/b/x.JPEG" && echo hello > "$T/gone/train/b/y.JPEG"
"$DTRAIN" --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet --data-dir "$T/gone" --image-size 40 \
    --pack-only --on-bad-image skip > "$T/bad.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "gone/train/b: none of its 2 images could be read, so the class would have no images in train" "$T/bad.out" ||
    { cat "$T/bad.out"; fail "a class all of whose images are unreadable, skipped: exit $rc"; }
# a net that cannot take the tree's images is the command line's error (exit 2), as on other datasets
printf 'input shape=2x24x24\nflatten\ndense out=10\nsoftmax_xent\n' > "$T/two.net"
printf 'input shape=1728\ndense out=10\nsoftmax_xent\n' > "$T/flat.net"
for n in two flat; do
    "$DTRAIN" --net "$T/$n.net" --dataset imagenet --data-dir "$T/tree" --iters 1 > "$T/bad.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q "$n.net: --dataset imagenet" "$T/bad.out" || { cat "$T/bad.out"; fail "$n.net on an image tree: exit $rc (expected 2)"; }
done
for dry in "" --dry-run; do # a dry run refuses what the run would
    "$DTRAIN" --net mlp --dataset synthetic --pack-only $dry > "$T/bad.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q "pack-only packs ImageNet-style image trees; --dataset synthetic has nothing to pack" "$T/bad.out" ||
        { cat "$T/bad.out"; fail "--pack-only $dry of synthetic data: exit $rc (expected 2)"; }
done
# an output among the tree's images (also through a link) is refused before training (exit 2): the
# next scan would take a weight file there for an image, or it would replace one
ln -s "$T/tree/train" "$T/trainlink"
for out in "--save $T/tree/train/n00000000/w.st" "--log $T/tree/val/run.jsonl" "--checkpoint $T/trainlink/c.ckpt"; do
    "$DTRAIN" $NET --on-bad-image skip --iters 2 --batch 20 $out > "$T/in.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "${out%% *} .* is among the images of imagenet's tree" "$T/in.out" && [ ! -e "${out#* }" ] ||
        { cat "$T/in.out"; fail "$out: an output in the image tree: exit $rc, or written"; }
done
echo "PASS: JPEG trees: baseline, progressive, CMYK, grey, PNG-in-JPEG decoded as PIL does; truncated images stop or are skipped and counted"
