#!/usr/bin/env bash
# The sweep's orchestration against the simulated backend: fault isolation, timeouts, the
# journal and resume after SIGKILL, Ctrl-C, the regression rule of apply, no device, bench.
# usage: sweep_sim.sh KTUNE SIM_WORKER SPACE WORKDIR
set -u
ktune=$1 worker=$2 space=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fail=0
note() { echo "== $*"; }
bad() { echo "FAIL: $*"; fail=1; }
sweep() { # run-dir [extra args]
  local run=$1; shift
  "$ktune" sweep --space "$space" --worker "$worker" --run "$run" --registry-dir "$work/reg" \
    --config-timeout 1 "$@"
}
sweep_bg() { # run-dir log lines: the sweep in the background (pid in $pid), until its journal
  # holds that many lines
  KTUNE_SIM_DELAY_MS=40 "$ktune" sweep --space "$space" --worker "$worker" --run "$1" \
    --registry-dir "$work/reg" --config-timeout 1 >"$2" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    [ -f "$1/trials.csv" ] && [ "$(wc -l <"$1/trials.csv")" -ge "$3" ] && break
    sleep 0.05
  done
}
status_of() { grep -F "$1,$2," "$3/trials.csv" | cut -d, -f3; }
winners() { grep -E ',1,[0-9]+,' "$1/final.csv" | cut -d, -f1,2 | sort; }

note "a full sweep: every fault recorded, the sweep goes on"
sweep "$work/a" || bad "sweep a exited $?"
for n in 8 64 1000 4096; do
  [ "$(status_of "n=$n" good_tile1 "$work/a")" = ok ] || bad "n=$n good_tile1 not ok"
  [ "$(status_of "n=$n" crash_code11 "$work/a")" = failed ] || bad "n=$n crash not failed"
  [ "$(status_of "n=$n" hang_seconds3600 "$work/a")" = timeout ] || bad "n=$n hang not timeout"
  [ "$(status_of "n=$n" wrong_delta1 "$work/a")" = wrong ] || bad "n=$n wrong not wrong"
  [ "$(status_of "n=$n" oom_mb1 "$work/a")" = failed ] || bad "n=$n oom not failed"
done
grep -q "crash_code11,failed,.*signal 11" "$work/a/trials.csv" || bad "the crash does not name its signal"
grep -q "oom_mb1,failed,.*out of memory" "$work/a/trials.csv" || bad "out of memory not named"
[ "$(status_of n=8 good_tile16 "$work/a")" = invalid ] || bad "n=8 good_tile16 not invalid"
expected=$'n=1000,good_tile32\nn=4096,good_tile32\nn=64,good_tile8\nn=8,good_tile2'
[ "$(winners "$work/a")" = "$expected" ] || bad "winners: $(winners "$work/a")"
rows=$(($(wc -l <"$work/a/trials.csv") - 1))
[ "$rows" -eq 40 ] || bad "trials.csv has $rows rows, expected 10 configs x 4 shapes"
grep -q '^search: "staged"' "$work/a/meta.yaml" || bad "the default search is not staged"
grep -q 'in timed samples: sweep overhead [0-9.]*%' "$work/a/summary.txt" || bad "no overhead in the summary"

note "a run resumes only with the search it was made with"
sweep "$work/a" --search exhaustive >"$work/a2.log" 2>&1 && bad "an exhaustive resume of a staged run went on"
grep -q "made with --search staged; resume it with the same command" "$work/a2.log" || bad "no word on the search"
"$ktune" sweep --space "$space" --worker "$worker" --run "$work/x" --search thorough >"$work/x.log" 2>&1
[ $? -eq 2 ] && grep -q "'thorough' is neither staged nor exhaustive" "$work/x.log" || bad "--search thorough"
[ ! -e "$work/x" ] || bad "a bad --search wrote a run folder"

note "killed with SIGKILL half-way, the same command resumes and ends with the same winners"
sweep_bg "$work/b" "$work/b.log" 15
kill -9 $pid
wait $pid 2>/dev/null
before=$(($(wc -l <"$work/b/trials.csv") - 1))
[ "$before" -lt 40 ] || bad "the sweep finished before it was killed"
sweep "$work/b" || bad "resumed sweep exited $?"
[ "$(winners "$work/b")" = "$expected" ] || bad "resumed winners: $(winners "$work/b")"
dups=$(tail -n +2 "$work/b/trials.csv" | cut -d, -f1,2 | sort | uniq -d | wc -l)
[ "$dups" -eq 0 ] || bad "$dups trials measured twice after the resume"
rows=$(($(wc -l <"$work/b/trials.csv") - 1))
[ "$rows" -eq 40 ] || bad "resumed trials.csv has $rows rows"
echo "killed after $before of 40 trials; resumed to 40"

