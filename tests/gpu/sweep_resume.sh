#!/usr/bin/env bash
# A real sweep killed with SIGKILL half-way, then resumed by the same command, measures every trial
# once and ends with the same table as an uninterrupted sweep: the same config for every key, or
# one the uninterrupted sweep timed (in its final round where it has both, else in its trials)
# within the noise of its own winner: 3%, or 0.15 us for kernels of a few microseconds (two runs
# on a GPU measure near ties apart; the simulated backend's test, which has no noise, asks for
# equality). usage:
# sweep_resume.sh KTUNE WORKER SPACE WORKDIR
set -u
ktune=$1 worker=$2 space=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
args() {
  echo --space "$space" --worker "$worker" --run "$work/$1" --registry-dir "$work/reg-$1" --apply \
    --search exhaustive
}
trials() { echo $(($(wc -l <"$work/$1/trials.csv") - 1)); }
table() { # key,config of every entry of run $1's registry, keys as trials.csv writes them
  sed -nE 's/^  - \{([^{]*), config: ([a-z0-9_]+),.*/\1,\2/p' "$work"/reg-"$1"/*/*.yaml |
    sed -E 's/: /=/g; s/, ([a-z_0-9]+=)/ \1/g'
}

"$ktune" sweep $(args a) >"$work/a.log" 2>&1
rc=$?
if [ $rc -eq 4 ]; then echo "no GPU: skipped"; exit 77; fi
[ $rc -eq 0 ] || { tail -5 "$work/a.log"; echo "FAIL: the uninterrupted sweep exited $rc"; exit 1; }
total=$(trials a)

"$ktune" sweep $(args b) >"$work/b0.log" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
  [ -f "$work/b/trials.csv" ] && [ "$(trials b)" -ge $((total / 2)) ] && break
  sleep 0.002
done
kill -9 $pid
wait $pid 2>/dev/null
killed=$(trials b)
echo "killed after $killed of $total trials"
[ "$killed" -lt "$total" ] || bad "the sweep ended before the kill"
[ ! -e "$work/reg-b" ] || bad "the killed sweep applied a table"
"$ktune" sweep $(args b) >"$work/b.log" 2>&1 || { tail -5 "$work/b.log"; bad "the resumed sweep exited $?"; }
[ "$(trials b)" -eq "$total" ] || bad "the resumed run holds $(trials b) trials, not $total"
dups=$(tail -n +2 "$work/b/trials.csv" | cut -d, -f1,2 | sort | uniq -d)
[ -z "$dups" ] || bad "measured twice: $dups"
tail -n +2 "$work/b/trials.csv" | grep -v ',ok,\|,invalid,' && bad "a softmax config failed"
table a >"$work/a.table"
table b >"$work/b.table"
[ "$(wc -l <"$work/b.table")" -eq "$(wc -l <"$work/a.table")" ] || bad "the tables hold different keys"
awk -F, '
  FNR == 1 { file++ }
  file == 1 && $3 == "ok" { t[$1 "," $2] = $4 }
  file == 2 && FNR > 1 { t[$1 "," $2] = $5 }
  file == 3 { want[$1] = $2 }
  file == 4 { n++; if ($2 == want[$1]) { same++; next }
              a = t[$1 "," $2]; b = t[$1 "," want[$1]]
              if (a == "" || b == "" || b <= 0) { printf "%s: no time for %s or %s\n", $1, $2, want[$1]; far++; next }
              printf "%s: %s, not %s: %.3fx its time in the uninterrupted run\n", $1, $2, want[$1], a / b
              if (a / b > 1 + (0.15 / b > 0.03 ? 0.15 / b : 0.03)) far++ }
  END { printf "the same config for %d of %d keys\n", same, n; if (n == 0 || far > 0) exit 1 }
' "$work/a/trials.csv" "$work/a/final.csv" "$work/a.table" "$work/b.table" ||
  bad "the resumed sweep chose a config slower than the uninterrupted one's beyond the noise"
grep -h "overhead" "$work/a/summary.txt"
exit $fail
