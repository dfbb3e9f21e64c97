#!/bin/bash
# The CUDA backend end to end.
# Everywhere (no GPU needed):
#  - dtrain itself links no CUDA library (the module does), so it runs where there is none;
#  - --device auto runs on the CPU and says in one line why not on a GPU (and that GPU options given
#    do nothing; --transport nccl: refused, saying why);
#  - where there is no usable GPU, --device cuda is one line naming what is missing, exit 1.
# On a GPU (else exit 77 after the above, saying why):
#  - training equivalence (the batches copied a batch ahead on a stream of their own): 20 steps of mlp, lenet (Fashion-MNIST) and resnet20 (synthetic
#    CIFAR-shaped data) from the same seed on CPU and GPU (--gpu-exact): every logged loss within
#    1e-4 relative (or, for resnet20, the spread rounding alone makes: below), final weights
#    within 1e-3 absolute + relative;
#  - every mode, 2 ranks sharing the GPU (and D-Sync and Pipe-SGD with 4; their rings on the GPU with
#    each codec, lazy D-Sync too; Top-k's residuals, TernGrad's coding and CSC's chunks on the GPU), one epoch of
#    Fashion-MNIST mlp: test accuracy within 0.5 point of the same run on the CPU (CSC: within its
#    seed-to-seed spread on the CPU);
#  - a checkpoint written on the GPU resumes on the CPU, and the reverse; --gpu-exact runs repeat
#    bit for bit;
#  - --gpu-graph: resnet20, cifar-quick and 2 ranks of Pipe-SGD (lenet) equal to the op-by-op runs
#    bit for bit (--gpu-exact), one recording per shape; resnet20's batch norms and adds fused with
#    their relus equal to the layers run one by one (DTRAIN_FUSE=0), bit for bit;
#  - NCCL: a one-rank run over it; two ranks on one GPU refused by --transport nccl, auto says why it
#    takes mpi; Top-k and gTop-k on one rank over nccl equal mpi; with two GPUs or more, D-Sync,
#    PS-Sync (a worker and a server), Pipe-SGD, TernGrad, Top-k and gTop-k over nccl against mpi, and
#    CSC over nccl equal to mpi bit for bit (--gpu-exact);
#  - --precision bf16 (GPUs of compute capability 8.0+): mlp and lenet reach fp32's accuracy;
#  - --precision fp16: mlp and lenet reach fp32's accuracy, also from a loss scale that overflows;
#  - --gpu 7 on a machine with fewer GPUs, a batch that cannot fit, --precision bf16 on a GPU older
#    than 8.0: clear errors, exit 1.
. "$(dirname "$0")/lib.sh"
need_mpirun
export DTRAIN_MODULE_PATH=${DTRAIN_MODULE_PATH:-$top_builddir}
if ldd "$DTRAIN" | grep -E 'libcuda|libcudart|libcublas|libcudnn'; then fail "dtrain links a CUDA library itself"; fi
"$DTRAIN" --list-devices > "$T/devices" 2>&1 || { cat "$T/devices"; fail "--list-devices failed"; }
grep -q '^cuda ' "$T/devices" || fail "--list-devices does not list cuda"
if [ -f "$top_builddir/dtrain-cuda.so" ]; then # built: it says what has run on a GPU and what only compiled
    grep -A1 '^cuda ' "$T/devices" | grep -q 'run on a GPU .*only compiled' ||
        { cat "$T/devices"; fail "--list-devices does not say which CUDA paths have run on a GPU"; }
fi
if ! grep -q '^cuda  *yes' "$T/devices"; then
    why=$(sed -n 's/^cuda *no: //p' "$T/devices")
    if [ -f "$top_builddir/dtrain-cuda.so" ]; then
        "$DTRAIN" --device cuda --iters 1 --progress none > "$T/out" 2>&1
        rc=$?
        [ $rc = 1 ] || { cat "$T/out"; fail "--device cuda without a usable GPU: exit $rc, expected 1"; }
        [ "$(wc -l < "$T/out")" = 1 ] || { cat "$T/out"; fail "--device cuda without a GPU: expected one line"; }
        grep -q "backend cuda: " "$T/out" || { cat "$T/out"; fail "the message does not name the backend"; }
        "$DTRAIN" --device auto --iters 1 --progress none > "$T/out" 2>&1 || { cat "$T/out"; fail "--device auto failed"; }
        grep -q "backend cpu (auto; cuda: " "$T/out" || { cat "$T/out"; fail "--device auto does not say why not cuda"; }
        # GPU options where auto took the cpu: said to do nothing; --transport nccl: refused
        "$DTRAIN" --iters 1 --progress none --tf32 --gpu 3 > "$T/out" 2>&1 || { cat "$T/out"; fail "auto with --tf32 failed"; }
        grep -q "^--gpu, --tf32: no effect: --device auto took the cpu" "$T/out" ||
            { cat "$T/out"; fail "auto on the cpu does not say that --gpu and --tf32 do nothing"; }
        "$DTRAIN" --iters 1 --progress none --transport nccl > "$T/out" 2>&1
        rc=$?
        [ $rc = 1 ] && grep -q -- "--transport nccl moves gradients between GPUs, and --device auto took the cpu (cuda: " \
            "$T/out" || { cat "$T/out"; fail "--transport nccl where auto took the cpu: exit $rc"; }
    fi
    echo "SKIP: no GPU here: $why (the CPU-side checks passed)"
    exit $SKIP
