#!/bin/bash
# tools/sweep and tools/report:
#  - a two-point sweep (2 ranks, --quick) runs both points, one directory each, keyed by the point
#  - a second run of it runs nothing; --dry-run lists the points and their state, also from a moved
#    base config and reordered lines (the same keys), not for a full run (other keys)
#  - a point that fails is recorded (exit status, last lines) and the sweep completes, exit 1;
#    --retry runs it again
#  - every point of every configs/experiments/*.sweep, full and --quick, passes dtrain --dry-run
#  - SIGTERM stops the running point's processes and the sweep (exit 143), which resumes; a second
#    sweep in the same results directory is refused
#  - bad sweep files are refused with file:line, exit 2: repeated keys, points that would share a
#    directory, more than 10,000 points, a baseline whose points are all excluded, a setting dtrain
#    has no option for, a published line of several points, a set line of an axis's key, one number
#    twice on an axis; --dtrain of a program that is not dtrain; tabs and a byte-order mark are read;
#    --check says which points' data is not here
#  - save and checkpoint of a sweep's config are written into each point's directory; a results
#    directory that cannot take a point's status stops the sweep with a message, exit 1; JSON nested
#    past Python's stack is damage, said, as in tools/report
#  - tools/report turns runs' --log files into a table and plots compared side by side, also of a
#    run going on; refuses files that are not logs
#  - tools/report turns a fixed set of results (tests/fixtures/report) into its tables and PNGs,
#    and a reproduction page with verdicts; damaged or missing results are said and counted; a
#    sweep whose points all failed is judged on nothing, and earlier plots of it are removed
. "$(dirname "$0")/lib.sh"
need_mpirun
SWEEP="$PYTHON $top_srcdir/tools/sweep --dtrain $DTRAIN"
REPORT="$PYTHON $top_srcdir/tools/report"

cat > "$T/two.sweep" <<EOT
title = two points
base  = $top_srcdir/configs/mlp-fashion-dsync.conf
ranks = 2
axis  mode = dsync pipesgd
set   threads = 1
baseline mode=dsync
quick dataset = synthetic
quick synthetic-samples = 2000
quick epochs = 1
EOT
timeout 300 $SWEEP --quick --out "$T/res" "$T/two.sweep" > "$T/out" 2>&1 || { cat "$T/out"; fail "the sweep failed"; }
n=0
for d in "$T"/res/*/; do
    [ -f "$d/status.json" ] || continue
    grep -q '"exit": 0' "$d/status.json" || { cat "$d/status.json"; fail "$d: not a success"; }
    grep -q '"type":"summary"' "$d/log.jsonl" || fail "$d: no summary in log.jsonl"
    grep -q '"ranks":2' "$d/log.jsonl" || fail "$d: not on 2 ranks"
    grep -q '^synthetic-samples = 2000' "$d/point.conf" || fail "$d: --quick settings missing from point.conf"
    n=$((n + 1))
done
[ "$n" -eq 2 ] || { cat "$T/out"; fail "expected 2 point directories, found $n"; }
grep -q "2 of 2 points done, 0 failed" "$T/out" || { cat "$T/out"; fail "no final line"; }

# again: nothing to run
before=$(cat "$T"/res/*/status.json | md5sum)
$SWEEP --quick --out "$T/res" "$T/two.sweep" > "$T/out2" 2>&1 || { cat "$T/out2"; fail "the second run failed"; }
grep -q "2 points, 0 to run, 2 already run" "$T/out2" || { cat "$T/out2"; fail "the second run ran points"; }
[ "$before" = "$(cat "$T"/res/*/status.json | md5sum)" ] || fail "the second run rewrote results"
$SWEEP --quick --dry-run --out "$T/res" "$T/two.sweep" > "$T/dry" || fail "--dry-run failed"
[ "$(grep -c "  done  " "$T/dry")" -eq 2 ] || { cat "$T/dry"; fail "--dry-run: expected 2 done points"; }
# the same points from a base config elsewhere (a moved or cloned tree) and with the sweep's lines in
# another order: the same keys, so found done
mkdir "$T/moved"
cp "$top_srcdir/configs/mlp-fashion-dsync.conf" "$T/moved/"
{ sed -n '/^quick epochs/p' "$T/two.sweep"; grep -v '^quick epochs' "$T/two.sweep"; } |
    sed "s#^base  = .*#base = $T/moved/mlp-fashion-dsync.conf#" > "$T/moved/two.sweep"
$SWEEP --quick --dry-run --out "$T/res" "$T/moved/two.sweep" > "$T/dry2" || fail "--dry-run of the moved sweep failed"
[ "$(grep -c "  done  " "$T/dry2")" -eq 2 ] || { cat "$T/dry2"; fail "a moved, reordered sweep: its points not found done"; }
# and a full run of it is not the --quick one
$SWEEP --dry-run --out "$T/res" "$T/two.sweep" > "$T/dry3" || fail "--dry-run without --quick failed"
[ "$(grep -c "  pending  " "$T/dry3")" -eq 2 ] || { cat "$T/dry3"; fail "full points found done among --quick ones"; }

# another sweep file, or the same one with(out) --quick, into these results: refused, nothing replaced
sed 's/^title = two points/title = other/' "$T/two.sweep" > "$T/other.sweep"
for args in "--quick $T/other.sweep" "$T/two.sweep"; do
    rc=0
    $SWEEP --out "$T/res" $args > "$T/out5" 2>&1 || rc=$?
    [ $rc -eq 2 ] && grep -q "res holds the results of .*two.sweep with --quick; this run would take them out" "$T/out5" ||
        { cat "$T/out5"; fail "a sweep into another's results ($args): exit $rc"; }
done
grep -q '"name": "two"' "$T/res/sweep.json" && grep -q '"quick_run": true' "$T/res/sweep.json" ||
    fail "the refused sweep replaced sweep.json"
# a sweep file of the same name elsewhere (results/two of configs/a/two.sweep and configs/b/two.sweep):
# refused too; the same file in a tree moved (the old one gone) or copied with its results is not
mkdir "$T/elsewhere" && cp "$T/two.sweep" "$T/elsewhere/"
rc=0
$SWEEP --quick --out "$T/res" "$T/elsewhere/two.sweep" > "$T/out5" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "res holds the results of $T/two.sweep with --quick" "$T/out5" ||
    { cat "$T/out5"; fail "a sweep file of the same name elsewhere into these results: exit $rc"; }
cp -r "$T/res" "$T/resmoved" && rm -f "$T/resmoved/.lock"
sed -i "s#\"file\": \"$T/two.sweep\"#\"file\": \"$T/gone/two.sweep\"#" "$T/resmoved/sweep.json"
grep -q "$T/gone/two.sweep" "$T/resmoved/sweep.json" || fail "sweep.json: no file to edit"
$SWEEP --quick --out "$T/resmoved" "$T/elsewhere/two.sweep" > "$T/out5" 2>&1 && grep -q "0 to run, 2 already run" "$T/out5" ||
    { cat "$T/out5"; fail "the sweep of a moved tree: its results refused"; }
