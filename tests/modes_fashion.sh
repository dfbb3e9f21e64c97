#!/bin/bash
# Every mode x codec on real data: Fashion-MNIST, the mlp, 4 ranks, 3 epochs, batch 100.
#  - test accuracy within 1 point of D-Sync without compression
#  - bytes rank 0 sent per iteration equal the analytic volume of the mode and codec:
#      dsync, pipesgd: the ring's 2(P-1) segments, encoded (reduce-scatter sends every segment
#                      but r+1, all-gather every segment but r+2)
#      ps (3 workers + 1 server): the encoded arena up, plus the 1-byte receipt a worker sends its
#                      server under BSP (the server sends workers their weights in turn)
. "$(dirname "$0")/lib.sh"
need_mpirun
skip_if_sanitized "hours of training on all of Fashion-MNIST for an accuracy bound"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || fail "Fashion-MNIST is not installed"
N=648010 P=4
common="--net mlp --dataset fashion-mnist --epochs 3 --batch 100 --progress none --seed 11"

# bytes of C values under codec $1 (q8: block 256)
enc() { awk -v c="$2" -v k="$1" 'BEGIN { if (k == "none") print 4 * c; else if (k == "q8") print c + 4 * int((c + 255) / 256); else print 2 * c }'; }
seg() { awk -v n=$N -v p=$P -v k="$1" 'BEGIN { k = (k % p + p) % p; print int((k + 1) * n / p) - int(k * n / p) }'; }
ring_bytes() { # rank 0: all segments but 1 (reduce-scatter), all but 2 (all-gather)
    local all=0 s
    for k in 0 1 2 3; do s=$(seg $k); all=$((all + $(enc "$1" "$s"))); done
    echo $(( (all - $(enc "$1" "$(seg 1)")) + (all - $(enc "$1" "$(seg 2)")) ))
}

mpi -np $P "$DTRAIN" $common --mode dsync --log "$T/base.jsonl" > "$T/out" || { cat "$T/out"; fail "dsync/none failed"; }
base=$(json_last "$T/base.jsonl" summary test_acc)
note "dsync/none: test accuracy $base"
for mode in dsync pipesgd ps; do
    for codec in none t16 fp16 q8; do
        [ "$mode/$codec" = dsync/none ] && continue
        mpi -np $P "$DTRAIN" $common --mode $mode --compress $codec --log "$T/r.jsonl" > "$T/out" ||
            { cat "$T/out"; fail "$mode/$codec failed"; }
        acc=$(json_last "$T/r.jsonl" summary test_acc)
        sent=$(json_last "$T/r.jsonl" summary bytes_sent)
        if [ $mode = ps ]; then want=$(( $(enc $codec $N) + 1 )); else want=$(ring_bytes $codec); fi
        note "$mode/$codec: test accuracy $acc, sent $sent bytes per iteration (analytic $want)"
        awk -v a="$acc" -v b="$base" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
            fail "$mode/$codec: test accuracy $acc is more than 1 point from dsync/none's $base"
        [ "$sent" = "$want" ] || fail "$mode/$codec: rank 0 sent $sent bytes per iteration, the analytic volume is $want"
    done
done
echo "PASS: 12 mode x codec runs within 1 point of dsync/none ($base), bytes as analysed"
