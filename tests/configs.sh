#!/bin/bash
# Every experiment config dry-runs, and --dry-run and --ranks check what they say:
#  - each configs/*.conf passes `dtrain --config F --dry-run` (net, options, the rank count the file
#    states against its mode, the data or what the run would look for) and reports the file's ranks
#  - a dry run trains nothing and writes nothing (--save, --log, no pack of a PNG tree: it is scanned)
#  - a rank count the mode cannot use, a dataset the net does not fit, a net too large for memory,
#    and a --load or --resume file that is missing, damaged, of another net or past the run's end, or
#    (--resume) made with other options
#    fail the dry run with their messages
#  - under mpirun, --ranks N with another rank count stops the job with exit 2
. "$(dirname "$0")/lib.sh"
need_mpirun

n=0
for f in "$top_srcdir"/configs/*.conf; do
    out=$(timeout 120 "$DTRAIN" --config "$f" --dry-run 2>&1) || { echo "$out"; fail "$(basename "$f"): the dry run failed"; }
    echo "$out" | grep -q "everything a run checks before training passed" || { echo "$out"; fail "$(basename "$f"): no verdict"; }
    ranks=$(sed -n 's/^ranks *= *\([0-9]*\).*/\1/p' "$f")
    if [ -n "$ranks" ]; then
        echo "$out" | grep -q "^  $ranks ranks\? (" || { echo "$out"; fail "$(basename "$f"): expected the dry run on $ranks ranks"; }
    fi
    n=$((n + 1))
done
[ "$n" -ge 15 ] || fail "expected at least 15 configs, found $n"
note "$n configs dry-run"

# nothing trained, nothing written
out=$("$DTRAIN" --net mlp --dataset synthetic --synthetic-samples 1000 --dry-run --save "$T/w.st" --log "$T/l.jsonl" 2>&1) ||
    { echo "$out"; fail "a synthetic dry run failed"; }
echo "$out" | grep -q "train_loss\|samples/s" && { echo "$out"; fail "the dry run trained"; }
[ ! -e "$T/w.st" ] && [ ! -e "$T/l.jsonl" ] || fail "the dry run wrote --save or --log"

# a PNG tree without its pack: scanned, not packed
$PYTHON "$top_srcdir/tests/mkimages.py" pngtree "$T/tree" 100 20 40 || fail "could not generate the PNG tree"
out=$("$DTRAIN" --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet --data-dir "$T/tree" --batch 50 --dry-run 2>&1) ||
    { echo "$out"; fail "the dry run on a PNG tree failed"; }
echo "$out" | grep -q "100 training and 20 test samples in .*(not packed yet" || { echo "$out"; fail "the PNG tree's sizes"; }
[ ! -e "$T/tree/.dtrain-pack" ] || fail "the dry run packed the PNG tree"

# what a dry run must refuse
expect() { # WHAT STATUS MESSAGE ARGS...: dtrain ARGS exits STATUS with MESSAGE on stderr
    local what=$1 want=$2 msg=$3 rc=0
    shift 3
    timeout 120 "$DTRAIN" "$@" > "$T/out" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || { cat "$T/out"; fail "$what: exit $rc (expected $want)"; }
    grep -qF -- "$msg" "$T/out" || { cat "$T/out"; fail "$what: expected '$msg'"; }
}
expect "ps on 1 rank" 2 "--mode ps with --ps-servers 1 needs at least 2 ranks" \
    --config "$top_srcdir/configs/modularps-cifar10-resnet20-ps.conf" --ranks 1 --dry-run
# (from a directory without data/, so that CIFAR-100 is not found)
mkdir -p "$T/empty"
(cd "$T/empty" && unset DTRAIN_DATA && expect "net and dataset" 2 \
    "the net's 1x28x28 input and 10 classes do not fit --dataset cifar100 (expected fashion-mnist)" \
    --net mlp --dataset cifar100 --dry-run) || exit 1
expect "memory" 1 "needs at least" --net resnet50 --dataset synthetic --batch 1000000 --dry-run
expect "batch per rank" 2 "--batch 8 is smaller than the number of ranks 16" --net mlp --dataset synthetic --batch 8 --ranks 16 --dry-run
# --load and --resume are read as the run reads them
S=(--net mlp --dataset synthetic --synthetic-samples 200 --batch 20 --progress none)
"$DTRAIN" "${S[@]}" --iters 4 --save "$T/w.st" --checkpoint "$T/c.ckpt" > "$T/out" 2>&1 || { cat "$T/out"; fail "the run for --load failed"; }
expect "missing --load" 2 "--load: $T/none.st: cannot open" "${S[@]}" --load "$T/none.st" --dry-run
head -c 100 "$T/w.st" > "$T/cut.st"
expect "damaged --load" 1 "--load: $T/cut.st: " "${S[@]}" --load "$T/cut.st" --dry-run
expect "--load of another net" 1 "(expected [10, 500] for net lenet)" --net lenet --dataset synthetic --load "$T/w.st" --dry-run
expect "missing --resume" 2 "--resume: $T/none.ckpt: cannot open" "${S[@]}" --resume "$T/none.ckpt" --dry-run
expect "--resume past the end" 1 "the checkpoint is at iteration 4, past this run's last (2)" "${S[@]}" --iters 2 \
    --resume "$T/c.ckpt" --dry-run
expect "--resume of a weight file" 1 "a weight file, not a checkpoint" "${S[@]}" --resume "$T/w.st" --dry-run
expect "--resume with other options" 1 "made with other options: the checkpoint has 'lr = 0.02', this run 'lr = 0.5'" \
    "${S[@]}" --iters 8 --lr 0.5 --resume "$T/c.ckpt" --dry-run
"$DTRAIN" "${S[@]}" --load "$T/w.st" --dry-run > "$T/out" 2>&1 || { cat "$T/out"; fail "--dry-run --load of good weights failed"; }
"$DTRAIN" "${S[@]}" --iters 8 --resume "$T/c.ckpt" --dry-run > "$T/out" 2>&1 || { cat "$T/out"; fail "--dry-run --resume failed"; }

# --ranks under mpirun: the job's rank count must match
rc=0
mpi -np 2 "$DTRAIN" --net mlp --dataset synthetic --synthetic-samples 1000 --iters 1 --ranks 4 > "$T/out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { cat "$T/out"; fail "--ranks 4 on 2 ranks: exit $rc (expected 2)"; }
grep -q "meant for 4 ranks, but it has 2" "$T/out" || { cat "$T/out"; fail "--ranks 4 on 2 ranks: no message"; }
# a dry run under mpirun checks the job's own count
mpi -np 2 "$DTRAIN" --net mlp --dataset synthetic --synthetic-samples 1000 --dry-run > "$T/out" 2>&1 || { cat "$T/out"; fail "a dry run on 2 ranks failed"; }
grep -q "^  2 ranks (2 computing)" "$T/out" || { cat "$T/out"; fail "a dry run on 2 ranks: expected 2 ranks"; }
[ "$(grep -c "everything a run checks" "$T/out")" -eq 1 ] || { cat "$T/out"; fail "a dry run on 2 ranks: expected one report (rank 0's)"; }
echo "PASS"