mkdir -p "$T/copy" && cp "$T/two.sweep" "$T/copy/" && cp -r "$T/res" "$T/copy/res" && rm -f "$T/copy/res/.lock"
$SWEEP --quick --out "$T/copy/res" "$T/copy/two.sweep" > "$T/out5" 2>&1 && grep -q "0 to run, 2 already run" "$T/out5" ||
    { cat "$T/out5"; fail "the sweep of a tree copied with its results: refused"; }

# a failing point (one that diverges: a value dtrain refuses is found before anything runs, below):
# recorded, and the sweep goes on
sed 's/^axis  mode = dsync pipesgd/axis  mode = dsync pipesgd\naxis  lr = 0.01 100\nwhere lr=100: wd = 1/' "$T/two.sweep" > "$T/fail.sweep"
rc=0
timeout 300 $SWEEP --quick --out "$T/res2" "$T/fail.sweep" > "$T/out3" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$T/out3"; fail "a sweep with failing points: exit $rc (expected 1)"; }
grep -q "2 of 4 points done, 2 failed" "$T/out3" || { cat "$T/out3"; fail "expected 2 failed points of 4"; }
grep -q "FAILED (exit 1).*training diverged" "$T/out3" || { cat "$T/out3"; fail "the failure's reason is not shown"; }
grep -l '"exit": 1' "$T"/res2/*/status.json > /dev/null || fail "the failed point's status is not recorded"
timeout 300 $SWEEP --quick --retry --out "$T/res2" "$T/fail.sweep" > "$T/out4" 2>&1 || true
grep -q "4 points, 2 to run, 2 already run" "$T/out4" || { cat "$T/out4"; fail "--retry did not run the failed points"; }

# SIGTERM during a point: its mpirun and ranks stopped (none left writing into the directory), the
# sweep ends with 128 + 15 and says so; while one sweep runs, another in its directory is refused
sed 's/^quick synthetic-samples = 2000/quick synthetic-samples = 200000/' "$T/two.sweep" > "$T/long.sweep"
$SWEEP --quick --out "$T/res3" "$T/long.sweep" > "$T/out5" 2>&1 &
sweep_pid=$!
for _ in $(seq 600); do pgrep -f -- "--config $T/res3/.*point.conf" > /dev/null && break; sleep 0.1; done
pgrep -f -- "--config $T/res3/.*point.conf" > /dev/null || { cat "$T/out5"; fail "the long sweep's point did not start"; }
rc=0
$SWEEP --quick --out "$T/res3" "$T/long.sweep" > "$T/out6" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "another tools/sweep is running in this results directory" "$T/out6" ||
    { cat "$T/out6"; fail "a second sweep in a running sweep's directory: exit $rc"; }
kill -TERM $sweep_pid
rc=0
wait $sweep_pid || rc=$?
[ $rc -eq 143 ] && grep -q "stopped by SIGTERM during mode=dsync" "$T/out5" || { cat "$T/out5"; fail "SIGTERM: exit $rc"; }
sleep 1
! pgrep -f -- "--config $T/res3/.*point.conf" > /dev/null || fail "SIGTERM: the point's processes outlived the sweep"
[ ! -f "$T"/res3/*/status.json ] || fail "SIGTERM: the stopped point was recorded as run"
# a status.json nested past Python's stack: the point is found not run, no traceback
cp -r "$T/res" "$T/resdeep" && rm -f "$T/resdeep/.lock"
set -- "$T"/resdeep/*/status.json
$PYTHON -c "print('[' * 5000 + ']' * 5000)" > "$1"
$SWEEP --quick --dry-run --out "$T/resdeep" "$T/two.sweep" > "$T/out8" 2>&1 && ! grep -q Traceback "$T/out8" &&
    [ "$(grep -c "  pending  " "$T/out8")" -eq 1 ] || { cat "$T/out8"; fail "a status.json nested 5000 deep"; }

# save and checkpoint in the config: each point writes its own, in its directory (one path for all
# had each point replace the last one's); a results directory that cannot take a point's status
# (here a directory where its file goes; a full disk alike): said, no traceback, exit 1, the sweep
# goes on when run again
{ cat "$T/two.sweep"; echo "set save = w.st"; echo "set checkpoint = sub/ck.st"; } > "$T/save.sweep"
first=$($SWEEP --quick --dry-run --out "$T/res5" "$T/save.sweep" | awk '/  pending  / { print $1; exit }')
[ -n "$first" ] && mkdir -p "$T/res5/$first/status.json.tmp" || fail "no point to block"
rc=0
(cd "$T" && timeout 300 $SWEEP --quick --out "$T/res5" "$T/save.sweep") > "$T/out9" 2>&1 || rc=$?
[ $rc -eq 1 ] && ! grep -q Traceback "$T/out9" && grep -q "status.json.tmp: Is a directory; the points run before it are kept" "$T/out9" ||
    { cat "$T/out9"; fail "a point whose status cannot be written: exit $rc"; }
rmdir "$T/res5/$first/status.json.tmp"
(cd "$T" && timeout 300 $SWEEP --quick --out "$T/res5" "$T/save.sweep") > "$T/out9" 2>&1 || { cat "$T/out9"; fail "the sweep with save and checkpoint failed"; }
[ "$(ls "$T"/res5/*/w.st | wc -l)" -eq 2 ] && [ "$(ls "$T"/res5/*/ck.st | wc -l)" -eq 2 ] && [ ! -e "$T/w.st" ] ||
    fail "save and checkpoint of the sweep: not one of each in every point's directory"

rc=0
$SWEEP --timeout -1 "$T/two.sweep" > "$T/out7" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "argument --timeout: expected seconds" "$T/out7" || { cat "$T/out7"; fail "--timeout -1: exit $rc"; }

# every experiment of configs/experiments: each point, full and --quick (--check without --quick
# checks both), passes dtrain --dry-run (not in the sanitized build: hundreds of start-ups checking
# the configs' logic; configs.sh runs dtrain's --dry-run there)
[ "${DT_SANITIZED:-no}" = yes ] ||
for f in "$top_srcdir"/configs/experiments/*.sweep; do
    $SWEEP --check "$f" > "$T/check" 2>&1 || { cat "$T/check"; fail "$(basename "$f"): a point fails dtrain --dry-run"; }
    grep -q "points pass dtrain --dry-run (.* with the quick lines)" "$T/check" || ! grep -q '^quick' "$f" ||
        { cat "$T/check"; fail "$(basename "$f"): --check did not check the quick lines"; }
done
# a typo in a quick line fails --check at its line, also without --quick
printf '%s\n' "base = $top_srcdir/configs/mlp-fashion-dsync.conf" "axis mode = dsync ps" "quick epochz = 1" > "$T/q.sweep"
rc=0
$SWEEP --check "$T/q.sweep" > "$T/q.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "q.sweep:3: quick epochz: not an option of dtrain" "$T/q.out" ||
    { cat "$T/q.out"; fail "a quick-line typo: exit $rc"; }
# a value dtrain refuses: --check names the sweep file's line that gave it (not the check's own config)
printf '%s
' "base = $top_srcdir/configs/mlp-fashion-dsync.conf" "axis compress = none zz" > "$T/v.sweep"
rc=0
$SWEEP --check "$T/v.sweep" > "$T/v.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "compress=zz: dtrain: .*v.sweep:2: compress: unknown codec 'zz'" "$T/v.out" &&
    grep -q "1 of 2 points pass" "$T/v.out" || { cat "$T/v.out"; fail "--check of a bad axis value: exit $rc"; }
rc=0 # a sweep that runs checks first: nothing runs, exit 2; a dry run says so too
$SWEEP --out "$T/v" "$T/v.sweep" > "$T/v.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "v.sweep:2: compress: unknown codec 'zz'" "$T/v.out" && grep -q "none is run" "$T/v.out" &&
    ! ls "$T/v"/*/status.json > /dev/null 2>&1 || { cat "$T/v.out"; fail "a sweep with a bad axis value: exit $rc"; }
rc=0
$SWEEP --dry-run --out "$T/v" "$T/v.sweep" > "$T/v.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "v.sweep:2: compress: unknown codec 'zz'" "$T/v.out" && grep -q "none would be run" "$T/v.out" &&
    [ "$(grep -c "  pending  " "$T/v.out")" -eq 2 ] || { cat "$T/v.out"; fail "--dry-run of a bad axis value: exit $rc"; }
# a value of the base config that dtrain refuses: named at the base's line (point.conf keeps its lines)
{ cat "$top_srcdir/configs/mlp-fashion-dsync.conf"; echo "batch = many"; } > "$T/badbase.conf"
printf '%s\n' "base = badbase.conf" "axis mode = dsync ps" > "$T/badbase.sweep"
rc=0
$SWEEP --check "$T/badbase.sweep" > "$T/v.out" 2>&1 || rc=$?
line=$(grep -c '' "$T/badbase.conf")
[ $rc -eq 2 ] && grep -q "mode=ps: dtrain: .*$T/badbase.conf:$line: batch" "$T/v.out" && ! grep -q "point's config" "$T/v.out" ||
    { cat "$T/v.out"; fail "--check of a bad base config line: exit $rc"; }
# the ranks a base config is meant for are the points' (--ranks 1 overrode them), and its ranks,
# log and progress lines are left out of point.conf, as tools/sweep gives those on the command line
printf '%s\n' "base = $top_srcdir/configs/pipesgd-mnist-mlp-pipesgd.conf" "axis seed = 1 2" > "$T/r.sweep"
$SWEEP --dry-run --out "$T/r" "$T/r.sweep" > "$T/v.out" 2>&1 && [ "$(grep -c -- "-np 4 .* --ranks 4 " "$T/v.out")" -eq 2 ] ||
    { cat "$T/v.out"; fail "a sweep without ranks: not the base config's 4"; }
{ grep -v '^ranks' "$T/badbase.conf" | grep -v '^batch'; echo "ranks = 3"; echo "log = elsewhere.jsonl"; } > "$T/given.conf"
printf '%s\n' "base = given.conf" "axis mode = dsync" "quick dataset = synthetic" "quick synthetic-samples = 200" \
    "quick epochs = 1" > "$T/given.sweep"
timeout 300 $SWEEP --quick --out "$T/given" "$T/given.sweep" > "$T/v.out" 2>&1 || { cat "$T/v.out"; fail "the sweep of given.conf failed"; }
grep -q '^# ranks = 3    (tools/sweep gives --ranks P' "$T"/given/*/point.conf &&
    grep -q '^# log = elsewhere.jsonl    (tools/sweep gives --log' "$T"/given/*/point.conf &&
    grep -q '"ranks":3' "$T"/given/*/log.jsonl && [ ! -e "$T/elsewhere.jsonl" ] ||
    { cat "$T/v.out" "$T"/given/*/point.conf; fail "the base's ranks and log lines in point.conf"; }

