#!/bin/bash
# Pipe-SGD semantics: `dtrain --mode pipesgd` on P ranks ends with exactly (bit for bit) the
# weights of tests/pipesim, a one-process simulation that applies the aggregated gradient of
# iteration t-K at iteration t, with and without a warm-up epoch of D-Sync, for P = 1 and 3 and
# K = 2 and 3. Dropout is in the net, so the masks must match too. The simulation with the
# switch at another iteration must differ: the comparison can fail.
. "$(dirname "$0")/lib.sh"
need_mpirun
make_idx "$T/data" 210 50   # 7 iterations per epoch at batch 30
net="$top_srcdir/tests/nets/mlp-dropout.net"
run() { # P K WARMUP OUT
    mpi -np "$1" "$DTRAIN" --net "$net" --dataset mnist --data-dir "$T/data" --mode pipesgd --pipeline-depth "$2" \
        --warmup-epochs "$3" --epochs 3 --batch 30 --lr 0.01 --momentum 0.9 --seed 7 --threads 1 --progress none \
        --save "$4" > "$T/out" || { cat "$T/out"; fail "dtrain --mode pipesgd -np $1 K=$2 warm-up $3 failed"; }
}
sim() { "$top_builddir/tests/pipesim" "$net" "$T/data" "$1" "$2" "$3" 3 30 0.01 0.9 7 "$4" || fail "pipesim failed"; }
for p in 1 3; do
    for k in 2 3; do
        for w in 0 1; do
            run $p $k $w "$T/real.st"
            sim $p $k $w "$T/sim.st"
            "$STDIFF" "$T/real.st" "$T/sim.st" 0 0 || fail "P=$p K=$k warm-up $w: dtrain differs from the simulation"
        done
    done
done
sim 3 2 0 "$T/other.st"
run 3 2 1 "$T/real.st"
"$STDIFF" "$T/real.st" "$T/other.st" 0 0 >/dev/null && fail "the warm-up switch made no difference: the comparison cannot fail"
echo "PASS: pipesgd equals its simulation bit for bit (P = 1, 3; K = 2, 3; warm-up 0, 1 epoch)"
