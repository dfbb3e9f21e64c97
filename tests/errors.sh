#!/bin/bash
# Bad input: a one-line message on stderr that says what was expected, exit status 2 for a command
# line that asks for what is not there or does not fit and 1 for anything else, never a crash
# (signal) or a hang (timeout); an error on one rank ends the whole job. And --version.
. "$(dirname "$0")/lib.sh"
need_mpirun
make_idx "$T/data" 200 40
n_checks=0

# expect_error WHAT STATUS SUBSTRING CMD... : CMD must exit with STATUS (2: the command line asks for
# something that is not there or does not fit; 1: a file, the data or the run failed), never a
# signal or a timeout, with SUBSTRING in its output
expect_error() {
    local what=$1 status=$2 want=$3
    shift 3
    if [ "$1" = mpi ]; then "$@" > "$T/out" 2>&1; else timeout 120 "$@" > "$T/out" 2>&1; fi
    local rc=$?
    [ $rc -ne 124 ] || fail "$what: timed out (hang)"
    [ $rc -ne 0 ] || { cat "$T/out"; fail "$what: exit status 0"; }
    [ $rc -lt 128 ] || { cat "$T/out"; fail "$what: killed by signal $((rc - 128))"; }
    [ $rc -eq "$status" ] || { cat "$T/out"; fail "$what: exit status $rc (expected $status)"; }
    grep -qF -- "$want" "$T/out" || { cat "$T/out"; fail "$what: output lacks '$want'"; }
    n_checks=$((n_checks + 1))
}

D="--dataset mnist --data-dir $T/data --progress none"

# flags and values
expect_error "unknown flag" 2 "unknown option '--lerning-rate' (see dtrain --help)" "$DTRAIN" --lerning-rate 0.1
expect_error "bad number" 2 "--lr: expected a number in [0, 100], found 'x'" "$DTRAIN" --lr x
expect_error "out of range" 2 "--epochs: expected an integer in [0, 1000000], found -1" "$DTRAIN" --epochs -1
expect_error "unknown net" 2 "unknown net 'vgg99' (expected one of mlp" "$DTRAIN" --net vgg99 $D
expect_error "unknown dataset" 2 "unknown dataset 'imagenet22k'" "$DTRAIN" --dataset imagenet22k
expect_error "unknown mode" 2 "unknown mode 'gossip' (expected one of dsync" "$DTRAIN" --mode gossip
expect_error "usage exit status 2" 1 "[rank 0]" bash -c "'$DTRAIN' --bogus; test \$? -eq 2 || echo WRONG-STATUS >&2; exit 1"
grep -q WRONG-STATUS "$T/out" && fail "a usage error must exit with status 2"

