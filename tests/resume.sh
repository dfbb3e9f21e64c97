#!/bin/bash
# Checkpoints resume exactly: N iterations straight, against N/2, a checkpoint, a new process that
# resumes and does the rest. A small CNN with batch norm, dropout, Nesterov momentum, weight decay
# and CIFAR augmentation, so every kind of state is in play.
#  - 1 rank: the final weights and running statistics are bit-identical
#  - 4 ranks D-Sync; 2 ranks Pipe-SGD (K = 3, q8), Top-k and CSC with momentum correction: the
#    weights are bit-identical, running statistics within 1e-6 (a run stopped by --iters
#    averages them over the ranks once more than the straight run: the same value, rounded)
#  - 3 and 4 ranks PS-Sync (servers' momentum, weights in flight), SSP with one worker: bit-identical,
#    also with checkpoints mid-run; with staleness (sum and each) resumed at the end, the weights the
#    run ended with, and further, it learns; Pipe-SGD resumed at the end lands its gradients
#  - kill -9 between two checkpoints (--checkpoint-every), resume: the same final weights
#  - a checkpoint of another net, other options, other data of the same size, a damaged file, a weight
#    file: clear errors
. "$(dirname "$0")/lib.sh"
need_mpirun
$PYTHON "$top_srcdir/tests/mkimages.py" cifar10 "$T/c10" 1000 200 || fail "could not generate CIFAR files"
NET="$top_srcdir/tests/nets/small-cifar.net"
C="--net $NET --dataset cifar10 --data-dir $T/c10 --batch 50 --lr 0.05 --nesterov --wd 5e-4 --progress none"

run() { "$@" > "$T/out" 2>&1 || { cat "$T/out"; fail "failed: $*"; }; }

# straight_vs_resumed P TOL MODE...: 50 iterations straight vs 25 + 25 (epochs of 20); in the sanitized
# build 30 vs 15 + 15 (the second half still crosses an epoch), the same paths at less compute
N=50 H=25 KE=3
[ "${DT_SANITIZED:-no}" = yes ] && N=30 H=15 KE=2
straight_vs_resumed() {
    local p=$1 tol=$2
    shift 2
    local L="mpi -np $p" C=$C
    case " $* " in *" --momentum-correction "*) C=${C/ --nesterov/} ;; esac # plain momentum: refused with Nesterov
    run $L "$DTRAIN" $C "$@" --iters $N --save "$T/straight.st"
    run $L "$DTRAIN" $C "$@" --iters $H --checkpoint "$T/half.st"
    grep -q "checkpoint $T/half.st: $H iterations" "$T/out" || { cat "$T/out"; fail "no checkpoint at the end"; }
    run $L "$DTRAIN" $C "$@" --iters $N --resume "$T/half.st" --save "$T/resumed.st"
    grep -q "resumed from $T/half.st at iteration $H of $N" "$T/out" || { cat "$T/out"; fail "no resume message"; }
    if [ "$tol" = exact ]; then
        cmp -s "$T/straight.st" "$T/resumed.st" || fail "$p rank(s) $*: resumed weights are not bit-identical: $("$STDIFF" "$T/straight.st" "$T/resumed.st" 0 0)"
    else
        "$STDIFF" "$T/straight.st" "$T/resumed.st" "$tol" 0 > "$T/diff" || { cat "$T/diff"; fail "$p ranks $*: resumed run differs"; }
        $PYTHON - "$T/straight.st" "$T/resumed.st" <<'PY' || fail "$p ranks $*: resumed weights differ (not running statistics)"
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = [k for k in a if "running" not in k and a[k] != b[k]]
assert not bad, bad
PY
        note "$p ranks $*: weights bit-identical, $(cat "$T/diff")"
    fi
}

