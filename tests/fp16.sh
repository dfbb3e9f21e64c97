#!/bin/bash
# --precision fp16 and its dynamic loss scaling (issue 11, part 5), without a GPU: the guarded test
# backend emulates fp16 (the inputs of GEMMs and convolutions rounded to IEEE half, overflowing to
# infinity) and injects overflows (DTRAIN_GUARDED_INF_AT=N[:RANK]: the N-th training backward pass
# of that rank gets an infinity in its loss gradient).
#  - refusals: fp16 on the cpu backend (1); the scaler's flags without fp16, a window of 0 (2); the
#    banner names fp16 and the scale
#  - a skipped step changes nothing: for every mode, 2 ranks (ps: 2 workers and a server) with an
#    overflow on rank 1 in the last of 6 iterations end with the weights of 5 iterations (bit for bit),
#    count 1 skipped step and halve the scale; with a checkpoint after the overflow, every tensor of it
#    (weights, momentum, each rank's residuals and buffers) equals the checkpoint after 5; PS's
#    stale-synchronous variants (whose weights depend on timing) skip and halve too
#  - the scale's course: from 1e12 the overflowing steps are skipped and halve it until the gradients
#    fit (the final scale is 1e12 / 2^skipped); from 1, 20 good steps with a window of 5 make it 16
#  - overflowing whatever the scale is (on one rank): every rank stops, one message, exit 1
#  - the scale and its good steps are in checkpoints: a run resumed across a change of scale equals
#    the straight run; an fp16 checkpoint resumes in fp32
. "$(dirname "$0")/lib.sh"
need_mpirun
[ -f "$top_builddir/tests/dtrain-cpu-guarded.so" ] || fail "tests/dtrain-cpu-guarded.so was not built"
export DTRAIN_MODULE_PATH="$top_builddir/tests"
make_idx "$T/data" 240 60 # 8 iterations per epoch at batch 30
common=(--net mlp --dataset mnist --data-dir "$T/data" --batch 30 --lr 0.05 --seed 3 --threads 1 --progress none)
g=(--device cpu-guarded --precision fp16)

expect_exit() { # CODE TEXT ARGS...
    local code=$1 text=$2
    shift 2
    "$DTRAIN" "${common[@]}" --iters 1 "$@" > "$T/e.out" 2>&1
    local rc=$?
    [ $rc = "$code" ] && grep -q -- "$text" "$T/e.out" || { cat "$T/e.out"; fail "$*: exit $rc, expected $code and '$text'"; }
}
expect_exit 1 "the CPU backend has no fp16 GEMMs" --device cpu --precision fp16
expect_exit 2 "is for --precision fp16" --fp16-scale 1024
expect_exit 2 "fp16-scale-window" "${g[@]}" --fp16-scale-window 0
"$DTRAIN" "${common[@]}" "${g[@]}" --iters 1 > "$T/b.out" 2>&1 || { cat "$T/b.out"; fail "a one-iteration fp16 run failed"; }
grep -q "fp16 GEMMs and convolutions (loss scale 65536, doubled every 2000 good steps)" "$T/b.out" ||
    { cat "$T/b.out"; fail "the banner does not name fp16 and its scale"; }
note "refusals and the banner"

# the emulation is real: fp16 trains other weights than fp32 on the same backend
mpi -np 2 "$DTRAIN" "${common[@]}" --device cpu-guarded --iters 6 --save "$T/fp32.st" > "$T/log" 2>&1 || { cat "$T/log"; fail "fp32 run"; }
mpi -np 2 "$DTRAIN" "${common[@]}" "${g[@]}" --iters 6 --save "$T/fp16.st" > "$T/log" 2>&1 || { cat "$T/log"; fail "fp16 run"; }
cmp -s "$T/fp32.st" "$T/fp16.st" && fail "fp16 trained the same weights as fp32"

# a skipped step changes nothing, in every mode
modes=("dsync" "dsync --fusion-bytes 20000 --compress q8" "pipesgd" "pipesgd --pipeline-depth 3"
       "topk --momentum-correction" "gtopk" "csc --fusion-bytes 20000" "csc --momentum-correction" "terngrad"
       "ps --compress q8" "ps --ps-messages range --ps-wait-free --transport mpi" "ps --transport nccl --compress q8"
       "ps --transport nccl --ps-messages range --ps-wait-free --compress q8")
