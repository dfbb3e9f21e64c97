#!/bin/bash
# Faults end a job cleanly, each within a time bound:
#  - kill -9 of one rank: the job ends within 30 s, non-zero, and mpirun names the rank
#  - SIGSTOP of one rank before MPI_Init: the others give up there after --comm-timeout
#  - SIGSTOP of one rank: another rank gives up after --comm-timeout, calls the roll and names the
#    stopped rank, the operation and the iteration; the job ends within twice the timeout plus 10 s
#    (also a ps --ps-apply each server whose one worker stops);
#    over --transport nccl (on the guarded backend's stand-in) the device's transfers give up too, and
#    so do the ranks making the device communicator while one of them is stopped
#  - SIGTERM to one rank with --checkpoint (a worker; ps's server): every rank stops after the same iteration, the
#    checkpoint is written, the exit status is 143, no temporary file is left; resuming gives the
#    weights of the run that was never stopped, bit for bit, and its log (going on with its own) the
#    straight run's records
#  - SIGUSR1 to mpirun (which forwards it): the same stop, exit status 138; SIGINT to a single rank
#    without --checkpoint: one line, exit status 130
#  - a full disk under --log (/dev/full): reported, exit 1
#  - outputs that cannot be written whole: stdout on a full disk (exit 1), a --save over ulimit -f
#    (its error, no temporary file, no summary in the log), an earlier log kept by a run that fails
#    in its set-up, a second run onto a log being written refused, one rank out of memory in the
#    link probe (every rank stops at once, naming it), a pack on a full tmpfs and a --save with no
#    room for it (as root), a second run onto a checkpoint being written refused, temporary files
#    that a killed run left removed, a replaced file's mode kept
#  - ranks whose options differ only in what they do together (--log-every, --save given on one
#    rank), whose data differ with the same sizes, or of which one only checks (--dry-run) or prints
#    (--version): refused at start-up, naming the option
#  - a non-finite loss: stopped in that iteration, naming the layers
. "$(dirname "$0")/lib.sh"
need_mpirun
make_idx "$T/data" 2000 200
D="--dataset mnist --data-dir $T/data --progress none --threads 1"
# a run of ~10-20 s on one core per rank: long enough to be hit while it trains
LONG="$D --net mlp --batch 20 --epochs 40"

# pid of the rank RANK of the dtrain job whose command line holds TAG (Open MPI's rank variable)
rank_pid() {
    local tag=$1 rank=$2 p
    for p in $(pgrep -f -- "dtrain .*$tag"); do
        tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" && { echo $p; return; }
    done
}
# waits until the JSON log FILE has an "iter" record (the job is training)
wait_training() {
    for _ in $(seq $((MPI_TIMEOUT * 2))); do grep -q '"type":"iter"' "$1" 2>/dev/null && return; sleep 0.05; done
    fail "the job did not start training within $((MPI_TIMEOUT / 10)) s"
}

# kill -9 of rank 1
mpi -np 3 "$DTRAIN" $LONG --log "$T/k9.jsonl" > "$T/k9.out" 2>&1 &
job=$!
wait_training "$T/k9.jsonl"
kill -9 "$(rank_pid k9.jsonl 1)"
t0=$(date +%s)
wait $job
rc=$?
dt=$(( $(date +%s) - t0 ))
[ $rc -ne 0 ] || fail "kill -9: the job exited 0"
[ $dt -le 30 ] || fail "kill -9: the job took $dt s to end"
grep -q "rank 1 with PID .* exited on signal 9\|\[\[[0-9]*,1\],1\]" "$T/k9.out" || { cat "$T/k9.out"; fail "kill -9: rank 1 not named"; }
note "kill -9 of rank 1: ended in $dt s, exit $rc"

