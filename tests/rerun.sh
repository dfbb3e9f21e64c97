#!/bin/bash
# Run records and --rerun:
#  - the JSON log's start record (and its summary) hold the version, git commit, backend,
#    libraries, hosts, data directory (absolute), every effective option and the given ones
#  - mpirun -np 2 dtrain --rerun LOG, from another directory, trains the same weights bit for bit
#    as the run that wrote LOG (a config file, flags and a relative --data-dir)
#  - a log cut after its start record (a run that died) reruns too; flags given with --rerun
#    override the record's; a net path with '#' in it reruns as given
#  - the net file, data directory and --load's weights the run read are the rerun's, checked by their
#    digests (exit 1 where they changed)
#  - another rank count, a file without a record, --rerun with --config, of a --mode auto run, --save
#    or --checkpoint onto the log: exit 2
#  - --rerun with another --mode drops the record's flags that only its mode read
. "$(dirname "$0")/lib.sh"
need_mpirun
make_idx "$T/data" 600 100
printf 'net = lenet\nmode = pipesgd\ncompress = q8\nbatch = 60\n' > "$T/run.conf"
cd "$T"
mpi -np 2 "$DTRAIN" --config run.conf --dataset mnist --data-dir data --lr 0.05 --epochs 2 --progress none \
    --log "$T/r1.jsonl" --save "$T/w1.st" > "$T/r1.out" 2>&1 || { cat "$T/r1.out"; fail "the first run failed"; }
start=$(grep '"type":"start"' "$T/r1.jsonl")
[ -n "$start" ] || fail "no start record in the log"
for key in version git backend libraries hosts ranks data_dir options given; do
    echo "$start" | grep -q "\"$key\":" || fail "the start record lacks $key"
    grep '"type":"summary"' "$T/r1.jsonl" | grep -q "\"$key\":" || fail "the summary record lacks $key"
done
echo "$start" | grep -q "\"data_dir\":\"$T/data\"" || fail "the record's data_dir is not absolute"
echo "$start" | grep -q '"given":"net = lenet\\ndataset = mnist\\nepochs = 2\\nbatch = 60\\nlr = 0.05\\nmode = pipesgd\\ncompress = q8\\n"' ||
    { echo "$start"; fail "the record's given options are not the config's and the flags'"; }
echo "$start" | grep -q '"options":"net = lenet\\n.*momentum = 0.9\\n.*pipeline-depth = 2\\n' || fail "the record lacks the defaults"
note "the run record: $(echo "$start" | sed 's/.*"hosts":"\([^"]*\)".*/hosts \1/'), $(echo "$start" | sed 's/.*"git":"\([^"]*\)".*/git \1/')"

mkdir -p "$T/elsewhere" && cd "$T/elsewhere"
mpi -np 2 "$DTRAIN" --rerun "$T/r1.jsonl" --progress none --save "$T/w2.st" > "$T/r2.out" 2>&1 || { cat "$T/r2.out"; fail "--rerun failed"; }
"$STDIFF" "$T/w2.st" "$T/w1.st" 0 0 || fail "--rerun did not train the same weights"
grep -q "mode pipesgd (K = 2, 0 warm-up epochs as D-Sync), compress q8" "$T/r2.out" || fail "--rerun did not take the mode"

grep -v '"type":"\(summary\|epoch\|iter\)"' "$T/r1.jsonl" > "$T/cut.jsonl"
mpi -np 2 "$DTRAIN" --rerun "$T/cut.jsonl" --epochs 1 --progress none --log "$T/r3.jsonl" --save "$T/w3.st" > "$T/r3.out" 2>&1 ||
    { cat "$T/r3.out"; fail "--rerun of a log cut after its start record failed"; }
grep -q '"type":"summary".*"options":"[^"]*epochs = 1\\n' "$T/r3.jsonl" || fail "--epochs given with --rerun did not override"
"$STDIFF" "$T/w3.st" "$T/w1.st" 0 0 > /dev/null && fail "one epoch trained the weights of two"
note "--rerun of a log cut after its start record, with --epochs 1 over the record's 2"

# a value with a '#' (a net file's path) reruns as given: the record is not read as a config file
mkdir -p "$T/h #1" && printf 'input shape=1x28x28\ndense out=10\nsoftmax_xent\n' > "$T/h #1/lin.net"
H=(--net "$T/h #1/lin.net" --dataset mnist --data-dir "$T/data" --iters 3 --progress none)
"$DTRAIN" "${H[@]}" --log "$T/h.jsonl" --save "$T/h1.st" > "$T/h.out" 2>&1 || { cat "$T/h.out"; fail "the run of a net under 'h #1' failed"; }
"$DTRAIN" --rerun "$T/h.jsonl" --progress none --save "$T/h2.st" > "$T/h.out" 2>&1 ||
    { cat "$T/h.out"; fail "--rerun of a run whose net path holds '#' failed"; }
