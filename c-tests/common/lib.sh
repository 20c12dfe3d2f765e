# The shared pieces of the test groups' run.sh (c-tests/*/run.sh): the preamble, the verdict
# lines, building C programs, and running the cases of a program of the common runner
# (c-tests/common/harness.c: memory, dataxfer, afterfree, fakeprov) each in a process of its
# own, so that a crash or a hang is charged to the case that caused it. Sourced by bash:
#
#   here=$(cd "$(dirname "$0")" && pwd)
#   . "$here/../common/lib.sh"
#   harness_init GROUP [system]
#
# harness_init sets, from the environment c-tests/run-all.sh gives every group (DAT2_ROOT,
# DAT2_BUILD, DAT2_OUT, CC, CFLAGS, DAT2_PASS):
#   group          GROUP
#   label          the verdicts' prefix: GROUP; a run.sh may change it between its runs
#                  (fakeprov: debian, dat2), or empty it for names without a prefix (abi)
#   root, build, out   DAT2_ROOT (default: the repository holding this file), DAT2_BUILD
#                  (default: $root/build, as run-all.sh's), DAT2_OUT (required)
#   cc, cflags     CC (default gcc) and the pass's CFLAGS
#   plain_cflags   $cflags without the sanitizer flags: for a shared object loaded into
#                  sanitized and plain programs alike (an uninstrumented .so loads fine into an
#                  ASan process)
#   hdr            where <dat2/...> comes from: -I$root/include when the repository has the
#                  headers, else the system's. With "system": the system's (Debian's
#                  libdapl-dev), unless DAT2_TEST_HEADERS=repo
#   debian_lib     Debian's libdat2.so.2 (package libdapl2), installed or not
#   rc=0           set to 1 by every FAIL line printed through this file; end with exit $rc
#   logs=$out/cases, case_timeout=60, show_case_log=0, case_lib=$build, prog=   (run_case)
#
# Verdicts (each one line; pass, fail and skip need only label, not harness_init):
#   pass NAME [TEXT...]      "PASS LABEL:NAME [TEXT]"
#   fail NAME [WHY...]       "FAIL LABEL:NAME [WHY]", and rc=1
#   skip NAME [WHY...]       "SKIP LABEL:NAME [WHY]"
#   skip_all WHY NAME...     "SKIP LABEL:NAME WHY" for each NAME, then exit 0
#   plain_only WHY NAME...   skip_all, except in the plain pass (prebuilt, uninstrumented
#                            programs; a Rust target)
#   died STATUS              words for the exit status of a command run under timeout(1):
#                            "timed out" (124), "killed by signal N" (above 128), else nothing
#
# Building:
#   compile [--plain] NAME OUTPUT ARGS...
#       $cc $cflags $hdr -o OUTPUT ARGS (--plain: $plain_cflags), its messages in
#       $out/LABEL.NAME.log. If it fails: "FAIL LABEL:NAME <its first 400 characters>", rc=1,
#       returns 1.
#   harness_compile PROGRAM ARGS...
#       compile build $out/PROGRAM with harness.c and ARGS (sources, libraries); sets prog.
#   harness_build PROGRAM ARGS...
#       harness_compile, linked with -pthread against our library (-L$build -ldat2); exits 1
#       if it does not build.
# Prebuilt programs (tests/vm/check.sh: gcc under the VM's TCG takes half a minute or more
# per program, so the host builds them first):
#   DAT2_TEST_BUILD_ONLY=1   compile builds OUTPUT, keeps a copy in $DAT2_TEST_PREBUILT and
#                            ends the group (exit 0): each of the VM's groups builds one program
#   DAT2_TEST_PREBUILT=DIR   where the copies are; a compile whose whole command (OUTPUT's
#                            directory aside) equals a kept copy's, and none of whose files
#                            (sources, and the headers of include/dat2 and of each -I
#                            directory) is newer than the copy, takes the copy instead of
#                            running the compiler. The host and the VM see the same files at
#                            the same paths; check.sh also empties DIR before each run
#
# Running the cases of $prog:
#   case_timeout=SECONDS     the limit of each case (timeout(1))
#   case_lib=DIR             LD_LIBRARY_PATH of the cases ($build); empty: unset (a program
#                            linked to another libdat2 by its path)
#   case_env() { ...; }      optional: sets the array extra=(VAR=value...) for case $1 (run_all)
#   run_case NAME [VAR=value...]
#   run_all                  run_case for each name "$prog list" prints (a list that fails is
#                            "FAIL LABEL:list"), then "# GROUP took N s". DAT2_TEST_CASES, an
#                            extended regular expression, keeps only the names it matches
#                            whole (say "rdma_rkey_.*|shm_rkey_bounds"), in every group run;
#                            DAT2_TEST_CASES_<GROUP> (say DAT2_TEST_CASES_dataxfer), in that
#                            group only, instead. DAT2_TEST_SKIP_CASES_<GROUP>, a regular
#                            expression too, reports the names it matches whole as SKIP
#                            (left out of this run) without running them
#
# run_case NAME [VAR=value...] runs "$prog NAME" (with -l LABEL when the label is not the
# group's name) with DAT_OVERRIDE=/nonexistent (no dat.conf: the built-in devices only),
# LD_LIBRARY_PATH=$case_lib and then the given variables (a later one wins); its output is kept
# in $logs/NAME.log ($logs/LABEL-NAME.log under another label). It prints the case's verdict
# line, and the verdict lines of the case's checks ("LABEL:NAME:CHECK", see harness.h). A case
# that exits with a status above 1 (a crash, a signal, timeout's 124), prints no verdict, or
# exits with 1 (a failure) without a FAIL line (an ASan report) is charged "FAIL LABEL:NAME
# crashed (why): <the last lines it printed>" (its checks' lines are kept). A FAIL sets rc=1.
# With show_case_log=1 the case's other lines (its "# ..." notes) are printed too.

