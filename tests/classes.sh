#!/bin/bash
# --classes and a built-in net's last layer sized to the data:
#  - cifar-quick (10 classes) on generated CIFAR-100, 2 ranks: sized to 100, the banner says so,
#    it trains, and the saved ip2 tensors are [100, 64] and [100]
#  - a net file of 10 classes on CIFAR-100: exit 2 naming --classes 100; with --classes 100 it trains
#  - --classes below the data's count, or on a net without a last dense layer: exit 2
. "$(dirname "$0")/lib.sh"
need_mpirun
$PYTHON "$top_srcdir/tests/mkimages.py" cifar100 "$T/c100" 600 100 || fail "could not generate CIFAR-100 files"
D="--dataset cifar100 --data-dir $T/c100 --batch 50 --progress none"

mpi -np 2 "$DTRAIN" --net cifar-quick $D --epochs 1 --save "$T/w.st" > "$T/out" 2>&1 || { cat "$T/out"; fail "cifar-quick on CIFAR-100 failed"; }
grep -q "^cifar-quick's last layer sized from 10 to the data's 100 classes$" "$T/out" || { cat "$T/out"; fail "the banner does not say the net was sized"; }
grep -q "net cifar-quick (151428 parameters)" "$T/out" || { cat "$T/out"; fail "expected 151,428 parameters (145,578 + 90 x 65)"; }
$PYTHON - "$T/w.st" <<'PY' || fail "the saved last layer is not 100-way"
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
assert h["ip2.weight"]["shape"] == [100, 64], h["ip2.weight"]["shape"]
assert h["ip2.bias"]["shape"] == [100], h["ip2.bias"]["shape"]
PY
note "cifar-quick sized to CIFAR-100's 100 classes: trained and saved a [100, 64] ip2"

printf 'input shape=3x32x32\nconv name=c out=8 k=3 pad=1\nrelu\navgpool global=1\nflatten\ndense name=fc out=10\nsoftmax_xent\n' > "$T/ten.net"
"$DTRAIN" --net "$T/ten.net" $D --iters 1 > "$T/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "the net ends in 10 classes, but cifar100 has 100 (expected the last dense layer to have out=100, or --classes 100)" "$T/out" ||
    { cat "$T/out"; fail "a 10-class net file on CIFAR-100: exit $rc"; }
"$DTRAIN" --net "$T/ten.net" $D --iters 2 --classes 100 > "$T/out" 2>&1 || { cat "$T/out"; fail "--classes 100 on a net file failed"; }
grep -q "net ten (1124 parameters)" "$T/out" || { cat "$T/out"; fail "--classes 100: expected 224 + 9 x 100 parameters"; }
"$DTRAIN" --net "$T/ten.net" $D --iters 1 --classes 50 > "$T/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "cifar100 has 100 classes, more than --classes 50 (expected --classes 100 or more)" "$T/out" ||
    { cat "$T/out"; fail "--classes 50 on 100-class data: exit $rc"; }
printf 'input shape=3x32x32\nconv out=4 k=3\nrelu\navgpool global=1\nflatten\nsoftmax_xent\n' > "$T/nodense.net"
"$DTRAIN" --net "$T/nodense.net" $D --iters 1 --classes 100 > "$T/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "no dense layer to size to --classes 100" "$T/out" || { cat "$T/out"; fail "--classes on a net without dense: exit $rc"; }
# without --dataset, --classes takes the dataset of the net's shape, which may have fewer classes
"$DTRAIN" --net mlp --classes 20 --iters 1 --progress none > "$T/out" 2>&1 && grep -q "on fashion-mnist" "$T/out" ||
    { cat "$T/out"; fail "--classes 20 without --dataset: no fashion-mnist run"; }
echo "PASS: built-in nets take the data's classes; --classes sizes any net and refuses data with more"
