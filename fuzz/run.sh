#!/usr/bin/env bash
# A fuzzing campaign of the soft device's wire protocol (see docs/testing.md, "Fuzzing"): builds
# the target, then runs libFuzzer on a corpus kept in fuzz/work/corpus (the committed seeds,
# fuzz/corpus/soft_wire, are read too), with crashes written to fuzz/work/artifacts/.
# DAT2_FUZZ_TARGET=soft_ud fuzzes the UD receive path instead (fuzz/work/soft_ud/).
# Extra arguments go to libFuzzer, e.g.
#   fuzz/run.sh -max_total_time=3600            an hour
#   fuzz/run.sh -fork=2 -ignore_crashes=1       two processes, going on after a crash
#   fuzz/run.sh fuzz/work/artifacts/crash-...   replays one input
# DAT2_FUZZ_WORK moves the work directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target=${DAT2_FUZZ_TARGET:-soft_wire}
work=${DAT2_FUZZ_WORK:-$here/work}
[ "$target" = soft_wire ] || work=$work/$target
bin=$("$here/build.sh")
mkdir -p "$work/corpus" "$work/artifacts"
export DAT_OVERRIDE=${DAT_OVERRIDE:-/nonexistent}
defaults=(-rss_limit_mb=2048 -timeout=20 -max_len=4096 -print_final_stats=1 "-artifact_prefix=$work/artifacts/")
for a in "$@"; do
  # Inputs or directories named: run on those alone.
  if [ -e "$a" ]; then exec "$bin" "${defaults[@]}" "$@"; fi
done
mkdir -p "$here/corpus/$target"
exec "$bin" "${defaults[@]}" "$@" "$work/corpus" "$here/corpus/$target"
