#!/usr/bin/env bash
# A space's instantiate: the library compiles each config for the combinations of instantiated
# key values its table's rows use (a default for every one), the sweep's candidates for every one;
# a registry row of a value not instantiated and a bad instantiate are errors that name them.
# usage: gen_instantiate.sh KTUNE TEMPLATES M4 DATA WORKDIR
set -u
ktune=$1 templates=$2 m4=$3 data=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
gen() { # space registry-dir out
  "$ktune" gen inst --space "$1" --registry-dir "$2" --templates "$templates" --m4 "$m4" \
    --out "$3" --shards 1
}
combos() { # file config: the combos literal of config's instance (before its twin, NULL here)
  grep -o "{\"$2\", .*, \(0x[0-9a-f]*ULL\), NULL}" "$1" | grep -o "0x[0-9a-f]*ULL"
}

gen "$data/instantiate.yaml" "$data/instantiate" "$work/out" || bad "gen exited $?"
lib="$work/out/inst_library.cu" cand="$work/out/inst_candidates.cu"
# good_tile1: the default; good_tile2: f16's answer; good_tile4: f16's runner-up and bf16's;
# good_tile8: bf16's answer
[ "$(combos "$lib" good_tile1)" = 0x3ULL ] || bad "the default: $(combos "$lib" good_tile1)"
[ "$(combos "$lib" good_tile2)" = 0x1ULL ] || bad "f16's answer: $(combos "$lib" good_tile2)"
[ "$(combos "$lib" good_tile4)" = 0x3ULL ] || bad "both rows' runner-up: $(combos "$lib" good_tile4)"
[ "$(combos "$lib" good_tile8)" = 0x2ULL ] || bad "bf16's answer: $(combos "$lib" good_tile8)"
grep -q "KTUNE_INST_DEFINE_GOOD(ktune__inst_library_good_tile2, 0x1ULL, 2)" "$work/out/inst_library_0.cu" ||
  bad "the kernel file does not pass good_tile2's combos"
for t in 1 2 4 8; do
  [ "$(combos "$cand" good_tile$t)" = 0x3ULL ] || bad "candidate good_tile$t: $(combos "$cand" good_tile$t)"
done
grep -q "^#define KTUNE_INST_COMBO_DTYPE_BF16 1$" "$work/out/inst_space.h" || bad "no COMBO define"

# --library-all: every config for every combination
"$ktune" gen inst --space "$data/instantiate.yaml" --registry-dir "$data/instantiate" \
  --templates "$templates" --m4 "$m4" --out "$work/all" --shards 1 --library-all || bad "gen --library-all"
[ "$(combos "$work/all/inst_library.cu" good_tile2)" = 0x3ULL ] || bad "--library-all: good_tile2 not every combination"

# a row of f32, which the space does not instantiate
mkdir -p "$work/f32/ktune-simulated-gpu"
sed 's/{dtype: f16, n: 8/{dtype: f32, n: 8/' "$data/instantiate/ktune-simulated-gpu/inst.yaml" \
  >"$work/f32/ktune-simulated-gpu/inst.yaml"
gen "$data/instantiate.yaml" "$work/f32" "$work/out-f32" >"$work/f32.log" 2>&1 && bad "a row of f32 generated"
grep -q "inst.yaml: dtype=f32 n=8: a value the space does not instantiate" "$work/f32.log" ||
  bad "the f32 row is not named: $(cat "$work/f32.log")"

# bad instantiate blocks: file:line:col and what is wrong
space_with() { # file instantiate-line
  sed "s/^  dtype: \[f16, bf16\]$/$2/" "$data/instantiate.yaml" >"$1"
}
expect_bad() { # instantiate-line message
  space_with "$work/bad.yaml" "$1"
  "$ktune" expand --space "$work/bad.yaml" >"$work/bad.log" 2>&1 && bad "'$1' loaded"
  grep -qF "$2" "$work/bad.log" || bad "'$1': $(cat "$work/bad.log")"
}
expect_bad "  rows: [1, 2]" "bad.yaml:8:3: instantiate: 'rows' is not a key dimension"
expect_bad "  dtype: [f16, f16]" "bad.yaml:8:16: instantiate: 'f16' is listed twice"
expect_bad "  dtype: [f16, half]" "bad.yaml:8:16: 'half' is not a dtype (f32, f16, bf16,"
expect_bad "  dtype: []" "bad.yaml:8:10: instantiated values must not be empty"
expect_bad "  dtype: [f16]\n  n: [$(seq -s, 1 65)]" \
  "bad.yaml:9:6: instantiate: more than 64 combinations of values (65)"
exit $fail