fi

# a failed check is reported and the others still run (a GPU is lent for minutes): the test fails at the end
failed=0
bad() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }

# ---- training equivalence ------------------------------------------------------------------------
# The GPU with --gpu-exact (GEMM-like convolutions) against the CPU, and the CPU against itself with
# the learning rate changed by 1e-6 (relative): how far rounding alone can carry this training. A
# net with batch norm at a training learning rate is chaotic (resnet20 at lr 0.02: 0.4% in 20
# steps from a 5e-6 change), so resnet20 runs at lr 0.001; a net passes when its losses are
# within 1e-4 of the CPU's, or within 3 times the CPU's own spread.
one() { # NAME DEVICE LR ARGS...: 20 iterations of $net, every loss logged
    local name=$1 dev=$2 l=$3
    shift 3
    "$DTRAIN" --net "$net" --iters 20 --seed 5 --threads 2 --progress none --log "$T/$name.jsonl" --log-every 1 \
        --device "$dev" --lr "$l" --save "$T/$name.st" "$@" > "$T/out" 2>&1 || { cat "$T/out"; bad "$net on $dev failed"; return 1; }
}
equiv() { # NET LR ARGS...
    local net=$1 lr=$2
    shift 2
    local lr2=$($PYTHON -c "print(repr($lr * (1 + 1e-6)))")
    one cpu cpu "$lr" "$@" && one cuda cuda "$lr" --gpu-exact "$@" && one sens cpu "$lr2" "$@" || return
    $PYTHON - "$T/cpu.jsonl" "$T/cuda.jsonl" "$T/sens.jsonl" "$net" <<'PY' || bad "$net: losses on the GPU differ from the CPU's"
import json, sys
def losses(p):
    return [json.loads(l)["loss"] for l in open(p) if '"type":"iter"' in l]
a, b, c = (losses(p) for p in sys.argv[1:4])
assert len(a) == len(b) == len(c) == 20, (len(a), len(b), len(c))
rel = lambda u, v: max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(u, v))
worst, spread = rel(a, b), rel(a, c)
print("-- %s: 20 losses, GPU against CPU %.2g (CPU against itself at lr x (1 + 1e-6): %.2g); first %.6f / %.6f, last %.6f / %.6f"
      % (sys.argv[4], worst, spread, a[0], b[0], a[-1], b[-1]))
assert worst <= max(1e-4, 3 * spread), worst
PY
    "$STDIFF" "$T/cpu.st" "$T/cuda.st" 1e-3 1e-3 > "$T/diff" || { cat "$T/diff"; bad "$net: final weights differ"; }
    note "$net final weights: $(tail -n 1 "$T/diff")"
}
equiv mlp 0.02 --dataset fashion-mnist
# the batches go to the GPU a batch ahead, on a stream of their own (upload.c)
grep -q "prefetched, copied to cuda memory a batch ahead on a queue of their own" <(
    "$DTRAIN" --net mlp --dataset fashion-mnist --iters 2 --device cuda --progress none 2>&1) ||
    bad "the banner does not say that batches are copied to the GPU ahead"
equiv lenet 0.02 --dataset fashion-mnist
equiv resnet20 0.001 --dataset synthetic --synthetic-samples 2000 --batch 64

