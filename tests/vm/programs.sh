#!/usr/bin/env bash
# Runs inside the VM (tests/vm/run.sh): Debian's test programs on real verbs (rxe0), with
# Debian's dapl providers, once through Debian's libdat2 and once through ours, and prints
# the two columns side by side. Judged by output, as the programs' exit codes do not show
# failures. Exit status: non-zero if any case fails with our library.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
export DAT_OVERRIDE="$root/tests/vm/dat.conf"
cases=(
  "dtest-scm|dtest -P ofa-v2-rxe0-1 -b 4096 -B 10|dtest -P ofa-v2-rxe0-1 -b 4096 -B 10 -h 127.0.0.1|DAPL Test Complete. PASSED"
  "dtest-W-scm|dtest -P ofa-v2-rxe0-1 -W -b 4096 -B 10|dtest -P ofa-v2-rxe0-1 -W -b 4096 -B 10 -h 127.0.0.1|DAPL Test Complete. PASSED"
  "dtestx-scm|dtestx -P ofa-v2-rxe0-1|dtestx -P ofa-v2-rxe0-1 -h 127.0.0.1|immed/atomic test PASSED"
  "dtest-cma|dtest -P ofa-v2-eth0 -b 4096 -B 10|dtest -P ofa-v2-eth0 -b 4096 -B 10 -h 10.0.2.15|DAPL Test Complete. PASSED"
)
run_case() { # lib_dir server client marker -> 0 if both sides print the marker
  local lib=$1 server=$2 client=$3 marker=$4 out rc=0
  out=$(mktemp -d)
  LD_LIBRARY_PATH=$lib timeout 120 $server >"$out/s" 2>&1 &
  local spid=$!
  sleep 2
  LD_LIBRARY_PATH=$lib timeout 120 $client >"$out/c" 2>&1
  wait "$spid"
  grep -q "$marker" "$out/s" && grep -q "$marker" "$out/c" || rc=1
  [ $rc -ne 0 ] && { tail -3 "$out/s" "$out/c" | sed 's/^/    /' >&2; }
  rm -rf "$out"
  return $rc
}
printf '%-14s %-10s %-10s\n' case debian dat2
fail=0
for c in "${cases[@]}"; do
  IFS='|' read -r name server client marker <<<"$c"
  if run_case "" "$server" "$client" "$marker"; then deb=PASS; else deb=FAIL; fi
  if run_case "$root/build" "$server" "$client" "$marker"; then ours=PASS; else ours=FAIL; fail=1; fi
  printf '%-14s %-10s %-10s\n' "$name" "$deb" "$ours"
  echo "$ours vm:$name"
done
exit $fail