"$STDIFF" "$T/h2.st" "$T/h1.st" 0 0 || fail "--rerun of a run whose net path holds '#' trained other weights"
# refused WHAT PATTERN CMD...: CMD exits 2 (RC, when set) with PATTERN (grep's) in its output
refused() {
    local what=$1 want=$2
    shift 2
    "$@" > "$T/bad.out" 2>&1
    local rc=$?
    [ $rc -eq "${RC:-2}" ] && grep -q -- "$want" "$T/bad.out" || { cat "$T/bad.out"; fail "$what: exit $rc"; }
}

# what the run read is what the rerun reads, or it stops (exit 1): a relative net file where the run
# found it (another of that name in the rerun's directory is not taken), and that file as it was; the
# data directory the run found through DTRAIN_DATA, and those samples and labels; --load's weights.
# Flags given with --rerun still override.
mkdir -p "$T/na" "$T/nb" "$T/dd"
printf 'input shape=1x28x28\ndense name=fc1 out=32\nrelu\ndense name=fc2 out=10\nsoftmax_xent name=loss\n' > "$T/na/my.net"
grep -v relu "$T/na/my.net" > "$T/nb/my.net" # the same tensors, another function
make_idx "$T/dd/mnist" 600 100 11
Q=(--dataset mnist --iters 4 --batch 20 --progress none)
(cd "$T/na" && DTRAIN_DATA="$T/dd" "$DTRAIN" --net my.net "${Q[@]}" --save "$T/init.st" > /dev/null 2>&1 &&
    DTRAIN_DATA="$T/dd" "$DTRAIN" --net my.net "${Q[@]}" --load "$T/init.st" --lr 0.2 --log "$T/q.jsonl" \
        --save "$T/q1.st" > "$T/q.out" 2>&1) || { cat "$T/q.out"; fail "the run of my.net failed"; }
grep '"type":"start"' "$T/q.jsonl" | grep -q "\"net_file\":\"$T/na/my.net\".*\"data_dir\":\"$T/dd/mnist\".*\"load\":\"$T/init.st\"" ||
    fail "the record lacks the net file, the data directory found through DTRAIN_DATA or --load's file"
(cd "$T/nb" && "$DTRAIN" --rerun "$T/q.jsonl" --save "$T/q2.st" > "$T/q.out" 2>&1) ||
    { cat "$T/q.out"; fail "--rerun of the run of a relative net file, DTRAIN_DATA's data and --load failed"; }
"$STDIFF" "$T/q2.st" "$T/q1.st" 0 0 || fail "--rerun from another directory: not the same weights (another net, data or start?)"
cp "$T/na/my.net" "$T/na/my.net.was" && sed -i 's/out=32/out=32 init=he/' "$T/na/my.net"
RC=1 refused "--rerun of an edited net file" "the net file $T/na/my.net is not the one the run had: its layers differ" \
    "$DTRAIN" --rerun "$T/q.jsonl"
sed 's/out=32/out=032 bias=1/' "$T/na/my.net.was" > "$T/na/my.net" # the same layers, written otherwise
"$DTRAIN" --rerun "$T/q.jsonl" --save "$T/q3.st" > "$T/q.out" 2>&1 || { cat "$T/q.out"; fail "--rerun of a net file written otherwise failed"; }
"$STDIFF" "$T/q3.st" "$T/q1.st" 0 0 || fail "--rerun of a net file written otherwise: not the same weights"
"$DTRAIN" --rerun "$T/q.jsonl" --net "$T/nb/my.net" --iters 1 > "$T/q.out" 2>&1 || { cat "$T/q.out"; fail "--rerun with --net given failed"; }
mv "$T/na/my.net.was" "$T/na/my.net"
cp "$T/init.st" "$T/init.was" && "$DTRAIN" --net "$T/na/my.net" "${Q[@]}" --data-dir "$T/dd/mnist" --seed 9 --save "$T/init.st" > /dev/null 2>&1
RC=1 refused "--rerun with other weights in --load's file" "the weights in $T/init.st are not those the run loaded" \
    "$DTRAIN" --rerun "$T/q.jsonl"
"$DTRAIN" --rerun "$T/q.jsonl" --load "$T/init.st" --iters 1 > "$T/q.out" 2>&1 || { cat "$T/q.out"; fail "--rerun with --load given failed"; }
mv "$T/init.was" "$T/init.st"
make_idx "$T/dd/mnist" 600 100 12
RC=1 refused "--rerun with other data in its directory" "the data in $T/dd/mnist is not the data the run had" \
    "$DTRAIN" --rerun "$T/q.jsonl"
# synthetic data: its settings given with --rerun make other samples, on purpose
"$DTRAIN" --net mlp --dataset synthetic --iters 2 --batch 16 --progress none --log "$T/syn.jsonl" > /dev/null 2>&1 &&
    "$DTRAIN" --rerun "$T/syn.jsonl" --seed 2 > "$T/q.out" 2>&1 || { cat "$T/q.out"; fail "--rerun of synthetic data with --seed failed"; }
note "--rerun takes the net file, data directory and --load's weights the run had, and stops where they changed"
for log in r1 cut; do # the rank count is in the start record too
    refused "--rerun $log.jsonl on 3 ranks" "the run it repeats had 2 ranks, and this one has 3 (expected mpirun -np 2, or --ranks 3" \
        mpi -np 3 "$DTRAIN" --rerun "$T/$log.jsonl" --progress none
