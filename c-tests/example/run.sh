#!/bin/sh
# The README's main job (make run): examples/rdma.c, two processes doing RDMA on dat2-soft.
set -u
$CC $CFLAGS -I"$DAT2_ROOT/include" "$DAT2_ROOT/examples/rdma.c" -L"$DAT2_BUILD" -ldat2 -o "$DAT2_OUT/rdma" ||
  { echo "FAIL example:build"; exit 1; }
. "$DAT2_ROOT/c-tests/netns.sh"
if LD_LIBRARY_PATH="$DAT2_BUILD" timeout 60 "$DAT2_OUT/rdma" 1048576 >"$DAT2_OUT/rdma.log" 2>&1 &&
  grep -q "RDMA example: PASSED" "$DAT2_OUT/rdma.log" && grep -q "data read back verified" "$DAT2_OUT/rdma.log"; then
  echo "PASS example:rdma"
else
  echo "FAIL example:rdma (log: $DAT2_OUT/rdma.log)"; cat "$DAT2_OUT/rdma.log"; exit 1
fi
