#!/usr/bin/env bash
# Hostile run folders and registries against apply, merge and emit: each refused with a clear
# error, and nothing committed changes (every file under the registry dir is compared byte for
# byte before and after each command).
# usage: runs.sh KTUNE SIM_WORKER SPACE WORKDIR
set -u
ktune=$1 worker=$2 space=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fail=0
note() { echo "== $*"; }
bad() { echo "FAIL: $*"; fail=1; }
reg="$work/reg"
snapshot() { (cd "$reg" && find . -type f | sort | xargs sha256sum) 2>/dev/null; }
# refused RC REGEX COMMAND...: exits RC, says REGEX, and leaves the registry dir as it was
refused() {
  local want=$1 regex=$2 before after out rc
  shift 2
  before=$(snapshot)
  out=$("$@" 2>&1)
  rc=$?
  after=$(snapshot)
  [ "$rc" = "$want" ] || bad "exit $rc, expected $want: $*: $out"
  grep -Eq -- "$regex" <<<"$out" || bad "output does not match '$regex': $out"
  [ "$before" = "$after" ] || bad "the registry changed: $*"
}
sweep() { "$ktune" sweep --space "$space" --worker "$worker" --registry-dir "$reg" --config-timeout 1 --run "$@"; }
apply() { "$ktune" apply --space "$space" --registry-dir "$reg" "$@"; }

note "a committed registry to protect"
sweep "$work/base" --apply >"$work/base.log" 2>&1 || bad "the base sweep failed: $(tail -3 "$work/base.log")"
header=$(ls "$reg"/*/sim.h)
[ -f "$header" ] || bad "no header"

# variant RUN: a copy of the base run to corrupt
variant() { rm -rf "$work/$1"; cp -r "$work/base" "$work/$1"; }

note "final.csv naming a config the space does not have"
variant unknown_config
sed -i '2s/,good_tile[0-9]*,/,good_tile999,/' "$work/unknown_config/final.csv"
refused 1 "final.csv:2:[0-9]+: a config of the space, not 'good_tile999'" apply "$work/unknown_config" --force

note "final.csv with a nan, an inf, a negative time"
for t in nan inf -3.5 1e999 0x10; do
  variant badtime
  awk -F, -v OFS=, -v t="$t" 'NR == 2 { $5 = t } { print }' "$work/base/final.csv" >"$work/badtime/final.csv"
  refused 1 "final.csv:2:[0-9]+: a time in us, more than 0 and at most 1e9, not '$t'" apply "$work/badtime" --force
done

note "final.csv rows that are not numbers, or out of range"
variant badrank
sed -i '2s/,1,\([0-9]*\),/,01,\1,/' "$work/badrank/final.csv"
refused 1 "final.csv:2:[0-9]+: a rank from 0 to 64, not '01'" apply "$work/badrank" --force

note "a run folder whose name holds a quote"
rm -rf "$work/quo\"te" && cp -r "$work/base" "$work/quo\"te"
sed -i 's/good_tile[0-9]*,1,/good_tile1,1,/' "$work/quo\"te/final.csv"
refused 1 "the run folder's name 'quo\"te' may hold only printable characters" apply "$work/quo\"te" --force

note "a run folder named after m4 builtins applies as text"
"$ktune" sweep --space "$space" --worker "$worker" --registry-dir "$work/reg-m4" --run "$work/m4_m4exit" \
  --apply >"$work/m4.log" 2>&1 || bad "the sweep into m4_m4exit failed: $(tail -3 "$work/m4.log")"
grep -q "run [0-9]*: m4_m4exit;" "$work"/reg-m4/*/sim.h || bad "the header does not name the run m4_m4exit"
grep -q '^#endif' "$work"/reg-m4/*/sim.h || bad "the header is cut short"

note "meta.yaml with a hostile device name"
variant evil_device
sed -i 's/^device: .*/device: "x *\/ int pwned; \/* y"/' "$work/evil_device/meta.yaml"
refused 1 "meta.yaml:[0-9]+:[0-9]+: device holds a character that is not allowed" apply "$work/evil_device" --force

note "merge into one of its inputs, or of a run named twice"
variant a
variant b
refused 1 "the output .*/a is also a run to merge" "$ktune" merge --space "$space" "$work/a" "$work/a" "$work/b"
refused 1 "the output .*/a is also a run to merge" "$ktune" merge --space "$space" "$work/a" "$work/a"
refused 1 "/a and .*/a/ are the same run" "$ktune" merge --space "$space" "$work/m" "$work/a" "$work/a/"
cmp -s "$work/a/final.csv" "$work/base/final.csv" || bad "a refused merge changed its input"
[ ! -e "$work/m" ] || bad "a refused merge wrote its output"
"$ktune" merge --space "$space" "$work/m" "$work/a" "$work/b" >"$work/m.log" 2>&1 || bad "merge a b failed: $(cat "$work/m.log")"

note "merge of a trials.csv line that does not parse"
variant badtrials
printf 'n=8,good_tile1,ok,nan,0.1,7,\n' >>"$work/badtrials/trials.csv"
refused 1 "trials.csv:[0-9]+:[0-9]+: a time in us, more than 0 and at most 1e9, not 'nan'" "$ktune" merge --space "$space" "$work/m2" "$work/badtrials"
[ ! -e "$work/m2" ] || bad "a refused merge wrote its output"

note "registries: nan, negative and infinite times, duplicate runs; emit refuses them"
for field in 'us: 7.000/us: nan' 'us: 7.000/us: -7.000' 'default_us: 9.500/default_us: .inf' 'spread: 0.0010/spread: -1'; do
  rm -rf "$work/r" && mkdir -p "$work/r/dev" && cp "$(dirname "$space")/golden/ktune-simulated-gpu/sim.yaml" "$work/r/dev/"
  sed -i "s/$field/" "$work/r/dev/sim.yaml"
  refused 1 "sim.yaml:[0-9]+:[0-9]+: (us|spread|default_us) must be" "$ktune" emit --space "$space" --registry-dir "$work/r"
  [ ! -e "$work/r/dev/sim.h" ] || bad "a header was emitted from a registry with '$field'"
done

note "emit --check without registries, and two registries of one device"
refused 1 "--registry-dir .*/nonexistent: cannot open" "$ktune" emit --space "$space" --registry-dir "$work/nonexistent" --check
rm -rf "$work/two" && mkdir -p "$work/two/x" "$work/two/y"
cp "$(dirname "$space")/golden/ktune-simulated-gpu/sim.yaml" "$work/two/x/"
cp "$(dirname "$space")/golden/ktune-simulated-gpu/sim.yaml" "$work/two/y/"
refused 1 "x/sim.yaml and .*y/sim.yaml are both tables of ktune simulated GPU \(132 SMs\)" \
  "$ktune" emit --space "$space" --registry-dir "$work/two"
refused 1 "no sim registry under .*/empty" bash -c "mkdir -p '$work/empty' && '$ktune' emit --space '$space' --registry-dir '$work/empty' --check"

note "a header out of date: emit --check exits 5 and changes nothing"
echo "/* edited */" >>"$header"
refused 5 "sim.h is not what .*sim.yaml emits" "$ktune" emit --space "$space" --registry-dir "$reg" --check

[ "$fail" = 0 ] && echo "all hostile run folders refused, nothing committed changed"
exit $fail
