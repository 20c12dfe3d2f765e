#!/usr/bin/env bash
# The seeds' data-path features on dat2-soft: one-shot bind+send and send-with-invalidate.
# seeds.c prints its own verdict lines.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init seeds
compile build "$out/seeds" "$here/seeds.c" -L"$build" -ldat2 || exit 1
DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$build" timeout 60 "$out/seeds" || rc=1
# Again over TCP only: the same features, and the path reported as such. DAT2_TEST_IA (set
# by tests/vm/ctests.sh) may name another IA than the soft device: this rerun is the soft
# device's alone.
if [ "${DAT2_TEST_IA:-dat2-soft}" = dat2-soft ]; then
  DAT2_SOFT_CMA=0 EXPECT_PATH=tcp DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$build" timeout 60 "$out/seeds" |
    sed 's/^\(PASS\|FAIL\) seeds:/\1 seeds:tcp-/' || rc=1
else
  skip tcp-all "DAT2_SOFT_CMA=0 concerns the soft device only (IA $DAT2_TEST_IA)"
fi
exit $rc