harness_common=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

harness_init() {
  group=$1
  label=$1
  root=${DAT2_ROOT:-$(cd "$harness_common/../.." && pwd)}
  out=${DAT2_OUT:?}
  build=${DAT2_BUILD:-$root/build}
  cc=${CC:-gcc}
  cflags=${CFLAGS:-}
  local f
  plain_cflags=""
  for f in $cflags; do
    case $f in -fsanitize* | -fno-sanitize*) ;; *) plain_cflags+="${plain_cflags:+ }$f" ;; esac
  done
  hdr=""
  if [ "${2:-}" = system ]; then
    [ "${DAT2_TEST_HEADERS:-system}" = repo ] && hdr="-I$root/include"
  elif [ -e "$root/include/dat2/udat.h" ]; then
    hdr="-I$root/include"
  fi
  debian_lib=/usr/lib/x86_64-linux-gnu/libdat2.so.2
  rc=0
  logs=$out/cases
  case_timeout=60
  show_case_log=0
  case_lib=$build
  prog=
}

pass() { echo "PASS ${label:+$label:}$*"; }
fail() { echo "FAIL ${label:+$label:}$*"; rc=1; }
skip() { echo "SKIP ${label:+$label:}$*"; }

skip_all() {
  local why=$1 name
  shift
  for name in "$@"; do skip "$name" "$why"; done
  exit 0
}

plain_only() {
  [ "${DAT2_PASS:-plain}" = plain ] || skip_all "$@"
}

died() {
  if [ "$1" -eq 124 ]; then
    echo "timed out"
  elif [ "$1" -gt 128 ]; then
    echo "killed by signal $(($1 - 128))"
  fi
}

