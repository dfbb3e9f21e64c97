#!/bin/bash
# PyTorch state dicts both ways (resnet18, torchvision's names):
#  - dtrain --save writes exactly the tensors of torchvision's resnet18 state_dict: names, shapes,
#    F32 and the I64 [] num_batches_tracked counters (tests/torch_names.py builds the names from
#    torchvision's ResNet definition, so this part needs NumPy only)
#  - a file as PyTorch writes it from a half-precision model (F16 convs, BF16 fc, I64 counters,
#    state_dict order) loads: the re-saved weights are its values in fp32 exactly, counters kept
#  - a file with a tensor missing and one extra: exit 1 naming both
#  - where torch and torchvision are installed (python3-torchvision): torchvision's own state_dict
#    loads and evaluates in dtrain with the test loss PyTorch computes, and the weights dtrain
#    trained load into torchvision (strict) and evaluate as in dtrain, on a JPEG tree (tools/torch_eval.py);
#    torchvision's googlenet and alexnet evaluate in dtrain as in PyTorch (vgg16: by hand, it is slow)
. "$(dirname "$0")/lib.sh"
S="--net resnet18 --dataset synthetic --synthetic-samples 20 --batch 2 --epochs 0 --progress none"
"$DTRAIN" $S --save "$T/d.st" > "$T/out" 2>&1 || { cat "$T/out"; fail "saving resnet18 failed"; }
$PYTHON "$top_srcdir/tests/torch_names.py" check "$T/d.st" 1000 || fail "the file is not torchvision's resnet18 state_dict"
$PYTHON "$top_srcdir/tests/torch_names.py" topytorch "$T/d.st" "$T/pt.st" || fail "could not write the PyTorch-style file"
"$DTRAIN" $S --load "$T/pt.st" --save "$T/back.st" > "$T/out" 2>&1 || { cat "$T/out"; fail "--load of a PyTorch-style file failed"; }
$PYTHON "$top_srcdir/tests/torch_names.py" compare "$T/back.st" "$T/pt.st" || fail "the PyTorch-style file was not read exactly"
$PYTHON "$top_srcdir/tests/torch_names.py" topytorch "$T/d.st" "$T/bad.st" --drop layer1.0.conv1.weight --extra head.weight ||
    fail "could not write the damaged file"
"$DTRAIN" $S --load "$T/bad.st" > "$T/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "does not hold the tensors of net resnet18: 1 missing (layer1.0.conv1.weight), 1 not in the net (head.weight)" "$T/out" ||
    { cat "$T/out"; fail "a file with a missing and an extra tensor: exit $rc"; }
note "resnet18: dtrain's file is torchvision's state_dict; F16/BF16/I64 read; missing and extra names listed"
# the counters saturate: a file at 2^63-1 trains and saves 2^63-1, which loads again (it wrapped negative)
N="--net $top_srcdir/tests/nets/small-cifar.net --dataset synthetic --synthetic-samples 20 --batch 2 --progress none"
"$DTRAIN" $N --epochs 0 --save "$T/n.st" > "$T/out" 2>&1 || { cat "$T/out"; fail "saving small-cifar failed"; }
counters() { # FILE [SET]: prints the counters, or sets them all to SET
    $PYTHON - "$@" <<'EOF2'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for k, e in sorted(h.items()):
    if k.endswith(".num_batches_tracked"):
        at = 8 + n + e["data_offsets"][0]
        if len(sys.argv) > 2: b[at:at + 8] = struct.pack("<q", int(sys.argv[2]))
        else: print(struct.unpack("<q", b[at:at + 8])[0])
if len(sys.argv) > 2: open(sys.argv[1], "wb").write(b)
EOF2
}
counters "$T/n.st" 9223372036854775807 || fail "could not set the counters"
"$DTRAIN" $N --iters 1 --load "$T/n.st" --save "$T/n2.st" > "$T/out" 2>&1 || { cat "$T/out"; fail "training from counters at 2^63-1 failed"; }
[ "$(counters "$T/n2.st" | sort -u)" = 9223372036854775807 ] || fail "the counters did not saturate: $(counters "$T/n2.st")"
"$DTRAIN" $N --epochs 0 --load "$T/n2.st" > "$T/out" 2>&1 || { cat "$T/out"; fail "the saturated counters do not load"; }

if [ "${DT_SANITIZED:-no}" = yes ]; then # the round trip's dtrain paths (weights, JPEG) ran above
    echo "PASS: state dicts with NumPy (sanitized build: the PyTorch round trip is left to the plain build)"
    exit 0
