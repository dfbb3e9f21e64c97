#!/bin/bash
# D-Sync correctness: P = 1, 2, 3, 4 ranks with global batch B from the same seed compute the
# gradient of 1 rank with batch B, summed in another order. What follows from that, and is tested:
#  - a smooth net (tests/nets/linear.net) at a learning rate where SGD is stable stays within
#    rounding of 1 rank for many steps: 2 epochs of B = 35 on 300 samples, with uneven splits
#    over ranks (8/9/9/9), a short last batch (20) and the per-epoch shuffle crossed. (At a rate
#    where the iteration is unstable in some direction, e.g. 0.05 here, any rounding difference
#    grows about 2x per step, as it would between two BLAS libraries);
#  - --allreduce mpi (Open MPI's MPI_Allreduce) equals the ring bit for bit on 2 ranks and 1 rank
#    within rounding on 3 (lazy) and 4;
#  - nets with ReLU and dropout (mlp, mlp-dropout) agree after one step. Over many steps they
#    need not: rounding can move a ReLU input across 0, where its gradient jumps.
# Batch norm is not here: its statistics are per rank, so P ranks train another function.
. "$(dirname "$0")/lib.sh"
need_mpirun
make_idx "$T/data" 300 50
# tolerance: fp32 sums in a different order, over 18 stable SGD steps with momentum
ATOL=1e-6 RTOL=1e-5
common="--dataset mnist --data-dir $T/data --batch 35 --momentum 0.9 --seed 3 --progress none"

check_net() {
    local net=$1 steps=$2
    note "net $net, $steps"
    "$DTRAIN" --net "$net" $common $steps --epochs 0 --save "$T/init.st" >/dev/null || fail "init run failed"
    "$DTRAIN" --net "$net" $common $steps --save "$T/ref.st" >/dev/null || fail "1-rank run without mpirun failed"
    # the test must be able to fail: training moved the weights
    "$STDIFF" "$T/ref.st" "$T/init.st" 1e-4 0 >/dev/null && fail "training did not change the weights"
    mpi -np 1 "$DTRAIN" --net "$net" $common $steps --save "$T/w1.st" >/dev/null || fail "mpirun -np 1 failed"
    "$STDIFF" "$T/w1.st" "$T/ref.st" 0 0 || fail "mpirun -np 1 differs from a plain 1-rank run"
    for p in 2 3 4; do
        mpi -np $p "$DTRAIN" --net "$net" $common $steps --save "$T/w$p.st" >/dev/null || fail "mpirun -np $p failed"
        "$STDIFF" "$T/w$p.st" "$T/ref.st" $ATOL $RTOL || fail "$p ranks differ from 1 rank beyond atol $ATOL rtol $RTOL"
    done
    # lazy allreduce: the arena goes in pieces of ~40 KB while backward runs, same result
    mpi -np 3 "$DTRAIN" --net "$net" $common $steps --fusion-bytes 40000 --save "$T/wf.st" >/dev/null ||
        fail "mpirun -np 3 --fusion-bytes failed"
    "$STDIFF" "$T/wf.st" "$T/ref.st" $ATOL $RTOL || fail "lazy allreduce differs from 1 rank beyond atol $ATOL rtol $RTOL"
    # Open MPI's own allreduce: on 2 ranks a + b is the ring's sum bit for bit; on 4 another order
    mpi -np 2 "$DTRAIN" --net "$net" $common $steps --allreduce mpi --save "$T/wm2.st" >/dev/null ||
        fail "mpirun -np 2 --allreduce mpi failed"
    "$STDIFF" "$T/wm2.st" "$T/w2.st" 0 0 || fail "--allreduce mpi on 2 ranks differs from the ring"
    mpi -np 4 "$DTRAIN" --net "$net" $common $steps --allreduce mpi --save "$T/wm4.st" >/dev/null ||
        fail "mpirun -np 4 --allreduce mpi failed"
    "$STDIFF" "$T/wm4.st" "$T/ref.st" $ATOL $RTOL || fail "--allreduce mpi on 4 ranks differs from 1 rank beyond atol $ATOL rtol $RTOL"
    mpi -np 3 "$DTRAIN" --net "$net" $common $steps --allreduce mpi --fusion-bytes 40000 --save "$T/wmf.st" >/dev/null ||
        fail "mpirun -np 3 --allreduce mpi --fusion-bytes failed"
    "$STDIFF" "$T/wmf.st" "$T/ref.st" $ATOL $RTOL || fail "lazy MPI_Allreduce differs from 1 rank beyond atol $ATOL rtol $RTOL"
}

check_net "$top_srcdir/tests/nets/linear.net" "--epochs 2 --lr 0.01"
cp "$T/ref.st" "$T/shuffled.st"
check_net "$top_srcdir/tests/nets/linear.net" "--epochs 2 --lr 0.01 --no-shuffle"
"$STDIFF" "$T/ref.st" "$T/shuffled.st" 1e-4 0 > /dev/null && fail "--no-shuffle did not change the order"
check_net "$top_srcdir/tests/nets/mlp-dropout.net" "--iters 1 --lr 0.05"
check_net mlp "--iters 1 --lr 0.05"
echo "PASS: D-Sync with 1-4 ranks, with lazy allreduce and with --allreduce mpi, equals 1 rank (atol $ATOL, rtol $RTOL): a smooth net over 18 steps (shuffled and in file order), ReLU nets over one"
