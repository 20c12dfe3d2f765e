#!/usr/bin/env bash
# Nothing touches memory after the call that gives it up has returned: dat_lmr_free with
# requests outstanding on either side, an RMR's unbind and dat_rmr_free with the peer's writes
# outstanding, dat_ep_free and dat_ia_close with requests and receives outstanding (see
# aftest.c). Built on the dataxfer harness (c-tests/dataxfer/dx_common.c).
#
# Each case runs in a process of its own; its peer runs in a thread of it (_thread) or in a
# process of its own (_fork, _tcp, _shm).
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh);
# DAT2_TEST_IA: the IA to test instead of dat2-soft (tests/vm/ctests.sh sets it in the VM);
# DX_PORT_BASE moves the TCP ports (default 34000, up to about 34200).

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
dx=$here/../dataxfer
logs=$out/cases
mkdir -p "$logs"
rc=0

if ! $cc $cflags $hdr -I"$dx" -pthread -o "$out/aftest" "$here/aftest.c" "$dx/dx_common.c" -L"$build" -ldat2 \
  2>"$out/build.log"; then
  echo "FAIL afterfree:build $(head -c 400 "$out/build.log" | tr '\n' ' ')"
  exit 1
fi

run_case() {
  local name=$1
  local log=$logs/$name.log
  env DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$build" \
    timeout 600 "$out/aftest" "$name" >"$log" 2>&1
  local status=$?
  local verdict
  verdict=$(grep -E "^(PASS|FAIL|SKIP) afterfree:$name( |\$)" "$log" | tail -1)
  if [ $status -gt 1 ] || [ -z "$verdict" ]; then
    local why="exit status $status"
    [ $status -eq 124 ] && why="timed out"
    [ $status -gt 128 ] && why="killed by signal $((status - 128))"
    verdict="FAIL afterfree:$name crashed ($why): $(grep -v -E '^(PASS|FAIL|SKIP) ' "$log" | tail -3 | tr '\n' ' ')"
  fi
  echo "$verdict"
  [[ $verdict == "FAIL "* ]] && rc=1
}

start=$(date +%s)
for name in $(LD_LIBRARY_PATH="$build" "$out/aftest" list); do
  run_case "$name"
done
echo "# afterfree took $(( $(date +%s) - start )) s"
exit $rc
