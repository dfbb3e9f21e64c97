#!/bin/bash
# tools/netem builds a cluster whose links really are shaped: dtrain's start-up probe, run across
# 3 emulated hosts with 100 Mbit/s links, measures a bandwidth near the line rate (~11.7 MB/s of
# TCP payload), the job runs to the end over the links, the timing model counts the hosts' ranks as
# sharing this machine's cores, and nothing is left behind afterwards.
# Skipped (77) where network namespaces cannot be made (not root, a restricted container).
. "$(dirname "$0")/lib.sh"
need_mpirun
[ "$(id -u)" = 0 ] || { echo "SKIP: tools/netem needs root"; exit $SKIP; }
ip netns add dtnet-testprobe 2>/dev/null || { echo "SKIP: cannot create network namespaces here"; exit $SKIP; }
ip netns del dtnet-testprobe
ip netns list | grep -q '^dtnet-' && { echo "SKIP: another tools/netem cluster is up"; exit $SKIP; }
make_idx "$T/data" 400 100
timeout 300 "$top_srcdir/tools/netem" run 3 100mbit -- -np 3 "$DTRAIN" --dataset mnist --data-dir "$T/data" \
    --batch 50 --epochs 1 --iters 6 --threads 1 --progress none --log "$T/log.jsonl" > "$T/out" 2>&1 ||
    { cat "$T/out"; fail "dtrain across the emulated hosts failed"; }
beta=$(json_last "$T/log.jsonl" summary model_beta)
[ -n "$beta" ] || { cat "$T/out"; fail "no model_beta in the log"; }
mbs=$(awk -v b="$beta" 'BEGIN { printf "%.2f", 1e-6 / b }')
awk -v m="$mbs" 'BEGIN { exit !(m >= 8 && m <= 13) }' || fail "measured $mbs MB/s over 100 Mbit/s links (expected 8-13)"
[ "$(json_last "$T/log.jsonl" summary iter)" = 6 ] || fail "the job did not run its 6 iterations"
# the emulated hosts share this machine's cores, and the model knows: cores per rank = cores / 3
cores=$(json_last "$T/log.jsonl" summary model_cores)
want=$(awk -v n="$(nproc)" 'BEGIN { printf "%.6g", n / 3 }')
[ "$cores" = "$want" ] || fail "model_cores $cores across 3 emulated hosts of one $(nproc)-core machine (expected $want)"
ip netns list | grep -q '^dtnet-' && fail "tools/netem left namespaces behind: $(ip netns list | grep dtnet- | tr '\n' ' ')"
echo "PASS: 3 emulated hosts at 100 Mbit/s: the probe measured $mbs MB/s; torn down"