# SIGSTOP of rank RANK of a job of NP ranks (default 3) of $LONG and ARGS, logging to $T/TAG.jsonl and
# $T/TAG.out, once it trains: sets rc (the job's exit status) and dt (the seconds it took to end after the stop)
stop_rank() { # TAG RANK ARGS...
    local tag=$1 rank=$2 job victim t0
    shift 2
    mpi -np "${NP:-3}" "$DTRAIN" $LONG "$@" --log "$T/$tag.jsonl" > "$T/$tag.out" 2>&1 &
    job=$!
    wait_training "$T/$tag.jsonl"
    victim=$(rank_pid "$tag.jsonl" "$rank")
    kill -STOP "$victim"
    t0=$(date +%s)
    wait $job
    rc=$?
    dt=$(( $(date +%s) - t0 ))
    kill -9 "$victim" 2>/dev/null
    rm -f "$T/$tag.jsonl"
}

# SIGSTOP of rank 2
stop_rank stop 2 --comm-timeout 3
[ $rc -ne 0 ] || fail "SIGSTOP: the job exited 0"
[ $dt -le 16 ] || fail "SIGSTOP: the job took $dt s to end (comm timeout 3 s, roll call 3 s)"
grep -q "waited [0-9]* s for \(rank [0-9]\|the other ranks\) in .*(training, mode dsync, iteration [0-9]*) and gave up (--comm-timeout 3): rank 2 does not answer" \
    "$T/stop.out" || { cat "$T/stop.out"; fail "SIGSTOP: no message naming the stopped rank, the operation and the iteration"; }
note "SIGSTOP of rank 2: ended in $dt s: $(grep -o 'waited.*answer' "$T/stop.out" | head -n 1)"

# SIGSTOP of the one worker of ps --ps-apply each: the server, which takes pushes as they come, gives up
# too (it polled its receives with no deadline, and the job never ended)
NP=2 stop_rank sspstop 0 --mode ps --ps-apply each --comm-timeout 3
[ $rc -ne 0 ] || fail "SIGSTOP of ps --ps-apply each's worker: the job exited 0"
[ $dt -le 16 ] || fail "SIGSTOP of ps --ps-apply each's worker: the job took $dt s to end (comm timeout 3 s)"
grep -q "waited [0-9]* s for rank 0 in .*(training, mode ps, iteration [0-9]*) and gave up (--comm-timeout 3): rank 0 does not answer" \
    "$T/sspstop.out" || { cat "$T/sspstop.out"; fail "SIGSTOP of ps --ps-apply each's worker: no message naming rank 0"; }
note "SIGSTOP of ps --ps-apply each's worker: ended in $dt s"

# a rank stopped before MPI's start-up (here before it even execs dtrain): the others wait for it in
# MPI_Init, which --comm-timeout bounds too; before, they waited forever
t0=$(date +%s)
mpi -np 2 "$DTRAIN" $D --iters 2 --comm-timeout 3 : -np 1 bash -c 'kill -STOP $$; exec "$0" "$@"' "$DTRAIN" $D --iters 2 \
    --comm-timeout 3 > "$T/istop.out" 2>&1
rc=$? dt=$(( $(date +%s) - t0 ))
[ $rc -ne 0 ] || fail "SIGSTOP before MPI_Init: the job exited 0"
[ $dt -le 20 ] || fail "SIGSTOP before MPI_Init: the job took $dt s to end (comm timeout 3 s)"
grep -q "MPI's start-up did not finish within 3 s (--comm-timeout): a rank of the job never started or was stopped" \
    "$T/istop.out" || { cat "$T/istop.out"; fail "SIGSTOP before MPI_Init: no message"; }
note "a rank stopped before MPI_Init: the job ended in $dt s"

