#!/usr/bin/env bash
# Nothing touches memory after the call that gives it up has returned: dat_lmr_free with
# requests outstanding on either side, an RMR's unbind and dat_rmr_free with the peer's writes
# outstanding, dat_ep_free and dat_ia_close with requests and receives outstanding (see
# aftest.c); and no request posted with a freed LMR's lmr_context moves a byte or succeeds,
# registration cache or not, a live LMR over the same range or not (see stale.c: its cases
# are appended to aftest's table, one program). Built on the dataxfer helpers
# (c-tests/dataxfer/dx_common.c).
#
# Each case runs in a process of its own (c-tests/common/lib.sh); its peer runs in a thread of
# it (_thread) or in a process of its own (_fork, _tcp, _shm).
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh);
# DAT2_TEST_IA: the IA to test instead of dat2-soft (tests/vm/ctests.sh sets it in the VM);
# DX_PORT_BASE moves the TCP ports (default 34000, up to about 34350).

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init afterfree
dx=$here/../dataxfer
harness_build aftest -I"$dx" "$here/aftest.c" "$here/stale.c" "$dx/dx_common.c"
case_timeout=600
run_all
exit $rc
