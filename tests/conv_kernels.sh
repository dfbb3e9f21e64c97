#!/bin/bash
# The CPU backend never runs a convolution, pooling or LRN on oneDNN's reference kernels (ref:any in
# ONEDNN_VERBOSE: 100-1000x slower than its JIT ones, a 3-conv net at 4.5 samples/s where it should
# run 800). A net with every layout transition a convolution can make (plain 1 -> plain 20: the
# narrow first layer; plain 20 -> plain 12; plain 12 -> 32 channels, blocked or channels last; 32 ->
# 32; 32 -> plain 20; grouped; LRN on plain and on blocked or channels-last) trains 2 iterations in fp32 and, on a CPU with bf16 instructions,
# in bf16; every primitive oneDNN executed is named, and none is a reference kernel.
. "$(dirname "$0")/lib.sh"
cat > "$T/layouts.net" <<'NET'
input shape=1x16x16
conv name=c1 out=20 k=3 pad=1
relu
conv name=c2 out=12 k=3 pad=1
relu
lrn size=5
conv name=c3 out=32 k=3 pad=1
relu
conv name=c4 out=32 k=3 pad=1 groups=2
relu
lrn size=3
conv name=c5 out=20 k=1
maxpool k=2
flatten
dense name=fc out=10
softmax_xent name=loss
NET
precisions=fp32
"$DTRAIN" --list-devices 2>&1 | grep -q "BF16\|AMX" && precisions="fp32 bf16"
for p in $precisions; do
    ONEDNN_VERBOSE=1 "$DTRAIN" --net "$T/layouts.net" --dataset synthetic --augment none --prefetch 0 --batch 8 --iters 2 \
        --threads 2 --precision $p --progress none > "$T/v-$p.out" 2>&1 || { tail -5 "$T/v-$p.out"; fail "$p: the run failed"; }
    n=$(grep -c ',exec,cpu,convolution,' "$T/v-$p.out")
    [ "$n" -ge 20 ] || fail "$p: ONEDNN_VERBOSE named $n convolutions run, expected 5 layers x 3 passes x 2 iterations"
    # the implementation is the fifth field: ref:any, lrn_ref:any, ...; and pooling's generic
    # simple_nchw (plain layouts: 42% of lenet's time; dtrain's own loops take them)
    if grep ',exec,cpu,' "$T/v-$p.out" |
        awk -F, '$4 ~ /^(convolution|pooling|pooling_v2|lrn)$/ && ($5 ~ /ref/ || $5 ~ /^simple/)' > "$T/ref-$p" &&
        [ -s "$T/ref-$p" ]; then
        cut -d, -f4-12 "$T/ref-$p" | sort -u
        fail "$p: oneDNN ran its reference (or generic) kernels"
    fi
    echo "$p: $n convolutions, none on a reference kernel"
done
