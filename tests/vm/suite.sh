#!/usr/bin/env bash
# Runs inside the VM for `make check-vm` (through tests/vm/check.sh): the library's Rust
# unit tests that need an RDMA device (the ignored tests under device::verbs::, from the test
# binary check.sh builds on the host, DAT2_VM_RUST_TESTS), one "PASS|FAIL vm:rust:<test>" (vm-siw:rust:... in the Soft-iWARP run)
# line each; Debian's programs in their three columns (tests/vm/programs.sh); then the C
# suite's memory, dataxfer, afterfree and seeds groups against our verbs IA
# (tests/vm/ctests.sh) when our library lists that IA; until then one SKIP line stands for
# them. Exits non-zero if any part failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
verbs_ia=${DAT2_VM_VERBS_IA:-dat2-verbs-rxe0-1}
tag=${DAT2_VM_TAG:-vm}
export DAT2_VM_TAG=$tag
out=${DAT2_VM_OUT:-$(mktemp -d /tmp/dat2-vm.XXXXXX)}
export DAT2_VM_OUT=$out
mkdir -p "$out"

# The registry check both parts need, built once (check.sh builds it on the host).
if [ -z "${DAT2_VM_IA_LISTED:-}" ]; then
  if gcc -O1 -I"$root/include" "$here/ia-listed.c" -L"$root/build" -ldat2 -o "$out/ia-listed" \
    > "$out/ia-listed.build.log" 2>&1; then
    export DAT2_VM_IA_LISTED=$out/ia-listed
  fi
fi

rc=0
start=$(date +%s)
# (the Soft-iWARP run takes only the capabilities test: the others build IB-style QPs by hand
# or UD QPs, which iWARP has not)
rust_filter=${DAT2_VM_RUST_FILTER:-device::verbs::}
if [ -z "${DAT2_VM_RUST_TESTS:-}" ]; then
  echo "FAIL $tag:rust the library's unit tests were not built (check.sh sets DAT2_VM_RUST_TESTS)"
  rc=1
else
  # libtest prints "test <path> ... ok|FAILED" per test on stdout (the result stays empty
  # when the binary dies in a test), kept apart from what rdma-core may write to stderr; both
  # stay in logs. A run that runs no test fails, and so does one that exits non-zero without
  # naming a failed test.
  timeout -k 10 300 "$DAT2_VM_RUST_TESTS" --ignored --test-threads=1 "$rust_filter" \
    > "$out/rust-tests.log" 2> "$out/rust-tests.stderr.log"
  trc=$?
  # (a file, not a process substitution: the guest has no /dev/fd)
  sed -n 's/^test \([^ ]*\) \.\.\. *\(.*\)$/\1 \2/p' "$out/rust-tests.log" > "$out/rust-tests.results"
  ran=0 failed=0
  while read -r name result; do
    ran=$((ran + 1))
    if [ "$result" = ok ]; then
      echo "PASS $tag:rust:$name"
    else
      echo "FAIL $tag:rust:$name ${result:-(no result: the test binary exited $trc)}"
      failed=$((failed + 1))
    fi
  done < "$out/rust-tests.results"
  if [ "$ran" -eq 0 ]; then
    echo "FAIL $tag:rust no ignored test under $rust_filter ran (exit $trc; see $out/rust-tests.log)"
    failed=1
  elif [ "$trc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "FAIL $tag:rust the test binary exited $trc (see $out/rust-tests.log)"
    failed=1
  fi
  if [ "$failed" -gt 0 ]; then
    rc=1
    # The panic messages, indented so that none of their lines is counted.
    sed -n '/^failures:$/,/^test result:/s/^/  | /p' "$out/rust-tests.log" | head -n 40
  fi
fi
echo "# rust tests took $(($(date +%s) - start)) s"

start=$(date +%s)
"$here/programs.sh" | tee "$out/programs.out"
prc=${PIPESTATUS[0]}
if [ "$prc" -ne 0 ]; then
  rc=1
  # A failure that printed no verdict (the script itself broke) is counted too.
  grep -q '^FAIL ' "$out/programs.out" ||
    echo "FAIL $tag:programs tests/vm/programs.sh exited $prc without a verdict (its lines are above)"
fi
echo "# programs took $(($(date +%s) - start)) s"

start=$(date +%s)
if [ -z "${DAT2_VM_IA_LISTED:-}" ]; then
  echo "FAIL $tag:ctests cannot build tests/vm/ia-listed.c (see $out/ia-listed.build.log)"
  rc=1
elif LD_LIBRARY_PATH=$root/build DAT_OVERRIDE=$here/dat.conf "$DAT2_VM_IA_LISTED" "$verbs_ia"; then
  DAT2_TEST_IA=$verbs_ia "$here/ctests.sh" || rc=1
  echo "# c-tests took $(($(date +%s) - start)) s"
else
  echo "SKIP $tag:ctests-$verbs_ia our library does not list the IA $verbs_ia"
fi
exit $rc
