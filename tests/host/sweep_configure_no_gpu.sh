#!/usr/bin/env bash
# cmake -DKTUNE_SWEEP=ON on a machine without a usable GPU: the configure stops within seconds,
# before building anything, says why, and leaves KTUNE_SWEEP OFF in the cache. Skipped (77) where
# there is a GPU, whose configure would sweep.
# usage: sweep_configure_no_gpu.sh SOURCE_DIR WORK_DIR GENERATOR PREFIX_PATH PROBE_WORKER
set -u
src=$1 work=$2 generator=$3 prefix=$4 worker=$5
if echo Q | "$worker" 2>/dev/null | grep -q '^H '; then
  echo "a GPU is here: a sweep configure would sweep; skipped"
  exit 77
fi
rm -rf "$work"
start=$(date +%s)
out=$(cmake -S "$src" -B "$work" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" -DKTUNE_SWEEP=ON \
  -DKTUNE_BUILD_TESTS=OFF 2>&1)
rc=$?
took=$(($(date +%s) - start))
echo "$out" | tail -12
fail=0
[ $rc -ne 0 ] || { echo "FAIL: the configure succeeded"; fail=1; }
grep -q "KTUNE_SWEEP needs a CUDA GPU on this machine" <<<"$out" || { echo "FAIL: no reason given"; fail=1; }
grep -q "ktune: building the sweep tools" <<<"$out" && { echo "FAIL: it built the sweep tools first"; fail=1; }
grep -q '^KTUNE_SWEEP:BOOL=OFF$' "$work/CMakeCache.txt" || { echo "FAIL: KTUNE_SWEEP is still on"; fail=1; }
[ ! -e "$work/ktune-sweep-tools" ] || { echo "FAIL: a tools build was started"; fail=1; }
echo "refused in ${took} s"
exit $fail
