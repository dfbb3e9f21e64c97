#!/bin/bash
# Pipe-SGD semantics: `dtrain --mode pipesgd` on P ranks ends with exactly (bit for bit) the
# weights of tests/pipesim, a one-process simulation that applies the aggregated gradient of
# iteration t-K at iteration t, with and without a warm-up epoch of D-Sync, for P = 1 and 3 and
# K = 2 and 3, and under a learning-rate schedule with either rate for a stale gradient
# (--stale-lr apply|compute). Dropout is in the net, so the masks must match too. The simulation with the
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
# under a schedule (poly:2: every iteration's rate differs), both rates a stale gradient may get
for stale in apply compute; do
    for p in 1 3; do
        mpi -np $p "$DTRAIN" --net "$net" --dataset mnist --data-dir "$T/data" --mode pipesgd --pipeline-depth 2 \
            --epochs 3 --batch 30 --lr 0.01 --lr-schedule poly:2 --stale-lr $stale --momentum 0.9 --seed 7 --threads 1 \
            --progress none --save "$T/real-$stale.st" > "$T/out" || { cat "$T/out"; fail "--stale-lr $stale -np $p failed"; }
        "$top_builddir/tests/pipesim" "$net" "$T/data" $p 2 0 3 30 0.01 0.9 7 "$T/sim.st" poly:2 $stale > /dev/null ||
            fail "pipesim failed"
        "$STDIFF" "$T/real-$stale.st" "$T/sim.st" 0 0 || fail "P=$p --lr-schedule poly:2 --stale-lr $stale: dtrain differs from the simulation"
    done
done
"$STDIFF" "$T/real-apply.st" "$T/real-compute.st" 0 0 > /dev/null && fail "--stale-lr compute made no difference under a schedule"
note "--stale-lr apply and compute under --lr-schedule poly:2 equal their simulations (P = 1, 3) and differ"
# how the ranks wait changes when things happen, never what is computed: every --comm-wait with and
# without --compute-nice gives the simulation's weights; the log reports the CPU the rank and its
# communication thread used
sim 3 2 0 "$T/sim.st"
for wait in spin sleep auto; do
    for nice in 0 10; do
        mpi -np 3 "$DTRAIN" --net "$net" --dataset mnist --data-dir "$T/data" --mode pipesgd --epochs 3 --batch 30 \
            --lr 0.01 --momentum 0.9 --seed 7 --threads 1 --progress none --comm-wait $wait --compute-nice $nice \
            --save "$T/real.st" --log "$T/log.jsonl" > "$T/out" || { cat "$T/out"; fail "--comm-wait $wait --compute-nice $nice failed"; }
        "$STDIFF" "$T/real.st" "$T/sim.st" 0 0 || fail "--comm-wait $wait --compute-nice $nice: dtrain differs from the simulation"
    done
done
cpu=$(json_last "$T/log.jsonl" summary cpu_iter)
comm=$(json_last "$T/log.jsonl" summary cpu_comm)
iter=$(json_last "$T/log.jsonl" summary t_iter)
awk -v c="$cpu" -v m="$comm" -v t="$iter" 'BEGIN { exit !(c > 0 && m > 0 && m < c && c < 4 * t) }' ||
    fail "cpu_iter $cpu, cpu_comm $comm for t_iter $iter: expected 0 < cpu_comm < cpu_iter < 4 t_iter"
note "--comm-wait spin, sleep, auto with --compute-nice 0 and 10 all equal the simulation; cpu_iter $cpu s, cpu_comm $comm s per iteration"
sim 3 2 0 "$T/other.st"
run 3 2 1 "$T/real.st"
"$STDIFF" "$T/real.st" "$T/other.st" 0 0 >/dev/null && fail "the warm-up switch made no difference: the comparison cannot fail"
echo "PASS: pipesgd equals its simulation bit for bit (P = 1, 3; K = 2, 3; warm-up 0, 1 epoch; both stale learning rates under a schedule)"
