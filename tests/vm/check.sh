#!/usr/bin/env bash
# `make check-vm`: builds on the host what the VM runs (ia-listed, the library's unit test
# binary), boots the Soft-RoCE VM once (tests/vm/run.sh) and runs tests/vm/suite.sh in it,
# then prints one closing line "vm: N passed, N failed, N skipped" counted from the
# "PASS|FAIL|SKIP <case>" lines, with the elapsed time, boot included. A VM that does not
# report back (timeout, crash) counts as one more failure. Exit status: 0 when nothing
# failed. The logs stay in build/vm-logs/.
#
# Environment: what tests/vm/run.sh and tests/vm/programs.sh take; DAT2_VM_TIMEOUT defaults
# to 1500 s here (the whole suite takes about 6 minutes on 2 cores).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$(date +%s)
export DAT2_VM_TIMEOUT=${DAT2_VM_TIMEOUT:-1500}

# The registry check of suite.sh and programs.sh, built on the host where gcc is fast.
tools=$root/build/vm-tools
mkdir -p "$tools"
if gcc -O1 -Wall -Wextra -Werror -I"$root/include" "$here/ia-listed.c" -L"$root/build" -ldat2 \
  -o "$tools/ia-listed" 2> "$tools/ia-listed.build.log"; then
  export DAT2_VM_IA_LISTED=$tools/ia-listed
else
  echo "vm: cannot build tests/vm/ia-listed.c on the host; the VM will try:" >&2
  cat "$tools/ia-listed.build.log" >&2
fi

# The library's Rust unit tests that need an RDMA device (the ignored ones under
# device::verbs::), built on the host too; suite.sh runs them in the VM. The copy keeps
# the path fixed (cargo names the executable after a hash).
cargo=${CARGO:-cargo}
echo "vm: building the library's unit tests (cargo test --no-run)" >&2
if exe=$(cd "$root" && "$cargo" test --release --locked --lib --no-run --message-format=json \
    2> "$tools/rust-tests.build.log" |
  sed -n 's/^{"reason":"compiler-artifact".*"executable":"\([^"]*\)".*$/\1/p' | tail -n 1) &&
  [ -n "$exe" ] && cp -f "$exe" "$tools/rust-tests"; then
  export DAT2_VM_RUST_TESTS=$tools/rust-tests
else
  echo "vm: cannot build the library's unit tests on the host (see $tools/rust-tests.build.log)" >&2
  tail -n 20 "$tools/rust-tests.build.log" >&2
fi

# The programs' logs come back to the host (the VM's own writes vanish with it).
logs=$root/build/vm-logs
rm -rf "$logs"
mkdir -p "$logs"
export DAT2_VM_OUT=$logs
export DAT2_VM_RW="$logs ${DAT2_VM_RW:-}"

log=$logs/check-vm.log
"$here/run.sh" "$here/suite.sh" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

pass=$(grep -cE '^ *PASS ' "$log")
fail=$(grep -cE '^ *FAIL ' "$log")
skip=$(grep -cE '^ *SKIP ' "$log")
if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
  case $rc in
    124) echo "FAIL vm:run the VM timed out after ${DAT2_VM_TIMEOUT}s" ;;
    125) echo "FAIL vm:run the VM reported no exit status" ;;
    *) echo "FAIL vm:run the suite exited $rc" ;;
  esac
  fail=$((fail + 1))
fi
if [ "$fail" -gt 0 ]; then
  echo "Failed in the VM:"
  grep -E '^ *FAIL ' "$log" | sed 's/^ */  /'
fi
echo "vm: $pass passed, $fail failed, $skip skipped ($(($(date +%s) - start)) s)"
[ "$fail" -eq 0 ]