expect_error "unknown codec" 2 "--compress: unknown codec 'q4' (expected one of none, t16, fp16, q8)" "$DTRAIN" --compress q4
expect_error "flag of another mode" 2 "--staleness applies to --mode ps, not to --mode dsync" "$DTRAIN" $D --staleness 2
expect_error "flag of another mode" 2 "--pipeline-depth applies to --mode pipesgd, not to --mode ps" "$DTRAIN" $D --mode ps --pipeline-depth 3
expect_error "flag of another mode" 2 "--fusion-bytes applies to --mode dsync, csc, not to --mode pipesgd" "$DTRAIN" $D --mode pipesgd --fusion-bytes 1e6
expect_error "block without q8" 2 "--compress-block applies to --compress q8, not to --compress t16" "$DTRAIN" $D --compress t16 --compress-block 64
expect_error "bad placement" 2 "--placement: expected one of uniform|round-robin|greedy, found 'random'" "$DTRAIN" --mode ps --placement random
expect_error "codec on a sparse mode" 2 "--compress applies to --mode dsync, ps, pipesgd, csc, not to --mode gtopk" "$DTRAIN" $D --mode gtopk --compress q8
expect_error "MPI_Allreduce with a codec" 2 "--allreduce mpi sums fp32 in the MPI library, which knows no codec (expected --compress none, or --allreduce ring for --compress q8)" "$DTRAIN" $D --allreduce mpi --compress q8
expect_error "allreduce of ps" 2 "--allreduce applies to --mode dsync, not to --mode ps" "$DTRAIN" $D --mode ps --allreduce mpi
expect_error "topk scope of gtopk" 2 "--topk-scope applies to --mode topk, not to --mode gtopk" "$DTRAIN" $D --mode gtopk --topk-scope layer
expect_error "clip-norm of dsync" 2 "--clip-norm applies to --mode topk, gtopk, not to --mode dsync" "$DTRAIN" $D --clip-norm 1
expect_error "stale-lr of dsync" 2 "--stale-lr applies to --mode pipesgd, not to --mode dsync" "$DTRAIN" $D --stale-lr compute
expect_error "loss scale of dsync" 2 "--loss-scale applies to --mode csc, not to --mode dsync" "$DTRAIN" $D --loss-scale dynamic
expect_error "a bad loss scale" 2 "--loss-scale: expected none, dynamic or a scale in [1, 2^24]" "$DTRAIN" $D --mode csc --loss-scale -4
expect_error "a comm timeout under a second" 2 "--comm-timeout: expected 0 (wait forever) or at least 1 second, found '1e-7'" \
    "$DTRAIN" $D --comm-timeout 1e-7
expect_error "a loss scale below 1" 2 "--loss-scale: expected none, dynamic or a scale in [1, 2^24]" "$DTRAIN" $D --mode csc \
    --loss-scale 1e-30
expect_error "a codec under --allreduce mpi in auto" 2 "candidate dsync+q8 has one" "$DTRAIN" $D --mode auto \
    --auto-allow dsync+q8 --allreduce mpi
expect_error "density of dsync" 2 "--density applies to --mode topk, gtopk, not to --mode dsync" "$DTRAIN" $D --density 0.01
expect_error "bad density warm-up" 2 "--density-warmup: expected none, dgc, gtopk-code or a list of densities" "$DTRAIN" --mode gtopk --density-warmup fast
# a warm-up density below the target was raised to it: the option did nothing
expect_error "a warm-up density below --density" 2 "--density-warmup: 0.1,0.0001: 0.0001 is below --density 0.01" \
    "$DTRAIN" --mode topk --density 0.01 --density-warmup 0.1,0.0001
expect_error "density out of range" 2 "--density: expected a number in [1e-09, 1], found 2" "$DTRAIN" --mode topk --density 2
expect_error "correction of terngrad" 2 "--momentum-correction applies to --mode topk, gtopk, csc, not to --mode terngrad" "$DTRAIN" $D --mode terngrad --momentum-correction
expect_error "ps on one rank" 2 "--mode ps with --ps-servers 1 needs at least 2 ranks (the servers and at least one worker), found 1" "$DTRAIN" $D --mode ps
expect_error "too many servers" 2 "--mode ps with --ps-servers 3 needs at least 4 ranks" mpi -np 3 "$DTRAIN" $D --mode ps --ps-servers 3