straight_vs_resumed 1 exact
note "1 rank: bit-identical"
straight_vs_resumed 4 1e-6 --mode dsync
cp "$T/half.st" "$T/dsync4.st"
straight_vs_resumed 2 1e-6 --mode pipesgd --pipeline-depth 3 --compress q8
straight_vs_resumed 2 1e-6 --mode pipesgd --stale-lr compute --lr-schedule poly:2
straight_vs_resumed 2 1e-6 --mode topk --density 0.05 --momentum-correction
straight_vs_resumed 2 1e-6 --mode csc --chunk 256 --momentum-correction
straight_vs_resumed 2 1e-6 --mode csc --chunk 256 --loss-scale dynamic
# PS-Sync: the servers' momentum is their own state, the weights in flight land first; a checkpoint
# mid-run (--checkpoint-every) changes nothing either
straight_vs_resumed 3 exact --mode ps
cp "$T/half.st" "$T/ps3.st"
ps4=(--mode ps --ps-servers 2 --placement round-robin --ps-wait-free --ps-messages range --compress q8)
straight_vs_resumed 4 exact "${ps4[@]}"
run mpi -np 4 "$DTRAIN" $C "${ps4[@]}" --iters $N --checkpoint "$T/every.st" --checkpoint-every 7it --save "$T/every-saved.st"
[ "$(grep -c "checkpoint $T/every.st:" "$T/out")" -ge 3 ] || { cat "$T/out"; fail "ps: no checkpoints every 7 iterations"; }
cmp -s "$T/straight.st" "$T/every-saved.st" || fail "ps: checkpoints every 7 iterations changed the weights: $("$STDIFF" "$T/straight.st" "$T/every-saved.st" 0 0)"
# --ps-apply each (SSP) with one worker: its pushes in one order, so bit for bit too
straight_vs_resumed 2 exact --mode ps --ps-apply each --staleness 1
run mpi -np 2 "$DTRAIN" $C --mode ps --ps-apply each --staleness 1 --iters $N --checkpoint "$T/every.st" \
    --checkpoint-every 7it --save "$T/every-saved.st"
cmp -s "$T/straight.st" "$T/every-saved.st" || fail "ps each: checkpoints every 7 iterations changed the weights"
# with staleness and several workers the versions a worker takes depend on timing: resumed where
# it stopped, a run has the weights it ended with (in flight at its checkpoint: the servers' latest,
# under each their own state, newer than any worker's), and resumed further it learns
stale=("--staleness 1" "--ps-apply each --staleness 2")
[ "${DT_SANITIZED:-no}" = yes ] && stale=("--ps-apply each --staleness 2") # (the paths of both, at less compute)
for w in "${stale[@]}"; do
    run mpi -np 4 "$DTRAIN" $C --mode ps --ps-servers 2 $w --iters $H --checkpoint "$T/stale.st" --save "$T/stale-end.st"
    run mpi -np 4 "$DTRAIN" $C --mode ps --ps-servers 2 $w --iters $H --resume "$T/stale.st" --save "$T/stale-again.st"
    cmp -s "$T/stale-end.st" "$T/stale-again.st" || fail "ps $w: resumed with nothing to train, other weights than the run's"
    run mpi -np 4 "$DTRAIN" $C --mode ps --ps-servers 2 $w --iters $N --resume "$T/stale.st" --checkpoint "$T/stale.st" \
        --checkpoint-every 4it --log "$T/stale.jsonl"
    a=$(json_last "$T/stale.jsonl" summary test_acc)
    awk -v a="$a" 'BEGIN { exit !(a >= 0.8) }' || fail "ps $w, resumed: test accuracy $a"
    note "ps $w: resumed at its end, the weights it ended with; resumed further, test accuracy $a"
