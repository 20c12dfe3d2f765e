#!/usr/bin/env bash
# Memory registration on the built-in dat2-soft provider (no dat.conf at all): PZs, the three
# LMR memory types, privileges, keys, queries, frees, the sync calls, RMRs, registration
# reuse, threads, 100,000 live LMRs, handle checks after 100,000 create/free pairs and IA
# teardown. See memtest.c for the cases.
#
# Each case runs in a process of its own (c-tests/common/lib.sh), so a crash is charged to the
# case that caused it.
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh), and
# DAT2_TEST_IA: the IA to test instead of dat2-soft (tests/vm/ctests.sh sets it in the VM);
# the checks of the soft device's own facts are skipped on any other IA.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init memory
harness_build memtest "$here/memtest.c" "$here/memlock.c"
case_timeout=300
show_case_log=1
case_env() {
  case $1 in
    reuse_debug_log) extra=(DAT_DBG_TYPE=0x2 DAT_DBG_DEST=1) ;;
  esac
}
run_all

# The debug log (DAT_DBG_TYPE=0x2) names the second create over an equal range, and the
# second LMR with an equal cookie, as a reused registration (the soft device's log line).
log=$logs/reuse_debug_log.log
if [ "${DAT2_TEST_IA:-dat2-soft}" != dat2-soft ]; then
  for name in reuse_debug_log_range reuse_debug_log_shared reuse_debug_log_first; do
    skip "$name" "the \"registration reused\" debug line is the soft device's"
  done
else
  between() { sed -n "/^MARK-$1-BEGIN\$/,/^MARK-$1-END\$/p" "$log"; }
  for what in RANGE SHARED; do
    name=reuse_debug_log_$(echo "$what" | tr 'A-Z' 'a-z')
    if between "$what" | grep -q "registration reused"; then
      pass "$name"
    else
      fail "$name" "no \"registration reused\" line for the second create (see $log)"
    fi
  done
  if sed -n '1,/^MARK-RANGE-BEGIN$/p' "$log" | grep -q "registration reused"; then
    fail reuse_debug_log_first "the first create of a range was logged as reused"
  else
    pass reuse_debug_log_first
  fi
fi

# Without DAT_DBG_TYPE the library prints nothing.
noisy=$(grep -l "DAT Registry" "$logs"/*.log 2>/dev/null | grep -v reuse_debug_log | head -3 | tr '\n' ' ')
if [ -n "$noisy" ]; then
  fail silent_by_default "debug output without DAT_DBG_TYPE in $noisy"
else
  pass silent_by_default
fi
exit $rc
