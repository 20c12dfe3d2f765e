#!/usr/bin/env bash
# Runs every test group of the C conformance suite and prints one closing line
# "N passed, N failed, N skipped".
#
# A test group is a directory c-tests/<group>/ holding an executable run.sh. It is
# run with the environment below and prints one line per case:
#   PASS <name>   FAIL <name> [why]   SKIP <name> [why]
# Anything else it prints is shown as is.
#
# Environment given to every group:
#   DAT2_ROOT   the repository's top directory
#   DAT2_BUILD  the directory holding libdat2.so.2 (our library)
#   DAT2_OUT    a scratch directory private to this group and this pass
#   CC, CFLAGS  the C compiler and flags to build test programs with
#   DAT2_PASS   "plain" or "sanitize" (ASan+UBSan flags already in CFLAGS)
# c-tests/common/lib.sh holds what the groups' run.sh share (this environment, the verdict
# lines, building C programs, running the cases of a c-tests/common/harness.c program each in a
# process of its own).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DAT2_BUILD:-$root/build}
out_base=${DAT2_TEST_OUT:-$root/build/test-out}
only=${DAT2_TEST_GROUPS:-}
passes=${DAT2_TEST_PASSES:-plain sanitize}
cc=${CC:-gcc}
pass=0 fail=0 skip=0
failed_names=()
for p in $passes; do
  case $p in
    plain) cflags="-O1 -g -Wall -Wextra -Werror" ;;
    sanitize) cflags="-O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" ;;
    *) echo "unknown pass $p" >&2; exit 2 ;;
  esac
  for dir in "$root"/c-tests/*/; do
    g=$(basename "$dir")
    [ -x "$dir/run.sh" ] || continue
    if [ -n "$only" ] && ! [[ " $only " == *" $g "* ]]; then continue; fi
    out="$out_base/$p/$g"; rm -rf "$out"; mkdir -p "$out"
    echo "== $g ($p)"
    log="$out/run.log"
    started=$SECONDS
    DAT2_ROOT=$root DAT2_BUILD=$build DAT2_OUT=$out CC=$cc CFLAGS="$cflags" DAT2_PASS=$p \
      ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
      "$dir/run.sh" >"$log" 2>&1
    rc=$?
    while IFS= read -r line; do
      case $line in
        "PASS "*) pass=$((pass+1)); echo "  $line" ;;
        "FAIL "*) fail=$((fail+1)); failed_names+=("$p/$g: ${line#FAIL }"); echo "  $line" ;;
        "SKIP "*) skip=$((skip+1)); echo "  $line" ;;
        *) [ -n "${DAT2_TEST_VERBOSE:-}" ] && echo "    $line" ;;
      esac
    done <"$log"
    if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$log"; then
      fail=$((fail+1)); failed_names+=("$p/$g: run.sh exited $rc")
      echo "  FAIL $g (run.sh exited $rc; log: $log)"; tail -20 "$log" | sed 's/^/    /'
    fi
    echo "  ($g, $p: $((SECONDS - started)) s)"
  done
done
if [ ${#failed_names[@]} -gt 0 ]; then
  echo "Failed:"; printf '  %s\n' "${failed_names[@]}"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
