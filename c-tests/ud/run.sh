#!/usr/bin/env bash
# The unreliable datagram (UD) service of the IB extensions on the built-in dat2-soft provider
# (or the IA DAT2_TEST_IA names): UD EPs, address resolution and its events, datagrams and
# their GRH, the release of address handles and connection records, and the exact codes of
# what a UD EP refuses. See udtest.c for the cases. Built on the dataxfer helpers
# (c-tests/dataxfer/dx_common.c).
#
# Each case runs in a process of its own (c-tests/common/lib.sh), with two IAs of the process
# joined over loopback. On the soft device the server's IA is ud-soft2, the soft device on
# 127.0.0.2 (from the dat.conf written here), so that a datagram's sender and receiver have
# different addresses.
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh);
# DAT2_TEST_IA: the IA to test instead of dat2-soft (for both sides);
# DX_PORT_BASE moves the TCP ports (default 35000, up to about 35160); run as root, the group
# runs in a private network namespace (c-tests/netns.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init ud
# Fixed ports (a few PSPs per case): in a private network namespace when root, on the soft
# device (another IA, such as the verbs device in the VM, needs the namespace its device's
# address is in).
[ -n "${DAT2_TEST_IA:-}" ] || . "$root/c-tests/netns.sh"
dx=$here/../dataxfer
harness_build udtest -I"$dx" "$here"/*.c "$dx/dx_common.c"

conf=$out/ud.conf
printf '%s\n' 'ud-soft2 u2.0 threadsafe default builtin:soft dat2.2.0 "127.0.0.2 0" ""' >"$conf"

case_timeout=60
case_env() {
  # Another IA keeps the dat.conf it is listed in (tests/vm/dat.conf in the VM).
  [ -n "${DAT2_TEST_IA:-}" ] || extra=(DAT_OVERRIDE="$conf")
}
run_all
exit $rc
