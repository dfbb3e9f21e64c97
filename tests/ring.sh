#!/bin/bash
# The compressed ring allreduce for P = 1..5 ranks (not only powers of two) and odd lengths:
# see tests/mpi_ring.c for what is asserted.
. "$(dirname "$0")/lib.sh"
need_mpirun
for p in 1 2 3 4 5; do
    mpi -np $p "$top_builddir/tests/mpi_ring" || fail "ring allreduce with $p ranks"
done
echo "PASS: ring allreduce, P = 1..5, codecs none/t16/fp16/q8, within their bounds, same bits on every rank, bytes as counted"
