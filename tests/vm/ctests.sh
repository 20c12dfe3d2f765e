#!/usr/bin/env bash
# Runs inside the VM (tests/vm/run.sh): chosen groups of the C suite (c-tests/) against the
# IA named by DAT2_TEST_IA (default dat2-soft), say our verbs device on rxe0:
#
#   DAT2_TEST_IA=dat2-verbs-rxe0-1 tests/vm/run.sh tests/vm/ctests.sh
#
# The groups read DAT2_TEST_IA themselves and skip the checks that concern the soft device
# alone. Only the plain pass runs: sanitizers on top of TCG's slowdown cost too much.
# Environment (optional): DAT2_VM_CTEST_GROUPS (default "memory dataxfer afterfree seeds ud"),
# DAT2_VM_CTEST_PASSES (default plain), DAT2_VM_OUT (logs; default a directory under /tmp).
# Prints the groups' "PASS/FAIL/SKIP <case>" lines; exits non-zero if one failed.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
export DAT2_TEST_IA=${DAT2_TEST_IA:-dat2-soft}
out=${DAT2_VM_OUT:-$(mktemp -d /tmp/dat2-vm-ctests.XXXXXX)}
mkdir -p "$out"
# A run other than the default Soft-RoCE one names its cases apart (say vm-siw:memory:...).
prefix=""
[ "${DAT2_VM_TAG:-vm}" = vm ] || prefix="$DAT2_VM_TAG:"
echo "c-tests against $DAT2_TEST_IA: ${DAT2_VM_CTEST_GROUPS:-memory dataxfer afterfree seeds ud}"
DAT2_TEST_GROUPS=${DAT2_VM_CTEST_GROUPS:-memory dataxfer afterfree seeds ud} \
  DAT2_TEST_PASSES=${DAT2_VM_CTEST_PASSES:-plain} \
  DAT2_TEST_OUT=$out/ctests \
  "$root/c-tests/run-all.sh" |
  sed -u -e "s/^\([0-9]* passed, [0-9]* failed, [0-9]* skipped\)\$/c-tests on $DAT2_TEST_IA: \1/" \
    -e "s/^\( *\)\(PASS\|FAIL\|SKIP\) \([^ ]\)/\1\2 $prefix\3/"
exit "${PIPESTATUS[0]}"