done
note "ps: bit-identical resumed (2 workers + 1 or 2 servers, wait-free, q8; each with 1 worker) and with checkpoints every 7 iterations"
# Pipe-SGD resumed with nothing to train: its gradients in flight land, as at the end of the run
run mpi -np 2 "$DTRAIN" $C --mode pipesgd --pipeline-depth 3 --iters $H --checkpoint "$T/pipe.st" --save "$T/pipe-end.st"
run mpi -np 2 "$DTRAIN" $C --mode pipesgd --pipeline-depth 3 --iters $H --resume "$T/pipe.st" --save "$T/pipe-again.st"
cmp -s "$T/pipe-end.st" "$T/pipe-again.st" || fail "pipesgd resumed with nothing to train: other weights than the run's"

# kill -9 between checkpoints: one thread, a bigger net, so the run lasts a few seconds
K="--net resnet20 --dataset cifar10 --data-dir $T/c10 --batch 50 --lr 0.05 --epochs $KE --threads 1 --progress none"
run mpi -np 2 "$DTRAIN" $K --save "$T/k_straight.st"
mpi -np 2 "$DTRAIN" $K --checkpoint "$T/kill.st" --checkpoint-every 4it --save "$T/k_never.st" > "$T/k1.txt" 2>&1 &
for _ in $(seq 600); do
    grep -qa '"iteration":"\(8\|12\|16\|20\|24\)"' "$T/kill.st" 2>/dev/null && break
    sleep 0.05
done
sleep 0.$((RANDOM % 5))
pkill -9 -f "dtrain.*$T/kill.st"
wait
[ -f "$T/k_never.st" ] && fail "the run finished before it was killed (make it longer)"
done_at=$(grep -ao '"iteration":"[0-9]*"' "$T/kill.st" | grep -o '[0-9][0-9]*')
note "killed after the checkpoint of iteration $done_at"
run mpi -np 2 "$DTRAIN" $K --checkpoint "$T/kill.st" --checkpoint-every 4it --resume "$T/kill.st" --save "$T/k_resumed.st"
"$STDIFF" "$T/k_straight.st" "$T/k_resumed.st" 1e-6 0 > "$T/diff" || { cat "$T/diff"; fail "killed and resumed run differs"; }
note "kill -9 at iteration ~$done_at, resumed: $(cat "$T/diff")"

# a checkpoint is also a weight file
run "$DTRAIN" $C --epochs 0 --load "$T/dsync4.st"

# errors
expect() { # WHAT SUBSTRING CMD...
    local what=$1 want=$2; shift 2
    if [ "$1" = mpi ]; then "$@" > "$T/out" 2>&1; else timeout 120 "$@" > "$T/out" 2>&1; fi && { cat "$T/out"; fail "$what: exit status 0"; }
    last_rc=$?
    grep -qF -- "$want" "$T/out" || { cat "$T/out"; fail "$what: output lacks '$want'"; }
}
expect "another net" "a checkpoint of net small-cifar, not resnet20" \
    "$DTRAIN" --net resnet20 --dataset cifar10 --data-dir "$T/c10" --batch 50 --resume "$T/dsync4.st"
# the net file edited between the checkpoint and the resume: written otherwise, the same layers (0.20
# for 0.2, a default spelled out), resumed; another layer of the same tensors (dropout's rate) refused
mkdir -p "$T/w" && cp "$NET" "$T/w/small-cifar.net"
CW=${C/$NET/$T/w/small-cifar.net}
run "$DTRAIN" $CW --iters 4 --checkpoint "$T/w.ck"
sed -i 's/p=0.2/p=0.20/; s/^\(conv *name=conv2.*\)$/\1 bias=1/' "$T/w/small-cifar.net"
grep -q "bias=1" "$T/w/small-cifar.net" || fail "the test's net lacks the spelled-out default"
run "$DTRAIN" $CW --iters 6 --resume "$T/w.ck"
sed -i 's/p=0.20/p=0.3/' "$T/w/small-cifar.net"
expect "other layers of the same tensors" \
    "made with other layers in net small-cifar: the checkpoint has 'dropout name=dropout1 in=flatten1 p=0.2 -> 32', this run 'dropout name=dropout1 in=flatten1 p=0.3 -> 32'" \
    "$DTRAIN" $CW --iters 6 --resume "$T/w.ck"
