#!/usr/bin/env bash
# ktune explain without a GPU: for entries of each committed registry, the library (through
# ktune-explain, on the registry's device described) picks the registry's config, exactly.
# usage: explain.sh KTUNE REGISTRY_DIR
set -u
. "$(dirname "$0")/registry_lines.sh"
ktune=$1 dir=$2
fail=0 checked=0
for reg in "$dir"/*/*.yaml; do
  family=$(basename "$reg" .yaml)
  device=$(registry_device "$reg")
  # the first, a middle and the last entry: their key fields, then the config
  total=$(registry_entries "$reg" | wc -l)
  for n in 1 $(( (total + 1) / 2 )) "$total"; do
    line=$(registry_entries "$reg" | sed -n "${n}p")
    [ -n "$line" ] || continue
    key=$(registry_key "$line")
    config=$(sed 's/, us: .*//; s/.*config: //' <<<"$line")
    out=$("$ktune" explain "$family" "$key" --device "$device" 2>&1)
    checked=$((checked + 1))
    grep -q ": $config (exact; table of $device," <<<"$out" ||
      { echo "FAIL: $family $key on $device: expected $config, got: $out"; fail=1; }
  done
done
[ "$checked" -ge 6 ] || { echo "FAIL: only $checked entries checked"; fail=1; }
echo "$checked entries explained as their registries say"
exit $fail