fi
if ! $PYTHON -c "import torch, torchvision" 2> /dev/null; then
    echo "PASS: state dicts with NumPy (torchvision not installed: the PyTorch round trip was not run)"
    exit 0
fi
$PYTHON "$top_srcdir/tests/mkjpeg.py" tree "$T/tree" 30 20 256 > /dev/null || fail "could not generate the JPEG tree"
J="--net resnet18 --dataset imagenet --data-dir $T/tree --on-bad-image skip --batch 10 --progress none"
$PYTHON "$top_srcdir/tools/torch_eval.py" export "$T/tv.st" --classes 10 > /dev/null || fail "torchvision export failed"
"$DTRAIN" $J --load "$T/tv.st" --epochs 0 --log "$T/ev.jsonl" > "$T/out" 2>&1 || { cat "$T/out"; fail "dtrain could not evaluate torchvision's weights"; }
ours=$(json_last "$T/ev.jsonl" summary test_loss)
theirs=$($PYTHON "$top_srcdir/tools/torch_eval.py" eval "$T/tv.st" "$T/tree" | sed -n 's/.*test loss \([0-9.]*\),.*/\1/p')
awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-4 * b) }' ||
    fail "torchvision's weights: test loss $ours in dtrain, $theirs in PyTorch"
"$DTRAIN" $J --iters 2 --save "$T/dt.st" --log "$T/tr.jsonl" > "$T/out" 2>&1 || { cat "$T/out"; fail "training resnet18 on the tree failed"; }
ours2=$(json_last "$T/tr.jsonl" summary test_loss)
theirs2=$($PYTHON "$top_srcdir/tools/torch_eval.py" eval "$T/dt.st" "$T/tree" | sed -n 's/.*test loss \([0-9.]*\),.*/\1/p')
awk -v a="$ours2" -v b="$theirs2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-4 * b) }' ||
    fail "dtrain's weights: test loss $ours2 in dtrain, $theirs2 in PyTorch (strict load)"
# googlenet (concat, ceil-mode pools, BasicConv2d): torchvision's weights evaluate the same in dtrain
$PYTHON "$top_srcdir/tools/torch_eval.py" export "$T/g.st" --classes 10 --net googlenet > /dev/null || fail "googlenet export failed"
"$DTRAIN" ${J/resnet18/googlenet} --load "$T/g.st" --epochs 0 --log "$T/g.jsonl" > "$T/out" 2>&1 || { cat "$T/out"; fail "dtrain could not evaluate torchvision's googlenet"; }
ours3=$(json_last "$T/g.jsonl" summary test_loss)
theirs3=$($PYTHON "$top_srcdir/tools/torch_eval.py" eval "$T/g.st" "$T/tree" --net googlenet | sed -n 's/.*test loss \([0-9.]*\),.*/\1/p')
awk -v a="$ours3" -v b="$theirs3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-4 * b) }' ||
    fail "torchvision's googlenet: test loss $ours3 in dtrain, $theirs3 in PyTorch"
note "googlenet: torchvision's weights at test loss $ours3 in dtrain, $theirs3 in PyTorch"
$PYTHON "$top_srcdir/tools/torch_eval.py" export "$T/a.st" --classes 10 --net alexnet-torchvision > /dev/null || fail "alexnet export failed"
"$DTRAIN" ${J/resnet18/alexnet-torchvision} --load "$T/a.st" --epochs 0 --log "$T/a.jsonl" > "$T/out" 2>&1 || { cat "$T/out"; fail "dtrain could not evaluate torchvision's alexnet"; }
ours4=$(json_last "$T/a.jsonl" summary test_loss)
theirs4=$($PYTHON "$top_srcdir/tools/torch_eval.py" eval "$T/a.st" "$T/tree" --net alexnet-torchvision | sed -n 's/.*test loss \([0-9.]*\),.*/\1/p')
awk -v a="$ours4" -v b="$theirs4" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-4 * b) }' ||
    fail "torchvision's alexnet: test loss $ours4 in dtrain, $theirs4 in PyTorch"
note "alexnet-torchvision: torchvision's weights at test loss $ours4 in dtrain, $theirs4 in PyTorch"
echo "PASS: state dicts both ways; torchvision's resnet18 evaluates in dtrain at loss $ours (PyTorch $theirs), dtrain's in PyTorch at $theirs2 (dtrain $ours2)"