# sanitized: the variants that overlap (threads) and one of each other kind
[ "${DT_SANITIZED:-no}" = yes ] && modes=("dsync --fusion-bytes 20000 --compress q8" "pipesgd --pipeline-depth 3"
                                        "topk --momentum-correction" "csc --fusion-bytes 20000" "terngrad"
                                        "ps --ps-messages range --ps-wait-free --transport mpi"
                                        "ps --transport nccl --ps-messages range --ps-wait-free")
n=0
for m in "${modes[@]}"; do
    args=("${common[@]}" "${g[@]}" --mode $m)
    np=2 devs=1
    case $m in ps*) np=3 devs=3 ;; esac # 2 workers, the overflow on the second; a device each (for nccl)
    DTRAIN_GUARDED_DEVICES=$devs DTRAIN_GUARDED_INF_AT=6:1 mpi -np $np -x DTRAIN_GUARDED_INF_AT \
        -x DTRAIN_GUARDED_DEVICES "$DTRAIN" "${args[@]}" --iters 6 --save "$T/a.st" --log "$T/a.jsonl" > "$T/log" 2>&1 ||
        { cat "$T/log"; fail "$m: the run with an overflow failed"; }
    DTRAIN_GUARDED_DEVICES=$devs mpi -np $np -x DTRAIN_GUARDED_DEVICES "$DTRAIN" "${args[@]}" --iters 5 \
        --save "$T/b.st" > "$T/log" 2>&1 || { cat "$T/log"; fail "$m: 5 iterations"; }
    "$STDIFF" "$T/a.st" "$T/b.st" 0 0 > "$T/diff" || { cat "$T/diff"; fail "$m: the skipped step changed the weights"; }
    [ "$(json_last "$T/a.jsonl" summary skipped_steps)" = 1 ] || fail "$m: the summary does not count 1 skipped step"
    [ "$(json_last "$T/a.jsonl" summary loss_scale)" = 32768 ] || fail "$m: the scale was not halved"
    case $m in pipesgd* | ps*) ;; *) # the state after the skipped step is the state before it (Pipe-SGD's slots
        # are not; ps has no checkpoints)
        rm -f "$T/a.ck" "$T/b.ck"
        DTRAIN_GUARDED_INF_AT=6:1 mpi -np $np -x DTRAIN_GUARDED_INF_AT "$DTRAIN" "${args[@]}" --iters 6 \
            --checkpoint "$T/a.ck" > "$T/log" 2>&1 || { cat "$T/log"; fail "$m: checkpointed run with an overflow"; }
        mpi -np $np "$DTRAIN" "${args[@]}" --iters 5 --checkpoint "$T/b.ck" > "$T/log" 2>&1 || { cat "$T/log"; fail "$m"; }
        "$STDIFF" "$T/a.ck" "$T/b.ck" 0 0 > "$T/diff" || { cat "$T/diff"; fail "$m: the skipped step changed the state"; }
        ;;
    esac
    n=$((n + 1))
done
# PS's stale-synchronous variants: their weights depend on which version has arrived, so they only have
# to skip the step and halve the scale
for m in "--staleness 1 --transport mpi" "--ps-apply each --staleness 2 --transport mpi" "--staleness 1 --transport nccl" \
    "--ps-apply each --staleness 2 --transport nccl"; do
    DTRAIN_GUARDED_DEVICES=3 DTRAIN_GUARDED_INF_AT=4:0 mpi -np 3 -x DTRAIN_GUARDED_INF_AT -x DTRAIN_GUARDED_DEVICES \
        "$DTRAIN" "${common[@]}" "${g[@]}" --mode ps $m \
        --iters 8 --log "$T/a.jsonl" > "$T/log" 2>&1 || { cat "$T/log"; fail "ps $m: the run with an overflow failed"; }
    [ "$(json_last "$T/a.jsonl" summary skipped_steps)" = 1 ] || fail "ps $m: the summary does not count 1 skipped step"
    [ "$(json_last "$T/a.jsonl" summary loss_scale)" = 32768 ] || fail "ps $m: the scale was not halved"
done
# and with convolutions (the emulation rounds their operands too)
lenet=("${common[@]/mlp/lenet}" "${g[@]}")
DTRAIN_GUARDED_INF_AT=4:0 mpi -np 2 -x DTRAIN_GUARDED_INF_AT "$DTRAIN" "${lenet[@]}" --iters 4 --save "$T/a.st" \
    > "$T/log" 2>&1 || { cat "$T/log"; fail "lenet: the run with an overflow failed"; }