note "Ctrl-C stops cleanly, exit 130, the journal intact"
sweep_bg "$work/c" "$work/c.log" 10
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || bad "interrupted sweep exited $rc, not 130"
grep -q "interrupted" "$work/c.log" || bad "no word of the interrupt"
tail -c1 "$work/c/trials.csv" | od -c | grep -q '\\n' || bad "journal does not end with a newline"
sweep "$work/c" >/dev/null 2>&1 || bad "sweep c did not resume"
[ "$(winners "$work/c")" = "$expected" ] || bad "winners after Ctrl-C and resume"

note "--seed shuffles reproducibly; --max-configs-without-improvement stops a shape early"
sweep "$work/s1" --seed 7 --max-configs-without-improvement 2 >"$work/s1.log" 2>&1 || bad "seeded sweep"
sweep "$work/s2" --seed 7 --max-configs-without-improvement 2 >/dev/null 2>&1 || bad "seeded sweep again"
sweep "$work/s3" --seed 8 >/dev/null 2>&1 || bad "sweep with another seed"
[ "$(cut -d, -f1,2 "$work/s1/trials.csv")" = "$(cut -d, -f1,2 "$work/s2/trials.csv")" ] || bad "the same seed gave another order"
[ "$(cut -d, -f1,2 "$work/s1/trials.csv")" != "$(cut -d, -f1,2 "$work/s3/trials.csv" | head -n "$(wc -l <"$work/s1/trials.csv")")" ] || bad "another seed gave the same order"
n1=$(($(wc -l <"$work/s1/trials.csv") - 1))
[ "$n1" -lt 40 ] || bad "early stop tried all $n1 trials"
grep -q "skipped (early stop" "$work/s1.log" || bad "no word of the skipped trials"
grep -q "^seed: 7" "$work/s1/meta.yaml" || bad "the seed is not in the metadata"
grep -q "GPU at the end" "$work/s1/summary.txt" || bad "no summary.txt"
# the default is measured first whatever the order, so the final round always has it
for n in 8 64 1000 4096; do
  grep -q "^n=$n,good_tile1,[0-9]*,[0-9]*,[0-9.]*,[0-9.]*,1," "$work/s1/final.csv" ||
    bad "n=$n: the early-stopped search left the default out of the final round"
done
echo "early stop: $n1 of 40 trials"

note "--shard i/N on two machines, then ktune merge: the same winners as one sweep"
sweep "$work/sh0" --shard 0/2 >/dev/null 2>&1 || bad "shard 0/2"
sweep "$work/sh1" --shard 1/2 >/dev/null 2>&1 || bad "shard 1/2"
[ "$(($(wc -l <"$work/sh0/trials.csv") - 1))" -eq 20 ] || bad "shard 0/2 did not measure half the trials"
"$ktune" merge "$work/merged" "$work/sh0" "$work/sh1" --space "$space" || bad "merge"
[ "$(winners "$work/merged")" = "$expected" ] || bad "merged winners: $(winners "$work/merged")"
[ "$(($(wc -l <"$work/merged/trials.csv") - 1))" -eq 40 ] || bad "merged trials"
"$ktune" merge "$work/merged2" "$work/sh0" "$space" --space "$space" >/dev/null 2>&1 && bad "merge took a file for a run"

note "--gpus: one worker a GPU, merged deterministically"
sweep "$work/mg" --gpus 0,1 >"$work/mg.log" 2>&1 || bad "--gpus sweep"
[ -d "$work/mg/gpu0" ] && [ -d "$work/mg/gpu1" ] || bad "no run folder a GPU"
[ "$(winners "$work/mg")" = "$expected" ] || bad "--gpus winners: $(winners "$work/mg")"
[ "$(tail -n +2 "$work/mg/final.csv")" = "$(tail -n +2 "$work/merged/final.csv")" ] || bad "--gpus and a manual merge differ"
grep -q '^gpu: 1$' "$work/mg/gpu1/meta.yaml" &&
  grep -q '^gpu_uuid: "GPU-00000000-0000-0000-0000-000000000001"$' "$work/mg/gpu1/meta.yaml" ||
  bad "a GPU's run does not name its GPU"
for g in 0 1; do # the merged metadata: each GPU's run, its GPU and the GPU's state
  grep -q "^  - {name: \"gpu$g\", shard: \"$g/2\", gpu: \"$g\", gpu_uuid: \"GPU-00000000-0000-0000-0000-00000000000$g\", gpu_state_start: " "$work/mg/meta.yaml" ||
    bad "the merged meta.yaml does not list GPU $g's run"
  grep -q "^\[$work/mg/gpu$g\] ktune: .*GPU at the end" "$work/mg/summary.txt" ||
    bad "the merged summary.txt lacks GPU $g's run"
done
grep -q '^shard:' "$work/mg/meta.yaml" && bad "the merged meta.yaml names one shard"
grep -q '^name: "mg"$' "$work/mg/meta.yaml" || bad "the merged meta.yaml is not named after its folder"

