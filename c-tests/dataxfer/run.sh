#!/usr/bin/env bash
# The data path of the built-in dat2-soft provider (no dat.conf): EVDs, CNOs, connections,
# send/receive, RDMA, protection errors, RMRs, IB extensions, SRQs, threads and IPv6 on ::1
# (through a private dat.conf naming "soft6"). See dxtest.c for the cases.
#
# Each case runs in a process of its own (c-tests/common/lib.sh; it forks its own peers where it
# needs them), so a crash or a hang is charged to the case that caused it.
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh).
# DX_PORT_BASE moves the TCP ports the cases use (default 33000, up to about 33680).
# DAT2_TEST_IA runs the cases on another IA than dat2-soft (tests/vm/ctests.sh sets it in the
# VM); the cases about the soft device alone are skipped there.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init dataxfer
harness_build dxtest "$here"/*.c

# The IPv6 case's configuration: one soft device on ::1.
conf6=$out/dat6.conf
printf '%s\n' 'soft6 u2.0 nonthreadsafe default builtin:soft dat2.2.0 "::1 0" ""' >"$conf6"

case_timeout=60
case_env() {
  case $1 in
    ipv6_*) extra=(DAT_OVERRIDE="$conf6") ;;
    # It looks for the debug message (the library reads these when it is loaded).
    conn_descriptor_limit) extra=(DAT_DBG_TYPE=0x1 DAT_DBG_DEST=1) ;;
    # They measure resident memory: AddressSanitizer's quarantine would keep every block freed
    # during the flood.
    conn_psp_provider_flood*) extra=(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0") ;;
  esac
}
run_all
exit $rc
