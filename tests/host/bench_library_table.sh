#!/usr/bin/env bash
# ktune bench with named keys chooses through the library (ktune-explain): where the registry
# folder holds a table for the device, the library must answer its keys with its configs, else
# the bench stops before it measures anything and says to rebuild. The simulated worker takes the
# H100's name, so that the library's H100 tables answer; it cannot run their configs, so a bench
# the check lets through fails later, at the worker.
#   bench_library_table.sh KTUNE WORKER_SIM GENERATED_DIR WORK_DIR
set -u
. "$(dirname "$0")/registry_lines.sh"
ktune=$1 worker=$2 generated=$3 work=$4
device="NVIDIA H100 80GB HBM3" slug=nvidia-h100-80gb-hbm3
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
rm -rf "$work" && mkdir -p "$work/same/$slug" "$work/other/$slug" "$work/none"
cp "$generated/$slug/matmul.yaml" "$work/same/$slug/"
# one entry's config changed to another the space holds
line=$(grep -m1 -n 'config: wgmma_bm128_bn192_consumers2_stages4,' "$generated/$slug/matmul.yaml" | cut -d: -f1)
[ -n "$line" ] || { echo "FAIL: no entry of wgmma_bm128_bn192_consumers2_stages4 in the table"; exit 1; }
sed "${line}s/config: wgmma_bm128_bn192_consumers2_stages4,/config: wgmma_bm256_bn128_consumers2_stages4,/" \
  "$generated/$slug/matmul.yaml" >"$work/other/$slug/matmul.yaml"
entries=$(registry_entries "$generated/$slug/matmul.yaml" | wc -l)
key=$(registry_key "$(sed -n "${line}p" "$generated/$slug/matmul.yaml")")
bench() { # registry folder: the bench's output
  KTUNE_SIM_DEVICE_NAME="$device" "$ktune" bench matmul --worker "$worker" \
    --key 'dtype=bf16,m=3,n=4096,k=4096' --registry-dir "$1" --out "$work/bench.csv" 2>&1
}
for reg in same none; do
  out=$(bench "$work/$reg")
  echo "$out"
  grep -q "does not hold" <<<"$out" && bad "$reg: the check refused the library's own table"
  grep -q "bench of 3x4096x4096 .* failed" <<<"$out" || bad "$reg: the bench did not reach the worker"
done
rm -f "$work/bench.csv"
out=$(bench "$work/other")
rc=$?
echo "$out"
[ "$rc" = 1 ] || bad "other: exit $rc, expected 1"
grep -qF "the library does not hold the table of $work/other/$slug/matmul.yaml: it answers 1 of its $entries keys otherwise ($key: the library's wgmma_bm128_bn192_consumers2_stages4 (exact), the table's wgmma_bm256_bn128_consumers2_stages4); rebuild the library" <<<"$out" ||
  bad "other: the error does not name the table, the count and the key"
grep -q "bench of 3x4096x4096" <<<"$out" && bad "other: the bench measured after the check failed"
[ -e "$work/bench.csv" ] && bad "other: a CSV was written"
[ "$fails" = 0 ] && echo "ok: the library's table checked against the registry's" || exit 1