# Ctrl-C or SIGTERM during the check before a run (here a --check of 40 points): the dry runs going
# on are stopped, the sweep ends at once with 128 + the signal and says so; SIGINT too when the
# shell started it ignoring SIGINT (a background job of a script, as here)
printf '%s\n' "base = $top_srcdir/configs/mlp-fashion-dsync.conf" "axis seed = $(seq -s ' ' 1 40)" > "$T/many.sweep"
for sig in INT TERM; do
    mkdir -p "$T/tmp$sig"
    TMPDIR="$T/tmp$sig" $SWEEP --check "$T/many.sweep" > "$T/sig.out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do pgrep -f -- "--config $T/tmp$sig/" > /dev/null && break; sleep 0.1; done
    kill -$sig $pid
    t0=$(date +%s)
    rc=0
    wait $pid || rc=$?
    [ $rc -eq $((128 + $(kill -l $sig))) ] && grep -q "stopped by SIG$sig; no point was running" "$T/sig.out" &&
        ! grep -q Traceback "$T/sig.out" && [ $(($(date +%s) - t0)) -le 5 ] ||
        { cat "$T/sig.out"; fail "SIG$sig during a check: exit $rc after $(($(date +%s) - t0)) s"; }
    sleep 0.5
    ! pgrep -f -- "--config $T/tmp$sig/" > /dev/null || fail "SIG$sig during a check: its dry runs outlived it"
done
# standard output that cannot take it: a reader that stopped (as SIGPIPE would), a full disk; no traceback
$SWEEP --dry-run --out "$T/v" "$T/r.sweep" 2> "$T/v.err" | true # gone before the first line
rc=${PIPESTATUS[0]}
[ "$rc" -eq 141 ] && [ ! -s "$T/v.err" ] || { cat "$T/v.err"; fail "--dry-run | true: exit $rc"; }
if [ -w /dev/full ]; then
    rc=0
    $SWEEP --dry-run --out "$T/v" "$T/r.sweep" > /dev/full 2> "$T/v.err" || rc=$?
    [ $rc -eq 1 ] && grep -q "cannot write its output (No space left on device)" "$T/v.err" && ! grep -q Traceback "$T/v.err" ||
        { cat "$T/v.err"; fail "--dry-run > /dev/full: exit $rc"; }
fi

# bad sweep files
bad() { # WHAT MESSAGE LINE...
    local what=$1 msg=$2
    shift 2
    printf '%s\n' "$@" > "$T/bad.sweep"
    rc=0
    $SWEEP --dry-run "$T/bad.sweep" > "$T/bad.out" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || { cat "$T/bad.out"; fail "$what: exit $rc (expected 2)"; }
    grep -qF -- "$msg" "$T/bad.out" || { cat "$T/bad.out"; fail "$what: expected '$msg'"; }
}
bad "no base" "no 'base = CONFIG' line" "axis mode = dsync"
bad "no axis" "no 'axis KEY = V1 V2 ...' line" "base = $top_srcdir/configs/mlp-fashion-dsync.conf"
bad "unknown directive" "bad.sweep:2: unknown directive 'axes'" "base = $top_srcdir/configs/mlp-fashion-dsync.conf" "axes mode = dsync"
bad "baseline off the axes" "'mode=ps' is not a value of axis mode" "base = $top_srcdir/configs/mlp-fashion-dsync.conf" \
    "axis mode = dsync pipesgd" "baseline mode=ps"
