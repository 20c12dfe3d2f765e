#!/usr/bin/env bash
# Builds a fuzz target (DAT2_FUZZ_TARGET: soft_wire, the default, or soft_ud) with libFuzzer's
# coverage instrumentation on stable Rust and prints the binary's path.
# Usage: fuzz/build.sh [cargo build arguments]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
# The instrumentation cargo-fuzz asks for, through stable -C flags (no -Z): SanitizerCoverage's
# inline 8-bit counters, PC table and comparison tracing. Overflow checks and debug
# assertions (the standard library's unsafe preconditions) turn silent errors into panics.
# --target keeps the flags off build scripts. dat2 is also a cdylib, which cargo links even
# as a dependency, with -z defs: the coverage callbacks are defined only in the fuzz binary
# (libFuzzer), so unresolved symbols are warnings (that cdylib is never used).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks \
-Cforce-frame-pointers=yes -Clink-arg=-Wl,--warn-unresolved-symbols"
cd "$here"
target=${DAT2_FUZZ_TARGET:-soft_wire}
cargo build --release --locked --target "$host" --bin "$target" "$@" >&2
echo "${CARGO_TARGET_DIR:-$here/target}/$host/release/$target"