expect "other options" "made with other options: the checkpoint has 'lr = 0.05', this run 'lr = 0.1'" \
    "$DTRAIN" $C --lr 0.1 --resume "$T/dsync4.st"
# an option given at the value the run takes anyway is the same run (it was refused: 'compress = ' against
# 'compress = none'); another value is named with what the checkpoint's run took
run "$DTRAIN" $C --iters 30 --resume "$T/dsync4.st" --compress none --classes 10
expect "another codec" "made with other options: the checkpoint has 'compress = none', this run 'compress = q8'" \
    "$DTRAIN" $C --iters 30 --resume "$T/dsync4.st" --compress q8
$PYTHON "$top_srcdir/tests/mkimages.py" cifar10 "$T/c10b" 1000 200 32 12 || fail "could not generate CIFAR files"
expect "other data of the same size" "made on other data of the same size (cifar10's fingerprint" \
    "$DTRAIN" ${C/$T\/c10/$T/c10b} --resume "$T/dsync4.st"
expect "a weight file" "a weight file, not a checkpoint (expected --load for weight files)" \
    "$DTRAIN" $C --resume "$T/straight.st"
cp "$T/dsync4.st" "$T/bad.st" && printf '\x55' | dd of="$T/bad.st" bs=1 seek=$(( $(stat -c %s "$T/bad.st") - 10 )) conv=notrunc 2>/dev/null
expect "a damaged checkpoint" "the file is damaged" "$DTRAIN" $C --resume "$T/bad.st"
run mpi -np 2 "$DTRAIN" $C --mode topk --density 0.05 --iters 5 --checkpoint "$T/topk.st"
expect "other rank count with per-rank state" "made by 2 ranks, this run has 1" \
    "$DTRAIN" $C --mode topk --density 0.05 --iters 10 --resume "$T/topk.st"
[ $last_rc -eq 2 ] || fail "another rank count than the checkpoint's: exit $last_rc (expected 2, the command line's)"
# --dry-run checks it as the run does (of this job's ranks, or --ranks'): before, it passed
expect "--dry-run, other rank count with per-rank state" "made by 2 ranks, this run has 1 (resume topk with 2 ranks" \
    "$DTRAIN" $C --mode topk --density 0.05 --iters 10 --resume "$T/topk.st" --dry-run
[ $last_rc -eq 2 ] || fail "--dry-run of another rank count than the checkpoint's: exit $last_rc (expected 2)"
expect "--dry-run --ranks 3, other rank count" "made by 2 ranks, this run has 3" \
    "$DTRAIN" $C --mode topk --density 0.05 --iters 10 --resume "$T/topk.st" --dry-run --ranks 3
