#!/usr/bin/env bash
# ktune explain --holdout without a GPU, on each committed registry's device described: every key
# of the table is voted for once with its own row left out; the counts add up to the registry's
# entries, a line names each key whose pick is not its answer, and a pick reported as a runner-up
# is one of that key's runner-ups in the registry, at the ratio of the two recorded times.
# usage: holdout.sh KTUNE REGISTRY_DIR
set -u
. "$(dirname "$0")/registry_lines.sh"
ktune=$1 dir=$2
fail=0 checked=0
for reg in "$dir"/*/*.yaml; do
  family=$(basename "$reg" .yaml)
  device=$(registry_device "$reg")
  entries=$(registry_entries "$reg" | wc -l)
  out=$("$ktune" explain "$family" --holdout --device "$device" 2>&1) ||
    { echo "FAIL: $family on $device: $out"; fail=1; continue; }
  summary=$(tail -n 1 <<<"$out")
  read -r keys answer runner unmeasured bounded none < <(sed -E 's/.*: ([0-9]+) keys, .*its own answer ([0-9]+), a runner-up it measured ([0-9]+) .*a config it did not measure ([0-9]+) \(([0-9]+) of them .*, nothing ([0-9]+)$/\1 \2 \3 \4 \5 \6/' <<<"$summary")
  lines=$(grep -c '^  ' <<<"$out")
  # the unmeasured picks of a variant the key measured: a line each, with that variant's ratio
  bound_lines=$(grep -c "its variant's fastest there at [0-9.]*x its speed)$" <<<"$out")
  if [ "$keys" != "$entries" ] || [ $((answer + runner + unmeasured + none)) -ne "$entries" ] ||
     [ "$lines" -ne $((entries - answer)) ] || [ "$bounded" -gt "$unmeasured" ] ||
     [ "$bound_lines" -ne "$bounded" ]; then
    echo "FAIL: $family on $device: $entries entries, $lines lines, summary: $summary"
    fail=1
    continue
  fi
  checked=$((checked + 1))
  # the first runner-up pick: its key's registry entry lists it, with the reported ratio
  pick=$(grep -m 1 ', a runner-up there at ' <<<"$out") || continue
  key=${pick#  }
  key=${key%%: *}
  config=$(sed -E 's/^  [^:]*: ([^,]*), a runner-up.*/\1/' <<<"$pick")
  ratio=$(sed -E 's/.* at ([0-9.]+)x the speed.*/\1/' <<<"$pick")
  fields=$(sed 's/=/: /g; s/ \([a-z_]*: \)/, \1/g' <<<"$key")
  entry=$(registry_entries "$reg" | grep -F -- "- {$fields, config: " | head -n 1)
  answer_us=$(sed -E 's/.*, us: ([0-9.]+), .*/\1/' <<<"${entry%%runner_ups*}")
  runner_us=$(grep -oE "\{config: $config, us: [0-9.]+\}" <<<"$entry" | sed -E 's/.*us: ([0-9.]+)\}/\1/')
  if [ -z "$entry" ] || [ -z "$runner_us" ] ||
     ! awk -v a="$answer_us" -v r="$runner_us" -v x="$ratio" \
         'BEGIN { exit !(x > 0 && (a / r - x) ^ 2 < 1e-6) }'; then
    echo "FAIL: $family: '$pick' against the registry's entry: ${entry:0:200}"
    fail=1
  fi
done
[ "$checked" -ge 7 ] || { echo "FAIL: only $checked registries checked"; fail=1; }
echo "$checked registries: each key voted for by the others, counts and runner-ups as recorded"
exit $fail