# SIGSTOP of a rank over --transport nccl (the guarded backend's stand-in for NCCL, which gives up as
# NCCL's wait does): the device's transfers give up after --comm-timeout too, on the compute thread
# (D-Sync's ring) and on a communication thread (PS's wait-free pushes; the lazy allreduce; SSP's answers)
if [ -f "$top_builddir/tests/dtrain-cpu-guarded.so" ]; then
    export DTRAIN_MODULE_PATH="$top_builddir/tests" DTRAIN_GUARDED_DEVICES=3
    for m in "dsync --compress q8" "dsync --fusion-bytes 20000" "ps --ps-wait-free --ps-messages range" \
             "ps --ps-apply each --ps-servers 2"; do
        stop_rank nstop 1 --device cpu-guarded --transport nccl --mode $m --comm-timeout 3
        [ $rc -ne 0 ] || fail "SIGSTOP over nccl ($m): the job exited 0"
        [ $dt -le 16 ] || fail "SIGSTOP over nccl ($m): the job took $dt s to end (comm timeout 3 s)"
        grep -q "did not finish in 3 s (--comm-timeout): a rank stopped or died\|gave up (--comm-timeout 3)" \
            "$T/nstop.out" || { cat "$T/nstop.out"; fail "SIGSTOP over nccl ($m): no message that a transfer gave up"; }
        note "SIGSTOP of rank 1 over nccl, $m: ended in $dt s: $(grep -o 'rank [0-9] of 3: .* did not finish' \
            "$T/nstop.out" | head -n 1)"
    done
    # a rank wedged while the ranks make the device communicator (NCCL's ncclCommInitRank blocks the
    # others until it joins): they give up after --comm-timeout too and name it
    t0=$(date +%s)
    mpi -np 3 env DTRAIN_GUARDED_STOP_IN_CREATE=1 "$DTRAIN" $LONG --device cpu-guarded --transport nccl --mode dsync \
        --comm-timeout 3 --log "$T/ncreate.jsonl" > "$T/ncreate.out" 2>&1
    rc=$? dt=$(( $(date +%s) - t0 ))
    pkill -9 -f -- "dtrain .*ncreate.jsonl"
    [ $rc -ne 0 ] || fail "SIGSTOP in the device communicator's creation: the job exited 0"
    [ $dt -le 30 ] || fail "SIGSTOP in the device communicator's creation: the job took $dt s to end (comm timeout 3 s)"
    grep -q "waited [0-9]* s for the other ranks in the device communicator's creation .* gave up (--comm-timeout 3): rank 1 does not answer" \
        "$T/ncreate.out" || { cat "$T/ncreate.out"; fail "SIGSTOP in the device communicator's creation: no message naming rank 1"; }
    note "SIGSTOP of rank 1 in the device communicator's creation: ended in $dt s"
    unset DTRAIN_MODULE_PATH DTRAIN_GUARDED_DEVICES
fi

# SIGTERM to one rank with --checkpoint, then resume: the weights of an uninterrupted run
# term_resume TAG NP RANK ARGS...: RANK of NP gets the signal
S="$D --net mlp --batch 20 --epochs 6"
term_resume() {
    local tag=$1 np=$2 rank=$3 rc at
    shift 3
    mpi -np $np "$DTRAIN" "$@" --save "$T/straight.st" --log "$T/straight.jsonl" > "$T/out" 2>&1 ||
        { cat "$T/out"; fail "$tag: the straight run failed"; }
    mpi -np $np "$DTRAIN" "$@" --checkpoint "$T/$tag.ckpt" --checkpoint-every 100ep --log "$T/$tag.jsonl" \
        --save "$T/never.st" > "$T/$tag.out" 2>&1 &
    local job=$!
    wait_training "$T/$tag.jsonl"
    kill -TERM "$(rank_pid $tag.jsonl $rank)"
    wait $job
    rc=$?
    [ $rc -eq 143 ] || { cat "$T/$tag.out"; fail "$tag: SIGTERM: exit status $rc (expected 143)"; }
    [ -f "$T/never.st" ] && fail "$tag: SIGTERM: the run finished before the signal (make it longer)"
    grep -q "stopped by SIGTERM after iteration [0-9]* of 600: continue with --resume $T/$tag.ckpt" "$T/$tag.out" ||
        { cat "$T/$tag.out"; fail "$tag: SIGTERM: no line saying where it stopped"; }
    ls "$T"/$tag.ckpt.tmp.* 2>/dev/null && fail "$tag: SIGTERM: a temporary file was left behind"
    at=$(sed -n 's/.*stopped by SIGTERM after iteration \([0-9]*\).*/\1/p' "$T/$tag.out")
    mpi -np $np "$DTRAIN" "$@" --resume "$T/$tag.ckpt" --save "$T/resumed.st" --log "$T/$tag.jsonl" > "$T/out" 2>&1 ||
        { cat "$T/out"; fail "$tag: resume after SIGTERM failed"; }
    grep -q "resumed from $T/$tag.ckpt at iteration $at of 600" "$T/out" || { cat "$T/out"; fail "$tag: no resume message"; }
    cmp -s "$T/straight.st" "$T/resumed.st" || fail "$tag: stopped at $at and resumed: the weights differ from the straight run"
    # and the log it went on with: the straight run's records (loss, accuracy) for every window and epoch
    $PYTHON - "$T/straight.jsonl" "$T/$tag.jsonl" <<'PY' || fail "$tag: stopped at $at and resumed: the log differs from the straight run's"
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
pick = lambda rs: [(r["type"], r["iter"], r.get("loss"), r.get("train_acc"), r.get("test_acc")) for r in rs if r["type"] != "start"]
assert pick(a) == pick(b), [x for x in zip(pick(a), pick(b)) if x[0] != x[1]][:3]
PY
    note "$tag: SIGTERM to rank $rank of $np: stopped after iteration $at, checkpoint written; resumed: bit-identical weights, the same log records"
}
term_resume term 2 1 $S
# ps, the signal to its server (rank 2): the weights in flight land before the checkpoint
term_resume psterm 3 2 $S --mode ps