# ---- --gpu-graph: forward and backward recorded as a CUDA graph ---------------------------------
# the same kernels in the same order: the weights equal the op-by-op run's bit for bit (--gpu-exact,
# whose runs repeat bit for bit); one recording for the one shape; and with Pipe-SGD on 2 ranks
for net in resnet20 cifar-quick; do
    for g in "" --gpu-graph; do
        "$DTRAIN" --net $net --dataset synthetic --synthetic-samples 2000 --batch 64 --iters 20 --seed 5 --device cuda \
            --gpu-exact --progress none --save "$T/g$g.st" $g > "$T/out$g" 2>&1 || { cat "$T/out$g"; bad "$net $g failed"; }
    done
    grep -q "^gpu graph: 19 passes launched from 1 recording" "$T/out--gpu-graph" ||
        { cat "$T/out--gpu-graph"; bad "$net --gpu-graph: not 19 passes launched from 1 recording"; }
    "$STDIFF" "$T/g.st" "$T/g--gpu-graph.st" 0 0 > "$T/diff" || { cat "$T/diff"; bad "$net --gpu-graph: weights differ"; }
    if [ $net = resnet20 ]; then # its batch norms and adds with the relus after them fused (the default) and not
        DTRAIN_FUSE=0 "$DTRAIN" --net $net --dataset synthetic --synthetic-samples 2000 --batch 64 --iters 20 --seed 5 \
            --device cuda --gpu-exact --progress none --save "$T/nofuse.st" > "$T/out" 2>&1 ||
            { cat "$T/out"; bad "$net DTRAIN_FUSE=0 failed"; }
        "$STDIFF" "$T/g.st" "$T/nofuse.st" 0 0 > "$T/diff" ||
            { cat "$T/diff"; bad "$net: fused and unfused layers give other weights on the GPU"; }
    fi
done
for g in "" --gpu-graph; do
    mpi -np 2 "$DTRAIN" --net lenet --dataset fashion-mnist --iters 30 --seed 3 --device cuda --gpu-exact --mode pipesgd \
        --compress q8 --progress none --save "$T/p$g.st" $g > "$T/out" 2>&1 || { cat "$T/out"; bad "pipesgd $g failed"; }
done
"$STDIFF" "$T/p.st" "$T/p--gpu-graph.st" 0 0 > "$T/diff" || { cat "$T/diff"; bad "pipesgd --gpu-graph: weights differ"; }

# ---- every mode, 2 ranks on one GPU ------------------------------------------------------------
acc() { json_last "$1" summary test_acc; }
for m in ps dsync pipesgd topk gtopk csc terngrad; do
    extra=()
    case $m in topk | gtopk) extra=(--density 0.01) ;; pipesgd) extra=(--compress q8) ;; esac
    for dev in cpu cuda; do
        mpi -np 2 "$DTRAIN" --net mlp --dataset fashion-mnist --epochs 1 --seed 3 --threads 2 --progress none \
            --mode $m "${extra[@]}" --device $dev --log "$T/$m-$dev.jsonl" > "$T/out" 2>&1 ||
            { cat "$T/out"; bad "--mode $m --device $dev failed"; }
    done
    case $m in topk | gtopk) # the last run's banner: the residuals and the selection stay on the GPU
        grep -q "$m: residuals and selection on cuda memory: only pairs cross to the host" "$T/out" ||
            { cat "$T/out"; bad "--mode $m: the banner does not say that its residuals stay on the GPU"; } ;;
    terngrad)
        grep -q "clipping, ternarizing and packing on cuda memory: only the codes cross" "$T/out" ||
            { cat "$T/out"; bad "--mode terngrad: the banner does not say that it codes on the GPU"; } ;;
    csc)
        grep -q "residuals on cuda memory, the ring runs on cuda memory" "$T/out" ||
            { cat "$T/out"; bad "--mode csc: the banner does not say that its chunks stay on the GPU"; } ;;
    esac
    a=$(acc "$T/$m-cpu.jsonl") b=$(acc "$T/$m-cuda.jsonl") tol=0.005
    if [ $m = csc ]; then # one epoch of CSC lands 2 points apart from seed to seed: its tolerance is that spread
        mpi -np 2 "$DTRAIN" --net mlp --dataset fashion-mnist --epochs 1 --seed 4 --threads 2 --progress none \
            --mode $m --device cpu --log "$T/$m-cpu4.jsonl" > "$T/out" 2>&1 || { cat "$T/out"; bad "--mode $m seed 4"; }
        tol=$($PYTHON -c "print(max(0.005, abs($a - $(acc "$T/$m-cpu4.jsonl"))))")
    fi
    note "mode $m: test accuracy cpu $a, cuda $b (tolerance $tol)"
    $PYTHON -c "import sys; sys.exit(abs($a - $b) > $tol)" || bad "--mode $m: accuracy $b on the GPU, $a on the CPU"