run "$DTRAIN" $C --mode topk --density 0.05 --iters 10 --resume "$T/topk.st" --dry-run --ranks 2
run "$DTRAIN" $C --iters 30 --resume "$T/dsync4.st" --dry-run --ranks 3 # D-Sync: no per-rank state
expect "ps, other rank count" "made by 3 ranks, this run has 4" mpi -np 4 "$DTRAIN" $C --mode ps --iters $N --resume "$T/ps3.st"
[ $last_rc -eq 2 ] || fail "ps, another rank count than the checkpoint's: exit $last_rc (expected 2)"
run "$DTRAIN" $C --iters 30 --resume "$T/dsync4.st" # D-Sync: another rank count is fine
# --resume onto the run's own --log goes on with it: the records up to the checkpoint stay (those of
# later iterations, a summary, what the first run's end closed early and a line cut off by a crash
# go), the iteration and epoch records equal the straight run's (the checkpoint holds what the
# epoch and its open log window had summed), time goes on, the new start record says where it resumed
run "$DTRAIN" $C --iters 10 --log-every 4 --log "$T/full.jsonl"
run "$DTRAIN" $C --iters 6 --log-every 4 --checkpoint "$T/h6.st" --log "$T/part.jsonl"
run "$DTRAIN" $C --iters 10 --log-every 4 --resume "$T/h6.st" --log "$T/part.jsonl"
logs_agree() { # STARTS [AT]: the resumed log (resumed at AT, default 6) against the straight one
    $PYTHON - "$T/full.jsonl" "$T/part.jsonl" "$1" "$T/h${2:-6}.st" "${2:-6}" <<'PY' || fail "--resume at ${2:-6} onto its own --log: $(cut -c1-100 "$T/part.jsonl")"
import json, os, sys
full, part = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
for kind in ("iter", "epoch"):
    its = lambda rs: [(r["iter"], r["loss"], r["train_acc"]) for r in rs if r["type"] == kind]
    assert its(part) == its(full), "%s records: %s against %s" % (kind, its(part), its(full))
kinds = [r["type"] for r in part]
assert kinds.count("start") == int(sys.argv[3]) and kinds.count("summary") == 1 and kinds[-1] == "summary", kinds
assert kinds.count("epoch") == 1, kinds  # the first run's partial epoch 1 went
last = [r for r in part if r["type"] == "start"][-1]
assert last["resumed_at"] == int(sys.argv[5]) and last["resumed_from"] == os.path.realpath(sys.argv[4]), last
times = [r["time"] for r in part if r["type"] != "start"]
assert times == sorted(times), "time goes back: %s" % times
PY
}
logs_agree 2
printf '{"type":"iter","epoch":1,"iter":11,"ti' >> "$T/part.jsonl" # a crash mid-line
run "$DTRAIN" $C --iters 10 --log-every 4 --resume "$T/h6.st" --log "$T/part.jsonl"
logs_agree 3
# a run that ended where its last log window ends: that window's record stays, and the resumed
# run's next window starts empty (the final checkpoint came before the record; it counted twice)
run "$DTRAIN" $C --iters 8 --log-every 4 --checkpoint "$T/h8.st" --log "$T/part.jsonl"
run "$DTRAIN" $C --iters 10 --log-every 4 --resume "$T/h8.st" --log "$T/part.jsonl"
logs_agree 2 8

# a run with gradients in flight at its end (pipesgd K = 3, ps) evaluates its last epoch before they
# land, as a longer run does, and its summary after: resumed at that epoch's end onto its log, every
# epoch record (test accuracy included) and the summary are the straight run's
for m in "--mode pipesgd --pipeline-depth 3" "--mode ps"; do
    np=2; [ "$m" = "--mode ps" ] && np=3
    run mpi -np $np "$DTRAIN" $C $m --iters 40 --log "$T/fl.jsonl"
    run mpi -np $np "$DTRAIN" $C $m --iters 20 --checkpoint "$T/fl20.st" --log "$T/flp.jsonl"
    run mpi -np $np "$DTRAIN" $C $m --iters 40 --resume "$T/fl20.st" --log "$T/flp.jsonl"
    $PYTHON - "$T/fl.jsonl" "$T/flp.jsonl" <<'PY' || fail "$m resumed at an epoch's end onto its log: other records"
import json, sys
full, part = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
keys = ("iter", "loss", "train_acc", "test_loss", "test_acc")
for kind in ("epoch", "summary"):
    its = lambda rs: [tuple(r.get(k) for k in keys) for r in rs if r["type"] == kind]
    assert its(part) == its(full) and len(its(full)) == (2 if kind == "epoch" else 1), \
        "%s records: %s against %s" % (kind, its(part), its(full))
PY
done
note "pipesgd K = 3 and ps resumed at an epoch's end onto their logs: the straight run's epoch records and summary"

echo "PASS: resumed runs equal straight ones (1 to 4 ranks, 6 modes, kill -9); a resumed run's log goes on"
