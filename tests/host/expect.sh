#!/usr/bin/env bash
# expect.sh RC REGEX COMMAND...: passes when COMMAND exits with RC and its output (stdout and
# stderr together) matches the extended regular expression REGEX ('.' also matches a newline,
# so one REGEX can ask for several lines in order).
want_rc=$1 regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
echo "$out"
if [ "$rc" != "$want_rc" ]; then echo "FAIL: exit code $rc, expected $want_rc"; exit 1; fi
if ! grep -Ezq -- "$regex" <<<"$out"; then echo "FAIL: output does not match: $regex"; exit 1; fi
echo "ok: exit $rc, output matches"
