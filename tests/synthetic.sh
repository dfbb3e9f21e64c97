#!/bin/bash
# The dataset follows the net, and --dataset synthetic measures speed without data:
#  - --list-nets names each built-in net's dataset (1x28x28 → fashion-mnist, 3x32x32 → cifar10 or
#    cifar100 by classes, ImageNet-sized → imagenet)
#  - without --dataset, a net trains on its dataset; when that dataset's files are missing the run
#    stops with exit 2, naming where it looked, how to get it, and --dataset synthetic
#  - the headline command of the README, mpirun -np 2 dtrain --net alexnet --mode pipesgd
#    --compress q8 --dataset synthetic --iters 3, trains within 120 s (about 15 s here) and
#    3 GB per rank (2.1 GB here), says it measures speed, and logs no accuracy
#  - --synthetic-once trains on its first batch every iteration: with one batch an epoch, in file
#    order and without augmentation (where every batch is the first), the weights equal a plain
#    synthetic run's bit for bit on 1 and 2 ranks; with shuffling and crops, a resumed run equals
#    one that never stopped; on device memory (the guarded backend) as on the cpu; the banner and
#    summary say so; without --dataset synthetic: exit 2
#  - 40 million synthetic samples (above the sampler's 2^25, a keyed order instead of an array):
#    training starts at once (Fisher-Yates took 75 s per epoch for 10^9), --dry-run counts no
#    memory for the shuffle, and a resumed run equals one that never stopped, on 2 ranks
. "$(dirname "$0")/lib.sh"
need_mpirun