# SIGUSR1 to mpirun: forwarded to every rank
mpi -np 2 "$DTRAIN" $LONG --checkpoint "$T/usr1.ckpt" --checkpoint-every 100ep --log "$T/usr1.jsonl" > "$T/usr1.out" 2>&1 &
job=$!
wait_training "$T/usr1.jsonl"
kill -USR1 "$(pgrep -f -- "^$MPIRUN .*usr1.jsonl" | head -n 1)"
wait $job
rc=$?
[ $rc -eq 138 ] || { cat "$T/usr1.out"; fail "SIGUSR1 to mpirun: exit status $rc (expected 138)"; }
grep -q "stopped by SIGUSR1 after iteration" "$T/usr1.out" || { cat "$T/usr1.out"; fail "SIGUSR1: no line"; }
[ -f "$T/usr1.ckpt" ] || fail "SIGUSR1: no checkpoint"

# SIGINT to a single rank without --checkpoint
timeout 120 "$DTRAIN" $LONG --log "$T/int.jsonl" > "$T/int.out" 2>&1 &
job=$!
wait_training "$T/int.jsonl"
kill -INT "$(pgrep -f -- "^$DTRAIN .*int.jsonl")"
wait $job
rc=$?
[ $rc -eq 130 ] || { cat "$T/int.out"; fail "SIGINT: exit status $rc (expected 130)"; }
grep -q "stopped by SIGINT after iteration [0-9]* of 4000; nothing saved" "$T/int.out" || { cat "$T/int.out"; fail "SIGINT: no line"; }
note "SIGUSR1 to mpirun: exit 138 with a checkpoint; SIGINT to one rank: exit 130"

# a full disk under --log
timeout 60 "$DTRAIN" $D --iters 5 --log /dev/full > "$T/full.out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$T/full.out"; fail "--log /dev/full: exit status $rc (expected 1)"; }
grep -q -- "--log /dev/full: .*No space left on device" "$T/full.out" || { cat "$T/full.out"; fail "--log /dev/full: not reported"; }

# ranks that disagree on what they do together
expect_refused() {
    local what=$1 want=$2
    shift 2
    mpi "$@" > "$T/out" 2>&1
    local rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$T/out"; fail "$what: exit status $rc"; }
    grep -qF -- "$want" "$T/out" || { cat "$T/out"; fail "$what: output lacks '$want'"; }
}
expect_refused "--log-every on one rank" "rank 0: 'log-every = 50', this rank: 'log-every = 10'" \
    -np 1 "$DTRAIN" $D --iters 5 --progress lines : -np 1 "$DTRAIN" $D --iters 5 --progress lines --log-every 10
