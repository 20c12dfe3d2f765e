#!/usr/bin/env bash
# The README's main job (make run): examples/rdma.c, two processes doing RDMA on dat2-soft.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init example
compile build "$out/rdma" "$root/examples/rdma.c" -L"$build" -ldat2 || exit 1
. "$root/c-tests/netns.sh"
if LD_LIBRARY_PATH="$build" timeout 60 "$out/rdma" 1048576 >"$out/rdma.log" 2>&1 &&
  grep -q "RDMA example: PASSED" "$out/rdma.log" && grep -q "data read back verified" "$out/rdma.log"; then
  pass rdma
else
  fail rdma "(log: $out/rdma.log)"; cat "$out/rdma.log"; exit 1
fi