# files
expect_error "missing net file" 2 "--net: $T/none.net: cannot open" "$DTRAIN" --net "$T/none.net" $D
printf 'input shape=1x28x28\ndense out=10 actvation=relu\nsoftmax_xent\n' > "$T/bad.net"
expect_error "malformed net file" 1 "$T/bad.net:2: dense: unknown key 'actvation'" "$DTRAIN" --net "$T/bad.net" $D
printf 'input shape=3x32x32\ndense out=10\nsoftmax_xent\n' > "$T/rgb.net"
expect_error "net/dataset shape" 2 "the input layer expects 3x32x32 samples, but mnist has 1x28x28" "$DTRAIN" --net "$T/rgb.net" $D
printf 'input shape=1x28x28\ndense out=7\nsoftmax_xent\n' > "$T/seven.net"
expect_error "class count" 2 "the net ends in 7 classes, but mnist has 10" "$DTRAIN" --net "$T/seven.net" $D
expect_error "missing data dir" 2 "--data-dir $T/nowhere: No such file or directory" "$DTRAIN" --dataset mnist --data-dir "$T/nowhere"
mkdir -p "$T/trunc" && cp "$T/data"/* "$T/trunc/" && gunzip "$T/trunc/train-images-idx3-ubyte.gz" &&
    truncate -s 100000 "$T/trunc/train-images-idx3-ubyte"
expect_error "truncated IDX" 1 "train-images-idx3-ubyte: truncated (header says 156800 data bytes, found 99984)" \
    "$DTRAIN" --dataset mnist --data-dir "$T/trunc" --progress none
expect_error "missing --load" 2 "--load: $T/none.st: cannot open" "$DTRAIN" $D --load "$T/none.st"
expect_error "missing --resume" 2 "--resume: $T/none.ckpt: cannot open" "$DTRAIN" $D --resume "$T/none.ckpt"
mkdir -p "$T/emptydir"
expect_error "a data dir without the data" 2 "$T/emptydir: none of the four IDX files of mnist (train-images-idx3-ubyte[.gz]," \
    "$DTRAIN" --dataset mnist --data-dir "$T/emptydir" --progress none
# some of the files, whichever is missing: a partial set (exit 1) that names what is missing
for f in train-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    mkdir -p "$T/part-$f" && cp "$T"/data/* "$T/part-$f"/ && rm "$T/part-$f/$f"*
    expect_error "a data dir without $f" 1 "$T/part-$f: no $f[.gz] (expected the four IDX files of mnist" \
        "$DTRAIN" --dataset mnist --data-dir "$T/part-$f" --progress none
done
mkdir -p "$T/part-dir" && cp "$T"/data/* "$T/part-dir"/ && rm "$T"/part-dir/t10k-images* && mkdir "$T/part-dir/t10k-images-idx3-ubyte"
expect_error "a directory for an IDX file" 1 "$T/part-dir/t10k-images-idx3-ubyte: a directory (expected the IDX file)" \
    "$DTRAIN" --dataset mnist --data-dir "$T/part-dir" --progress none
head -c 50 /dev/urandom > "$T/junk.st"
expect_error "malformed --load" 1 "--load: $T/junk.st:" "$DTRAIN" $D --load "$T/junk.st"
printf 'input shape=1x28x28\ndense name=fc1 out=7\nrelu\ndense name=fc2 out=500\nrelu\ndense name=fc3 out=10\nsoftmax_xent\n' > "$T/narrow.net"
"$DTRAIN" --net "$T/narrow.net" $D --epochs 0 --save "$T/narrow.st" >/dev/null || fail "could not write narrow.st"
expect_error "--load of another net's weights" 1 "tensor 'fc2.weight' has shape [500, 7] (expected [500, 500] for net mlp)" \
    "$DTRAIN" --net mlp $D --load "$T/narrow.st"
# weights that are not finite: the tensor and the first bad value named (one, or how many)
$PYTHON - "$top_srcdir/tools" "$T/narrow.st" "$T/nan1.st" "$T/nan3.st" <<'PY' || fail "could not write NaN weights"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, safetensors_np as st
t = st.read(sys.argv[2])
for path, bad in ((sys.argv[3], [4]), (sys.argv[4], [2, 5, 6])):
    out = []
    for name, (dtype, shape, a) in t.items():
        a = a.copy()
        if name == "fc3.bias":
            a[bad] = np.nan
        out.append((name, dtype, a))
    st.write(path, out)
PY
expect_error "--load of a NaN" 1 "$T/nan1.st: tensor 'fc3.bias' holds a non-finite value ([4] is nan)" \
    "$DTRAIN" --net "$T/narrow.net" $D --epochs 0 --load "$T/nan1.st"
timeout 60 "$DTRAIN" --net "$T/narrow.net" $D --epochs 0 --load "$T/nan1.st" --allow-nonfinite --log "$T/nan.jsonl" \
    > "$T/out" 2>&1 || { cat "$T/out"; fail "--allow-nonfinite: the evaluation failed"; }
[ "$(json_last "$T/nan.jsonl" summary test_loss)" = null ] || fail "a NaN test loss is not null in the log"
expect_error "--load of 3 NaNs" 1 "$T/nan3.st: tensor 'fc3.bias' holds 3 non-finite values (the first, [2], is nan)" \
    "$DTRAIN" --net "$T/narrow.net" $D --epochs 0 --load "$T/nan3.st"
printf 'input shape=1x28x28\nconv name=c1 out=4 k=3\nflatten\ndense name=fc2 out=10\nsoftmax_xent\n' > "$T/other.net"
expect_error "--load of another net's weights, names and shapes" 1 "does not hold the tensors of net other: 2 missing (c1.weight, c1.bias), 4 not in the net (fc3.weight, fc3.bias, fc1.weight, fc1.bias); and tensor 'fc2.weight' has shape [500, 7] (expected [10, 2704]" \
    "$DTRAIN" --net "$T/other.net" $D --load "$T/narrow.st"
printf 'lr = 0.1\nbatch size = 10\n' > "$T/bad.conf"
expect_error "bad config" 2 "$T/bad.conf:2: batch size: unknown option 'batch size'" "$DTRAIN" --config "$T/bad.conf"
# a check across options, or one made later, names the lines that set them
printf 'mode = dsync\nstaleness = 2\n' > "$T/cross.conf"
expect_error "a config's options that do not fit" 2 \
    "--staleness applies to --mode ps, not to --mode dsync (--mode from $T/cross.conf:1; --staleness from $T/cross.conf:2)" \
    "$DTRAIN" --config "$T/cross.conf"
printf 'net = bogus\n' > "$T/net.conf"
expect_error "a config's unknown net" 2 "--net: unknown net 'bogus'" "$DTRAIN" --config "$T/net.conf"
grep -qF "(--net from $T/net.conf:1)" "$T/out" || { cat "$T/out"; fail "the unknown net of a config: its line not named"; }
# batch norm over one value per channel (a dense layer's, one sample a rank): its output is its shift
# alone and nothing before it learns; refused, as PyTorch refuses it (it trained at chance without a word)
printf 'input shape=1x28x28\ndense out=20\nbatchnorm\nrelu\ndense out=10\nsoftmax_xent\n' > "$T/densebn.net"
expect_error "batch norm of one value per channel" 2 \
    "--batch 1 over 1 worker gives a rank 1 sample an iteration, so batch norm 'batchnorm1' ($T/densebn.net:3)" \
    "$DTRAIN" --net "$T/densebn.net" $D --batch 1 --iters 2
expect_error "batch norm of one value per channel, 2 ranks" 2 "(expected at least 2 samples per rank in every batch: --batch 4, say)" \
    mpi -np 2 "$DTRAIN" --net "$T/densebn.net" $D --batch 3 --iters 2
# the epoch's last batch, 200 % 6 = 2 samples over 2 ranks, gives each 1 (it trained that batch on the shift alone)
expect_error "batch norm of one value per channel in the last batch" 2 \
    "the last batch of each epoch, 2 of the 200 training samples at --batch 6, gives a rank of the 2 workers 1 sample, so batch norm 'batchnorm1'" \
    mpi -np 2 "$DTRAIN" --net "$T/densebn.net" $D --batch 6 --epochs 1
grep -qF -- "--batch 7, say)" "$T/out" || { cat "$T/out"; fail "the last batch's batch norm: no batch suggested"; }
mpi -np 2 "$DTRAIN" --net "$T/densebn.net" $D --batch 6 --iters 5 > "$T/out" 2>&1 || { cat "$T/out"; fail "a run that ends before the short batch was refused"; }
"$DTRAIN" --net "$T/densebn.net" $D --batch 2 --iters 2 > "$T/out" 2>&1 || { cat "$T/out"; fail "batch norm of 2 values"; }
expect_error "--log in no directory" 2 "--log: $T/nonexistent/dir/log.jsonl: cannot create: no directory $T/nonexistent/dir" "$DTRAIN" $D --log "$T/nonexistent/dir/log.jsonl"
# --dry-run checks the outputs as a run does
expect_error "--dry-run --log in no directory" 2 "--log: $T/nonexistent/dir/log.jsonl: cannot create" "$DTRAIN" $D --dry-run --log "$T/nonexistent/dir/log.jsonl"
expect_error "--dry-run --log onto a directory" 2 "--log: $T is a directory" "$DTRAIN" $D --dry-run --log "$T"
# a kernel file takes the open() and access() of root, and refuses only the write
expect_error "--dry-run --log onto a file in /proc" 2 "--log: /proc/self/status is one of the kernel's files (in /proc)" \
    "$DTRAIN" $D --dry-run --log /proc/self/status
long=$(printf 'n%.0s' $(seq 300))
expect_error "--save of a name too long" 2 "--save: $T/$long.st" "$DTRAIN" $D --iters 1 --save "$T/$long.st"
expect_error "--log of a name too long" 2 "--log: $T/$long" "$DTRAIN" $D --iters 1 --log "$T/$long"
# outputs never replace what the run reads: the net file, the configuration, the data
cp "$T/narrow.net" "$T/keep.net"
expect_error "--log onto the net file" 2 "--log $T/keep.net and --net $T/keep.net are one file" "$DTRAIN" --net "$T/keep.net" $D --log "$T/keep.net"
expect_error "--save onto the net file" 2 "--save $T/keep.net and --net $T/keep.net are one file" "$DTRAIN" --net "$T/keep.net" $D --iters 1 --save "$T/keep.net"
grep -q '^input' "$T/keep.net" || fail "the net file was replaced"
expect_error "--log onto a data file" 2 "is mnist's file $T/data/train-labels-idx1-ubyte" "$DTRAIN" $D --log "$T"/data/train-labels-idx1-ubyte*
expect_error "--dry-run --checkpoint onto a data file" 2 "--checkpoint $T/data/t10k-images" "$DTRAIN" $D --dry-run --checkpoint "$T"/data/t10k-images-idx3-ubyte*
expect_error "--save in no directory" 2 "cannot create" "$DTRAIN" $D --iters 2 --save "$T/nonexistent/dir/w.st"
expect_error "a directory as --checkpoint" 2 "--checkpoint: $T is a directory" "$DTRAIN" $D --iters 2 --checkpoint "$T"
# a directory where no file can be created though access() says it may be written (as root): at
# start-up, not after the run (--epochs 5000 would take minutes)
expect_error "--save in /proc" 1 "--save: /proc/w.st: cannot" "$DTRAIN" $D --epochs 5000 \
    --save /proc/w.st

# images
expect_error "--nesterov with --momentum-correction" 2 "--nesterov and --momentum-correction exclude each other" \
    "$DTRAIN" $D --mode topk --momentum-correction --nesterov
expect_error "bad augmentation" 2 "--augment: unknown item 'twist' (expected default, none, or a comma list" "$DTRAIN" $D --augment crop=4,twist
expect_error "image size off imagenet" 2 "--image-size applies to --dataset imagenet, not to --dataset mnist" "$DTRAIN" $D --image-size 64
expect_error "bad-image policy off imagenet, the net's dataset" 2 "--on-bad-image applies to ImageNet-shaped data, not to --dataset fashion-mnist (the net's)" \
    "$DTRAIN" --net mlp --data-dir "$T/data" --progress none --on-bad-image skip
mkdir -p "$T/imn"
expect_error "an image size below the net's input" 2 "--image-size 100 is smaller than the net's 227x227 input (expected at least 227)" \
    "$DTRAIN" --net alexnet --dataset imagenet --data-dir "$T/imn" --image-size 100 --dry-run
mkdir -p "$T/c10" && $PYTHON "$top_srcdir/tests/mkimages.py" cifar10 "$T/c10" 50 10 || fail "no CIFAR files"
expect_error "an ImageNet net on CIFAR" 2 "the input layer expects 3x227x227 samples, but cifar10 has 3x32x32" \
    "$DTRAIN" --net alexnet --dataset cifar10 --data-dir "$T/c10" --progress none
truncate -s 30000 "$T/c10/data_batch_2.bin"
expect_error "truncated CIFAR file" 1 "data_batch_2.bin: 30000 bytes is not a whole number of 3073-byte records" \
    "$DTRAIN" --net cifar-quick --dataset cifar10 --data-dir "$T/c10" --progress none
truncate -s 0 "$T/c10/data_batch_2.bin"
expect_error "empty CIFAR file" 1 "data_batch_2.bin: an empty file (expected CIFAR-10 records of 3073 bytes" \
    "$DTRAIN" --net cifar-quick --dataset cifar10 --data-dir "$T/c10" --progress none
mkdir -p "$T/tree/train/cat" "$T/tree/val/cat" && printf '\xff\xd8\xff\xe0JFIF' > "$T/tree/train/cat/1.jpg"
expect_error "a damaged JPEG" 1 "train/cat/1.jpg: a damaged JPEG (libjpeg: " \
    "$DTRAIN" --net resnet18 --dataset imagenet --data-dir "$T/tree" --progress none
expect_error "a checkpoint of a run that only evaluates" 2 "--checkpoint with --epochs 0 would write nothing" \
    "$DTRAIN" $D --epochs 0 --checkpoint "$T/e0.ck" --checkpoint-every 1it
# --iters with --epochs 0 caps nothing: said (it was silently dropped)
"$DTRAIN" $D --epochs 0 --iters 3 > "$T/out" 2>&1 || { cat "$T/out"; fail "--epochs 0 --iters 3 failed"; }
grep -qF "note: --iters 3 stops nothing: --epochs 0 only evaluates" "$T/out" || { cat "$T/out"; fail "--iters with --epochs 0: no note"; }
# more threads than cores: said (each pass slows as OpenMP's threads wait for each other)
"$DTRAIN" $D --iters 1 --threads $(($(getconf _NPROCESSORS_ONLN) + 1)) > "$T/out" 2>&1 || { cat "$T/out"; fail "--threads cores+1 failed"; }
grep -qF "is more threads than its $(getconf _NPROCESSORS_ONLN) core" "$T/out" || { cat "$T/out"; fail "--threads above the cores: no note"; }
expect_error "--log on one rank only" 1 "[rank 1] the configuration differs from rank 0's (rank 0: 'log = (not given)', this rank: 'log = (given)')" \
    mpi -np 1 "$DTRAIN" $D --iters 2 : -np 1 "$DTRAIN" $D --iters 2 --log "$T/one.jsonl"
expect_error "a checkpoint cadence without a file" 2 "--checkpoint-every needs --checkpoint FILE" "$DTRAIN" $D --checkpoint-every 2ep
ln -s "$T/later.st" "$T/dangling" # the file a write through the link would create
expect_error "a log through a dangling link onto --save" 2 "--log $T/dangling and --save $T/later.st are one file" \
    "$DTRAIN" --dataset synthetic --iters 1 --progress none --log "$T/dangling" --save "$T/later.st"
expect_error "--epochs 0 on synthetic data" 2 "--epochs 0 on synthetic data would neither train nor evaluate" \
    "$DTRAIN" --dataset synthetic --epochs 0 --progress none
expect_error "a bad checkpoint cadence" 2 "--checkpoint-every: expected N, Nit or Nep" "$DTRAIN" $D --checkpoint c.st --checkpoint-every 5min
expect_error "resume and load" 2 "--resume and --load exclude each other" "$DTRAIN" $D --resume a.st --load b.st
expect_error "tf32 and gpu-exact" 2 "--tf32 and --gpu-exact exclude each other" "$DTRAIN" $D --tf32 --gpu-exact

printf 'input shape=1x28x28\ndense out=500 init=normal:1e5\nrelu\ndense out=500 init=normal:1e5\nrelu\ndense out=10 init=normal:1e5\nsoftmax_xent\n' > "$T/huge.net"
expect_error "a non-finite loss stops the run" 1 "training diverged: the loss is nan in iteration 2" \
    mpi -np 2 "$DTRAIN" --net "$T/huge.net" $D --lr 1

# a fixed loss scale whose scaled gradients do not fit fp16 stops every rank (before, they saturated: no learning)
expect_error "a loss scale that overflows fp16" 1 "csc: iteration 0: the sum of the gradients scaled by --loss-scale 16777216 does not fit fp16" \
    mpi -np 2 "$DTRAIN" --net mlp $D --mode csc --loss-scale 16777216 --iters 3

# rank counts and several ranks
expect_error "batch smaller than ranks" 2 "--batch 3 is smaller than the number of ranks 4 (expected at least one sample per rank)" \
    mpi -np 4 "$DTRAIN" $D --batch 3
[ "$(grep -c 'smaller than the number of ranks' "$T/out")" -eq 1 ] || { cat "$T/out"; fail "the same error was printed by several ranks"; }
expect_error "bad flag under mpirun, said once" 2 "unknown option '--bogus'" mpi -np 3 "$DTRAIN" --bogus
[ "$(grep -c "unknown option" "$T/out")" -eq 1 ] || { cat "$T/out"; fail "the same error was printed by several ranks"; }
# one rank with a different data directory: the whole job ends, that rank says why
expect_error "an error on one rank ends the job" 2 "[rank 2] --data-dir $T/nowhere: No such file or directory" \
    mpi -np 2 "$DTRAIN" $D : -np 1 "$DTRAIN" --dataset mnist --data-dir "$T/nowhere" --progress none : -np 1 "$DTRAIN" $D
# a usage error on only some ranks, rank 0 or another: before, the others waited in a different collective
# (a hang, or an MPI abort that hid the message)
expect_error "a bad flag on rank 1 only" 2 "[rank 1] unknown option '--bogus'" \
    mpi -np 1 "$DTRAIN" $D --iters 2 : -np 1 "$DTRAIN" $D --iters 2 --bogus
expect_error "a bad flag on rank 0 only" 2 "[rank 0] unknown option '--bogus'" \
    mpi -np 1 "$DTRAIN" $D --iters 2 --bogus : -np 1 "$DTRAIN" $D --iters 2
expect_error "one rank prints, the other trains" 2 "the action differs from rank 0's (rank 0: '--version', this rank: 'train')" \
    mpi -np 1 "$DTRAIN" $D --version : -np 1 "$DTRAIN" $D --iters 2
# ranks started with different options refuse to train together
expect_error "configuration mismatch" 1 "[rank 1] the configuration differs from rank 0's (rank 0: 'lr = 0.1', this rank: 'lr = 0.2')" \
    mpi -np 1 "$DTRAIN" $D --lr 0.1 : -np 1 "$DTRAIN" $D --lr 0.2
# an option given at the value it takes anyway is the same configuration (it was refused: 'compress = none'
# against 'compress = '); a real difference of codec still is one
mpi -np 1 "$DTRAIN" $D --iters 2 --compress none --classes 10 : -np 1 "$DTRAIN" $D --iters 2 > "$T/out" 2>&1 ||
    { cat "$T/out"; fail "ranks that differ only in options spelled out at their defaults did not train together"; }
expect_error "a codec on one rank only" 1 "[rank 1] the configuration differs from rank 0's (rank 0: 'compress = q8', this rank: 'compress = none')" \
    mpi -np 1 "$DTRAIN" $D --iters 2 --compress q8 : -np 1 "$DTRAIN" $D --iters 2
# another net of the same tensors on one rank (a relu left out): its layers are compared, not only their sizes
# (--net my.net in two directories: the same option)
mkdir -p "$T/ra" "$T/rb"
printf 'input shape=1x28x28\ndense name=fc1 out=16\nrelu\ndense name=fc2 out=10\nsoftmax_xent\n' > "$T/ra/my.net"
grep -v relu "$T/ra/my.net" > "$T/rb/my.net"
expect_error "another net of the same tensors on one rank" 1 \
    "[rank 1] the configuration differs from rank 0's (rank 0: 'net layer = relu name=relu1 in=fc1 -> 16', this rank: 'net layer = dense name=fc2 in=fc1 out=10 -> 10')" \
    mpi -np 1 -wdir "$T/ra" "$DTRAIN" $D --net my.net : -np 1 -wdir "$T/rb" "$DTRAIN" $D --net my.net
# the same net written otherwise (keys at their defaults spelled out, 016 for 16, 0.50 for 0.5): the same layers
mkdir -p "$T/sa" "$T/sb"
printf 'input shape=1x28x28\ndense name=fc1 out=16\nrelu\ndropout\ndense name=fc2 out=10\nsoftmax_xent\n' > "$T/sa/my.net"
printf 'input shape=1x28x28\ndense name=fc1 out=016 bias=1 init=torch frozen=0\nrelu\ndropout p=0.50\ndense out=10 name=fc2\nsoftmax_xent\n' > "$T/sb/my.net"
mpi -np 1 -wdir "$T/sa" "$DTRAIN" $D --net my.net --iters 2 : -np 1 -wdir "$T/sb" "$DTRAIN" $D --net my.net --iters 2 > "$T/out" 2>&1 ||
    { cat "$T/out"; fail "ranks of one net written in two ways (defaults spelled out, 016) did not train together"; }
mkdir -p "$T/other" && make_idx "$T/other" 150 40
expect_error "different data on different ranks" 1 "this rank: 'training samples = 150'" \
    mpi -np 1 "$DTRAIN" $D : -np 1 "$DTRAIN" --dataset mnist --data-dir "$T/other" --progress none

# srun without PMI: each task a world of one; dtrain says how to launch
expect_error "srun without PMI" 1 "Slurm started 4 tasks but MPI sees a single rank (srun found no PMI to connect them): launch with srun --mpi=pmix" \
    env SLURM_STEP_NUM_TASKS=4 "$DTRAIN" $D --iters 1

# --version: version, the commit built from, the libraries built in
"$DTRAIN" --version > "$T/v" || fail "--version failed"
head -n 1 "$T/v" | grep -q "^dtrain [0-9][0-9.]* (git [0-9a-f]\{7,\}\(-dirty\)\{0,1\})$" ||
    { cat "$T/v"; fail "--version: the first line lacks the version and the git commit"; }
grep -q "^features: Open MPI .*; images: libjpeg-turbo [0-9.]*, libpng [0-9.]*; " "$T/v" || { cat "$T/v"; fail "--version: no features line"; }

# the most samples --synthetic-samples takes, 2^32-1: their shuffle was refused where 17.2 GB of
# indices did not fit; above 2^25 samples the order is keyed (src/data/sampler.h) and needs none, so
# --dry-run passes saying so and a run starts at once; one more is a usage error
B=(--net mlp --dataset synthetic --synthetic-samples 4294967295 --batch 7 --progress none)
"$DTRAIN" "${B[@]}" --dry-run > "$T/big.out" 2>&1 || { cat "$T/big.out"; fail "2^32-1 synthetic samples: --dry-run failed"; }
grep -q "and 0 GB of host memory per rank for the shuffle" "$T/big.out" || { cat "$T/big.out"; fail "2^32-1 samples: shuffle memory"; }
timeout 60 "$DTRAIN" "${B[@]}" --iters 1 > "$T/big.out" 2>&1 || { cat "$T/big.out"; fail "2^32-1 synthetic samples: 1 iteration"; }
expect_error "2^32 synthetic samples" 2 "--synthetic-samples: expected an integer in [0, 4294967295]" \
    "$DTRAIN" --net mlp --dataset synthetic --synthetic-samples 4294967296 --dry-run

echo "PASS: $n_checks error cases give a clear message and the exit status of their kind (2 usage, 1 otherwise)"