done

# --precision bf16 (compute capability 8.0 and newer) and fp16 (tensor cores from 7.0, dtrain's oldest
# target) on the GPU: mlp and lenet, one epoch, reach fp32's test accuracy on the GPU within 0.5 point;
# the banner says which (fp16: and its loss scale); fp16 from a scale of 1e12 skips the overflowing
# steps (the log counts them) and still reaches that accuracy within a point
cc=$(sed -n 's/^  GPU 0: .*compute capability \([0-9]*\)\.[0-9]*.*/\1/p' "$T/devices")
bf16_gpu=no lowps=fp16
[ "${cc:-0}" -ge 8 ] && bf16_gpu=yes lowps="bf16 fp16"
for net in mlp lenet; do
    for p in fp32 $lowps; do
        [ $net = mlp ] && [ $p = fp32 ] && continue # the D-Sync run above
        mpi -np 2 "$DTRAIN" --net $net --dataset fashion-mnist --epochs 1 --seed 3 --threads 2 --progress none \
            --mode dsync --device cuda --precision $p --log "$T/$net-$p.jsonl" > "$T/$net-$p.out" 2>&1 ||
            { cat "$T/$net-$p.out"; bad "--net $net --precision $p on the GPU failed"; }
    done
    a=$(acc "$T/$net-fp32.jsonl")
    [ $net = mlp ] && a=$(acc "$T/dsync-cuda.jsonl")
    for p in $lowps; do
        grep -q "$p GEMMs and convolutions" "$T/$net-$p.out" || { cat "$T/$net-$p.out"; bad "the $p banner"; }
        b=$(acc "$T/$net-$p.jsonl")
        note "--net $net on the GPU: test accuracy fp32 $a, $p $b"
        $PYTHON -c "import sys; sys.exit(abs($a - $b) > 0.005)" || bad "--net $net: $p accuracy $b, fp32 $a"
    done
done
grep -q "fp16 GEMMs and convolutions (loss scale 65536" "$T/mlp-fp16.out" || bad "the fp16 banner lacks the loss scale"
mpi -np 2 "$DTRAIN" --net mlp --dataset fashion-mnist --epochs 1 --seed 3 --threads 2 --progress none --mode pipesgd \
    --device cuda --precision fp16 --fp16-scale 1e12 --log "$T/scaled.jsonl" > "$T/out" 2>&1 ||
    { cat "$T/out"; bad "fp16 from a scale of 1e12 failed"; }
s=$(json_last "$T/scaled.jsonl" summary skipped_steps) a=$(acc "$T/dsync-cuda.jsonl") b=$(acc "$T/scaled.jsonl")
note "fp16 from a loss scale of 1e12 on the GPU (Pipe-SGD): $s steps skipped, test accuracy $b"
[ -n "$s" ] && [ "$s" -ge 5 ] || bad "fp16 from a scale of 1e12: $s steps skipped"
$PYTHON -c "import sys; sys.exit(abs($a - $b) > 0.01)" || bad "fp16 from 1e12: accuracy $b, fp32 $a"

# four ranks on one GPU: D-Sync and Pipe-SGD
for m in dsync pipesgd; do
    for dev in cpu cuda; do
        mpi -np 4 "$DTRAIN" --net mlp --dataset fashion-mnist --epochs 1 --seed 3 --threads 1 --progress none \
            --mode $m --device $dev --log "$T/$m-$dev-4.jsonl" > "$T/out" 2>&1 || { cat "$T/out"; bad "4 ranks --mode $m --device $dev failed"; }
    done
    a=$(acc "$T/$m-cpu-4.jsonl") b=$(acc "$T/$m-cuda-4.jsonl")
    note "mode $m, 4 ranks: test accuracy cpu $a, cuda $b"
    $PYTHON -c "import sys; sys.exit(abs($a - $b) > 0.005)" || bad "4 ranks --mode $m: accuracy $b on the GPU, $a on the CPU"
done