bad "missing base" "base config" "base = nowhere.conf" "axis mode = dsync"
bad "a label value without a where line" "axis consistency is not a dtrain option, so it is a label whose values where lines turn into settings; ssp has none" \
    "base = $top_srcdir/configs/mlp-fashion-dsync.conf" "axis consistency = bsp ssp" "where consistency=bsp: staleness = 0"
bad "not UTF-8" "bad.sweep: not UTF-8 text (byte 0;" "$(printf '\xff\xfe')base = x"
b="base = $top_srcdir/configs/mlp-fashion-dsync.conf"
bad "a set key twice" "bad.sweep:4: set lr is given twice" "$b" "axis mode = dsync" "set lr = 0.1" "set lr = 0.5"
bad "two baselines" "bad.sweep:4: baseline is given twice" "$b" "axis mode = dsync ps" "baseline mode=dsync" "baseline mode=ps"
bad "points that share a configuration" "points variant=a and variant=b run the same configuration" "$b" \
    "axis variant = a b" "where variant=a: lr = 0.1" "where variant=b: lr = 0.1"
bad "too many points" "10 x 10 x 10 x 10 x 10 = 100000 points, more than a sweep's 10000" "$b" \
    "axis seed = $(seq -s ' ' 10)" "axis epochs = $(seq -s ' ' 10)" "axis batch = $(seq -s ' ' 10)" \
    "axis lr = $(seq -s ' ' 10)" "axis threads = $(seq -s ' ' 10)"
bad "a link that is no rate" "link: expected none or a rate like 1gbit, 100mbit or 500kbit, found '10parsecs'" "$b" \
    "axis mode = dsync ps" "link = 10parsecs"
bad "an excluded baseline" "baseline mode=ps: every such point is excluded" "$b" "axis mode = dsync ps" \
    "exclude mode=ps" "baseline mode=ps"
# a setting dtrain has no option for: at its line, before any point runs (it failed every point)
bad "a set key dtrain lacks" "bad.sweep:3: set learning-rate: not an option of dtrain" "$b" "axis mode = dsync" \
    "set learning-rate = 0.1"
bad "a quick key dtrain lacks" "bad.sweep:3: quick epoch: not an option of dtrain" "$b" "axis mode = dsync" "quick epoch = 1"
bad "a where key dtrain lacks" "bad.sweep:3: where bogus: not an option of dtrain" "$b" "axis mode = dsync ps" \
    "where mode=ps: bogus = 1"
# a paper's number of several points (it was set beside the first); lines that select nothing or
# set what an axis sets; one number twice; ranks and link at their lines
bad "a published line of several points" "bad.sweep:4: published mode=pipesgd names 2 points (mode=pipesgd ranks=1, mode=pipesgd ranks=2;" \
    "$b" "axis mode = dsync pipesgd" "axis ranks = 1 2" "published mode=pipesgd: speedup 2.0 2x"
bad "a bare exclude" "bad.sweep:3: exclude names no point" "$b" "axis mode = dsync pipesgd" "exclude"
bad "one number twice on an axis" "bad.sweep:2: axis lr repeats a value: 0.1 and 0.10 are the same number" "$b" "axis lr = 0.1 0.10"
bad "a set line of an axis's key" "bad.sweep:3: set mode: mode is an axis" "$b" "axis mode = dsync pipesgd" "set mode = ps"
bad "ranks that is no number" "bad.sweep:3: ranks: expected an integer from 1 to 1048576, found 'two'" "$b" \
    "axis mode = dsync ps" "ranks = two"
# digits that are not ASCII ones (Python's isdigit takes them, int() not: a traceback), too many ranks
bad "ranks of a superscript digit" "bad.sweep:3: ranks: expected an integer from 1 to 1048576, found '²'" "$b" \
    "axis mode = dsync ps" "ranks = ²"
bad "a where ranks of a superscript digit" "bad.sweep:3: ranks: expected an integer" "$b" "axis mode = dsync ps" \
    "where mode=ps: ranks = ³"
bad "a timeout of a superscript digit" "bad.sweep:3: timeout: expected seconds, found '²'" "$b" "axis mode = dsync ps" \
    "timeout = ²"
bad "more ranks than dtrain takes" "bad.sweep:3: ranks: expected an integer from 1 to 1048576, found '100000000000000000000'" \
    "$b" "axis mode = dsync ps" "ranks = 100000000000000000000"
# every option dtrain's config files refuse (OPT_NO_CONFIG in src/cli.c, so the list cannot drift), at its line
no_config=$(grep 'OPT_NO_CONFIG' "$top_srcdir/src/cli.c" | sed -n 's/^ *{"[A-Za-z]*", "\([a-z-]*\)".*/\1/p')
[ "$(echo "$no_config" | wc -w)" -ge 10 ] || fail "found only '$no_config' as the command line's own options in src/cli.c"
for k in $no_config; do
    bad "set $k" "bad.sweep:3: set $k: an option of dtrain's command line only" "$b" "axis mode = dsync ps" "set $k = x"
done
bad "an axis of a command-line option" "bad.sweep:2: axis dry-run: an option of dtrain's command line only" "$b" \
    "axis dry-run = true false"
bad "a where of a command-line option" "bad.sweep:3: where config: an option of dtrain's command line only" "$b" \
    "axis mode = dsync ps" "where mode=ps: config = a.conf"
bad "a set line of log, which the sweep gives" "bad.sweep:3: set log: tools/sweep gives every point --log POINT/log.jsonl" \
    "$b" "axis mode = dsync ps" "set log = run.jsonl"
bad "a where line of progress" "bad.sweep:3: where progress: tools/sweep gives every point --progress none" "$b" \
    "axis mode = dsync ps" "where mode=ps: progress = bar"
{ cat "$top_srcdir/configs/mlp-fashion-dsync.conf"; echo "ranks = two"; } > "$T/ranks2.conf"
bad "a base config's ranks that is no number" "ranks2.conf:$(grep -c '' "$T/ranks2.conf"): ranks: expected an integer" \
    "base = $T/ranks2.conf" "axis mode = dsync"
bad "a where link that is no rate" "bad.sweep:3: link: expected none or a rate" "$b" "axis mode = dsync ps" "where mode=ps: link = fast"
bad "an exclude off the axes, at its line" "bad.sweep:3: 'mode=ps' is not a value of axis mode" "$b" "axis mode = dsync pipesgd" \
    "exclude mode=ps"
# tabs between the words and a byte-order mark (an editor's): read as spaces are
printf '\xef\xbb\xbf%s\naxis\tmode =\tdsync pipesgd\nset\tthreads = 1\n' "$b" > "$T/tabs.sweep"
$SWEEP --dry-run --out "$T/tabs" "$T/tabs.sweep" > "$T/tabs.out" 2>&1 && [ "$(grep -c "  pending  mode=" "$T/tabs.out")" -eq 2 ] ||
    { cat "$T/tabs.out"; fail "a sweep file with tabs and a byte-order mark"; }
