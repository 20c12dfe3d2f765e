#!/usr/bin/env bash
# The data path of the built-in dat2-soft provider (no dat.conf): EVDs, CNOs, connections,
# send/receive, RDMA, protection errors, RMRs, IB extensions, SRQs, threads and IPv6 on ::1
# (through a private dat.conf naming "soft6"). See dxtest.c for the cases.
#
# Each case runs in a process of its own (and forks its own peers where it needs them), so
# a crash or a hang is charged to the case that caused it.
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh).
# DX_PORT_BASE moves the TCP ports the cases use (default 33000, up to about 33550).
# DAT2_TEST_IA runs the cases on another IA than dat2-soft (tests/vm/ctests.sh sets it in the
# VM); the cases about the soft device alone are skipped there.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${DAT2_OUT:?}
build=${DAT2_BUILD:?}
cc=${CC:-gcc}
cflags=${CFLAGS:-}
if [ -e "${DAT2_ROOT:-/nonexistent}/include/dat2/udat.h" ]; then
  hdr="-I$DAT2_ROOT/include"
else
  hdr=""
fi
logs=$out/cases
mkdir -p "$logs"
rc=0

if ! $cc $cflags $hdr -pthread -o "$out/dxtest" "$here"/*.c -L"$build" -ldat2 2>"$out/build.log"; then
  echo "FAIL dataxfer:build $(head -c 400 "$out/build.log" | tr '\n' ' ')"
  exit 1
fi

# The IPv6 case's configuration: one soft device on ::1.
conf6=$out/dat6.conf
printf '%s\n' 'soft6 u2.0 nonthreadsafe default builtin:soft dat2.2.0 "::1 0" ""' >"$conf6"

run_case() {
  local name=$1; shift
  local log=$logs/$name.log
  env DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$build" "$@" \
    timeout 60 "$out/dxtest" "$name" >"$log" 2>&1
  local status=$?
  grep -E "^(PASS|FAIL|SKIP) " "$log"
  if [ $status -gt 1 ] || ! grep -q -E "^(PASS|FAIL|SKIP) dataxfer:$name( |\$)" "$log"; then
    local why="exit status $status"
    [ $status -eq 124 ] && why="timed out"
    [ $status -gt 128 ] && why="killed by signal $((status - 128))"
    echo "FAIL dataxfer:$name crashed ($why): $(grep -v -E '^(PASS|FAIL|SKIP) ' "$log" | tail -3 | tr '\n' ' ')"
    rc=1
  elif grep -q "^FAIL " "$log"; then
    rc=1
  fi
}

start=$(date +%s)
for name in $(LD_LIBRARY_PATH="$build" "$out/dxtest" list); do
  case $name in
    ipv6_*) run_case "$name" DAT_OVERRIDE="$conf6" ;;
    *) run_case "$name" ;;
  esac
done
echo "# dataxfer took $(( $(date +%s) - start )) s"
exit $rc
