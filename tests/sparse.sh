#!/bin/bash
# The sparse modes on constructed inputs for P = 1..6 (tests/mpi_sparse.c says what is asserted),
# and CSC with every chunk selected (ratio 1.0, no codec) equals D-Sync bit for bit.
. "$(dirname "$0")/lib.sh"
need_mpirun
for p in 1 2 3 4 5 6; do
    mpi -np $p "$top_builddir/tests/mpi_sparse" || fail "sparse modes with $p ranks"
done
make_idx "$T/data" 300 50
common="--dataset mnist --data-dir $T/data --batch 30 --epochs 2 --lr 0.05 --seed 4 --progress none"
mpi -np 3 "$DTRAIN" $common --mode dsync --save "$T/d.st" > /dev/null || fail "dsync failed"
mpi -np 3 "$DTRAIN" $common --mode csc --chunk 1000 --chunk-ratio 1 --compress none --save "$T/c.st" > /dev/null ||
    fail "csc failed"
"$STDIFF" "$T/c.st" "$T/d.st" 0 0 || fail "csc with every chunk selected differs from dsync"
echo "PASS: gtopk, topk, csc, terngrad as their definitions say for P = 1..6; csc at ratio 1 is dsync"