# --check of points whose data is not here: they pass dtrain --dry-run, and the check says they would fail
mkdir "$T/nodata"
printf '%s\n' "$b" "axis mode = dsync pipesgd" "set dataset = mnist" "set data-dir = $T/nodata" > "$T/nodata.sweep"
$SWEEP --check "$T/nodata.sweep" > "$T/nodata.out" 2>&1 &&
    grep -q "the data of 2 points is not here, so they would fail when they run: $T/nodata: none of the four IDX files of mnist" "$T/nodata.out" ||
    { cat "$T/nodata.out"; fail "--check of points without their data"; }
printf '%s\n' "$b" "axis mode = dsync" > "$T/ok.sweep"
rc=0
$PYTHON "$top_srcdir/tools/sweep" --dtrain /bin/true --dry-run "$T/ok.sweep" > "$T/bad.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -qF "/bin/true --help names no --net and --mode options: not a dtrain" "$T/bad.out" ||
    { cat "$T/bad.out"; fail "--dtrain of another program: exit $rc"; }

# a label axis: not written as an option, its where lines are
printf '%s\n' "base = $top_srcdir/configs/mlp-fashion-dsync.conf" "set mode = ps" "ranks = 3" "axis consistency = bsp ssp" \
    "where consistency=bsp: staleness = 0" "where consistency=ssp: staleness = 2" > "$T/label.sweep"
$SWEEP --dry-run --out "$T/lab" "$T/label.sweep" > "$T/label.out" 2>&1 || { cat "$T/label.out"; fail "label axis: --dry-run failed"; }
grep -q "consistency=ssp\$" "$T/label.out" && grep -q "staleness=2" "$T/label.out" && ! grep -q "consistency=ssp " "$T/label.out" ||
    { cat "$T/label.out"; fail "label axis: expected the point consistency=ssp with staleness=2 and no consistency option"; }

# the report names the sweep file as its page finds it
$REPORT "$T/res" > "$T/rep0" 2>&1 || { cat "$T/rep0"; fail "tools/report of the first sweep failed"; }
p=$(sed -n 's/^Sweep `\([^`]*\)`.*/\1/p' "$T/res/report/results.md")
[ -f "$T/res/report/$p" ] || fail "results.md names the sweep file as '$p', which is not there from the page"