done
sed 's/"ranks":2/"ranks":-3/' "$T/r1.jsonl" > "$T/neg.jsonl"
refused "--rerun of a record with ranks -3" "the record's ranks is -3 (expected a rank count" "$DTRAIN" --rerun "$T/neg.jsonl"
# an edited record: an option only a command line sets, a NUL inside a string
sed 's/"options":"/"options":"dry-run = true\\n/' "$T/r1.jsonl" > "$T/dry.jsonl"
refused "--rerun of a record whose options set --dry-run" "the record's options set --dry-run, which a run record never holds" \
    "$DTRAIN" --rerun "$T/dry.jsonl"
# an output edited into the given options: refused, not written to
sed 's|"given":"|"given":"log = '"$T"'/edited.jsonl\\n|' "$T/r1.jsonl" > "$T/edlog.jsonl"
refused "--rerun of a record whose given options set --log" "the record's given options set --log, which a run record never holds" \
    "$DTRAIN" --rerun "$T/edlog.jsonl"
[ ! -e "$T/edited.jsonl" ] || fail "--rerun of a record whose given options set --log: wrote that log"
sed 's/"given":"/"given":"lr = 0.1\\u0000/' "$T/r1.jsonl" > "$T/nul.jsonl"
refused "--rerun of a record with a NUL in given" "does not parse: .*expected a string without \\\\u0000" "$DTRAIN" --rerun "$T/nul.jsonl"
refused "--rerun LOG --log LOG" "are one file: the new log would replace the one --rerun reads" \
    "$DTRAIN" --rerun "$T/r1.jsonl" --log "$T/r1.jsonl"
grep -q '"type":"summary"' "$T/r1.jsonl" || fail "--rerun LOG --log LOG: the log lost"
for out in save checkpoint; do
    refused "--rerun LOG --$out LOG" "are one file: the .* would replace the log --rerun reads" \
        "$DTRAIN" --rerun "$T/r1.jsonl" --$out "$T/r1.jsonl"
    grep -q '"type":"summary"' "$T/r1.jsonl" || fail "--rerun LOG --$out LOG: the log lost"
done
# a record of another build: rerun, with a note that the code may differ
sed 's/"git":"[^"]*"/"git":"0000000-older"/g' "$T/r1.jsonl" > "$T/older.jsonl"
mpi -np 2 "$DTRAIN" --rerun "$T/older.jsonl" --iters 1 > "$T/older.out" 2>&1 || { cat "$T/older.out"; fail "--rerun of another build's record failed"; }
grep -q "note: --rerun of a run made by dtrain git 0000000-older; this one is git " "$T/older.out" ||
    { cat "$T/older.out"; fail "--rerun of another build's record: no note"; }
# a --mode auto run: the timing model measures anew and may choose another mode, so the rerun asks for the chosen one
sed 's/mode = pipesgd/mode = auto/g' "$T/r1.jsonl" > "$T/auto.jsonl"
refused "--rerun of a --mode auto run" "the run had --mode auto, .*; give the mode it chose, --mode pipesgd --compress q8, or --mode auto" \
    "$DTRAIN" --rerun "$T/auto.jsonl"
# a mode without a codec: the advice names none (gtopk refuses --compress)
sed 's/"mode":"pipesgd"/"mode":"gtopk"/' "$T/auto.jsonl" > "$T/auto-gtopk.jsonl"
refused "--rerun of a --mode auto run that chose gtopk" "give the mode it chose, --mode gtopk, or --mode auto" \
    "$DTRAIN" --rerun "$T/auto-gtopk.jsonl"
# --rerun with another --mode: the record's flags that only its mode read (pipesgd's --pipeline-depth,
# its --compress for gtopk) are dropped, not refused; given on the command line they are refused
sed 's/"given":"net = lenet/"given":"pipeline-depth = 3\\nnet = lenet/' "$T/r1.jsonl" > "$T/deep.jsonl"
grep -q 'pipeline-depth = 3' "$T/deep.jsonl" || fail "could not edit the record"
for m in dsync gtopk; do
    mpi -np 2 "$DTRAIN" --rerun "$T/deep.jsonl" --mode $m --dry-run > "$T/other.out" 2>&1 ||
        { cat "$T/other.out"; fail "--rerun of a pipesgd run with --mode $m: refused"; }
done
refused "--rerun with --mode dsync --pipeline-depth 3" "pipeline-depth applies to --mode pipesgd, not to --mode dsync" \
    "$DTRAIN" --rerun "$T/deep.jsonl" --mode dsync --pipeline-depth 3 --dry-run
echo '{"type":"iter","epoch":1}' > "$T/none.jsonl"
refused "--rerun of a log without a record" "rerun $T/none.jsonl: no run record in it" "$DTRAIN" --rerun "$T/none.jsonl"
refused "--rerun with --config" "rerun and --config exclude each other" "$DTRAIN" --rerun "$T/r1.jsonl" --config "$T/run.conf"
echo "PASS: run records hold what ran and every option; --rerun trains the same weights bit for bit"