# the ring on the GPU: D-Sync and Pipe-SGD code there and send only the encoded segments through the
# host, lazy D-Sync and Pipe-SGD from a stream of their own; the banner says so, accuracy as on the CPU
for args in "dsync --compress q8" "dsync --fusion-bytes 65536 --compress t16" "pipesgd --compress fp16"; do
    m=${args%% *}
    for dev in cpu cuda; do
        mpi -np 2 "$DTRAIN" --net mlp --dataset fashion-mnist --epochs 1 --seed 3 --threads 2 --progress none \
            --mode $args --device $dev --log "$T/ring-$dev.jsonl" > "$T/out" 2>&1 ||
            { cat "$T/out"; bad "--mode $args --device $dev failed"; }
    done
    grep -q "$m: the ring runs on cuda memory: only encoded segments cross to the host" "$T/out" ||
        { cat "$T/out"; bad "--mode $args: the banner does not say that the ring runs on the GPU"; }
    a=$(acc "$T/ring-cpu.jsonl") b=$(acc "$T/ring-cuda.jsonl")
    note "--mode $args: test accuracy cpu $a, cuda $b"
    $PYTHON -c "import sys; sys.exit(abs($a - $b) > 0.005)" || bad "--mode $args: accuracy $b on the GPU, $a on the CPU"
done

# ---- NCCL (--transport) ---------------------------------------------------------------------------
# one rank: a communicator of one; two ranks on one GPU: nccl refused naming them and the GPU, auto
# takes mpi and says why; with a GPU per rank (a machine with 2 or more): the rings and the allreduce
# over NCCL, accuracy as on the CPU
if grep -q "with the NCCL transport" <("$DTRAIN" --version 2>&1; "$DTRAIN" --list-devices 2>&1); then
    F=(--net mlp --dataset fashion-mnist --seed 3 --threads 2 --progress none)
    "$DTRAIN" "${F[@]}" --iters 20 --device cuda --transport nccl --compress q8 > "$T/out" 2>&1 &&
        grep -q "^transport nccl (NCCL 2\." "$T/out" || { cat "$T/out"; bad "one rank over nccl"; }
    # Top-k and gTop-k on one rank over nccl: the pairs summed (pairs_apply's add) and put back on the
    # GPU; with --gpu-exact the weights equal those over mpi (the host's sums) bit for bit
    for m in topk gtopk; do
        for tr in mpi nccl; do
            "$DTRAIN" "${F[@]}" --iters 30 --device cuda --gpu-exact --transport $tr --mode $m --density 0.01 \
                --momentum-correction --save "$T/sp-$tr.st" > "$T/out" 2>&1 || { cat "$T/out"; bad "$m over $tr"; }
        done
        "$STDIFF" "$T/sp-mpi.st" "$T/sp-nccl.st" 0 0 > "$T/diff" || { cat "$T/diff"; bad "$m: nccl differs from mpi"; }
    done
    mpi -np 2 "$DTRAIN" "${F[@]}" --iters 2 --device cuda --gpu 0 --transport nccl > "$T/out" 2>&1
    rc=$?
    [ $rc = 1 ] && grep -q "ranks 0 and 1 share one device (GPU-" "$T/out" ||
        { cat "$T/out"; bad "two ranks on one GPU with --transport nccl: exit $rc"; }
    mpi -np 2 "$DTRAIN" "${F[@]}" --iters 2 --device cuda --gpu 0 > "$T/out" 2>&1 &&
        grep -q "^transport mpi (auto: not nccl: ranks 0 and 1 share one device" "$T/out" ||
        { cat "$T/out"; bad "two ranks on one GPU, --transport auto: no mpi and why"; }
    if [ "$(grep -c '^  GPU ' "$T/devices")" -ge 2 ]; then
        for args in "dsync" "dsync --compress q8" "dsync --fusion-bytes 65536" "pipesgd --compress fp16" \
            "terngrad" "topk --density 0.01" "gtopk --density 0.01" "ps --compress q8" \
            "ps --ps-wait-free --ps-messages range --compress q8"; do
            for tr in mpi nccl; do
                mpi -np 2 "$DTRAIN" "${F[@]}" --epochs 1 --mode $args --device cuda --transport $tr \
                    --log "$T/tr-$tr.jsonl" > "$T/out" 2>&1 || { cat "$T/out"; bad "--mode $args --transport $tr failed"; }
            done
            a=$(acc "$T/tr-mpi.jsonl") b=$(acc "$T/tr-nccl.jsonl")
            note "--mode $args on 2 GPUs: test accuracy over mpi $a, over nccl $b"
            $PYTHON -c "import sys; sys.exit(abs($a - $b) > 0.005)" || bad "--mode $args: nccl $b, mpi $a"
        done
        # CSC: the packed chunks' ring from GPU to GPU, the same bytes and sums as staged through the host
        for args in "--chunk 4096" "--chunk 4096 --compress q8 --fusion-bytes 65536 --momentum-correction"; do
            for tr in mpi nccl; do
                mpi -np 2 "$DTRAIN" "${F[@]}" --iters 30 --mode csc $args --device cuda --gpu-exact --transport $tr \
                    --save "$T/csc-$tr.st" > "$T/out" 2>&1 || { cat "$T/out"; bad "csc $args --transport $tr failed"; }
            done
            "$STDIFF" "$T/csc-mpi.st" "$T/csc-nccl.st" 0 0 > "$T/diff" || { cat "$T/diff"; bad "csc $args: nccl differs"; }
        done
    else
        note "one GPU: NCCL between two GPUs not tried"
    fi