# the report of runs' logs (no sweep): a column per option they differ in, the first log the baseline,
# the table on the terminal too; a log cut before its summary (a run going on) is drawn, its row
# empty; a file that is not a log, and logs beside a results directory, are refused (exit 2)
logs=$(for m in dsync pipesgd; do grep -l "^mode = $m\$" "$T"/res/*/point.conf; done | sed 's#point.conf$#log.jsonl#')
[ "$(echo $logs | wc -w)" -eq 2 ] || fail "expected a log of each point of the first sweep, found: $logs"
$REPORT --out "$T/logrep" $logs > "$T/rep1" 2>&1 || { cat "$T/rep1"; fail "tools/report of two logs failed"; }
head -n 1 "$T/logrep/results.csv" | grep -q "^log,mode,ranks,state,final test accuracy,samples/s,speed-up," &&
    grep -q '^[0-9a-f]*/log.jsonl,dsync,2,ok,,[0-9.]*,1.00x,' "$T/logrep/results.csv" &&
    grep -q '^[0-9a-f]*/log.jsonl,pipesgd,2,ok,,[0-9.]*,[0-9.]*x,' "$T/logrep/results.csv" ||
    { cat "$T/rep1" "$T/logrep/results.csv"; fail "tools/report of logs: unexpected table"; }
grep -q '^| [0-9a-f]*/log.jsonl | pipesgd | 2 | ok |' "$T/rep1" && grep -q "2 logs -> $T/logrep" "$T/rep1" ||
    { cat "$T/rep1"; fail "tools/report of logs: no table on the terminal"; }
for png in loss time_split bytes; do
    f="$T/logrep/$png.png"
    [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && [ "$(stat -c %s "$f")" -gt 10000 ] ||
        { cat "$T/rep1"; fail "tools/report of logs: $png.png missing, not a PNG or suspiciously small"; }
done
[ ! -e "$T/logrep/accuracy_epoch.png" ] || fail "tools/report of logs: an accuracy plot of runs that measured none"
one=$(echo $logs | cut -d' ' -f1)
head -n -1 "$one" > "$T/going.jsonl"
$REPORT "$T/going.jsonl" > "$T/rep2" 2>&1 || { cat "$T/rep2"; fail "tools/report of a log without its summary failed"; }
grep -q "going.jsonl: no summary record yet" "$T/rep2" && grep -q '^going.jsonl,2,not finished,' "$T/report/results.csv" &&
    [ -s "$T/report/loss.png" ] || { cat "$T/rep2" "$T/report/results.csv"; fail "tools/report of a run going on"; }
for args in "$T/two.sweep" "$T/res $one" "--reproduction $T/R.md $one"; do
    rc=0
    $REPORT $args > "$T/rep3" 2>&1 || rc=$?
    [ $rc -eq 2 ] && grep -q "expected a log dtrain --log wrote\|not both\|not logs" "$T/rep3" && ! grep -q Traceback "$T/rep3" ||
        { cat "$T/rep3"; fail "tools/report $args: exit $rc, or no message"; }
done

# the report of a fixed set of results
cp -r "$top_srcdir/tests/fixtures/report" "$T/fixture"
chmod -R u+w "$T/fixture"
$REPORT --reproduction "$T/REPRO.md" "$T/fixture" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report failed"; }
head -n 1 "$T/fixture/report/results.csv" | grep -q "^mode,ranks,link,state,final test accuracy," ||
    { head -n 2 "$T/fixture/report/results.csv"; fail "results.csv: unexpected header"; }
[ "$(grep -c ',ok,' "$T/fixture/report/results.csv")" -eq 4 ] || fail "results.csv: expected 4 rows that ran"
grep -q "^| dsync | 1 | none | ok | 0.86" "$T/fixture/report/results.md" || { cat "$T/fixture/report/results.md"; fail "results.md: the baseline row"; }
grep -q "| 1.00x |" "$T/fixture/report/results.md" || fail "results.md: no speed-up column"
for png in loss accuracy_epoch accuracy_time time_split bytes scaling; do
    f="$T/fixture/report/$png.png"
    [ -f "$f" ] || fail "$png.png not written"
    [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png.png is not a PNG"
    [ "$(stat -c %s "$f")" -gt 10000 ] || fail "$png.png is suspiciously small"
done
grep -q "| mode=pipesgd ranks=2 | speedup | 1.5 .* | 0.75 | not reproduced (not faster)" "$T/REPRO.md" || { cat "$T/REPRO.md"; fail "the reproduction page's speed-up verdict"; }
grep -q "| mode=dsync ranks=2 | test_acc | 0.85 .* | 0.86[0-9]* | reproduced in kind (+0.01" "$T/REPRO.md" || { cat "$T/REPRO.md"; fail "the reproduction page's accuracy verdict"; }
grep -qF "| mode=dsync ranks=2 | 2 | ok | 0.8652 | 25044 | 0.98x | +14% |" "$T/REPRO.md" || { cat "$T/REPRO.md"; fail "the reproduction page: no row of every point"; }
grep -qF "Timing model: within 15% on 3 of 4 points; the farthest, mode=pipesgd ranks=2, -37%." "$T/REPRO.md" || { cat "$T/REPRO.md"; fail "the reproduction page: no line on the timing model"; }
# damaged results: a point not run, a log cut before its summary, a status that is not an object,
# a samples/s that is not a number: said and counted, no traceback
cp -r "$top_srcdir/tests/fixtures/report" "$T/damaged" && chmod -R u+w "$T/damaged"
set -- "$T"/damaged/*/
rm -r "$1"
head -n 2 "$2/log.jsonl" > "$2/log.cut" && mv "$2/log.cut" "$2/log.jsonl"
echo '[]' > "$3/status.json"
sed -i 's/"samples_per_s":[0-9.e+]*/"samples_per_s":"fast"/' "$4/log.jsonl"
sed -i '1a {"type":"epoch",garbage' "$4/log.jsonl" # a damaged line inside the log: left out and said
$REPORT --reproduction "$T/DAMAGED.md" "$T/damaged" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of damaged results failed"; }
! grep -q Traceback "$T/rep" && grep -q "3 of the sweep's 4 points (1 without results)" "$T/rep" &&
    grep -q "ran, but its log.jsonl has no summary record" "$T/rep" &&
    grep -q "log.jsonl: 1 line is not a JSON record (damaged or edited): left out" "$T/rep" &&
    grep -q "3 of the sweep's 4 points (1 without results)" "$T/damaged/report/results.md" &&
    grep -q "3 of the sweep's 4 points (1 without results)" "$T/DAMAGED.md" &&
    grep -q "status.json is damaged, but log.jsonl has the run's summary: its row is from the log" "$T/rep" &&
    grep -q "| damaged status.json |" "$T/damaged/report/results.md" || { cat "$T/rep" "$T/damaged/report/results.md"; fail "tools/report: damaged results"; }
# a status.json missing beside a log with its summary (the sweep stopped as the point ended): said, the
# row from the log; a damaged one beside a log cut before its summary: a damaged point, counted
cp -r "$top_srcdir/tests/fixtures/report" "$T/nostatus" && chmod -R u+w "$T/nostatus"
set -- "$T"/nostatus/*/
rm "$1/status.json"
echo '{"exit": 0, "sec' > "$2/status.json" && head -n 2 "$2/log.jsonl" > "$2/log.cut" && mv "$2/log.cut" "$2/log.jsonl"
$REPORT "$T/nostatus" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of a missing status.json failed"; }
grep -q "status.json is missing, but log.jsonl has the run's summary" "$T/rep" &&
    grep -q "| no status.json |" "$T/nostatus/report/results.md" &&
    grep -q "$2status.json: damaged (not what tools/sweep writes): left out" "$T/rep" &&
    grep -q "1 of the sweep's 4 points has no results (0 not run yet, 0 stopped while running, 1 damaged)" "$T/rep" ||
    { cat "$T/rep" "$T/nostatus/report/results.md"; fail "tools/report: a missing or damaged status.json"; }
# JSON nested deeper than Python's stack (a RecursionError, a traceback before) in a log line and in
# a status.json: damaged, said, no traceback, in tools/report and in a sweep that resumes
cp -r "$top_srcdir/tests/fixtures/report" "$T/deep" && chmod -R u+w "$T/deep"
set -- "$T"/deep/*/
deep=$($PYTHON -c "print('[' * 5000 + ']' * 5000)")
echo "$deep" >> "$1/log.jsonl" && echo '{"type":"epoch"}' >> "$1/log.jsonl" && echo "$deep" > "$2/status.json"
$REPORT "$T/deep" > "$T/rep" 2>&1
! grep -q Traceback "$T/rep" && grep -q "log.jsonl: 1 line is not a JSON record" "$T/rep" ||
    { cat "$T/rep"; fail "tools/report of JSON nested 5000 deep"; }
# points stopped while they ran (point.json, no status, no log): without results, so exit 1
cp -r "$top_srcdir/tests/fixtures/report" "$T/stopped" && chmod -R u+w "$T/stopped"
rm -f "$T"/stopped/*/status.json "$T"/stopped/*/log.jsonl
rc=0
$REPORT "$T/stopped" > "$T/rep" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "4 of the sweep's 4 points have no results (0 not run yet, 4 stopped while running" "$T/rep" ||
    { cat "$T/rep"; fail "tools/report of points stopped while running: exit $rc"; }
touch "$T/afile"
rc=0
$REPORT --out "$T/afile" "$T/damaged" > "$T/rep" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "afile: not a directory" "$T/rep" || { cat "$T/rep"; fail "tools/report --out FILE: exit $rc"; }
rc=0
$REPORT "$T" > "$T/rep" 2>&1 || rc=$? # a directory, but no results: the command line's mistake
[ $rc -eq 2 ] && grep -q "no readable sweep.json .*: expected a results directory tools/sweep wrote" "$T/rep" ||
    { cat "$T/rep"; fail "tools/report of a directory without results: exit $rc"; }
# one directory that is not results among good ones: said, the others and the page still written, exit 2
rm -f "$T/BOTH.md"
rc=0
$REPORT --reproduction "$T/BOTH.md" "$T/nonexistent" "$T/fixture" > "$T/rep" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "nonexistent: no such directory" "$T/rep" && [ -s "$T/BOTH.md" ] ||
    { cat "$T/rep"; fail "tools/report of a missing and a good directory: exit $rc, or no page"; }
# names with a byte of no valid UTF-8, which dtrain's log keeps as \udcNN (Python's surrogateescape):
# shown as U+FFFD (writing the lone surrogate raised UnicodeEncodeError)
cp -r "$top_srcdir/tests/fixtures/report" "$T/latin" && chmod -R u+w "$T/latin"
for f in "$T"/latin/*/log.jsonl; do sed -i 's/"\(net\|dataset\|mode\)":"\([^"]*\)"/"\1":"\2\\udce9"/g' "$f"; done
grep -q 'udce9' "$T"/latin/*/log.jsonl || fail "the test's logs hold no \\udce9"
$REPORT --reproduction "$T/LATIN.md" "$T/latin" > "$T/rep" 2>&1 && ! grep -q Traceback "$T/rep" &&
    grep -q $'data: fashion-mnist\xef\xbf\xbd' "$T/LATIN.md" || { cat "$T/rep"; fail "tools/report of names with \\udcNN escapes"; }
# fields that are not numbers (an epoch without its time, a phase null) and no matplotlib (python -S
# finds no site packages): said, no traceback, the tables written
cp -r "$top_srcdir/tests/fixtures/report" "$T/fields" && chmod -R u+w "$T/fields"
set -- "$T"/fields/*/
sed -i '/"type":"epoch"/s/"time":[0-9.e+-]*,//' "$1/log.jsonl"
sed -i '/"type":"summary"/s/"t_forward":[0-9.e+-]*/"t_forward":null/' "$2/log.jsonl"
$REPORT "$T/fields" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of records with fields that are not numbers failed"; }
! grep -q Traceback "$T/rep" && grep -q "epoch records\? without a number in range for epoch, time or test_acc" "$T/rep" &&
    grep -q "the summary's t_forward is not a number" "$T/rep" || { cat "$T/rep"; fail "tools/report: fields not numbers"; }
rm -r "$T/fields/report"
$PYTHON -S "$top_srcdir/tools/report" "$T/fields" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report without matplotlib failed"; }
grep -q "matplotlib not found" "$T/rep" && [ -s "$T/fields/report/results.md" ] ||
    { cat "$T/rep"; fail "tools/report without matplotlib: no warning or no tables"; }

# every point failed: the page says nothing was measured, judges nothing and repeats no notes; the
# plots of an earlier report of these results are removed (they showed runs that are not these)
cp -r "$top_srcdir/tests/fixtures/report" "$T/allfailed" && chmod -R u+w "$T/allfailed"
$REPORT "$T/allfailed" > "$T/rep" 2>&1 && [ -f "$T/allfailed/report/scaling.png" ] || { cat "$T/rep"; fail "tools/report: no plots"; }
sed -i 's/"exit": 0/"exit": 1/' "$T"/allfailed/*/status.json
$REPORT --reproduction "$T/FAILED.md" "$T/allfailed" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of failed points failed"; }
grep -q "^No point of this sweep ran to the end" "$T/FAILED.md" && ! grep -q "| metric | published |" "$T/FAILED.md" &&
    grep -q "| mode=dsync ranks=1 | 1 | failed (exit 1) |" "$T/FAILED.md" && grep -q "data: none ran\.$" "$T/FAILED.md" ||
    { cat "$T/FAILED.md"; fail "the page of a sweep whose points all failed"; }
[ -z "$(ls "$T"/allfailed/report/*.png 2>/dev/null)" ] && grep -q "scaling.png: removed (an earlier report's plot" "$T/rep" ||
    { ls "$T/allfailed/report"; cat "$T/rep"; fail "tools/report kept the plots of results that are gone"; }

# the same results marked --quick: no verdicts, and the full sweep's notes left out
cp -r "$top_srcdir/tests/fixtures/report" "$T/quick" && chmod -R u+w "$T/quick"
sed -i 's/"quick_run": false/"quick_run": true/' "$T/quick/sweep.json"
$REPORT --reproduction "$T/QUICK.md" "$T/quick" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of a --quick run failed"; }
grep -q "^A \`--quick\` run: .*nothing here is compared with the published numbers" "$T/QUICK.md" &&
    ! grep -q "| metric | published |" "$T/QUICK.md" || { cat "$T/QUICK.md"; fail "the report of a --quick run judges it"; }

# --reproduction over a file the report reads or writes: refused, nothing overwritten
cp -r "$top_srcdir/tests/fixtures/report" "$T/over" && chmod -R u+w "$T/over"
set -- "$T"/over/*/
for f in "$T/over/sweep.json" "${1}log.jsonl" "$T/over/report/results.md"; do
    cp "$T/over/sweep.json" "$T/sweep.before"
    rc=0
    $REPORT --reproduction "$f" "$T/over" > "$T/rep" 2>&1 || rc=$?
    [ $rc -eq 2 ] && grep -q "is a file of the results .* reads or writes" "$T/rep" && cmp -s "$T/sweep.before" "$T/over/sweep.json" ||
        { cat "$T/rep"; fail "tools/report --reproduction $f: exit $rc, or not refused"; }
done
$REPORT --reproduction "$T/over/REPRODUCTION.md" "$T/over" > "$T/rep" 2>&1 && [ -s "$T/over/REPRODUCTION.md" ] ||
    { cat "$T/rep"; fail "tools/report --reproduction of a new file in the results directory"; }
# a sweep.json whose fields are of other types (edited): said, exit 2, no traceback
for edit in 'd["title"] = 5' 'd["published"][0]["value"] = "x"' 'd["published"][0]["point"] = "x"' \
            'd["target"] = "high"' 'd["axes"][0][1] = "dsync"'; do
    cp -r "$top_srcdir/tests/fixtures/report" "$T/types" && chmod -R u+w "$T/types"
    $PYTHON -c 'import json, sys; d = json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(d, open(sys.argv[1], "w"))' \
        "$T/types/sweep.json" "$edit" || fail "could not edit sweep.json with $edit"
    rc=0
    $REPORT --reproduction "$T/TYPES.md" "$T/types" > "$T/rep" 2>&1 || rc=$?
    [ $rc -eq 2 ] && grep -q "sweep.json's .* is not what tools/sweep writes (damaged or edited)" "$T/rep" && ! grep -q Traceback "$T/rep" ||
        { cat "$T/rep"; fail "tools/report of a sweep.json edited with $edit: exit $rc"; }
    rm -rf "$T/types"
done
# NaN, infinities and negative rates in a summary, an exit that is a string: damage, said and left out
cp -r "$top_srcdir/tests/fixtures/report" "$T/nan" && chmod -R u+w "$T/nan"
set -- "$T"/nan/*/
sed -i '/"type":"summary"/{s/"test_acc":[0-9.]*/"test_acc":NaN/;s/"samples_per_s":[0-9.]*/"samples_per_s":Infinity/}' "$1/log.jsonl"
sed -i '/"type":"summary"/s/"bytes_sent":[0-9.]*/"bytes_sent":-1e30/' "$2/log.jsonl"
sed -i 's/"exit": 0/"exit": "0"/' "$3/status.json"
$REPORT "$T/nan" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of summaries with NaN failed"; }
grep -q "the summary's test_acc NaN, samples_per_s Infinity are out of range (edited or damaged): left out" "$T/rep" &&
    grep -q "the summary's bytes_sent -1e+30 is out of range" "$T/rep" && grep -q "status.json's exit \"0\" is not a number" "$T/rep" &&
    ! grep -qiw "nan\|inf\|infx" "$T/nan/report/results.md" ||
    { cat "$T/rep" "$T/nan/report/results.md"; fail "tools/report took NaN, infinities or a negative count as measured"; }
# finite numbers past any run's (a phase of 1e308 s overflowed the stacked bars), a negative phase, an
# epoch's accuracy above 1, epochs out of order: said and left out, no traceback
cp -r "$top_srcdir/tests/fixtures/report" "$T/huge" && chmod -R u+w "$T/huge"
set -- "$T"/huge/*/
sed -i '/"type":"summary"/{s/"t_forward":[0-9.e+-]*/"t_forward":1e308/;s/"t_update":[0-9.e+-]*/"t_update":-0.5/}' "$1/log.jsonl"
sed -i '0,/"type":"epoch"/{/"type":"epoch"/s/"test_acc":[0-9.]*/"test_acc":7.5/}' "$2/log.jsonl"
$PYTHON -c 'import sys; l = open(sys.argv[1]).readlines(); e = [i for i, x in enumerate(l) if "\"type\":\"epoch\"" in x]
l[e[0]], l[e[1]] = l[e[1]], l[e[0]]; open(sys.argv[1], "w").writelines(l)' "$3/log.jsonl"
$REPORT "$T/huge" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of huge numbers failed"; }
! grep -q Traceback "$T/rep" && grep -q "the summary's t_forward 1e+308, t_update -0.5 are out of range" "$T/rep" &&
    grep -q "$2log.jsonl: 1 epoch record without a number in range" "$T/rep" &&
    grep -q "$3log.jsonl: 1 epoch record out of order" "$T/rep" ||
    { cat "$T/rep"; fail "tools/report of numbers out of range"; }
# damaged point.json and status.json fields (a link of 5, a tail of 5): said, no traceback; a point whose
# axis values are another's; a results directory given twice
cp -r "$top_srcdir/tests/fixtures/report" "$T/types" && chmod -R u+w "$T/types"
set -- "$T"/types/*/
edit() { $PYTHON -c 'import json, sys; d = json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(d, open(sys.argv[1], "w"))' "$@"; }
edit "$1/point.json" 'd["link"] = 5' && edit "$2/status.json" 'd["tail"] = 5; d["exit"] = 1'
cp "$3/point.json" "$4/point.json"
$REPORT "$T/types" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of damaged point fields failed"; }
! grep -q Traceback "$T/rep" && grep -q "$1point.json: damaged (not what tools/sweep writes: link 5)" "$T/rep" &&
    grep -q "status.json's tail is not a list of lines" "$T/rep" &&
    grep -q "\($4\|$3\)point.json: damaged (not what tools/sweep writes: the axis values of \($(basename "$3")\|$(basename "$4")\))" "$T/rep" ||
    { cat "$T/rep"; fail "tools/report of damaged point fields"; }
rc=0
$REPORT "$T/types" "$T/types/" > "$T/rep" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "is given twice" "$T/rep" || { cat "$T/rep"; fail "tools/report of one directory twice: exit $rc"; }
# published times and bytes: less is better; the timing model's error: how close
cp -r "$top_srcdir/tests/fixtures/report" "$T/verdict" && chmod -R u+w "$T/verdict"
edit "$T/verdict/sweep.json" 'p = {"mode": "dsync", "ranks": "2"}
d["published"] = [dict(point=p, metric="ms_per_iter", value=0.001, text=""), dict(point=p, metric="time_to_target", value=100.0, text=""),
                  dict(point=p, metric="model_error", value=50.0, text="")]'
$REPORT --reproduction "$T/VERDICT.md" "$T/verdict" > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of lower-is-better claims failed"; }
grep -q "| ms_per_iter | 0.001  | 7.97 | not reproduced (7.97 higher) |" "$T/VERDICT.md" &&
    grep -q "| time_to_target | 100.0  | 3.[0-9]* | reproduced |" "$T/VERDICT.md" &&
    grep -q "| model_error | 50.0  | 14.[0-9]* | not reproduced (-36 points) |" "$T/VERDICT.md" ||
    { cat "$T/VERDICT.md"; fail "verdicts of times, and of the timing model's error"; }
# a run that only evaluated (a summary of 0 iterations): no speed, not the baseline; a log whose name
# has a '|' (a cell of its own in results.md) or a byte of no valid UTF-8 (shown as U+FFFD); the
# earlier report kept whole where this one cannot be written
mkdir -p "$T/names" && set -- $logs
sed '/"type":"summary"/{s/"iter":[0-9]*/"iter":0/;s/"samples_per_s":[0-9.e+]*/"samples_per_s":0/}' "$1" > "$T/names/eval.jsonl"
cp "$1" "$T/names/a|b.jsonl" && cp "$2" "$T/names/$(printf 'r\xe9sum\xe9').jsonl"
$REPORT "$T/names/eval.jsonl" "$T/names/a|b.jsonl" "$T/names/"r*.jsonl > "$T/rep" 2>&1 || { cat "$T/rep"; fail "tools/report of odd names failed"; }
grep -q '^| eval.jsonl | dsync | 2 | ok, evaluated only |  |  |  |' "$T/names/report/results.md" &&
    grep -q '^| a\\|b.jsonl | dsync | 2 | ok |  | [0-9]* | 1.00x |' "$T/names/report/results.md" &&
    grep -q $'^| r\xef\xbf\xbdsum\xef\xbf\xbd.jsonl | pipesgd | 2 | ok |' "$T/names/report/results.md" &&
    grep -q "baseline (speed-up 1.00x): the first that measured its speed, \`../a|b.jsonl\`" "$T/names/report/results.md" ||
    { cat "$T/rep" "$T/names/report/results.md"; fail "tools/report: an evaluation-only run, names with | and non-UTF-8 bytes"; }
