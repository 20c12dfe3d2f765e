#!/usr/bin/env bash
# Runs inside the VM for `make check-vm` (through tests/vm/check.sh): Debian's programs in
# their three columns (tests/vm/programs.sh), then the C suite's memory, dataxfer, afterfree
# and seeds groups against our verbs IA (tests/vm/ctests.sh) when our library lists that IA;
# until then one SKIP line stands for them. Exits non-zero if either part failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
verbs_ia=${DAT2_VM_VERBS_IA:-dat2-verbs-rxe0-1}
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
"$here/programs.sh" || rc=1
echo "# programs took $(($(date +%s) - start)) s"

start=$(date +%s)
if [ -z "${DAT2_VM_IA_LISTED:-}" ]; then
  echo "FAIL vm:ctests cannot build tests/vm/ia-listed.c (see $out/ia-listed.build.log)"
  rc=1
elif LD_LIBRARY_PATH=$root/build DAT_OVERRIDE=$here/dat.conf "$DAT2_VM_IA_LISTED" "$verbs_ia"; then
  DAT2_TEST_IA=$verbs_ia "$here/ctests.sh" || rc=1
  echo "# c-tests took $(($(date +%s) - start)) s"
else
  echo "SKIP vm:ctests-$verbs_ia our library does not list the IA $verbs_ia"
fi
exit $rc
