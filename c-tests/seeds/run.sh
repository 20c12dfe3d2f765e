#!/bin/sh
# The seeds' data-path features on dat2-soft: one-shot bind+send and send-with-invalidate.
set -u
inc="-I$DAT2_ROOT/include"
$CC $CFLAGS $inc "$DAT2_ROOT/c-tests/seeds/seeds.c" -L"$DAT2_BUILD" -ldat2 -o "$DAT2_OUT/seeds" || { echo "FAIL seeds:build"; exit 1; }
DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$DAT2_BUILD" timeout 60 "$DAT2_OUT/seeds" || rc=1
# Again over TCP only: the same features, and the path reported as such. DAT2_TEST_IA (set
# by tests/vm/ctests.sh) may name another IA than the soft device: this rerun is the soft
# device's alone.
if [ "${DAT2_TEST_IA:-dat2-soft}" = dat2-soft ]; then
  DAT2_SOFT_CMA=0 EXPECT_PATH=tcp DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$DAT2_BUILD" timeout 60 "$DAT2_OUT/seeds" |
    sed 's/^\(PASS\|FAIL\) seeds:/\1 seeds:tcp-/' || rc=1
else
  echo "SKIP seeds:tcp-all DAT2_SOFT_CMA=0 concerns the soft device only (IA $DAT2_TEST_IA)"
fi
exit ${rc:-0}