cp -r "$T/names/report" "$T/names.before"
chmod a-w "$T/names/report"
if ! touch "$T/names/report/x" 2> /dev/null; then # not as root, who writes there all the same
    rc=0
    $REPORT "$T/names/eval.jsonl" "$T/names/a|b.jsonl" > "$T/rep" 2>&1 || rc=$?
    [ $rc -eq 1 ] && grep -q "Permission denied (the earlier report there is left as it was)" "$T/rep" &&
        diff -r "$T/names.before" "$T/names/report" > /dev/null || { cat "$T/rep"; fail "tools/report into a read-only report: exit $rc"; }
fi
chmod u+w "$T/names/report"
if [ "$(id -u)" = 0 ] && mkdir "$T/full" && mount -t tmpfs -o size=400k tmpfs "$T/full" 2> /dev/null; then
    cp $logs "$T/full/" 2> /dev/null; cp "$T/names/eval.jsonl" "$T/full/" # on a full disk: as it was, every PNG whole
    $REPORT "$T"/full/*.jsonl > "$T/rep" 2>&1 || { umount "$T/full"; cat "$T/rep"; fail "tools/report on the tmpfs failed"; }
    cp -r "$T/full/report" "$T/full.before"
    dd if=/dev/zero of="$T/full/filler" bs=4k 2> /dev/null
    rc=0
    $REPORT "$T"/full/*.jsonl > "$T/rep" 2>&1 || rc=$?
    same=$(diff -r "$T/full.before" "$T/full/report" > /dev/null && echo yes)
    umount "$T/full"
    [ $rc -eq 1 ] && grep -q "No space left on device (the earlier report there is left as it was)" "$T/rep" && [ "$same" = yes ] ||
        { cat "$T/rep"; fail "tools/report on a full disk: exit $rc, the earlier report same: ${same:-no}"; }
fi
# one results directory that cannot take its report: the others and the page all the same, exit 1
cp -r "$top_srcdir/tests/fixtures/report" "$T/m1" && cp -r "$top_srcdir/tests/fixtures/report" "$T/m2" && chmod -R u+w "$T/m1" "$T/m2"
rm -rf "$T/m1/report" "$T/m2/report" && touch "$T/m1/report"
rc=0
$REPORT --reproduction "$T/M.md" "$T/m1" "$T/m2" > "$T/rep" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "m1/report: not a directory" "$T/rep" && [ -s "$T/m2/report/results.md" ] && [ -s "$T/M.md" ] ||
    { cat "$T/rep"; fail "tools/report of an unwritable and a good directory: exit $rc"; }
echo PASS
