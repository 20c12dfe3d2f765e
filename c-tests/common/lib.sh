# Sourced by the run.sh of a group whose test program uses the runner of harness.c
# (c-tests/memory, dataxfer, afterfree): builds the program and runs each of its cases in a
# process of its own, so that a crash or a hang is charged to the case that caused it.
#
#   here=$(cd "$(dirname "$0")" && pwd)
#   . "$here/../common/lib.sh"
#   harness_init GROUP              # sets group, out, build, cc, cflags, hdr, logs ($out/cases),
#                                   # rc=0, case_timeout=60, show_case_log=0
#   harness_build PROGRAM ARGS...   # cc ARGS + harness.c into $out/PROGRAM (prog), against our
#                                   # library; on failure prints "FAIL GROUP:build ..", exits 1
#   case_timeout=SECONDS            # the limit of each case (timeout(1))
#   case_env() { ...; }             # optional: sets the array extra=(VAR=value...) for case $1
#   run_all                         # run_case for each name "PROGRAM list" prints (a list that
#                                   # fails is "FAIL GROUP:list"), then "# GROUP took N s"
#
# run_case NAME [VAR=value...] runs "PROGRAM NAME" with DAT_OVERRIDE=/nonexistent (no dat.conf:
# the built-in devices only), LD_LIBRARY_PATH=$build and then the given variables (a later one
# wins); its output is kept in $logs/NAME.log. It prints the case's verdict line; a case that
# exits with a status above 1 (a crash, a signal, timeout's 124) or prints no verdict of its own
# is charged "FAIL GROUP:NAME crashed (why): <the last lines it printed>". A FAIL sets rc=1.
# With show_case_log=1 the case's other lines (its "# ..." notes) are printed too.
#
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh). The
# headers are the repository's (include/) when DAT2_ROOT has them, else the system's.

harness_common=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

harness_init() {
  group=$1
  out=${DAT2_OUT:?}
  build=${DAT2_BUILD:?}
  cc=${CC:-gcc}
  cflags=${CFLAGS:-}
  if [ -e "${DAT2_ROOT:-/nonexistent}/include/dat2/udat.h" ]; then
    hdr="-I$DAT2_ROOT/include"
  else
    hdr=""
  fi
  logs=$out/cases
  mkdir -p "$logs"
  rc=0
  case_timeout=60
  show_case_log=0
  prog=
}

harness_build() {
  prog=$out/$1
  shift
  # shellcheck disable=SC2086 # $cflags and $hdr are lists of words
  if ! $cc $cflags $hdr -I"$harness_common" -pthread -o "$prog" "$@" "$harness_common/harness.c" \
    -L"$build" -ldat2 2>"$out/build.log"; then
    echo "FAIL $group:build $(head -c 400 "$out/build.log" | tr '\n' ' ')"
    exit 1
  fi
}

run_case() {
  local name=$1
  shift
  local log=$logs/$name.log
  env DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$build" "$@" \
    timeout "$case_timeout" "$prog" "$name" >"$log" 2>&1
  local status=$?
  local verdict
  verdict=$(grep -E "^(PASS|FAIL|SKIP) $group:$name( |\$)" "$log" | tail -1)
  [ "$show_case_log" = 1 ] && grep -v -E '^(PASS|FAIL|SKIP) ' "$log"
  if [ $status -gt 1 ] || [ -z "$verdict" ]; then
    local why="exit status $status"
    [ $status -eq 124 ] && why="timed out"
    [ $status -gt 128 ] && why="killed by signal $((status - 128))"
    verdict="FAIL $group:$name crashed ($why): $(grep -v -E '^(PASS|FAIL|SKIP) ' "$log" | tail -3 | tr '\n' ' ')"
  fi
  echo "$verdict"
  [[ $verdict == "FAIL "* ]] && rc=1
  return 0
}

run_all() {
  local start names name
  start=$(date +%s)
  if ! names=$(LD_LIBRARY_PATH="$build" "$prog" list 2>"$out/list.log") || [ -z "$names" ]; then
    echo "FAIL $group:list \"${prog##*/} list\" failed: $(head -c 400 "$out/list.log" | tr '\n' ' ')"
    rc=1
    return
  fi
  for name in $names; do
    extra=()
    if declare -F case_env >/dev/null; then case_env "$name"; fi
    run_case "$name" ${extra[@]+"${extra[@]}"}
  done
  echo "# $group took $(($(date +%s) - start)) s"
}
