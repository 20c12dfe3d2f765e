#!/usr/bin/env bash
# The hostile-peer suite: hostile.py speaks dat2-soft's wire protocol itself and attacks
# target.c, an ordinary dat2 consumer, as a client and as a server (see hostile.py). Then,
# as root, the cases of a peer on another host: two network namespaces joined by a veth pair
# (10.78.0.1 the target's, 10.78.0.2 the attacker's), as in c-tests/programs.
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh);
# HOSTILE_PORT_BASE moves the TCP ports (default 34100; the cases use up to base + 700, the
# remote ones base + 100 to base + 800).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init hostile
# What the attacks test is the library, which the sanitizers do not instrument; target.c is a
# plain consumer. The plain pass is the suite (a sanitize pass took a minute for nothing).
plain_only "the attacks test the library (not instrumented); target.c runs in the plain pass" all
. "$root/c-tests/netns.sh"
compile build "$out/target" "$here/target.c" -L"$build" -ldat2 || exit 1
export LD_LIBRARY_PATH=$build DAT_OVERRIDE=/nonexistent
base=${HOSTILE_PORT_BASE:-34100}
timeout 600 python3 "$here/hostile.py" "$out/target" "$base"

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  skip remote "needs root and ip (iproute2) for two network namespaces"
  exit 0
fi
na=dat2h-a-$$ nb=dat2h-b-$$ va=d2ha$$ vb=d2hb$$
trap 'ip netns delete $na 2>/dev/null; ip netns delete $nb 2>/dev/null' EXIT
log=$out/netns.log
if ! { ip netns add "$na" && ip netns add "$nb" &&
  ip link add "$va" netns "$na" type veth peer name "$vb" netns "$nb" &&
  ip -n "$na" addr add 10.78.0.1/24 dev "$va" && ip -n "$nb" addr add 10.78.0.2/24 dev "$vb" &&
  ip -n "$na" link set lo up && ip -n "$nb" link set lo up &&
  ip -n "$na" link set "$va" up && ip -n "$nb" link set "$vb" up; } >"$log" 2>&1; then
  skip remote "cannot set up the namespaces and veth pair: $(head -1 "$log")"
  exit 0
fi
printf 'soft-ns u2.0 nonthreadsafe default builtin:soft dat2.2.0 "10.78.0.1 0" ""\n' >"$out/ns.conf"
DAT_OVERRIDE=$out/ns.conf TARGET_IA=soft-ns HOSTILE_TARGET_NETNS=$na timeout 300 \
  ip netns exec "$nb" python3 "$here/hostile.py" --remote 10.78.0.1 "$out/target" $((base + 100))
