#!/usr/bin/env bash
# `make check-vm`: builds on the host what the VM runs (ia-listed, the library's unit test
# binary), boots the VM twice (tests/vm/run.sh: Soft-RoCE, then Soft-iWARP) and runs
# tests/vm/suite.sh in each,
# then prints one closing line "vm: N passed, N failed, N skipped" counted from the
# "PASS|FAIL|SKIP <case>" lines, with the elapsed time, boot included. A VM that does not
# report back (timeout, crash) counts as one more failure. Exit status: 0 when nothing
# failed. The logs stay in build/vm-logs/.
#
# Environment: what tests/vm/run.sh and tests/vm/programs.sh take; DAT2_VM_TIMEOUT defaults
# to 1500 s here, for each of the two boots (the rxe suite takes about 6 minutes on 2 cores);
# DAT2_VM_RUNS (default "rxe siw").
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

# Two boots: Soft-RoCE (rxe0), then Soft-iWARP (siw0, a module tests/vm/prepare.sh builds
# from Debian's kernel source). The siw run names its cases vm-siw:..., uses Debian's
# rdma_cm provider (ofa-v2-eth0) as its anchor, and leaves out the rows iWARP cannot run:
# UD, and dtestx's write with immediate data and atomics (siw has neither; the c-tests
# check that both are refused). Debian's provider hangs in dtestsrq and crashes in dapltest
# -T L on siw, in either library: those cells are not run. dapltest -T F -f queryinfo's RMR
# case may fail its dat_rmr_create there (siw has no memory windows: DAT_MODEL_NOT_SUPPORTED,
# as the IA's max_rmrs of 0 says). Its C groups are memory, seeds and ud: dataxfer and
# afterfree take over half an hour on siw under TCG, past make check's budget, and run on
# request (DAT2_VM_SIW_CTEST_GROUPS="dataxfer afterfree", see the README's iWARP section).
# DAT2_VM_RUNS picks the runs.
siw_cases="dtest dtest-p dtest-c dtest-u dtest-w dtest-W dtest-D dtest-W-a dtest-t-S1 dtestcm-c10
  dtestsrq dtestsrq-c4-B10 T-SR T-RW T-RR T-V T-t2-w2 P-RW P-RR-poll F-hwconn F-endpoint F-pz F-mem
  F-connmgt F-queryinfo L"
rc=0
logs_all=()
for run in ${DAT2_VM_RUNS:-rxe siw}; do
  case $run in
    rxe)
      log=$logs/check-vm.log
      "$here/run.sh" "$here/suite.sh" 2>&1 | tee "$log"
      rrc=${PIPESTATUS[0]}
      ;;
    siw)
      log=$logs/check-vm-siw.log
      mkdir -p "$logs/siw"
      DAT2_VM_RDMA=siw0:siw DAT2_VM_TAG=vm-siw \
        DAT2_VM_RUST_FILTER=device::verbs::api::device_tests::ud::capabilities_follow_the_transport DAT2_VM_OUT=$logs/siw \
        DAT2_VM_VERBS_IA=dat2-verbs-siw0-1 DAT2_VM_SCM_IA=ofa-v2-eth0 \
        DAT2_VM_PLUGIN="dat2prov-siw0-1|verbs siw0 1" DAT2_VM_CASES="$(echo $siw_cases)" \
        DAT2_VM_SKIP_CELLS="debian:dtestsrq debian:dtestsrq-c4-B10 dat2:dtestsrq dat2:L" \
        DAT2_VM_SKIP_WHY="Debian's cma provider hangs in dtestsrq and crashes in dapltest -T L on siw, in Debian's libdat2 too" \
        DAT2_VM_FFT_ALLOW=queryinfo:286 DAT2_VM_CTEST_GROUPS="${DAT2_VM_SIW_CTEST_GROUPS:-memory seeds ud}" \
        "$here/run.sh" "$here/suite.sh" 2>&1 | tee "$log"
      rrc=${PIPESTATUS[0]}
      ;;
    *)
      echo "FAIL vm:run unknown run $run in DAT2_VM_RUNS" | tee -a "$logs/check-vm.log"
      continue
      ;;
  esac
  logs_all+=("$log")
  if [ "$rrc" -ne 0 ] && ! grep -qE '^ *FAIL ' "$log"; then
    case $rrc in
      124) echo "FAIL vm:run-$run the VM timed out after ${DAT2_VM_TIMEOUT}s" ;;
      125) echo "FAIL vm:run-$run the VM reported no exit status" ;;
      *) echo "FAIL vm:run-$run the suite exited $rrc" ;;
    esac | tee -a "$log"
  fi
  [ "$rrc" -eq 0 ] || rc=1
done

pass=$(cat "${logs_all[@]}" /dev/null | grep -cE '^ *PASS ')
fail=$(cat "${logs_all[@]}" /dev/null | grep -cE '^ *FAIL ')
skip=$(cat "${logs_all[@]}" /dev/null | grep -cE '^ *SKIP ')
if [ "$fail" -gt 0 ]; then
  echo "Failed in the VM:"
  cat "${logs_all[@]}" | grep -E '^ *FAIL ' | sed 's/^ */  /'
  rc=1
fi
echo "vm: $pass passed, $fail failed, $skip skipped ($(($(date +%s) - start)) s)"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