expect_refused "--save on one rank" "rank 0: 'save = (not given)', this rank: 'save = (given)'" \
    -np 1 "$DTRAIN" $D --iters 5 : -np 1 "$DTRAIN" $D --iters 5 --save "$T/one.st"
expect_refused "--comm-timeout differs" "rank 0: 'comm-timeout = 300', this rank: 'comm-timeout = 10'" \
    -np 1 "$DTRAIN" $D --iters 5 : -np 1 "$DTRAIN" $D --iters 5 --comm-timeout 10
# a rank that only checks or prints, beside one that trains (each left the other waiting)
expect_refused "--dry-run on one rank" "the action differs from rank 0's (rank 0: '--dry-run', this rank: 'train')" \
    -np 1 "$DTRAIN" $D --iters 5 --dry-run : -np 1 "$DTRAIN" $D --iters 5
expect_refused "--version on one rank" "the action differs from rank 0's (rank 0: 'train', this rank: '--version')" \
    -np 1 "$DTRAIN" $D --iters 5 : -np 1 "$DTRAIN" --version
mkdir -p "$T/data2" && make_idx "$T/data2" 2000 200 8
expect_refused "same sizes, other data" "this rank: 'data fingerprint = " \
    -np 1 "$DTRAIN" $D --iters 5 : -np 1 "$DTRAIN" --dataset mnist --data-dir "$T/data2" --progress none --threads 1 --iters 5

# outputs that cannot be written whole: nothing passed off as complete, nothing good replaced
# - standard output on a full disk: exit 1, said on stderr (without --log it is the run's only record)
timeout 60 "$DTRAIN" $D --iters 5 > /dev/full 2> "$T/fullout.err"
rc=$?
[ $rc -eq 1 ] && grep -q "standard output: write failed" "$T/fullout.err" ||
    { cat "$T/fullout.err"; fail "stdout on /dev/full: exit $rc"; }
"$DTRAIN" --help > /dev/full 2> /dev/null && fail "--help > /dev/full: exit 0"
# - a file over ulimit -f: the write's error (not SIGXFSZ's kill, exit 153), no temporary file; the
#   log of a run whose --save failed has no summary (it would pass for a run that wrote what it was asked)
mkdir "$T/fsz"
# (the limit on the rank alone: a singleton's own PMIx server writes megabytes of segments)
mpi -np 1 bash -c 'ulimit -f 1000 && exec "$0" "$@"' "$DTRAIN" $D --iters 5 --save "$T/fsz/w.st" --log "$T/fsz/log.jsonl" \
    > "$T/fsz.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q -- "--save: $T/fsz/w.st: write failed (File too large)" "$T/fsz.out" ||
    { cat "$T/fsz.out"; fail "--save over ulimit -f: exit $rc"; }
[ -z "$(ls "$T/fsz" | grep -v '^log.jsonl$')" ] || { ls -la "$T/fsz"; fail "--save over ulimit -f: files left"; }
grep -q '"type":"epoch"' "$T/fsz/log.jsonl" && ! grep -q '"type":"summary"' "$T/fsz/log.jsonl" ||
    { cat "$T/fsz/log.jsonl"; fail "a run whose --save failed: its log has a summary, or no epoch"; }
# - an earlier log is left as it was by a run that fails in its set-up, and a second run onto a log
#   that another is writing is refused (exit 1), the first one's log whole
"$DTRAIN" $D --iters 5 --log "$T/keep.jsonl" > /dev/null 2>&1 || fail "a short run with --log failed"
before=$(md5sum < "$T/keep.jsonl")
"$DTRAIN" $D --iters 5 --log "$T/keep.jsonl" --load "$T/no-such.st" > "$T/keep.out" 2>&1
[ $? -ne 0 ] && [ "$(md5sum < "$T/keep.jsonl")" = "$before" ] || { cat "$T/keep.out"; fail "a failed set-up emptied the earlier log"; }
"$DTRAIN" $LONG --log "$T/busy.jsonl" > "$T/busy1.out" 2>&1 &
job=$!
wait_training "$T/busy.jsonl"
timeout 60 "$DTRAIN" $D --iters 5 --log "$T/busy.jsonl" > "$T/busy2.out" 2>&1
rc=$?
kill -TERM $job; wait $job
[ $rc -eq 1 ] && grep -q -- "--log $T/busy.jsonl: another run is writing this log" "$T/busy2.out" ||
    { cat "$T/busy2.out"; fail "a second run onto a log being written: exit $rc"; }
