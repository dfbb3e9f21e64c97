#!/bin/bash
# D-Sync correctness: P = 1, 2, 3, 4 ranks with global batch B from the same seed end with the
# weights of 1 rank with batch B, within float tolerance (the sums are taken in another order).
# B = 35 on 300 samples: uneven splits over ranks (8/9/9/9) and a short last batch (20) in every
# epoch; 2 epochs, so the per-epoch shuffle is crossed.
. "$(dirname "$0")/lib.sh"
need_mpirun
make_idx "$T/data" 300 50
# tolerance: fp32 sums in a different order, amplified over 18 SGD steps with momentum
ATOL=1e-6 RTOL=1e-5
common="--dataset mnist --data-dir $T/data --batch 35 --epochs 2 --lr 0.05 --momentum 0.9 --seed 3 --progress none"

for net in "$top_srcdir/tests/nets/mlp-dropout.net" mlp; do
    note "net $net"
    "$DTRAIN" --net "$net" $common --epochs 0 --save "$T/init.st" >/dev/null || fail "init run failed"
    "$DTRAIN" --net "$net" $common --save "$T/ref.st" >/dev/null || fail "1-rank run without mpirun failed"
    # the test must be able to fail: training moved the weights
    "$STDIFF" "$T/ref.st" "$T/init.st" 1e-4 0 >/dev/null && fail "training did not change the weights"
    mpi -np 1 "$DTRAIN" --net "$net" $common --save "$T/w1.st" >/dev/null || fail "mpirun -np 1 failed"
    "$STDIFF" "$T/w1.st" "$T/ref.st" 0 0 || fail "mpirun -np 1 differs from a plain 1-rank run"
    for p in 2 3 4; do
        mpi -np $p "$DTRAIN" --net "$net" $common --save "$T/w$p.st" >/dev/null || fail "mpirun -np $p failed"
        "$STDIFF" "$T/w$p.st" "$T/ref.st" $ATOL $RTOL || fail "$p ranks differ from 1 rank beyond atol $ATOL rtol $RTOL"
    done
    # lazy allreduce: the arena goes in pieces of ~40 KB while backward runs, same result
    mpi -np 3 "$DTRAIN" --net "$net" $common --fusion-bytes 40000 --save "$T/wf.st" >/dev/null ||
        fail "mpirun -np 3 --fusion-bytes failed"
    "$STDIFF" "$T/wf.st" "$T/ref.st" $ATOL $RTOL || fail "lazy allreduce differs from 1 rank beyond atol $ATOL rtol $RTOL"
done
echo "PASS: D-Sync with 1-4 ranks, and with lazy allreduce, equals 1 rank (atol $ATOL, rtol $RTOL)"