else
    note "this dtrain has no NCCL transport: not tried"
fi

# ---- checkpoints across devices ----------------------------------------------------------------
# (--gpu-exact: deterministic convolutions that agree with the CPU's, so what differs is the
# state carried over, not 40 iterations of rounding on two devices; without it, on an H200, a
# straight GPU run and one resumed on the CPU ended 5e-3 apart in one weight)
C=(--net lenet --dataset fashion-mnist --batch 50 --seed 9 --threads 2 --progress none)
for pair in "cuda cpu" "cpu cuda"; do
    set -- $pair
    x1=() x2=()
    [ $1 = cuda ] && x1=(--gpu-exact)
    [ $2 = cuda ] && x2=(--gpu-exact)
    mpi -np 2 "$DTRAIN" "${C[@]}" --device "$1" "${x1[@]}" --iters 40 --save "$T/straight.st" > "$T/out" 2>&1 || { cat "$T/out"; bad "straight run on $1"; }
    mpi -np 2 "$DTRAIN" "${C[@]}" --device "$1" "${x1[@]}" --iters 20 --checkpoint "$T/half.ckpt" > "$T/out" 2>&1 || { cat "$T/out"; bad "first half on $1"; }
    mpi -np 2 "$DTRAIN" "${C[@]}" --device "$2" "${x2[@]}" --iters 40 --resume "$T/half.ckpt" --save "$T/resumed.st" > "$T/out" 2>&1 ||
        { cat "$T/out"; bad "resume on $2 of a checkpoint from $1"; }
    grep -q "resumed from $T/half.ckpt at iteration 20 of 40" "$T/out" || { cat "$T/out"; bad "no resume message"; }
    "$STDIFF" "$T/straight.st" "$T/resumed.st" 1e-3 1e-3 > "$T/diff" || { cat "$T/diff"; bad "checkpoint from $1 resumed on $2 differs"; }
    note "checkpoint from $1 resumed on $2: $(tail -n 1 "$T/diff")"
done

# ---- --gpu-exact repeats bit for bit ------------------------------------------------------------
for k in 1 2; do
    "$DTRAIN" --net resnet20 --dataset synthetic --synthetic-samples 2000 --batch 64 --iters 10 --seed 5 --progress none \
        --device cuda --gpu-exact --save "$T/exact$k.st" > "$T/out" 2>&1 || { cat "$T/out"; bad "--gpu-exact run $k"; }
done
cmp -s "$T/exact1.st" "$T/exact2.st" || bad "two --gpu-exact runs differ: $("$STDIFF" "$T/exact1.st" "$T/exact2.st" 0 0)"

# ---- bad cases ---------------------------------------------------------------------------------
n=$(grep -c '^  GPU ' "$T/devices")
"$DTRAIN" --device cuda --gpu $((n + 6)) --iters 1 > "$T/out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q -- "--gpu $((n + 6)): this machine has" "$T/out" || { cat "$T/out"; bad "--gpu $((n + 6)): exit $rc"; }
"$DTRAIN" --device cuda --net resnet50 --dataset synthetic --synthetic-samples 200000 --batch 100000 --iters 1 > "$T/out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "are free" "$T/out" && grep -q -- "--batch" "$T/out" || { cat "$T/out"; bad "a batch that cannot fit: exit $rc"; }
note "too large a batch: $(grep "are free" "$T/out" | head -n 1)"
if [ "$bf16_gpu" = no ]; then
    "$DTRAIN" --device cuda --precision bf16 --iters 1 > "$T/out" 2>&1
    rc=$?
    [ $rc = 1 ] && grep -q "no bf16 tensor operations" "$T/out" || { cat "$T/out"; bad "--precision bf16 on compute capability $cc: exit $rc"; }
fi
[ $failed = 0 ] || fail "$failed of the checks above failed"
echo "PASS: CPU and GPU agree: training, $(echo ps dsync pipesgd topk gtopk csc terngrad | wc -w) modes, checkpoints both ways, bad cases"