[ "$(grep -c '"type":"start"' "$T/busy.jsonl")" -eq 1 ] && ! grep -qP '\x00' "$T/busy.jsonl" ||
    fail "a second run onto a log being written damaged it"
# - the same for a checkpoint: a second run onto a checkpoint that another keeps writing stops at
#   start-up (exit 1, also as a --resume of it), rather than replace that run's checkpoints unseen
"$DTRAIN" $LONG --checkpoint "$T/busy.st" --checkpoint-every 5it > "$T/busyck1.out" 2>&1 &
job=$!
for _ in $(seq 200); do [ -s "$T/busy.st" ] && break; sleep 0.05; done
[ -s "$T/busy.st" ] || fail "a checkpoint every 5 iterations: none written"
for extra in "" "--resume $T/busy.st"; do
    timeout 60 "$DTRAIN" $D --iters 5 --checkpoint "$T/busy.st" $extra > "$T/busyck2.out" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q -- "--checkpoint: $T/busy.st: another run is writing this file" "$T/busyck2.out" ||
        { cat "$T/busyck2.out"; kill -TERM $job; fail "a second run onto a checkpoint being written ($extra): exit $rc"; }
done
kill -TERM $job; wait $job
# - temporary files that a killed run left beside an output go with the next write of it (those a
#   minute old that no process holds), others stay; a replaced file keeps its mode
mkdir "$T/stale" && touch "$T/stale/w.st.tmp.1" "$T/stale/w.st.tmp.2" "$T/stale/w.st.tmp.x1" "$T/stale/v.st.tmp.3"
touch -d '5 minutes ago' "$T/stale/w.st.tmp.1" "$T/stale/w.st.tmp.x1" "$T/stale/v.st.tmp.3"
: > "$T/stale/w.st" && chmod 640 "$T/stale/w.st"
"$DTRAIN" $D --iters 5 --save "$T/stale/w.st" > "$T/stale.out" 2>&1 || { cat "$T/stale.out"; fail "--save beside stale files"; }
[ "$(cd "$T/stale" && echo *)" = "v.st.tmp.3 w.st w.st.tmp.2 w.st.tmp.x1" ] ||
    { ls -la "$T/stale"; fail "stale temporary files: not as expected"; }
[ "$(stat -c %a "$T/stale/w.st")" = 640 ] || { ls -la "$T/stale"; fail "--save over a file of mode 640: its mode not kept"; }
# - one rank without memory for the start-up probe of the links (its 4 MiB buffers): every rank
#   stops at once, naming it (it left the others in a chain it never joined: exit 15 on 2 ranks,
#   a wait for --comm-timeout on 3)
if [ "${DT_SANITIZED:-no}" != yes ]; then # (a preloaded allocator: not beside the sanitizers' own)
    t0=$(date +%s)
    expect_refused "one rank out of memory in the link probe" "timing-model probe: rank 1 is out of memory" \
        -np 1 "$DTRAIN" $D --iters 5 : -np 1 env LD_PRELOAD="$top_builddir/tests/failalloc.so" DT_FAIL_BYTES=4194304 \
        "$DTRAIN" $D --iters 5 : -np 1 "$DTRAIN" $D --iters 5
    [ $(($(date +%s) - t0)) -lt 60 ] || fail "one rank out of memory in the link probe: the job took $(($(date +%s) - t0)) s"
