#!/usr/bin/env bash
# The soft device's wire protocol under libFuzzer (fuzz/, see docs/testing.md, "Fuzzing"): builds
# the fuzz target with coverage instrumentation, replays the regression inputs
# (fuzz/regressions/: each once made the library fail) and the seed corpus, then fuzzes for
# DAT2_FUZZ_SECONDS (default 45) from the seeds. Then the same for the UD receive path
# (soft_ud: its seeds, DAT2_FUZZ_UD_SECONDS, default 20). A crash, a hang, a leak or an
# out-of-memory fails it; the input that did it is left in DAT2_OUT/artifacts/ (ud-artifacts/).
# Rust, not C: it runs in the plain pass only.
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, DAT2_PASS (see c-tests/run-all.sh), DAT2_FUZZ_SECONDS,
# DAT2_FUZZ_UD_SECONDS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init fuzz
plain_only "runs in the plain pass (Rust targets: the C flags do not apply)" soft_wire soft_ud
secs=${DAT2_FUZZ_SECONDS:-45}
if ! bin=$(nice "$root/fuzz/build.sh" 2>"$out/build.log"); then
  fail build "$(grep -m3 -E '^error' "$out/build.log" | tr '\n' ' ') (log: $out/build.log)"
  exit 1
fi
export DAT_OVERRIDE=/nonexistent
opts=(-rss_limit_mb=2048 -timeout=20 -max_len=4096)

# What went wrong, from a libFuzzer log: the harness's report, else libFuzzer's.
why() {
  grep -m1 -E '^==dat2-fuzz==|ERROR: libFuzzer|^thread .* panicked' "$1" | cut -c1-300
}

for f in "$root"/fuzz/regressions/*; do
  [ -f "$f" ] || continue
  n=$(basename "$f")
  log=$out/regression-$n.log
  # strict-*: with DAT2_FUZZ_STRICT_FLUSH=1 (see fuzz_targets/soft_wire.rs).
  strict=0
  case $n in strict-*) strict=1 ;; esac
  if DAT2_FUZZ_STRICT_FLUSH=$strict timeout 120 "$bin" "${opts[@]}" "$f" >"$log" 2>&1; then
    pass "regression/$n"
  else
    fail "regression/$n" "$(why "$log") (log: $log)"
  fi
done

log=$out/seeds.log
# The files, not the directory: libFuzzer would add to a directory it is given first.
if timeout 300 "$bin" "${opts[@]}" "$root"/fuzz/corpus/soft_wire/* >"$log" 2>&1; then
  pass seeds "$(ls "$root/fuzz/corpus/soft_wire" | wc -l) inputs"
else
  fail seeds "$(why "$log") (log: $log)"
fi

mkdir -p "$out/corpus" "$out/artifacts"
log=$out/fuzz.log
timeout $((secs + 120)) "$bin" "${opts[@]}" -max_total_time="$secs" -print_final_stats=1 \
  -artifact_prefix="$out/artifacts/" "$out/corpus" "$root/fuzz/corpus/soft_wire" >"$log" 2>&1
st=$?
stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
if [ $st = 0 ]; then
  pass soft_wire "${secs} s, $(stat number_of_executed_units) inputs ($(stat average_exec_per_sec)/s), $cov, peak RSS $(stat peak_rss_mb) MB"
else
  fail soft_wire "exit $st after $(stat number_of_executed_units) inputs: $(why "$log"); input: $(ls -d "$out"/artifacts/* 2>/dev/null | head -1) (log: $log)"
fi

# The UD receive path (fuzz_targets/soft_ud.rs): its seeds, then DAT2_FUZZ_UD_SECONDS of fuzzing.
ud_secs=${DAT2_FUZZ_UD_SECONDS:-20}
if ! ud_bin=$(DAT2_FUZZ_TARGET=soft_ud nice "$root/fuzz/build.sh" 2>"$out/build-ud.log"); then
  fail soft_ud "build: $(grep -m3 -E '^error' "$out/build-ud.log" | tr '\n' ' ') (log: $out/build-ud.log)"
  exit 1
fi
log=$out/ud-seeds.log
if timeout 300 "$ud_bin" "${opts[@]}" "$root"/fuzz/corpus/soft_ud/* >"$log" 2>&1; then
  pass ud-seeds "$(ls "$root/fuzz/corpus/soft_ud" | wc -l) inputs"
else
  fail ud-seeds "$(why "$log") (log: $log)"
fi
mkdir -p "$out/ud-corpus" "$out/ud-artifacts"
log=$out/fuzz-ud.log
timeout $((ud_secs + 120)) "$ud_bin" "${opts[@]}" -max_total_time="$ud_secs" -print_final_stats=1 \
  -artifact_prefix="$out/ud-artifacts/" "$out/ud-corpus" "$root/fuzz/corpus/soft_ud" >"$log" 2>&1
st=$?
cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
if [ $st = 0 ]; then
  pass soft_ud "${ud_secs} s, $(stat number_of_executed_units) inputs ($(stat average_exec_per_sec)/s), $cov, peak RSS $(stat peak_rss_mb) MB"
else
  fail soft_ud "exit $st after $(stat number_of_executed_units) inputs: $(why "$log"); input: $(ls -d "$out"/ud-artifacts/* 2>/dev/null | head -1) (log: $log)"
fi
exit $rc
