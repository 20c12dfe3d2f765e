#!/usr/bin/env bash
# Debian's dapltest (package dapl2-utils) against our library and its built-in dat2-soft
# provider, with no dat.conf at all:
#   dapltest -T F -D dat2-soft -f <test> -n <port>   for hwconn endpoint pz mem queryinfo connmgt
#   dapltest -T L -D dat2-soft -n <port>             the limit tests
# A functional test passes when dapltest exits 0, prints no "failed in file" line, prints
# the expected number of "Result:" lines and every one of them is PASS (queryinfo case 5,
# which dapltest itself does not support, prints UNSUPP: that one is accepted). The limit
# test passes when every limit reports all the objects it asked for.
#
# dapltest is a prebuilt binary (not instrumented), so it runs in the plain pass only.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init dapltest
dapltest=${DAPLTEST:-$(command -v dapltest || echo /usr/bin/dapltest)}
# test name and the number of cases dapltest runs for it
tests="hwconn:4 endpoint:3 pz:3 mem:5 queryinfo:18 connmgt:2"

names() { for t in $tests; do echo "fft-${t%%:*}"; done; echo limit; }
# shellcheck disable=SC2046 # one name a word
plain_only "prebuilt binary, not instrumented: runs in the plain pass only" $(names)
# shellcheck disable=SC2046
[ -x "$dapltest" ] || skip_all "dapltest not installed (apt-get install dapl2-utils)" $(names)
# The limit test's service points use fixed qualifiers (dapltest's own), so run where no
# other program can hold those ports.
. "$root/c-tests/netns.sh"

# dapltest listens on its port (-n, default 62000) and the limit test on up to 1000 ports
# after it. Another dapltest on this machine (say a -T S server) would make ours fail with
# DAT_CONN_QUAL_IN_USE, so each run gets a block of 1000 ports below the ephemeral range
# with no listener in it.
pick_port() {
  local listening start base i
  listening=$(ss -ltnH 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')
  start=$(( ($$ + RANDOM) % 12 ))
  for i in $(seq 0 11); do
    base=$(( 20000 + ((start + i) % 12) * 1000 ))
    if ! echo "$listening" | awk -v lo="$base" -v hi="$((base + 1000))" '$1 >= lo && $1 <= hi { f = 1 } END { exit !f }'; then
      echo "$base"; return
    fi
  done
  echo 62000
}

# Runs dapltest with "$@" into $1; once more on another port block if a port was taken.
run() {
  local log=$1; shift
  local attempt status
  for attempt in 1 2; do
    env DAT_OVERRIDE=/nonexistent LD_LIBRARY_PATH="$build" timeout 120 "$dapltest" "$@" -n "$(pick_port)" >"$log" 2>&1
    status=$?
    grep -q DAT_CONN_QUAL_IN_USE "$log" || break
    [ $attempt -eq 1 ] && cp "$log" "$log.port-in-use"
  done
  return $status
}

# Why a functional test's log is not a pass (empty when it is one).
fft_problems() {
  local log=$1 status=$2 want=$3
  if [ "$status" -eq 124 ]; then echo "timed out"; return; fi
  [ "$status" -ne 0 ] && echo "exit status $status;"
  grep -m1 "failed in file" "$log" | sed 's/^[[:space:]]*/failed check: /; s/$/;/'
  awk -v want="$want" '
    /case: *[0-9]+/ { c = $NF }
    /^Result:/ {
      n++
      r = $2
      if (r != "PASS" && !(r == "UNSUPP" && c == 5 && FILENAME ~ /queryinfo/)) bad = bad " case " c " " r
    }
    END {
      if (bad != "") printf "not PASS:%s;", bad
      if (n != want) printf " %d Result lines, expected %d;", n, want
    }' "$log"
}

for t in $tests; do
  name=${t%%:*} want=${t##*:}
  log=$out/fft-$name.log
  run "$log" -T F -D dat2-soft -f "$name"
  status=$?
  why=$(fft_problems "$log" "$status" "$want" | tr '\n' ' ')
  if [ -z "$why" ]; then
    pass "fft-$name"
  else
    fail "fft-$name" "$why(log: $log)"
  fi
done

# The limit test: each limit with the default maximum of 1000 objects, and registrations up
# to 1 GiB.
log=$out/limit.log
run "$log" -T L -D dat2-soft
status=$?
why=""
if [ $status -eq 124 ]; then why="timed out; "; elif [ $status -ne 0 ]; then why="exit status $status; "; fi
grep -q "failed in file" "$log" && why+="$(grep -m1 'failed in file' "$log" | sed 's/^[[:space:]]*//'); "
for line in "IAs opened: 1000" "PZs created: 1000" "CNOs created: 1000" "EVDs created: 1000" \
    "EPs created: 1000" "RSPs created: 1000" "PSPs created: 1000" "LMRs created: 1000" \
    "recv buffers posted per EP: 1000" "LMR of 0x40000000 bytes OK"; do
  grep -q "LimitTest: $line" "$log" || why+="no \"$line\"; "
done
if [ -z "$why" ]; then
  pass limit
else
  fail limit "$why(log: $log)"
fi
exit $rc
