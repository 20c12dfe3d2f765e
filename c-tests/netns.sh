# Sourced by test groups that use fixed ports: re-runs the group in a private network
# namespace (root only, when unshare and ip exist), so its ports cannot collide with anything
# else on the machine. Usage, near the top of run.sh:  . "$DAT2_ROOT/c-tests/netns.sh"
if [ -z "${DAT2_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
  command -v ip >/dev/null && unshare --net true 2>/dev/null; then
  exec unshare --net env DAT2_NETNS=1 bash "$0" "$@"
fi
if [ -n "${DAT2_NETNS:-}" ]; then
  ip link set lo up || { echo "FAIL netns:setup cannot bring up lo in a private namespace"; exit 1; }
fi