note "ktune merge of merged runs (two machines' --gpus runs): one list of every GPU's run"
"$ktune" merge "$work/mm" "$work/mg" "$work/merged" --space "$space" >/dev/null 2>&1 || bad "merge of merged runs"
[ "$(grep -c '^  - {name: ' "$work/mm/meta.yaml")" -eq 4 ] || bad "the merge of merged runs lists: $(grep -A5 '^merged:' "$work/mm/meta.yaml")"
[ "$(grep -c '^merged:' "$work/mm/meta.yaml")" -eq 1 ] || bad "the merge of merged runs has two lists"
"$ktune" apply "$work/mm" --registry-dir "$work/reg-mm" --space "$space" >/dev/null 2>&1 ||
  bad "apply of a merge of merged runs"

note "--gpus 0,0: two workers on one GPU, each in its own run folder"
sweep "$work/m00" --gpus 0,0 >"$work/m00.log" 2>&1 || bad "--gpus 0,0 sweep"
[ -d "$work/m00/gpu0" ] && [ -d "$work/m00/gpu0-2" ] || bad "--gpus 0,0: not a run folder a worker"
[ "$(winners "$work/m00")" = "$expected" ] || bad "--gpus 0,0 winners: $(winners "$work/m00")"
sweep "$work/m65" --gpus "$(seq -s, 0 64)" >"$work/m65.log" 2>&1 && bad "--gpus took 65 devices"
grep -q "names more than 64 devices" "$work/m65.log" || bad "--gpus of 65 devices: $(cat "$work/m65.log")"

