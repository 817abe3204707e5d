#!/usr/bin/env bash
# A sweep over deliberately faulting configs on the GPU: every fault is recorded, the sweep goes on.
# usage: sweep_faults.sh KTUNE FAULT_WORKER SPACE WORKDIR
set -u
ktune=$1 worker=$2 space=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$ktune" sweep --space "$space" --worker "$worker" --run "$work/run" --registry-dir "$work/reg" \
  --config-timeout 5 --samples 3 --min-sample-us 50
rc=$?
if [ $rc -eq 4 ]; then echo "no GPU: skipped"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: sweep exited $rc"; exit 1; }
fail=0
run=$work/run
expect() { # key config status [detail regex]: a row of $run's trials
  line=$(grep -F "$1,$2," "$run/trials.csv")
  st=$(echo "$line" | cut -d, -f3)
  if [ "$st" != "$3" ] || ! echo "$line" | grep -Eq "${4:-.}"; then
    echo "FAIL: $1 $2: expected $3${4:+ ($4)}, got: $line"; fail=1
  else
    echo "ok: $1 $2: $line"
  fi
}
for n in 1000 5000; do
  expect "n=$n" kernel_mode0 ok
  expect "n=$n" kernel_mode1 failed "illegal|context lost|signal"
  expect "n=$n" kernel_mode2 timeout "no answer"
  expect "n=$n" kernel_mode3 wrong "element"
done
grep -q "kernel_mode0,1," "$work/run/final.csv" || { echo "FAIL: kernel_mode0 did not win"; fail=1; }
# A config that leaves half its output unwritten, checked right after a correct one in the same
# window: the output must have been poisoned again between the two checks.
space=$(dirname "$space")/faults_unwritten.yaml run=$work/unwritten
"$ktune" sweep --space "$space" --worker "$worker" --run "$run" --registry-dir "$work/reg" \
  --config-timeout 5 --samples 3 --min-sample-us 50 ||
  { echo "FAIL: the sweep over $space exited $?"; exit 1; }
for n in 1000 5000; do
  expect "n=$n" kernel_mode0 ok
  expect "n=$n" kernel_mode4 wrong "of $n elements out of tolerance; first at row 0 col $((n / 2))"
done
exit $fail