mpi -np 2 "$DTRAIN" "${lenet[@]}" --iters 3 --save "$T/b.st" > "$T/log" 2>&1 || { cat "$T/log"; fail "lenet: 3 iterations"; }
"$STDIFF" "$T/a.st" "$T/b.st" 0 0 > "$T/diff" || { cat "$T/diff"; fail "lenet: the skipped step changed the weights"; }
note "$n modes and lenet: a step that overflowed on one rank is skipped on all and changes nothing"

# the scale's course: halved while it overflows, doubled after a window of good steps
mpi -np 2 "$DTRAIN" "${common[@]}" "${g[@]}" --fp16-scale 1e12 --iters 40 --log "$T/s.jsonl" > "$T/log" 2>&1 ||
    { cat "$T/log"; fail "the run from 1e12 failed"; }
skipped=$(json_last "$T/s.jsonl" summary skipped_steps)
scale=$(json_last "$T/s.jsonl" summary loss_scale)
[ -n "$skipped" ] && [ "$skipped" -ge 10 ] || fail "from a scale of 1e12: $skipped steps skipped, expected at least 10"
$PYTHON -c "import sys; sys.exit(abs($scale - 1e12 / 2**$skipped) > 1e-3 * $scale)" ||
    fail "from 1e12 with $skipped steps skipped the scale is $scale"
mpi -np 2 "$DTRAIN" "${common[@]}" "${g[@]}" --fp16-scale 1 --fp16-scale-window 5 --iters 20 --log "$T/w.jsonl" \
    > "$T/log" 2>&1 || { cat "$T/log"; fail "the run from 1 failed"; }
[ "$(json_last "$T/w.jsonl" summary loss_scale)" = 16 ] || fail "20 good steps with a window of 5 from 1: not 16"
[ "$(json_last "$T/w.jsonl" summary skipped_steps)" = 0 ] || fail "steps skipped from a scale of 1 (or no skipped_steps in the summary)"
note "from 1e12: $skipped steps skipped, scale $scale; from 1 with a window of 5: 16 after 20 steps"

DTRAIN_GUARDED_INF_AT=2+:1 mpi -np 2 -x DTRAIN_GUARDED_INF_AT "$DTRAIN" "${common[@]}" "${g[@]}" --fp16-scale 1 \
    --epochs 20 --iters 100 > "$T/e.out" 2>&1
rc=$?
[ $rc = 1 ] && [ "$(grep -c "64 steps in a row up to iteration 65 overflowed in fp16" "$T/e.out")" = 1 ] ||
    { cat "$T/e.out"; fail "every step overflowing on rank 1: exit $rc, expected 1 and one message"; }

# the scale goes into checkpoints: resumed across its changes, the run is the straight one
r=("${common[@]}" "${g[@]}" --fp16-scale 1e12 --fp16-scale-window 4 --mode topk)
mpi -np 2 "$DTRAIN" "${r[@]}" --iters 30 --save "$T/straight.st" --log "$T/straight.jsonl" > "$T/log" 2>&1 ||
    { cat "$T/log"; fail "straight run"; }
mpi -np 2 "$DTRAIN" "${r[@]}" --iters 15 --checkpoint "$T/c.ck" > "$T/log" 2>&1 || { cat "$T/log"; fail "first half"; }
mpi -np 2 "$DTRAIN" "${r[@]}" --iters 30 --resume "$T/c.ck" --save "$T/resumed.st" --log "$T/resumed.jsonl" \
    > "$T/log" 2>&1 || { cat "$T/log"; fail "resumed run"; }
"$STDIFF" "$T/straight.st" "$T/resumed.st" 0 0 > "$T/diff" || { cat "$T/diff"; fail "the resumed fp16 run differs"; }
[ "$(json_last "$T/straight.jsonl" summary loss_scale)" = "$(json_last "$T/resumed.jsonl" summary loss_scale)" ] ||
    fail "the resumed run ends with another loss scale"
r32=("${common[@]}" --device cpu-guarded --mode topk)
mpi -np 2 "$DTRAIN" "${r32[@]}" --fp16-scale 1e12 --iters 30 --resume "$T/c.ck" > "$T/log" 2>&1 &&
    fail "--fp16-scale was taken without fp16"
mpi -np 2 "$DTRAIN" "${r32[@]}" --precision fp32 --iters 30 --resume "$T/c.ck" > "$T/log" 2>&1 ||
    { cat "$T/log"; fail "an fp16 checkpoint did not resume in fp32"; }
grep -q "resumed in fp32 a checkpoint written in fp16" "$T/log" || { cat "$T/log"; fail "no line on the change"; }
note "the loss scale is checkpointed: resumed runs equal straight ones; fp16 checkpoints resume in fp32"