fi
# - an image pack on a file system that fills up: the error, not SIGBUS where the mapped file had no
#   block (root: a small tmpfs)
if [ "$(id -u)" = 0 ] && mkdir "$T/small" && mount -t tmpfs -o size=1200k tmpfs "$T/small" 2>/dev/null; then
    $PYTHON "$top_srcdir/tests/mkjpeg.py" tree "$T/small/tree" 120 30 40 > /dev/null 2>&1 || { umount "$T/small"; fail "mkjpeg"; }
    timeout 120 "$DTRAIN" --net "$top_srcdir/tests/nets/tiny-images.net" --dataset imagenet --data-dir "$T/small/tree" \
        --image-size 96 --pack-only > "$T/pack.out" 2>&1
    rc=$?
    left=$(ls "$T/small/tree/.dtrain-pack" 2>/dev/null | grep -c tmp)
    # (and a --save with no room for it: refused before training, saying what is free)
    timeout 60 "$DTRAIN" $D --net lenet --epochs 1 --save "$T/small/w.st" > "$T/room.out" 2>&1
    room=$?
    umount "$T/small"
    [ $room -eq 1 ] && grep -q -- "--save: $T/small/w.st: its file system has [0-9.]* MB free, and the weights take at least 5.0 MB" \
        "$T/room.out" && ! grep -q "^epoch" "$T/room.out" || { cat "$T/room.out"; fail "--save with no room: exit $room"; }
    [ $rc -eq 1 ] && grep -q "No space left on device" "$T/pack.out" && [ "$left" = 0 ] ||
        { cat "$T/pack.out"; fail "a pack on a full file system: exit $rc, $left temporary files left"; }
    note "a pack on a full tmpfs: exit 1, said"
else
    note "a pack on a full file system: not checked (needs root for a small tmpfs)"
fi

# a loss that becomes NaN: stopped in that iteration (not at the next --log-every)
timeout 120 "$DTRAIN" $D --net mlp --lr 90 --epochs 1 > "$T/nan.out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$T/nan.out"; fail "NaN loss: exit status $rc"; }
grep -q "training diverged: the loss is \(nan\|infinite\) in iteration [0-9]*; the first non-finite gradient (in backward order) is 'fc3\.[a-z]*'" \
    "$T/nan.out" || { cat "$T/nan.out"; fail "NaN loss: not reported with the iteration and layer"; }
note "NaN loss: $(grep -o 'the loss is [a-z]* in iteration [0-9]*' "$T/nan.out")"
# the same run over fp16 on the wire of 2 ranks: saturation keeps it finite, so it goes on; a
# warning says so at once and the summary counts the saturated values (terngrad's codec is named)
mpi -np 2 "$DTRAIN" $D --net mlp --lr 90 --iters 20 --compress fp16 --log "$T/sat.jsonl" > "$T/sat.out" 2>&1 ||
    { cat "$T/sat.out"; fail "fp16 on the wire, diverging: the run failed"; }
grep -q "^warning: by iteration [0-9]*, [0-9]* gradient values on the wire lay beyond fp16's range" "$T/sat.out" ||
    { cat "$T/sat.out"; fail "fp16 on the wire, diverging: no warning of saturated values"; }
[ "$(json_last "$T/sat.jsonl" summary fp16_saturated)" -gt 0 ] || fail "fp16 on the wire, diverging: fp16_saturated"
mpi -np 2 "$DTRAIN" $D --net mlp --iters 20 --compress fp16 --log "$T/sat0.jsonl" > "$T/sat0.out" 2>&1 ||
    { cat "$T/sat0.out"; fail "fp16 on the wire: the run failed"; }
! grep -q "^warning" "$T/sat0.out" && [ "$(json_last "$T/sat0.jsonl" summary fp16_saturated)" = 0 ] ||
    { cat "$T/sat0.out"; fail "fp16 on the wire, a sane lr: saturated values reported"; }
mpi -np 2 "$DTRAIN" $D --net mlp --iters 4 --mode terngrad --log "$T/tern.jsonl" > "$T/tern.out" 2>&1 ||
    { cat "$T/tern.out"; fail "terngrad: the run failed"; }
[ "$(json_last "$T/tern.jsonl" summary compress)" = "\"tern\"" ] || fail "terngrad: the summary's compress is not tern"
echo "PASS: kill -9, SIGSTOP, SIGTERM/SIGUSR1/SIGINT, a full disk, disagreeing ranks, a NaN loss and a saturating fp16 wire all end cleanly"