# each built-in net's dataset
"$DTRAIN" --list-nets > "$T/nets" || fail "--list-nets failed"
for pair in mlp=fashion-mnist lenet=fashion-mnist cifar-quick=cifar10 cifar-quick-convex=cifar100 \
    resnet20=cifar10 vgg16=cifar10 alexnet=imagenet alexnet-bn=imagenet resnet18=imagenet resnet50=imagenet googlenet=imagenet \
    alexnet-torchvision=imagenet vgg16-torchvision=imagenet; do
    net=${pair%=*} want=${pair#*=}
    got=$(awk -v n="$net" '$1 == n { s = substr($0, 44, 14); sub(/ +$/, "", s); print s }' "$T/nets")
    [ "$got" = "$want" ] || { cat "$T/nets"; fail "--list-nets: $net's dataset is '$got' (expected $want)"; }
done
[ "$(grep -c . "$T/nets")" -eq 14 ] || fail "--list-nets: expected 13 nets (a new one needs a line here)"

# without --dataset: the net's, found or refused with exit 2 (run where no data/ directory is)
mkdir -p "$T/empty" && cd "$T/empty"
unset DTRAIN_DATA
if [ -d /usr/share/datasets/fashion-mnist ]; then
    timeout 120 "$DTRAIN" --net mlp --iters 2 --progress none > "$T/mlp.out" 2>&1 || { cat "$T/mlp.out"; fail "mlp without --dataset failed"; }
    grep -q "^dtrain .*: net mlp .* on fashion-mnist (60000 train" "$T/mlp.out" || { cat "$T/mlp.out"; fail "mlp did not take fashion-mnist"; }
fi
for pair in resnet20=cifar10 cifar-quick-convex=cifar100 alexnet=imagenet; do
    net=${pair%=*} want=${pair#*=}
    [ -d "/usr/share/datasets/$want" ] && continue # installed here: it would train
    timeout 120 "$DTRAIN" --net "$net" --iters 1 --progress none > "$T/miss.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] || { cat "$T/miss.out"; fail "$net without its data: exit $rc (expected 2)"; }
    grep -q -- "--dataset $want: not found in .*/usr/share/datasets/$want (.*or give --data-dir DIR; to measure speed without data: --dataset synthetic)" \
        "$T/miss.out" || { cat "$T/miss.out"; fail "$net without its data: the message lacks where, how or --dataset synthetic"; }
done
# a net no dataset fits: exit 2, asking for --dataset
printf 'input shape=3x20x20\nflatten\ndense out=7\nsoftmax_xent\n' > "$T/odd.net"
timeout 60 "$DTRAIN" --net "$T/odd.net" --iters 1 > "$T/odd.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "no dataset has the net's 3x20x20 input and 7 classes (expected --dataset NAME" "$T/odd.out" ||
    { cat "$T/odd.out"; fail "a net no dataset fits: exit $rc"; }
timeout 60 "$DTRAIN" --net "$T/odd.net" --dataset synthetic --iters 2 --batch 8 --progress none > "$T/odd.out" 2>&1 ||
    { cat "$T/odd.out"; fail "--dataset synthetic on a net of its own shape failed"; }
# synthetic data is as large as the dataset of the net's shape, whatever its class count
for c in 10 20; do
    "$DTRAIN" --net mlp --classes $c --dataset synthetic --dry-run > "$T/syn.out" 2>&1 &&
        grep -q "data synthetic, 60000 training samples (generated" "$T/syn.out" ||
        { cat "$T/syn.out"; fail "synthetic data for an MNIST-shaped net of $c classes is not MNIST's size"; }
done
note "every built-in net's dataset; missing data: exit 2 with where to look and --dataset synthetic"

# the headline command on synthetic data, 2 ranks, bounded in time and memory
t0=$(date +%s)
# each rank's peak memory appended to one file (O_APPEND: whole lines; on stdout the two ranks' lines
# could interleave)
mpi -np 2 /usr/bin/time -a -o "$T/rss" -f "maxrss %M KB" "$DTRAIN" --net alexnet --mode pipesgd --compress q8 --dataset synthetic \
    --iters 3 --threads 1 --progress none --log "$T/alex.jsonl" > "$T/alex.out" 2>&1 || { cat "$T/alex.out"; fail "the headline command on synthetic data failed"; }
dt=$(( $(date +%s) - t0 ))
limit=120; [ "${DT_SANITIZED:-no}" = yes ] && limit=900
[ $dt -le $limit ] || fail "the headline command took $dt s (bound $limit s)"
for kb in $(sed -n 's/^maxrss \([0-9]*\) KB/\1/p' "$T/rss"); do
    [ "${DT_SANITIZED:-no}" = yes ] || [ "$kb" -le 3145728 ] || fail "a rank used $((kb / 1024)) MB (bound 3072 MB)"
done
[ "$(grep -c '^maxrss' "$T/rss")" -eq 2 ] || { cat "$T/alex.out" "$T/rss"; fail "expected the peak memory of 2 ranks"; }
grep -q "on synthetic data (1281167 samples, 3x260x260 cropped to 227x227, 1000 classes" "$T/alex.out" || { cat "$T/alex.out"; fail "no synthetic banner"; }
grep -q "^synthetic data: random samples, so no accuracy was measured" "$T/alex.out" || { cat "$T/alex.out"; fail "the summary does not say the data are synthetic"; }
grep -q "accuracy [0-9]\|test_acc [0-9]" "$T/alex.out" && { cat "$T/alex.out"; fail "an accuracy was presented for synthetic data"; }
[ "$(json_last "$T/alex.jsonl" summary synthetic)" = true ] || fail "the JSON summary does not mark the run synthetic"
grep -q '"test_acc"' "$T/alex.jsonl" && fail "the JSON log holds a test accuracy for synthetic data"
grep -q '"type":"summary".*"dataset":"synthetic"' "$T/alex.jsonl" || fail "the JSON summary does not name the dataset"
note "mpirun -np 2 dtrain --net alexnet --mode pipesgd --compress q8 --dataset synthetic --iters 3: $dt s, $(sed -n 's/^maxrss \([0-9]*\) KB/\1/p' "$T/rss" | sort -n | tail -n 1 | awk '{ printf "%.0f", $1 / 1024 }') MB per rank at most"

# --synthetic-once: the first batch, every iteration
cd "$T"
O=(--net mlp --dataset synthetic --synthetic-samples 40 --batch 40 --no-shuffle --augment none --epochs 4 --progress none)
for np in 1 2; do
    mpi -np $np "$DTRAIN" "${O[@]}" --synthetic-once --save "$T/once$np.st" > "$T/once.out" 2>&1 || { cat "$T/once.out"; fail "--synthetic-once on $np ranks failed"; }
    mpi -np $np "$DTRAIN" "${O[@]}" --save "$T/plain$np.st" > "$T/plain.out" 2>&1 || { cat "$T/plain.out"; fail "the plain synthetic run on $np ranks failed"; }
    cmp -s "$T/once$np.st" "$T/plain$np.st" || fail "--synthetic-once on $np ranks: weights differ from a run whose every batch is the first"
done
# on device memory (the guarded backend's, PROT_NONE outside its ops): the same weights
if [ -f "$top_builddir/tests/dtrain-cpu-guarded.so" ]; then
    DTRAIN_MODULE_PATH="$top_builddir/tests" mpi -np 2 "$DTRAIN" "${O[@]}" --synthetic-once --device cpu-guarded \
        --save "$T/guarded.st" > "$T/g.out" 2>&1 || { cat "$T/g.out"; fail "--synthetic-once on the guarded backend failed"; }
    cmp -s "$T/guarded.st" "$T/once2.st" || fail "--synthetic-once on the guarded backend differs from the cpu's"
fi
grep -q "one batch made once, on the device, every iteration" "$T/once.out" || { cat "$T/once.out"; fail "--synthetic-once: the banner does not say so"; }
grep -q "those of compute and communication alone (--synthetic-once" "$T/once.out" || { cat "$T/once.out"; fail "--synthetic-once: the summary does not say so"; }
# shuffled, cropped and flipped: the same batch after a resume
R=(--net cifar-quick --dataset synthetic --synthetic-samples 64 --batch 16 --synthetic-once --progress none --threads 1)
mpi -np 2 "$DTRAIN" "${R[@]}" --iters 6 --save "$T/straight.st" > "$T/r.out" 2>&1 || { cat "$T/r.out"; fail "--synthetic-once, 6 iterations, failed"; }
mpi -np 2 "$DTRAIN" "${R[@]}" --iters 3 --checkpoint "$T/once.ckpt" > "$T/r.out" 2>&1 || { cat "$T/r.out"; fail "--synthetic-once, 3 iterations, failed"; }
mpi -np 2 "$DTRAIN" "${R[@]}" --iters 6 --checkpoint "$T/once.ckpt" --resume "$T/once.ckpt" --save "$T/resumed.st" > "$T/r.out" 2>&1 ||
    { cat "$T/r.out"; fail "--synthetic-once resumed failed"; }
cmp -s "$T/straight.st" "$T/resumed.st" || fail "--synthetic-once: a resumed run differs from one that never stopped"
rc=0
"$DTRAIN" --net mlp --synthetic-once --iters 1 > "$T/bad.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q -- "--synthetic-once applies to --dataset synthetic" "$T/bad.out" || { cat "$T/bad.out"; fail "--synthetic-once without synthetic data: exit $rc"; }
note "--synthetic-once: the first batch every iteration, on 1 and 2 ranks, resumed"

# a keyed order for 40 million samples
K=(--net mlp --dataset synthetic --synthetic-samples 40000000 --batch 32 --progress none --threads 1)
"$DTRAIN" "${K[@]}" --dry-run > "$T/k.out" 2>&1 || { cat "$T/k.out"; fail "--dry-run of 40 million samples failed"; }
grep -q "and 0 GB of host memory per rank for the shuffle" "$T/k.out" || { cat "$T/k.out"; fail "--dry-run: memory for a keyed shuffle"; }
grep -q "40000000 training samples (generated; no evaluation)" "$T/k.out" || { cat "$T/k.out"; fail "--dry-run: synthetic samples"; }
# the memory figure counts the optimizer's velocity: 648010 parameters, 2.59 MB more with momentum
gb() { "$DTRAIN" "${K[@]}" --dry-run "$@" | sed -n 's/.*classes; \([0-9.e+-]*\) GB per rank on .*/\1/p'; }
awk -v a="$(gb --momentum 0)" -v b="$(gb)" 'BEGIN { exit !(b - a > 0.00254 && b - a < 0.00264) }' ||
    fail "--dry-run: the momentum's memory ($(gb --momentum 0) GB without, $(gb) GB with)"
mpi -np 2 timeout 60 "$DTRAIN" "${K[@]}" --iters 6 --save "$T/k-straight.st" > "$T/k.out" 2>&1 ||
    { cat "$T/k.out"; fail "40 million samples, 6 iterations, failed (or took over 60 s)"; }
mpi -np 2 "$DTRAIN" "${K[@]}" --iters 3 --checkpoint "$T/k.ckpt" > "$T/k.out" 2>&1 || { cat "$T/k.out"; fail "40 million samples, 3 iterations"; }
mpi -np 2 "$DTRAIN" "${K[@]}" --iters 6 --checkpoint "$T/k.ckpt" --resume "$T/k.ckpt" --save "$T/k-resumed.st" > "$T/k.out" 2>&1 ||
    { cat "$T/k.out"; fail "40 million samples, resumed"; }
cmp -s "$T/k-straight.st" "$T/k-resumed.st" || fail "40 million samples: a resumed run differs from one that never stopped"
note "40 million samples: a keyed order, no shuffle memory, resumed exactly"
echo "PASS: the dataset follows the net; synthetic data measure the headline command"