compile() {
  local flags=$cflags
  if [ "$1" = --plain ]; then
    flags=$plain_cflags
    shift
  fi
  local name=$1 output=$2
  shift 2
  local log=$out/${label:+$label.}$name.log
  local kept="" command=""
  if [ -n "${DAT2_TEST_PREBUILT:-}" ]; then
    kept=$DAT2_TEST_PREBUILT/${label:+$label.}$name.${output##*/}
    command="$cc $flags $hdr -o ${output##*/} $*"
    if [ -z "${DAT2_TEST_BUILD_ONLY:-}" ] && [ -f "$kept" ] && [ -f "$kept.command" ] &&
      [ "$(<"$kept.command")" = "$command" ] && ! newer_than "$kept" $hdr "$@" && cp "$kept" "$output"; then
      echo "prebuilt: $kept" >"$log"
      return 0
    fi
  fi
  # shellcheck disable=SC2086 # $flags and $hdr are lists of words
  if ! $cc $flags $hdr -o "$output" "$@" 2>"$log"; then
    fail "$name" "$(head -c 400 "$log" | tr '\n' ' ')"
    return 1
  fi
  if [ -n "${DAT2_TEST_BUILD_ONLY:-}" ] && [ -n "$kept" ]; then
    mkdir -p "$DAT2_TEST_PREBUILT" && cp "$output" "$kept" && printf '%s\n' "$command" >"$kept.command" || exit
    skip build-only "DAT2_TEST_BUILD_ONLY: $output built, no case run"
    exit 0
  fi
}

# Is any file a compile reads (an argument, a header beside it or in an -I directory) newer
# than FILE?
newer_than() { # FILE compile-arguments...
  local kept=$1 a f
  shift
  for a in "$@"; do
    case $a in
      -I*)
        for f in "${a#-I}"/*.h "${a#-I}"/dat2/*.h; do
          [ -f "$f" ] && [ "$f" -nt "$kept" ] && return 0
        done
        ;;
      -*) ;;
      *)
        [ -f "$a" ] || continue
        [ "$a" -nt "$kept" ] && return 0
        # the headers beside a source, which it includes by a quoted name
        for f in "${a%/*}"/*.h; do
          [ -f "$f" ] && [ "$f" -nt "$kept" ] && return 0
        done
        ;;
    esac
  done
  return 1
}

harness_compile() {
  prog=$out/$1
  shift
  compile build "$prog" -I"$harness_common" "$harness_common/harness.c" "$@"
}

harness_build() {
  local program=$1
  shift
  harness_compile "$program" "$@" -pthread -L"$build" -ldat2 || exit 1
}

run_case() {
  local name=$1
  shift
  local log=$logs/$name.log opts=() base=()
  if [ "$label" != "$group" ]; then
    log=$logs/$label-$name.log
    opts=(-l "$label")
  fi
  mkdir -p "$logs"
  if [ -n "$case_lib" ]; then
    base=(DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$case_lib")
  else
    base=(-u LD_LIBRARY_PATH DAT_OVERRIDE=/nonexistent)
  fi
  env "${base[@]}" "$@" timeout "$case_timeout" "$prog" ${opts[@]+"${opts[@]}"} "$name" >"$log" 2>&1
  local status=$?
  # The case's own verdict (its last), its checks' ("LABEL:NAME:CHECK") and its last three
  # other lines, read by the shell itself: a grep costs a fifth of a second under the VM's TCG.
  # A log past 20,000 lines (a runaway case) is left to grep: the shell would take minutes.
  local own="" checks="" failed=0 line verdict rest last=() others="" n=0
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    if [ $n -gt 20000 ]; then
      own=$(grep -aE "^(PASS|FAIL|SKIP) $label:$name( |\$)" "$log" | tail -1)
      checks=$(grep -aE "^(PASS|FAIL|SKIP) $label:$name:" "$log")
      [ -n "$checks" ] && checks+=$'\n'
      [[ $'\n'$checks == *$'\n'"FAIL "* ]] && failed=1
      [ "$show_case_log" = 1 ] && tail -n +20001 "$log" | grep -avE '^(PASS|FAIL|SKIP) '
      others=$(grep -avE '^(PASS|FAIL|SKIP) ' "$log" | tail -3 | tr '\n' ' ')
      last=()
      break
    fi
    verdict=${line%% *}
    case $verdict in
      PASS | FAIL | SKIP)
        rest=${line#* }
        if [ "$rest" = "$label:$name" ] || [ "${rest#"$label:$name "}" != "$rest" ]; then
          own=$line
          continue
        elif [ "${rest#"$label:$name:"}" != "$rest" ]; then
          checks+=$line$'\n'
          [ "$verdict" = FAIL ] && failed=1
          continue
        elif [ "$line" != "$verdict" ]; then
          continue
        fi
        ;;
    esac
    [ "$show_case_log" = 1 ] && printf '%s\n' "$line"
    last=(${last[@]+"${last[@]:${#last[@]}-2}"} "$line")
  done <"$log"
  [ -n "$checks" ] && printf '%s' "$checks"
  [[ $own == "FAIL "* ]] && failed=1
  if [ $status -gt 1 ] || [ -z "$own$checks" ] || { [ $status = 1 ] && [ $failed = 0 ]; }; then
    local why
    why=$(died $status)
    for line in ${last[@]+"${last[@]}"}; do others+="$line "; done
    own="FAIL $label:$name crashed (${why:-exit status $status}): $others"
  fi
  [ -n "$own" ] && echo "$own"
  [[ $own == "FAIL "* ]] && failed=1
  [ $failed = 1 ] && rc=1
  return 0
}

run_all() {
  local start names name
  start=$(date +%s)
  mkdir -p "$logs"
  if ! names=$(LD_LIBRARY_PATH="$case_lib" "$prog" list 2>"$out/list.log") || [ -z "$names" ]; then
    fail list "\"${prog##*/} list\" failed: $(head -c 400 "$out/list.log" | tr '\n' ' ')"
    return
  fi
  local only_var="DAT2_TEST_CASES_$group" skip_var="DAT2_TEST_SKIP_CASES_$group" only left_out
  only=${!only_var:-${DAT2_TEST_CASES:-}}
  left_out=${!skip_var:-}
  for name in $names; do
    if [ -n "$only" ] && ! [[ $name =~ ^($only)$ ]]; then
      continue
    fi
    if [ -n "$left_out" ] && [[ $name =~ ^($left_out)$ ]]; then
      skip "$name" "left out of this run ($skip_var)"
      continue
    fi
    extra=()
    if declare -F case_env >/dev/null; then case_env "$name"; fi
    run_case "$name" ${extra[@]+"${extra[@]}"}
  done
  echo "# $group took $(($(date +%s) - start)) s"
}
