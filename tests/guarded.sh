#!/bin/bash
# Every mode on device memory, proven without a GPU: each of the seven modes, with every codec it
# takes (and its overlap and correction variants), runs 2 ranks on the guarded test backend
# (backend_guarded.c, loaded as the module dtrain-cpu-guarded.so), whose memory faults when any
# code touches it outside a backend op. Each run must end with exactly (bit for bit) the weights
# of the same run on the cpu backend: the kernels are the same, so any difference is a staging
# bug (the guarded backend also runs the device-side paths: the rings on device memory with its
# codecs and a second queue, the sparse modes' residuals and top-k there). Checkpoints go through
# it too: Pipe-SGD and Top-k runs checkpointed and resumed on the guarded backend equal the straight
# cpu runs. The guard must bite: a direct access aborts
# (tests/check_guarded does that one).
. "$(dirname "$0")/lib.sh"
need_mpirun
[ -f "$top_builddir/tests/dtrain-cpu-guarded.so" ] || fail "tests/dtrain-cpu-guarded.so was not built"
export DTRAIN_MODULE_PATH="$top_builddir/tests"
make_idx "$T/data" 240 60   # 8 iterations per epoch at batch 30
net="$top_srcdir/tests/nets/mlp-dropout.net"
common=(--net "$net" --dataset mnist --data-dir "$T/data" --epochs 2 --batch 30 --lr 0.05 --seed 3 --threads 1
        --progress none)
runs=0
run() { # DEVICE OUT ARGS...
    local dev=$1 out=$2
    shift 2
    mpi -np 2 "$DTRAIN" "${common[@]}" --device "$dev" --save "$out" "$@" > "$T/log" 2>&1 ||
        { cat "$T/log"; fail "--device $dev $*: dtrain failed"; }
}
same() { # ARGS...: the guarded run equals the cpu run
    run cpu "$T/cpu.st" "$@"
    run cpu-guarded "$T/guarded.st" "$@"
    "$STDIFF" "$T/cpu.st" "$T/guarded.st" 0 0 > "$T/diff" || { cat "$T/diff"; fail "$*: cpu-guarded differs from cpu"; }
    runs=$((runs + 1))
}
grep -q "backend cpu-guarded" <(mpi -np 1 "$DTRAIN" "${common[@]}" --device cpu-guarded --iters 1) ||
    fail "the banner does not name the guarded backend"
# D-Sync's and Pipe-SGD's rings run on the device's memory where the backend codes
# (ring_create_on): the banner says so, and the runs below compare them with the host ring bit for bit
for m in dsync pipesgd; do
    mpi -np 2 "$DTRAIN" "${common[@]}" --device cpu-guarded --iters 1 --mode $m --compress q8 > "$T/log" 2>&1 ||
        { cat "$T/log"; fail "$m on cpu-guarded failed"; }
    grep -q "$m: the ring runs on cpu-guarded memory: only encoded segments cross to the host" "$T/log" ||
        { cat "$T/log"; fail "$m on cpu-guarded does not say that its ring runs on the device"; }
done
# Top-k's and gTop-k's residuals, selection and sparse updates stay on the device (memory_create_on)
for m in topk gtopk; do
    mpi -np 2 "$DTRAIN" "${common[@]}" --device cpu-guarded --iters 1 --mode $m --density 0.02 > "$T/log" 2>&1 ||
        { cat "$T/log"; fail "$m on cpu-guarded failed"; }
    grep -q "$m: residuals and selection on cpu-guarded memory: only pairs cross to the host" "$T/log" ||
        { cat "$T/log"; fail "$m on cpu-guarded does not say that its residuals stay on the device"; }
done
for c in none t16 fp16 q8; do
    same --mode dsync --compress "$c"
    same --mode ps --compress "$c"
    same --mode pipesgd --compress "$c"
    same --mode csc --compress "$c" --chunk 512
done
same --mode dsync --fusion-bytes 20000
same --mode dsync --fusion-bytes 20000 --compress q8
same --mode ps --ps-messages range --ps-wait-free --compress q8
same --mode csc --chunk 512 --fusion-bytes 20000 --momentum-correction --wd 1e-4
same --mode pipesgd --pipeline-depth 3 --warmup-epochs 1 --compress q8
# stale-synchronous PS uses whichever weights have arrived: timing-dependent, so it only has to run
run cpu-guarded "$T/guarded.st" --mode ps --staleness 1
run cpu-guarded "$T/guarded.st" --mode ps --ps-apply each --staleness 2
for m in topk gtopk; do
    same --mode "$m" --density 0.02
    same --mode "$m" --density 0.02 --momentum-correction --wd 1e-4
done
same --mode topk --density 0.02 --topk-scope layer --clip-norm 1
same --mode terngrad
same --mode terngrad --tern-skip-last
# a checkpoint after epoch 1, resumed: device state (Pipe-SGD's slots, Top-k's residuals and
# velocities) goes to the file and back through backend ops
for args in "pipesgd --compress q8" "topk --density 0.02 --momentum-correction --wd 1e-4"; do
    run cpu "$T/straight.st" --mode $args
    run cpu-guarded "$T/first.st" --mode $args --epochs 1 --checkpoint "$T/run.ckpt"
    run cpu-guarded "$T/resumed.st" --mode $args --checkpoint "$T/run.ckpt" --resume "$T/run.ckpt"
    "$STDIFF" "$T/straight.st" "$T/resumed.st" 0 0 > "$T/diff" ||
        { cat "$T/diff"; fail "--mode $args: resume on cpu-guarded differs"; }
done
echo "PASS: $runs mode/codec runs on cpu-guarded equal cpu bit for bit; a checkpoint resumed on it too"