note "--gpus: a worker killed on one GPU; that GPU's sweep records it and goes on, the other's is untouched"
KTUNE_SIM_DELAY_MS=40 sweep "$work/mk" --gpus 0,1 >"$work/mk.log" 2>&1 &
pid=$!
killed=
for _ in $(seq 200); do # the worker of GPU 1, once it has answered a few trials
  if [ -f "$work/mk/gpu1/trials.csv" ] && [ "$(wc -l <"$work/mk/gpu1/trials.csv")" -ge 4 ]; then
    for p in /proc/[0-9]*; do
      c=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)
      if [[ $c == "$worker "*" --device 1 "* ]]; then
        kill -9 "${p#/proc/}" 2>/dev/null && killed=${p#/proc/} && break
      fi
    done
  fi
  [ -n "$killed" ] && break
  sleep 0.05
done
wait $pid || bad "--gpus with a killed worker exited $?"
[ -n "$killed" ] || bad "found no worker of GPU 1 to kill"
restarts() { grep -o 'worker restarts [0-9]*' "$1/summary.txt" | grep -o '[0-9]*$'; }
r0=$(restarts "$work/mk/gpu0") r1=$(restarts "$work/mk/gpu1")
# GPU 0 as in the same sweep without the kill (mg); GPU 1 restarted its worker, recorded the
# trial it killed, or neither where the kill took a worker its sweep was ending anyway (a hanging
# config's), so only its completeness is asserted
[ "$r0" -eq "$(restarts "$work/mg/gpu0")" ] ||
  bad "restarts: GPU 0 $r0, GPU 1 $r1; without the kill $(restarts "$work/mg/gpu0") and $(restarts "$work/mg/gpu1")"
grep -q "signal 9" "$work/mk/gpu0/trials.csv" && bad "GPU 0 recorded GPU 1's kill"
for g in 0 1; do
  [ "$(($(wc -l <"$work/mk/gpu$g/trials.csv") - 1))" -eq 20 ] || bad "GPU $g's run lacks trials"
done
[ "$(($(wc -l <"$work/mk/trials.csv") - 1))" -eq 40 ] || bad "the merged run lacks trials"
echo "worker restarts: GPU 0 $r0, GPU 1 $r1 (its worker $killed killed)"

note "budgets: a shape's and the run's"
KTUNE_SIM_DELAY_MS=100 sweep "$work/bs" --shape-budget 0.25 >"$work/bs.log" 2>&1 || bad "shape budget sweep"
n=$(($(wc -l <"$work/bs/trials.csv") - 1))
[ "$n" -lt 40 ] || bad "the shape budget skipped nothing ($n trials)"
for n in 8 64 1000 4096; do
  grep -q "^n=$n,good_tile1,[0-9]*,[0-9]*,[0-9.]*,[0-9.]*,1," "$work/bs/final.csv" ||
    bad "n=$n: the shape budget left the default out of the final round"
done
KTUNE_SIM_DELAY_MS=100 sweep "$work/br" --budget 0.5 >"$work/br.log" 2>&1
rc=$?
[ $rc -eq 3 ] || bad "a spent run budget exited $rc, not 3"
grep -q "run budget spent" "$work/br.log" || bad "no word of the spent budget"
sweep "$work/br" >/dev/null 2>&1 || bad "the budgeted run did not resume"
[ "$(winners "$work/br")" = "$expected" ] || bad "winners after the budget and resume"
echo "shape budget: $n of 40 trials"

note "the keys a program ran untuned: --untuned FILE sweeps those, each once"
printf '# keys as KTUNE_UNTUNED_FILE records them\nsim n=100\nother n=5\nsim n=100\nsim n=3000\n' >"$work/untuned.txt"
sweep "$work/u" --untuned "$work/untuned.txt" >"$work/u.log" 2>&1 || bad "sweep --untuned exited $?"
shapes=$(cut -d, -f1 "$work/u/trials.csv" | tail -n +2 | sort -u | tr '\n' ' ')
[ "$shapes" = "n=100 n=3000 " ] || bad "sweep --untuned measured '$shapes', not n=100 and n=3000"
echo "untuned: $shapes"

note "apply: new keys, then the regression rule"
"$ktune" apply "$work/a" --space "$space" --registry-dir "$work/reg" || bad "apply a"
reg="$work/reg/ktune-simulated-gpu/sim.yaml"
[ -f "$reg" ] && [ -f "${reg%.yaml}.h" ] || bad "no registry or header"
[ "$(grep -c 'config:' "$reg")" -eq 4 ] || bad "registry does not hold 4 entries"
sum=$(md5sum <"$reg")
"$ktune" apply "$work/a" --space "$space" --registry-dir "$work/reg" || bad "apply a again"
[ "$sum" = "$(md5sum <"$reg")" ] || bad "applying the same run twice changed the registry"
# with a registry, the committed config is measured first too (after the default)
sweep "$work/c1" --seed 7 --max-configs-without-improvement 1 >/dev/null 2>&1 || bad "seeded sweep with a registry"
for n in 8 64 1000 4096; do
  grep -q "^n=$n,[a-z_0-9]*,[0-9]*,[0-9]*,[0-9.]*,[0-9.]*,[01],1$" "$work/c1/final.csv" ||
    bad "n=$n: the early-stopped search left the committed config out of the final round"
done
# good_tile4 becomes 0.5% faster than the committed good_tile8 at n=64: within the noise
KTUNE_SIM_BONUS=good_tile4:0.905 sweep "$work/d" >/dev/null 2>&1 || bad "sweep d"
"$ktune" apply "$work/d" --space "$space" --registry-dir "$work/reg" >"$work/d.log" 2>&1 || bad "apply d"
grep -q "n: 64, config: good_tile8" "$reg" || bad "a win within the noise replaced the committed config"
grep -q "keeps good_tile8 .*not faster beyond" "$work/d.log" || bad "apply d does not say why it kept"
"$ktune" apply "$work/d" --space "$space" --registry-dir "$work/reg" --force >/dev/null 2>&1 || bad "apply d --force"
grep -q "n: 64, config: good_tile4" "$reg" || bad "--force did not replace"
"$ktune" apply "$work/a" --space "$space" --registry-dir "$work/reg" --force >/dev/null 2>&1
grep -q "n: 64, config: good_tile8" "$reg" || bad "apply a --force did not restore good_tile8"
# the default 0.4% faster than the committed good_tile8 at n=64, within the noise: the default stays
# unless beaten beyond it, and the committed config did not beat it at all
KTUNE_SIM_BONUS=good_tile1:0.304 sweep "$work/k" >/dev/null 2>&1 || bad "sweep k"
"$ktune" apply "$work/k" --space "$space" --registry-dir "$work/reg" >"$work/k.log" 2>&1 || bad "apply k"
grep -q "n: 64, config: good_tile1" "$reg" || bad "a committed config slower than the default was kept"
grep -q "takes good_tile1 (the committed good_tile8 at 20.000 us in this run, the default at 19.912)" \
  "$work/k.log" || bad "apply k does not say why it took the default"
"$ktune" apply "$work/a" --space "$space" --registry-dir "$work/reg" --force >/dev/null 2>&1
grep -q "n: 64, config: good_tile8" "$reg" || bad "apply a --force did not restore good_tile8"
# the seed's --force-retune: the sweep applies its winners as apply --force does
KTUNE_SIM_BONUS=good_tile4:0.905 sweep "$work/f" --force-retune >"$work/f.log" 2>&1 || bad "sweep --force-retune"
grep -q "n: 64, config: good_tile4" "$reg" || bad "--force-retune did not take the new winner"
"$ktune" apply "$work/a" --space "$space" --registry-dir "$work/reg" --force >/dev/null 2>&1
# good_tile8 0.3% faster than good_tile4 at n=64 ties with it: the run picks the first declared
KTUNE_SIM_BONUS=good_tile4:0.912 sweep "$work/t" >/dev/null 2>&1 || bad "sweep t"
grep -q "^n=64,good_tile4,1," "$work/t/final.csv" || bad "a tie within the noise did not go to the first declared config"
grep -q "^n=64,good_tile8,2,.*,20.0000," "$work/t/final.csv" || bad "the faster of a tie is not second"
# now a clear win: twice as fast
KTUNE_SIM_BONUS=good_tile4:0.5 sweep "$work/e" >/dev/null 2>&1 || bad "sweep e"
"$ktune" apply "$work/e" --space "$space" --registry-dir "$work/reg" >"$work/e.log" 2>&1 || bad "apply e"
grep -q "n: 64, config: good_tile4" "$reg" || bad "a clear win did not replace"
grep -q "n: 1000, config: good_tile32" "$reg" || bad "an unchanged key changed"
"$ktune" emit --space "$space" --registry-dir "$work/reg" --check || bad "header out of sync"
# a run three times slower with the same winners changes nothing
sum=$(md5sum <"$reg")
KTUNE_SIM_SCALE=3 KTUNE_SIM_BONUS=good_tile4:0.5 sweep "$work/f" >/dev/null 2>&1 || bad "sweep f"
"$ktune" apply "$work/f" --space "$space" --registry-dir "$work/reg" >"$work/f.log" 2>&1 || bad "apply f"
grep -q "n: 64, config: good_tile4" "$reg" || bad "a slower run worsened n=64"
[ "$sum" = "$(md5sum <"$reg")" ] || bad "a run with the same winners changed the registry"
cat "$work/f.log"

note "the final round re-measures the fastest, those within --final-margin, the default and the committed config"
cat >"$work/margin.yaml" <<'EOF'
family: sim
key:
  - {name: n}
variants:
  good:
    params:
      tile: [1, 2, 4, 8, 16, 32]
  slow:
    params:
      tile: [4, 8]
defaults:
  - {variant: good, tile: 1}
shapes:
  - list:
      - {n: 64}
EOF
block() { cut -d, -f2,3,5 "$1/final.csv" | tail -n +2 | tr '\n' ' '; }
# n=64: good_tile8 20 us, good_tile4 22, good_tile16 28, slow_tile8 30, the default good_tile1
# 65.5; the final round's times are told apart by a factor of 1.01
KTUNE_SIM_FINAL_SCALE=1.01 "$ktune" sweep --space "$work/margin.yaml" --worker "$worker" \
  --run "$work/m1" --registry-dir "$work/reg-m" >/dev/null 2>&1 || bad "sweep m1"
want="good_tile8,1,20.2000 good_tile1,2,66.1550 slow_tile8,3,30.0000 "
[ "$(block "$work/m1")" = "$want" ] || bad "margin 0.05: $(block "$work/m1")"
grep -q '^final_margin: 0.05' "$work/m1/meta.yaml" || bad "the margin is not in the metadata"
KTUNE_SIM_FINAL_SCALE=1.01 "$ktune" sweep --space "$work/margin.yaml" --worker "$worker" \
  --run "$work/m2" --registry-dir "$work/reg-m" --final-margin 0.5 --top 3 >/dev/null 2>&1 || bad "sweep m2"
want="good_tile8,1,20.2000 good_tile4,2,22.2200 good_tile16,3,28.2800 slow_tile8,4,30.3000 good_tile1,5,66.1550 "
[ "$(block "$work/m2")" = "$want" ] || bad "margin 0.5, top 3: $(block "$work/m2")"
# kernels of a fraction of a microsecond (times x 0.004): within 0.15 us of the fastest, at most 6
KTUNE_SIM_SCALE=0.004 KTUNE_SIM_FINAL_SCALE=1.02 "$ktune" sweep --space "$work/margin.yaml" \
  --worker "$worker" --run "$work/m5" --registry-dir "$work/reg-m" >/dev/null 2>&1 || bad "sweep m5"
want="good_tile8,1,0.0816 good_tile4,2,0.0898 good_tile16,3,0.1142 slow_tile8,4,0.1224 slow_tile4,5,0.1346 good_tile2,6,0.1428 good_tile1,7,0.2672 "
[ "$(block "$work/m5")" = "$want" ] || bad "the 0.15 us floor: $(block "$work/m5")"
# with the registry of the runs above, where good_tile4 is n=64's committed config
KTUNE_SIM_FINAL_SCALE=1.01 "$ktune" sweep --space "$work/margin.yaml" --worker "$worker" \
  --run "$work/m4" --registry-dir "$work/reg" >/dev/null 2>&1 || bad "sweep m4"
want="good_tile8,1,20.2000 good_tile4,2,22.2200 good_tile1,3,66.1550 slow_tile8,4,30.0000 "
[ "$(block "$work/m4")" = "$want" ] || bad "the committed config: $(block "$work/m4")"
"$ktune" sweep --space "$work/margin.yaml" --worker "$worker" --run "$work/m3" \
  --screen-cut 0.5 >"$work/m3.log" 2>&1 && bad "--screen-cut 0.5 was taken"
grep -q "screen-cut: 0.5 would cut the fastest config" "$work/m3.log" || bad "no word on --screen-cut 0.5"

note "apply: a kept entry gains the runner-ups of variants it did not name, at the record's scale"
# a table swept before the space had slow_tile*, then a run of twice the times with it
head -n "$(grep -n '^  slow:' "$work/margin.yaml" | cut -d: -f1)" "$work/margin.yaml" | head -n -1 >"$work/good_only.yaml"
sed -n '/^defaults:/,$p' "$work/margin.yaml" >>"$work/good_only.yaml"
"$ktune" sweep --space "$work/good_only.yaml" --worker "$worker" --run "$work/w1" \
  --registry-dir "$work/reg-w" --apply >/dev/null 2>&1 || bad "sweep w1"
regw="$work/reg-w/ktune-simulated-gpu/sim.yaml"
grep -q "n: 64, config: good_tile8, us: 20.000" "$regw" || bad "w1: $(grep 'n: 64' "$regw")"
grep "n: 64" "$regw" | grep -q slow && bad "w1 named a variant its space has not"
KTUNE_SIM_SCALE=2 "$ktune" sweep --space "$work/margin.yaml" --worker "$worker" --run "$work/w2" \
  --registry-dir "$work/reg-w" >/dev/null 2>&1 || bad "sweep w2"
"$ktune" apply "$work/w2" --space "$work/margin.yaml" --registry-dir "$work/reg-w" >"$work/w2.log" 2>&1 ||
  bad "apply w2"
cat "$work/w2.log"
grep -q "n=64: good_tile8 gains the runner-up slow_tile8 at 30.000 us (60.000 in this run)" "$work/w2.log" ||
  bad "apply w2 does not say what the entry gained"
grep -q "0 added, 0 replaced, 1 kept (0 of them with this run's time, 1 with runner-ups of variants" \
  "$work/w2.log" || bad "apply w2's counts"
grep "n: 64" "$regw" | grep -q "config: good_tile8, us: 20.000, .*{config: slow_tile8, us: 30.000}" ||
  bad "the kept entry: $(grep 'n: 64' "$regw")"
"$ktune" emit --space "$work/margin.yaml" --registry-dir "$work/reg-w" --check || bad "header out of sync after widening"
sum=$(md5sum <"$regw")
"$ktune" apply "$work/w2" --space "$work/margin.yaml" --registry-dir "$work/reg-w" >/dev/null 2>&1 || bad "apply w2 again"
[ "$sum" = "$(md5sum <"$regw")" ] || bad "applying the same run twice widened the entry twice"

note "no device: a clear message, nothing written"
before=$(find "$work/reg" -type f | xargs md5sum)
KTUNE_SIM_NO_DEVICE=1 sweep "$work/g" --apply >"$work/g.log" 2>&1
rc=$?
cat "$work/g.log"
[ $rc -eq 4 ] || bad "no device: exit $rc, not 4"
grep -q "no GPU to sweep on" "$work/g.log" || bad "no device: no clear message"
[ ! -e "$work/g" ] || bad "no device: a run folder was made"
KTUNE_SIM_NO_DEVICE=1 sweep "$work/g" --gpus 0,1 --apply >"$work/g2.log" 2>&1
rc=$?
[ $rc -eq 4 ] || bad "no device, --gpus: exit $rc, not 4"
[ ! -e "$work/g" ] || bad "no device, --gpus: a run folder was made"
for cmd in verify bench; do
  KTUNE_SIM_NO_DEVICE=1 "$ktune" $cmd --space "$space" --worker "$worker" --registry-dir "$work/reg" \
    --out "$work/nodev.csv" >"$work/g3.log" 2>&1
  rc=$?
  [ $rc -eq 4 ] || bad "no device, $cmd: exit $rc, not 4"
  grep -q "no GPU to $cmd on: .*no usable CUDA device 0" "$work/g3.log" || bad "no device, $cmd: no clear message"
done
[ "$before" = "$(find "$work/reg" -type f | xargs md5sum)" ] || bad "no device: the registry changed"

note "verify: the committed table re-measured, the performance gate"
# the committed times were taken with good_tile4 at 0.5 (run e): the same device as then
KTUNE_SIM_BONUS=good_tile4:0.5 "$ktune" verify --space "$space" --worker "$worker" --registry-dir "$work/reg" >"$work/v1.log" 2>&1
rc=$?
cat "$work/v1.log"
[ $rc -eq 0 ] || bad "verify of an unchanged device failed ($rc)"
# a runner-up recorded under other constraints (good_tile16 cannot run n = 8) is no reference
rm -rf "$work/reg-stale" && cp -r "$work/reg" "$work/reg-stale"
sed -i 's/{n: 8, \(.*\)runner_ups: \[{config: good_tile2,/{n: 8, \1runner_ups: [{config: good_tile16,/' \
  "$work/reg-stale/ktune-simulated-gpu/sim.yaml"
grep -q "n: 8, .*{config: good_tile16," "$work/reg-stale/ktune-simulated-gpu/sim.yaml" || bad "no stale runner-up made"
KTUNE_SIM_BONUS=good_tile4:0.5 "$ktune" verify --space "$space" --worker "$worker" --registry-dir "$work/reg-stale" >"$work/v1s.log" 2>&1 ||
  bad "verify with a runner-up invalid on the device failed: $(grep FAILED "$work/v1s.log")"
# good_tile4 now 20% slower
KTUNE_SIM_BONUS=good_tile4:0.6 "$ktune" verify --space "$space" --worker "$worker" --registry-dir "$work/reg" >"$work/v2.log" 2>&1
rc=$?
cat "$work/v2.log"
[ $rc -eq 5 ] || bad "verify of a 20% slower entry exited $rc, not 5"
grep -q "n=64 .*good_tile4 .*SLOWER" "$work/v2.log" || bad "verify does not name the slower entry"
KTUNE_SIM_BONUS=good_tile4:0.6 "$ktune" verify --space "$space" --worker "$worker" --registry-dir "$work/reg" --threshold 25 >/dev/null 2>&1 ||
  bad "verify failed within a 25% threshold"

note "verify --fresh: an entry's time does not follow what its worker measured before"
# good_tile4 20% slower in a worker that measured another key first: in one worker, the entries of
# good_tile4 after the first look slower (measured again in fresh workers, they pass); with
# --fresh every entry is first in its workers
KTUNE_SIM_HISTORY=good_tile4:1.2 KTUNE_SIM_BONUS=good_tile4:0.5 "$ktune" verify --seed 7 \
  --space "$space" --worker "$worker" --registry-dir "$work/reg" >"$work/v3.log" 2>&1 ||
  bad "verify of entries slower only after another key failed: $(grep SLOWER "$work/v3.log")"
cat "$work/v3.log"
grep -q "good_tile4 .*ok (so is the reference, or not again)" "$work/v3.log" ||
  bad "verify in one worker did not find a good_tile4 entry slower"
grep -q "recorded vs now: 4 of 4 within" "$work/v3.log" && bad "verify in one worker: no entry differs"
KTUNE_SIM_HISTORY=good_tile4:1.2 KTUNE_SIM_BONUS=good_tile4:0.5 "$ktune" verify --seed 7 --fresh \
  --space "$space" --worker "$worker" --registry-dir "$work/reg" >"$work/v4.log" 2>&1 ||
  bad "verify --fresh failed"
cat "$work/v4.log"
grep -q "every entry alone): 4 entries compared (4 alone), 0 slower .*(0 looked slower.*; 4 fresh" \
  "$work/v4.log" || bad "verify --fresh: not 4 entries alone, none slower"
grep -q "recorded vs now: 4 of 4 within 3%" "$work/v4.log" || bad "verify --fresh: an entry differs"

note "a key of a few microseconds: the sweep records it alone, as verify re-measures it"
# good_tile8 20% slower in a worker that measured another key first: n=64's winner (8 us, swept
# after n=8) is timed alone at the end of its final round, and verify, measuring it alone too,
# agrees; n=1000 and n=4096 (32 and 70 us) stay with the sweep's worker. The space of the good
# configs only: no crash restarts the worker between keys, so it keeps its history
good_space="$(dirname "$space")/sim-good.yaml"
KTUNE_SIM_SCALE=0.4 KTUNE_SIM_HISTORY=good_tile8:1.2 "$ktune" sweep --space "$good_space" \
  --worker "$worker" --run "$work/al" --registry-dir "$work/reg-al" --config-timeout 1 \
  >"$work/al.log" 2>&1 || bad "sweep al exited $?"
grep -q "^n=64,good_tile8,1,[0-9]*,8.0000," "$work/al/final.csv" ||
  bad "n=64 not recorded alone: $(grep "^n=64," "$work/al/final.csv")"
"$ktune" apply "$work/al" --space "$good_space" --registry-dir "$work/reg-al" >/dev/null 2>&1 || bad "apply al"
KTUNE_SIM_SCALE=0.4 KTUNE_SIM_HISTORY=good_tile8:1.2 "$ktune" verify --seed 3 --space "$good_space" \
  --worker "$worker" --registry-dir "$work/reg-al" >"$work/v5.log" 2>&1 || bad "verify of reg-al failed"
cat "$work/v5.log"
grep -q "4 entries compared (2 alone), 0 slower" "$work/v5.log" || bad "verify: not 2 of 4 alone"
grep -q "recorded vs now: 4 of 4 within 3%" "$work/v5.log" || bad "verify: an entry recorded alone differs"
# a second sweep over that table, in which good_tile4 wins n=64: the committed good_tile8, which
# apply weighs against the winner, is timed alone with it (8 us, not its worker's 9.6)
KTUNE_SIM_SCALE=0.4 KTUNE_SIM_HISTORY=good_tile8:1.2 KTUNE_SIM_BONUS=good_tile4:0.5 "$ktune" sweep \
  --space "$good_space" --worker "$worker" --run "$work/al2" --registry-dir "$work/reg-al" \
  --config-timeout 1 >"$work/al2.log" 2>&1 || bad "sweep al2 exited $?"
grep -q "^n=64,good_tile4,1,3,4.4000," "$work/al2/final.csv" || bad "al2: good_tile4 does not win n=64"
grep -q "^n=64,good_tile8,[0-9],3,8.0000,.*,0,1$" "$work/al2/final.csv" ||
  bad "al2: the committed config not timed alone: $(grep "^n=64,good_tile8," "$work/al2/final.csv")"
# bench: n=64's row (after n=8's in the bench's worker) benched alone too: its record's 8 us
KTUNE_SIM_SCALE=0.4 KTUNE_SIM_HISTORY=good_tile8:1.2 "$ktune" bench --space "$good_space" \
  --worker "$worker" --registry-dir "$work/reg-al" --out "$work/bench-al.csv" >"$work/bench-al.log" 2>&1 ||
  bad "bench of reg-al failed"
grep -q "4 shapes (2 alone)" "$work/bench-al.log" || bad "bench: not 2 of 4 rows alone"
grep -q '^sim,-,64,good_tile8,8.0000,' "$work/bench-al.csv" ||
  bad "bench: n=64 not benched alone: $(grep "^sim,-,64," "$work/bench-al.csv")"
# every row against the one copy ceiling the bench's worker measured (n=8's, its first key)
[ "$(cut -d, -f13 "$work/bench-al.csv" | tail -n +2 | sort -u)" = "3008.0" ] ||
  bad "bench: rows against different copy ceilings: $(cut -d, -f13 "$work/bench-al.csv" | tr '\n' ' ')"

note "apply: a kept entry takes a faster time of its config, never a slower one"
# the same winners, twice as fast (run f, three times slower, changed nothing above)
KTUNE_SIM_SCALE=0.5 KTUNE_SIM_BONUS=good_tile4:0.5 sweep "$work/h" >/dev/null 2>&1 || bad "sweep h"
"$ktune" apply "$work/h" --space "$space" --registry-dir "$work/reg" >"$work/h.log" 2>&1 || bad "apply h"
cat "$work/h.log"
grep -q "n=64: good_tile4's recorded time 11.000 -> 5.500 us" "$work/h.log" || bad "a faster kept time was not taken"
grep -q "warning: n=64: good_tile4 re-measured at 5.500 us, -50.0%" "$work/h.log" || bad "a far re-measurement was not reported"
grep -q "n: 64, config: good_tile4, us: 5.5" "$reg" || bad "the registry does not hold the faster time"
"$ktune" emit --space "$space" --registry-dir "$work/reg" --check || bad "header out of sync after a refresh"

note "bench: the CSV a family's bench writes"
"$ktune" bench --space "$space" --worker "$worker" --registry-dir "$work/reg" --out "$work/bench.csv" >"$work/bench.log" || bad "bench"
cat "$work/bench.log"
head -1 "$work/bench.csv" | grep -q '^family,dtype,shape,config,tuned_us,default_us,anchor,anchor_us,gbps,pct_of_ceiling.*,variants,vendors$' || bad "bench CSV header"
[ "$(($(wc -l <"$work/bench.csv") - 1))" -eq 4 ] || bad "bench CSV rows"
# the simulated worker's two vendor paths: n/8 and n/4 us; the first is the anchor
grep -q '^sim,-,64,.*,sim_blas,8.0000,.*,sim_blas=8.0000 sim_blas_wide=16.0000$' "$work/bench.csv" || bad "bench CSV: the vendor paths of n=64"
grep -q 'tuned vs sim_blas [0-9.]*x (geomean of 4); tuned vs sim_blas_wide [0-9.]*x (geomean of 4)' "$work/bench.log" || bad "bench summary: a geomean a vendor path"
grep -q "slower than the family's default" "$work/bench.log" && bad "bench warned of a table whose entries beat the default"
# entries that now run five times slower (good_tile4, n=8's and n=64's: 40 and 110 us, the
# default 9.5 and 65.5): counted, the worst named with the command that re-tunes it
KTUNE_SIM_BONUS=good_tile4:5 "$ktune" bench --space "$space" --worker "$worker" --registry-dir "$work/reg" --out "$work/bench5.csv" >"$work/bench5.log" || bad "bench of stale entries"
grep -q "warning: 2 of 4 entries ran slower than the family's default beyond the noise (the worst 0.237x).*ktune sweep sim --key 'n=8' --force-retune" "$work/bench5.log" || bad "bench did not name the entries slower than the default"
exit $fail
