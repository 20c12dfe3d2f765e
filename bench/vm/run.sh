#!/bin/bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Part of dat2: benchmarks on real verbs (Soft-RoCE, rxe0) inside the test VM, as ratios
# between programs measured in this one run. `make bench-vm` builds bench/vm/reg.c on the
# host and runs this script with tests/vm/run.sh; it does not work outside the VM.
#
#   1. Registration: bench/vm/reg times register+release at 4 KiB .. 256 MiB, "cold" (a
#      fresh mapping each time, its munmap timed apart), "rereg" (one buffer again and again)
#      and "pool" (the next buffer of a pool registered whole once), with local privileges,
#      remote read/write and all (0x33; pool with local and all), for raw verbs
#      (ibv_reg_mr/ibv_dereg_mr), Debian's libdat2 with its scm provider (ofa-v2-rxe0-1),
#      ours (dat2-verbs-rxe0-1) and ours with DAT2_MR_CACHE=0. Targets, each a ratio from
#      this run: remote-privilege registration (cold and rereg, rw and all) <= 1.10 x dapl
#      at every size; cached local re-registration >= 10 x faster than dapl at 4-64 KiB and
#      >= 50 x from 1 MiB up; cold local registration <= 2.0 x raw verbs at 4 KiB and
#      <= 1.25 x from 1 MiB up; what the cache adds to the munmap of a watched range no more
#      than libfabric's userfaultfd monitor adds (when its variant, fiuffd, is in the run).
#      Beside them, in the same rounds, the peers (bench/vm/reg_peer.h), local privileges, cold
#      and rereg: libfabric's verbs MR cache with its uffd and memhooks monitors, and UCX's
#      ucp_mem_map with its rcache; target: ours at least as good as the best peer on cold,
#      munmap and hit.
#   2. Data path: Debian's dapltest -T P (RW and RR, blocking and polling; one server per
#      library, client and server in this VM) through Debian's dapl and through ours, and
#      perftest's ib_write_bw and ib_write_lat on rxe0 as the limit. Targets: ours / dapl
#      >= 1.0; ours / perftest >= 0.9.
#   3. Instructions: bench/vm/ops under callgrind counts the user-space instructions (every
#      thread of the process) of one operation, post + completion, for RDMA write, RDMA read
#      and send/recv, completed by polling (dat_evd_dequeue) or blocking (dat_evd_wait), once
#      through Debian's dapl and once through ours; the harness's own count (the same loops
#      without DAT calls) is subtracted. Deterministic where timings under TCG are not.
#      Targets: ours <= dapl on each of the 6 rows, and on a dequeue that finds nothing
#      (each printed met or missed, then how many rows met).
# Every variant runs once per round, in the same order each round (A B C A B C ...), and
# the tables show medians over all rounds. Under TCG everything is ~30x slower than on
# hardware and the host's other load shows through: only ratios mean something. A target
# missed is reported, not failed; the exit status is non-zero only when something that
# must run (raw verbs, Debian's dapl, perftest, or ours once its IA opens) fails.
#
# Environment:
#   BENCH_VM_ROUNDS     registration rounds (5)
#   BENCH_VM_DP_ROUNDS  data path rounds (10)
#   BENCH_VM_ITERS      dapltest / perftest operations per run (500)
#   BENCH_VM_PIPE       operations in flight in the bandwidth phase (32)
#   BENCH_VM_SIZE       message size of the data path runs (4096)
#   BENCH_VM_OPS_ITERS  operations per counted phase of bench/vm/ops (20)
#   BENCH_VM_QUICK=1    one round of each with few iterations (a smoke run)
#   BENCH_VM_SKIP       "reg", "dp" and/or "ops": leave those parts out
#   BENCH_VM_OUT=DIR    copy the logs there at the end; to keep them after the VM, share DIR
#                       with the host: DAT2_VM_RW=DIR BENCH_VM_OUT=DIR make bench-vm. The
#                       runs themselves write to a scratch directory in the VM's own /tmp:
#                       a file on the 9p share, written between two timed iterations, slows
#                       the next one by ~100 us.
#   BENCH_VM_REPORT=DIR only print the tables again from the logs a run left in DIR (works
#                       outside the VM too)
#   DAT2_VM_ADDR        the VM's address on the device's netdev (10.0.2.15)
#   DAT2_VM_DEV         the RDMA device (rxe0)
# Processes are costly under TCG (each exec is translated anew), so the tables come from
# one awk run each and timings use $EPOCHREALTIME.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
DEV=${DAT2_VM_DEV:-rxe0}
ADDR=${DAT2_VM_ADDR:-10.0.2.15}
QUICK=${BENCH_VM_QUICK:-0}
ROUNDS=${BENCH_VM_ROUNDS:-5}
DP_ROUNDS=${BENCH_VM_DP_ROUNDS:-10}
ITERS=${BENCH_VM_ITERS:-500}
PIPE=${BENCH_VM_PIPE:-32}
SIZE=${BENCH_VM_SIZE:-4096}
OPS_ITERS=${BENCH_VM_OPS_ITERS:-20}
SKIP=${BENCH_VM_SKIP:-}
DAPL_IA=ofa-v2-${DEV}-1
OURS_IA=dat2-verbs-${DEV}-1
CONF=$ROOT/tests/vm/dat.conf
if [ "$QUICK" = 1 ]; then
  ROUNDS=1 DP_ROUNDS=1 ITERS=100 OPS_ITERS=10
fi
REPORT=${BENCH_VM_REPORT:-}
KEEP=""
if [ -n "$REPORT" ]; then
  OUT=$REPORT
  [ -d "$OUT" ] || { echo "bench/vm/run.sh: no directory $OUT" >&2; exit 2; }
else
  OUT=$(mktemp -d /tmp/bench-vm.XXXXXX) || exit 1
  KEEP=${BENCH_VM_OUT:-}
fi

say() { printf '%s\n' "$*"; }
usec() { local t=${EPOCHREALTIME/./}; printf '%s' "$((10#$t))"; }
T0=$(usec)
elapsed() { printf '%d' $(( ($(usec) - T0) / 1000000 )); }
failed=""
fail() { failed+="$*; "; say "error: $*"; }

# timed LABEL CMD...: runs CMD and appends "LABEL SECONDS STATUS" to $OUT/times.log.
timed() {
  local label=$1 t st d
  shift
  t=$(usec)
  "$@"
  st=$?
  d=$(( $(usec) - t ))
  printf '%s %d.%02d %s\n' "$label" $((d / 1000000)) $((d % 1000000 / 10000)) "$st" >>"$OUT/times.log"
  return "$st"
}

# Every server we start is recorded here and ended (by its pid) when we leave.
PIDS=""
# shellcheck disable=SC2329  # called by the EXIT trap
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null; done
  for p in $PIDS; do wait "$p" 2>/dev/null; done
  PIDS=""
  if [ -z "$REPORT" ] && [ -n "$KEEP" ]; then
    mkdir -p "$KEEP" && cp -p "$OUT"/* "$KEEP"/ && say "bench-vm: logs copied to $KEEP"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "$REPORT" ] && [ ! -d "/sys/class/infiniband/$DEV" ]; then
  say "bench/vm/run.sh: no RDMA device $DEV here; run it in the test VM: make bench-vm"
  exit 2
fi
ulimit -l unlimited 2>/dev/null

# The registration program: the one make bench-vm built, or one built here.
REG=$BUILD/bench-vm/reg
if [ -z "$REPORT" ] && { [ ! -x "$REG" ] || [ "$ROOT/bench/vm/reg.c" -nt "$REG" ]; }; then
  REG=$OUT/reg
  say "building $REG (no up-to-date build/bench-vm/reg)"
  ${CC:-cc} -O2 -Wall -Wextra -I"$ROOT/include" -o "$REG" "$ROOT/bench/vm/reg.c" -L"$BUILD" -ldat2 -libverbs ||
    { say "error: cannot build bench/vm/reg.c"; exit 1; }
fi
OPS=$BUILD/bench-vm/ops
if [ -z "$REPORT" ] && { [ ! -x "$OPS" ] || [ "$ROOT/bench/vm/ops.c" -nt "$OPS" ]; }; then
  OPS=$OUT/ops
  say "building $OPS (no up-to-date build/bench-vm/ops)"
  ${CC:-cc} -O2 -g -Wall -Wextra -I"$ROOT/include" -o "$OPS" "$ROOT/bench/vm/ops.c" -L"$BUILD" -ldat2 -lpthread ||
    { say "error: cannot build bench/vm/ops.c"; exit 1; }
fi

# The peers' registration programs (bench/vm/reg_peer.h): reg built with libfabric ("fi") and
# with UCX ("ucx"), the ones make bench-vm built or ones built here; a peer that cannot be
# built shows as n/a.
declare -A PEER_BIN=()
peer_build() { # fi|ucx
  local k=$1 bin=$BUILD/bench-vm/reg-$1 def libs
  if [ -z "$REPORT" ] && { [ ! -x "$bin" ] || [ "$ROOT/bench/vm/reg.c" -nt "$bin" ] || [ "$ROOT/bench/vm/reg_peer.h" -nt "$bin" ]; }; then
    bin=$OUT/reg-$k
    case $k in fi) def=REG_PEER_FI libs="-lfabric" ;; *) def=REG_PEER_UCX libs="-lucp -lucs" ;; esac
    # shellcheck disable=SC2086  # libs holds several words
    ${CC:-cc} -O2 -Wall -Wextra -I"$ROOT/include" -D$def -rdynamic -o "$bin" "$ROOT/bench/vm/reg.c" -L"$BUILD" -ldat2 \
      -libverbs $libs -ldl 2>"$OUT/reg-$k.build.err" ||
      { say "note: cannot build the $k peer ($(head -c 160 "$OUT/reg-$k.build.err")); its columns show n/a"; return; }
  fi
  PEER_BIN[$k]=$bin
}
PEERS=""
if [ -z "$REPORT" ]; then
  peer_build fi
  peer_build ucx
  [ -n "${PEER_BIN[fi]:-}" ] && PEERS+=" fiuffd fimh"
  [ -n "${PEER_BIN[ucx]:-}" ] && PEERS+=" ucx"
fi

# run_as VARIANT CMD...: CMD with the library and environment of a variant:
#   raw, dapl   Debian's libdat2 (no LD_LIBRARY_PATH) and tests/vm/dat.conf
#   dat2        our build/libdat2.so.2 (it lists dat2-verbs-<dev>-<port> by itself)
#   dat2nc      ours with DAT2_MR_CACHE=0
run_as() {
  local v=$1
  shift
  case $v in
    raw | dapl) env -u LD_LIBRARY_PATH DAT_OVERRIDE="$CONF" "$@" ;;
    dat2) env LD_LIBRARY_PATH="$BUILD" DAT_OVERRIDE="$CONF" "$@" ;;
    dat2nc) env LD_LIBRARY_PATH="$BUILD" DAT_OVERRIDE="$CONF" DAT2_MR_CACHE=0 "$@" ;;
    # The peers (their MR cache statistics go to stderr at the end):
    #   fiuffd, fimh  libfabric's verbs provider, MR cache monitor userfaultfd / memory hooks
    #   ucx           UCX's ucp_mem_map with the rc_verbs transport's md (and its rcache)
    fiuffd | fimh)
      env -u LD_LIBRARY_PATH FI_MR_CACHE_MONITOR="$([ "$v" = fimh ] && echo memhooks || echo uffd)" \
        FI_LOG_LEVEL=info FI_LOG_SUBSYS=mr "$@" ;;
    ucx) env -u LD_LIBRARY_PATH UCX_TLS=rc_verbs "$@" ;;
  esac
}

# Whether our library opens the verbs IA (it cannot before the verbs device lands): all of
# ours shows as n/a otherwise, and the rest still runs.
[ -n "$REPORT" ] || say "bench-vm: $(uname -r), $(nproc) CPUs, device $DEV, our library $BUILD"
OURS=1
if [ -n "$REPORT" ]; then
  compgen -G "$OUT/reg-dat2-*.log" >/dev/null || compgen -G "$OUT/dp-dat2-*.log" >/dev/null || [ -f "$OUT/ops-dat2.log" ] || OURS=0
  for f in "$OUT"/reg-raw-*.log; do
    f=${f##*-}
    f=${f%.log}
    [[ $f =~ ^[0-9]+$ ]] && [ "$f" -gt 0 ] && ROUNDS=$f
  done
elif ! run_as dat2 timeout 60 "$REG" dat "$OURS_IA" rereg:4K:1 >"$OUT/ours-probe.log" 2>&1; then
  OURS=0
  say "note: $OURS_IA does not open with our library ($(grep -m1 'reg:' "$OUT/ours-probe.log" | cut -c1-160)); its columns show n/a"
fi

# Shared by both tables' awk programs: median of v[1..n], ratio, number and verdict format.
AWK_LIB='
function median(v, n,    i, j, t) {
  for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
  if (n == 0) return ""
  return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function ratio(a, b, d) { return (a == "" || b == "" || b + 0 == 0) ? "n/a" : sprintf("%.*f", d, a / b) }
function num(x) { return (x == "") ? "n/a" : sprintf(x >= 100 ? "%.0f" : "%.1f", x) }
function verdict(r, op, t) {
  if (r == "n/a") return ""
  return ((op == "<=") ? (r + 0 <= t) : (r + 0 >= t)) ? "met" : "missed"
}
function tally(v, k) { if (v != "") { total[k]++; if (v == "met") good[k]++ } }
function target(k, text, why) {
  if (why != "") printf "target %s: n/a (%s)\n", text, why
  else if (total[k] == 0) printf "target %s: n/a (no figures)\n", text
  else printf "target %s: %s (%d of %d)\n", text, (good[k] == total[k]) ? "met" : "missed", good[k] + 0, total[k]
}
'

# =========================================================================== registration
# Shared by the registration tables' awk programs (after AWK_LIB): var and file, the variant and
# the log being read, the samples, and med(VARIANT, MODE, SIZE, FIELD), the median of one column
# (t: register+release, u: munmap).
AWK_REG_LIB='
FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, p, "-"); var = p[2]; file = f }
$1 == "sample" { k = var SUBSEP $2 SUBSEP $3; n[k]++; t[k, n[k]] = $4; u[k, n[k]] = $5 }
function med(v, m, s, which,    k, i, a) {
  k = v SUBSEP m SUBSEP s
  for (i = 1; i <= n[k]; i++) a[i] = (which == "t") ? t[k, i] : u[k, i]
  return median(a, n[k] + 0)
}
function human(s) { return s >= 1048576 ? (s / 1048576) "M" : (s / 1024) "K" }
'
SIZES="4096 65536 1048576 16777216 268435456"
# Timed iterations per size and round.
reg_iters() {
  if [ "$QUICK" = 1 ]; then
    case $1 in 268435456) echo 1 ;; 16777216) echo 2 ;; *) echo 4 ;; esac
  else
    case $1 in 268435456) echo 2 ;; 16777216) echo 4 ;; 1048576) echo 8 ;; *) echo 16 ;; esac
  fi
}

# The privilege sets (reg.c's PRIV) and the modes measured with each: local, remote read and
# write, and all (0x33). pool is measured with local and all privileges.
PRIVS="local rw all"
reg_modes() { if [ "$1" = rw ]; then echo "cold rereg"; else echo "cold rereg pool"; fi; }

reg_measure() {
  local specs=() peer_specs=() s v r log st p m mode variants="raw dapl"
  # The peers' backends register with local privileges and hold one registration at a time.
  for m in cold rereg; do
    for s in $SIZES; do peer_specs+=("$m:$s:$(reg_iters "$s")"); done
  done
  for p in $PRIVS; do
    for m in $(reg_modes "$p"); do
      mode=$m
      [ "$p" = local ] || mode=$m/$p
      for s in $SIZES; do specs+=("$mode:$s:$(reg_iters "$s")"); done
    done
  done
  [ $OURS = 1 ] && variants+=" dat2 dat2nc"
  variants+=$PEERS
  say "== registration: $ROUNDS rounds of: $variants"
  for r in $(seq 1 "$ROUNDS"); do
    for v in $variants; do
      log=$OUT/reg-$v-$r.log
      case $v in
        raw) timed "reg-$v-$r" run_as raw timeout 900 "$REG" raw "$DEV" "${specs[@]}" >"$log" 2>"$log.err" ;;
        dapl) timed "reg-$v-$r" run_as dapl timeout 900 "$REG" dat "$DAPL_IA" "${specs[@]}" >"$log" 2>"$log.err" ;;
        fiuffd | fimh) timed "reg-$v-$r" run_as "$v" timeout 900 "${PEER_BIN[fi]}" fi "$DEV" "${peer_specs[@]}" >"$log" 2>"$log.err" ;;
        ucx) timed "reg-$v-$r" run_as ucx timeout 900 "${PEER_BIN[ucx]}" ucx "$DEV" "${peer_specs[@]}" >"$log" 2>"$log.err" ;;
        *) timed "reg-$v-$r" run_as "$v" timeout 900 "$REG" dat "$OURS_IA" "${specs[@]}" >"$log" 2>"$log.err" ;;
      esac
      st=$?
      # A peer that fails is noted (its figures show n/a); the others must run.
      case " $PEERS " in *" $v "*) [ $st = 0 ] || say "note: peer $v round $r: exit status $st: $(grep -m1 'reg:' "$log.err" | cut -c1-200)"; st=0 ;; esac
      [ $st = 0 ] || fail "registration $v round $r: exit status $st: $(grep -m1 'reg:' "$log.err" | cut -c1-200)"
    done
    say "   round $r done ($(elapsed) s)"
  done
  say ""
}

# One table per privilege set, a row per mode and size, a column per variant (any reg-VARIANT-
# ROUND.log of the run: raw, dapl, dat2 and dat2nc first, then others, such as peers' programs
# printing the same sample lines); then the ratios and the targets.
reg_report() {
  local why=""
  [ $OURS = 1 ] || why="$OURS_IA does not open"
  awk -v sizes="$SIZES" -v why="$why" -v last="reg-dat2-$ROUNDS.log" -v munmap_peer="fiuffd" "$AWK_LIB"'
    FNR == 1 {
      file = FILENAME; sub(/.*\//, "", file); var = file; sub(/^reg-/, "", var); sub(/-[0-9]+\.log$/, "", var)
      if (!(var in seen)) { seen[var] = 1; found[++nfound] = var }
    }
    $1 == "sample" { k = var SUBSEP $2 SUBSEP $3; n[k]++; t[k, n[k]] = $4; u[k, n[k]] = $5 }
    $1 == "cache" && file == last { c = $0; sub(/^cache DAT2_MR_CACHE_?/, "", c); cache = cache sep c; sep = "; " }
    # med(VARIANT, MODE, SIZE, FIELD): the median of one column (t: register+release, u: munmap).
    function med(v, m, s, which,    k, i, a) {
      k = v SUBSEP m SUBSEP s
      for (i = 1; i <= n[k]; i++) a[i] = (which == "t") ? t[k, i] : u[k, i]
      return median(a, n[k] + 0)
    }
    function human(s) { return s >= 1048576 ? (s / 1048576) "M" : (s / 1024) "K" }
    function label(v) { return v == "dat2nc" ? "nocache" : v }
    # table(PRIV, TITLE, MODES): one privilege set, every variant.
    function table(p, title, modes,    nm, M, i, j, m, mode, line) {
      print title
      line = sprintf("%-7s%-6s|", "", "size"); for (j = 1; j <= nv; j++) line = line sprintf("%9s", label(V[j])); print line
      nm = split(modes, M, " ")
      for (m = 1; m <= nm; m++) {
        mode = (M[m] == "munmap") ? "cold" : M[m]
        if (p != "local") mode = mode "/" p
        for (i = 1; i <= ns; i++) {
          line = sprintf("%-7s%-6s|", M[m], human(S[i]))
          for (j = 1; j <= nv; j++) line = line sprintf("%9s", num(med(V[j], mode, S[i], M[m] == "munmap" ? "u" : "t")))
          print line
        }
      }
      print ""
    }
    END {
      ns = split(sizes, S, " ")
      nv = 0; split("raw dapl dat2 dat2nc", K, " ")
      for (j = 1; j <= 4; j++) if (K[j] in seen) V[++nv] = K[j]
      for (j = 1; j <= nfound; j++) if (found[j] !~ /^(raw|dapl|dat2|dat2nc)$/) V[++nv] = found[j]
      print "Registration, microseconds per register + release (medians of all rounds'\'' samples)."
      print "cold: a fresh mapping each time; munmap: the unmap that follows it (a cache works there);"
      print "rereg: the same buffer again; pool: the next buffer of a pool that stays registered whole."
      print "raw = ibv_reg_mr/ibv_dereg_mr; dapl = Debian'\''s libdat2 (scm provider); dat2 = ours (cache on,"
      print "the default); nocache = ours with DAT2_MR_CACHE=0. Samples per size and variant: " n["raw" SUBSEP "cold" SUBSEP S[1]] + 0 " (4K), " n["raw" SUBSEP "cold" SUBSEP S[ns]] + 0 " (256M)."
      print ""
      table("local", "Local privileges (LOCAL_READ|LOCAL_WRITE; raw: LOCAL_WRITE)", "cold munmap rereg pool")
      table("rw", "Remote read and write (0x32: LOCAL_WRITE|REMOTE_READ|REMOTE_WRITE; raw: the same)", "cold munmap rereg")
      table("all", "All privileges (0x33; raw: as rw, with REMOTE_ATOMIC)", "cold munmap rereg pool")
      fmt = "%-5s|%6s %6s %6s %6s %-7s|%8s %-7s|%8s %-7s|%8s %8s %8s\n"
      print "Ratios. remote: dat2/dapl, cold and rereg, rw and all (target <= 1.10); hit: local rereg"
      print "dapl/dat2 (target >= 10 at 4K-64K, >= 50 from 1M); cold: local cold dat2/raw (target <= 2.0"
      print "at 4K, <= 1.25 from 1M; 64K informs); pool: local pool dat2/raw; munmap+: what the munmap"
      print "after a local cold registration costs more than raw verbs'\'' (us), for dat2 and libfabric'\''s"
      print "userfaultfd monitor (" munmap_peer ", when in the run; target: dat2 no more)."
      printf fmt, "", "remote", "", "", "", "", "hit", "", "cold", "", "pool", "munmap+", "munmap+"
      printf fmt, "size", "c/rw", "c/all", "r/rw", "r/all", "", "dapl/d2", "", "d2/raw", "", "d2/raw", "dat2", munmap_peer
      for (i = 1; i <= ns; i++) {
        s = S[i]; worst = ""
        split("cold/rw cold/all rereg/rw rereg/all", RM, " ")
        for (j = 1; j <= 4; j++) {
          rr[j] = ratio(med("dat2", RM[j], s, "t"), med("dapl", RM[j], s, "t"), 2)
          vr = verdict(rr[j], "<=", 1.10); tally(vr, "remote")
          if (vr == "missed" || (vr == "met" && worst == "")) worst = vr
        }
        rh = ratio(med("dapl", "rereg", s, "t"), med("dat2", "rereg", s, "t"), 1)
        vh = verdict(rh, ">=", s < 1048576 ? 10 : 50); tally(vh, "hit")
        rc = ratio(med("dat2", "cold", s, "t"), med("raw", "cold", s, "t"), 2)
        vc = (s == 4096) ? verdict(rc, "<=", 2.0) : (s >= 1048576) ? verdict(rc, "<=", 1.25) : ""
        tally(vc, "cold")
        rp = ratio(med("dat2", "pool", s, "t"), med("raw", "pool", s, "t"), 2)
        ur = med("raw", "cold", s, "u"); ud = med("dat2", "cold", s, "u"); uf = med(munmap_peer, "cold", s, "u")
        ad = (ud == "" || ur == "") ? "" : ud - ur; af = (uf == "" || ur == "") ? "" : uf - ur
        vu = (ad == "" || af == "") ? "" : (ad <= af) ? "met" : "missed"; tally(vu, "munmap")
        printf fmt, human(s), rr[1], rr[2], rr[3], rr[4], worst, rh, vh, rc, vc, rp, num(ad), num(af) (vu == "" ? "" : " " vu)
      }
      print ""
      target("remote", "remote-privilege registration <= 1.10 x dapl (cold and rereg, rw and all), figures", why)
      target("hit", "cached local re-registration >= 10 x (4K-64K) / 50 x (1M up) faster than dapl, sizes", why)
      target("cold", "cold local registration <= 2.0 x raw verbs at 4K, <= 1.25 x from 1M, sizes", why)
      mwhy = why
      if (mwhy == "" && !(munmap_peer in seen)) mwhy = "no " munmap_peer " variant (libfabric, userfaultfd monitor) in this run"
      target("munmap", "munmap cost the cache adds <= libfabric userfaultfd monitor'\''s, sizes", mwhy)
      if (cache != "") print "dat2 cache counters of one process (" last "): " cache
    }' "$OUT"/reg-*-*.log
}

# The peers a user would pick instead of a DAT library (see run_as), beside dat2, from the same
# rounds: cold, munmap and hit (rereg) medians, then dat2 against the best peer of each row
# (target: dat2 at least as good, dat2/best <= 1.00), then whether each peer's cache was used:
# device registrations per registration asked for (reg_peer.h counts ibv_reg_mr calls), and
# libfabric's own MR cache statistics.
reg_peers_report() {
  local why="" fistats=""
  [ $OURS = 1 ] || why="$OURS_IA does not open"
  for v in fiuffd fimh; do
    [ -f "$OUT/reg-$v-$ROUNDS.log.err" ] &&
      fistats+="$v: $(grep -m1 -o 'MR cache stats:.*' "$OUT/reg-$v-$ROUNDS.log.err" | sed 's/MR cache stats: //'); "
  done
  awk -v sizes="$SIZES" -v why="$why" -v fistats="$fistats" "$AWK_LIB$AWK_REG_LIB"'
    $1 == "peer" { pc[var, $2] += $3 }
    $1 == "cache" && ($2 == "DAT2_MR_CACHE_HITS" || $2 == "DAT2_MR_CACHE_MISSES") { pc[var, $2] += $3 }
    END {
      ns = split(sizes, S, " "); np = split("fiuffd fimh ucx", P, " ")
      name["fiuffd"] = "fi-uffd"; name["fimh"] = "fi-mhook"; name["ucx"] = "ucx"
      print "Peers, microseconds (medians of the same rounds), local privileges: fi-uffd and fi-mhook ="
      print "libfabric 1.17 verbs provider (fi_mr_reg/fi_close) with its MR cache monitored by userfaultfd"
      print "and by memory hooks; ucx = UCX 1.13 ucp_mem_map/ucp_mem_unmap over rc_verbs (its rcache)."
      print "hit: the same buffer again (rereg)."
      print ""
      fmt = "%-5s|%7s %7s %7s %8s %7s |%7s %7s %7s %8s %7s |%7s %7s %8s %7s\n"
      printf fmt, "", "cold", "", "", "", "", "munmap", "", "", "", "", "hit", "", "", ""
      printf fmt, "size", "raw", "dat2", "fi-uffd", "fi-mhook", "ucx", "raw", "dat2", "fi-uffd", "fi-mhook", "ucx", "dat2", "fi-uffd", "fi-mhook", "ucx"
      for (i = 1; i <= ns; i++) {
        s = S[i]
        for (j = 1; j <= np; j++) {
          C[j] = med(P[j], "cold", s, "t"); U[j] = med(P[j], "cold", s, "u"); G[j] = med(P[j], "rereg", s, "t")
        }
        c0 = med("dat2", "cold", s, "t"); u0 = med("dat2", "cold", s, "u"); g0 = med("dat2", "rereg", s, "t")
        printf fmt, human(s), num(med("raw", "cold", s, "t")), num(c0), num(C[1]), num(C[2]), num(C[3]), \
          num(med("raw", "cold", s, "u")), num(u0), num(U[1]), num(U[2]), num(U[3]), num(g0), num(G[1]), num(G[2]), num(G[3])
        # The best peer of each column: the lowest median.
        bc = bu = bg = ""; nc[i] = nu[i] = ng[i] = "n/a"
        for (j = 1; j <= np; j++) {
          if (C[j] != "" && (bc == "" || C[j] + 0 < bc + 0)) { bc = C[j]; nc[i] = name[P[j]] }
          if (U[j] != "" && (bu == "" || U[j] + 0 < bu + 0)) { bu = U[j]; nu[i] = name[P[j]] }
          if (G[j] != "" && (bg == "" || G[j] + 0 < bg + 0)) { bg = G[j]; ng[i] = name[P[j]] }
        }
        rc[i] = ratio(c0, bc, 2); vc[i] = verdict(rc[i], "<=", 1.0); tally(vc[i], "pcold")
        ru[i] = ratio(u0, bu, 2); vu[i] = verdict(ru[i], "<=", 1.0); tally(vu[i], "punmap")
        rg[i] = ratio(g0, bg, 2); vg[i] = verdict(rg[i], "<=", 1.0); tally(vg[i], "phit")
      }
      print ""
      print "dat2 vs best peer: dat2 / the best peer of the row (lower is better; target <= 1.00)."
      fmt = "%-5s|%6s %-8s %-7s|%6s %-8s %-7s|%6s %-8s %-7s\n"
      printf fmt, "size", "cold", "best", "", "munmap", "best", "", "hit", "best", ""
      for (i = 1; i <= ns; i++)
        printf fmt, human(S[i]), rc[i], nc[i], vc[i], ru[i], nu[i], vu[i], rg[i], ng[i], vg[i]
      print ""
      target("pcold", "dat2 cold registration at least as good as the best peer, sizes", why)
      target("punmap", "dat2 munmap at least as good as the best peer, sizes", why)
      target("phit", "dat2 cache hit at least as good as the best peer, sizes", why)
      printf "device registrations per registration asked for, all rounds (below 1: served by a cache):"
      for (j = 1; j <= np; j++)
        if (pc[P[j], "calls"] > 0) printf " %s %d/%d (%d deregistered);", name[P[j]], pc[P[j], "regs"], pc[P[j], "calls"], pc[P[j], "deregs"]
      if (pc["dat2", "DAT2_MR_CACHE_MISSES"] != "")
        printf " dat2 misses %d, hits %d", pc["dat2", "DAT2_MR_CACHE_MISSES"], pc["dat2", "DAT2_MR_CACHE_HITS"]
      print ""
      if (fistats != "") print "libfabric MR cache statistics of the last round: " fistats
    }' "$OUT"/reg-*-*.log
}

# =========================================================================== data path
# shellcheck disable=SC2329  # called through timed
listening() { # PORT: whether a TCP socket listens on it
  local hex
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
# The GID index of the device's IPv4-mapped RoCE v2 address (perftest's -x), else 1.
gid_index() {
  local d=/sys/class/infiniband/$DEV/ports/1 f i t g
  for f in "$d"/gids/*; do
    i=${f##*/}
    read -r g <"$f" 2>/dev/null || continue
    read -r t <"$d/gid_attrs/types/$i" 2>/dev/null || continue
    case $g in
      0000:0000:0000:0000:0000:ffff:*) [ "$t" = "RoCE v2" ] && { echo "$i"; return; } ;;
    esac
  done
  echo 1
}

DSRV_PORT_dapl=62000
DSRV_PORT_dat2=63000
dsrv_start() { # variant ia port
  local log=$OUT/dapltest-server-$1.log pid i t
  t=$(usec)
  run_as "$1" timeout 3000 stdbuf -oL dapltest -T S -D "$2" -n "$3" >"$log" 2>&1 &
  pid=$!
  PIDS+=" $pid"
  eval "DSRV_PID_$1=$pid"
  for i in $(seq 1 120); do
    if grep -q 'Service Point Ready' "$log"; then
      printf 'dapltest-server-%s-ready %d 0\n' "$1" $(( ($(usec) - t) / 1000000 )) >>"$OUT/times.log"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  fail "dapltest -T S on $2 did not get ready: $(head -3 "$log" | tr -s ' \t\n' ' ' | cut -c1-160)"
  return 1
}
dsrv_stop() { # variant ia port
  local pid
  eval "pid=\${DSRV_PID_$1:-}"
  [ -n "$pid" ] || return 0
  run_as "$1" timeout 60 dapltest -T Q -s "$ADDR" -D "$2" -n "$3" >"$OUT/dapltest-quit-$1.log" 2>&1
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

PT_PORT=18600
# shellcheck disable=SC2329  # called through timed
perftest_run() { # program log args-of-both-sides...
  local prog=$1 log=$2 spid st
  shift 2
  PT_PORT=$((PT_PORT + 1))
  timeout 300 "$prog" -d "$DEV" -x "$GIDX" -F -p "$PT_PORT" "$@" >"$log.server" 2>&1 &
  spid=$!
  for _ in $(seq 1 100); do listening "$PT_PORT" && break; kill -0 "$spid" 2>/dev/null || break; sleep 0.2; done
  timeout 300 "$prog" -d "$DEV" -x "$GIDX" -F -p "$PT_PORT" "$@" "$ADDR" >"$log" 2>&1
  st=$?
  wait "$spid" 2>/dev/null
  return "$st"
}

dp_measure() {
  GIDX=$(gid_index)
  local cases=("RW-block|-m b RW" "RW-poll|-m p RW" "RR-block|-m b RR" "RR-poll|-m p RR")
  local libs="dapl" r c name args lib ia port log st try why
  local retries_dapl=0 retries_dat2=0
  rm -f "$OUT/dp-retries"
  [ $OURS = 1 ] && libs+=" dat2"
  say "== data path: $DP_ROUNDS rounds of dapltest -T P -i $ITERS -p $PIPE <op> $SIZE 1 for each of:"
  say "   $libs; then ib_write_bw -s $SIZE -n $ITERS -t $PIPE and ib_write_lat -s $SIZE -n $ITERS"
  say "   (GID index $GIDX, $ADDR)"
  dsrv_start dapl "$DAPL_IA" $DSRV_PORT_dapl
  [ $OURS = 1 ] && dsrv_start dat2 "$OURS_IA" $DSRV_PORT_dat2
  for r in $(seq 1 "$DP_ROUNDS"); do
    for c in "${cases[@]}"; do
      name=${c%%|*} args=${c#*|}
      for lib in $libs; do
        ia=$DAPL_IA port=$DSRV_PORT_dapl
        [ "$lib" = dat2 ] && ia=$OURS_IA port=$DSRV_PORT_dat2
        log=$OUT/dp-$lib-$name-$r.log
        # A run whose client prints no raw: line is tried again, twice at most: Debian's
        # scm provider now and then fails the client's last sync send (after the timed
        # phases) with "Client_Sync_Send-reaping DTO problem".
        for try in 1 2 3; do
          # shellcheck disable=SC2086  # args holds several words
          timed "dp-$lib-$name-$r-$try" run_as "$lib" timeout 300 dapltest -T P -s "$ADDR" -D "$ia" -n "$port" \
            -i "$ITERS" -p "$PIPE" $args "$SIZE" 1 >"$log.$try" 2>&1
          st=$?
          if grep -q '^raw: ' "$log.$try"; then
            mv "$log.$try" "$log"
            break
          fi
          if [ "$lib" = dapl ]; then retries_dapl=$((retries_dapl + 1)); else retries_dat2=$((retries_dat2 + 1)); fi
          echo "dapl $retries_dapl, dat2 $retries_dat2" >"$OUT/dp-retries"
          why="exit $st: $(grep -m1 -iE 'error|fail' "$log.$try" | cut -c1-160)"
          [ $try = 3 ] && fail "dapltest -T P $args on $ia (round $r): no raw: line in 3 runs, the last: $why"
        done
      done
    done
    timed "dp-perftest-bw-$r" perftest_run ib_write_bw "$OUT/dp-perftest-bw-$r.log" -s "$SIZE" -n "$ITERS" -t "$PIPE" ||
      fail "ib_write_bw (round $r): $(tail -n 2 "$OUT/dp-perftest-bw-$r.log" | tr -s ' \n' ' ' | cut -c1-160)"
    timed "dp-perftest-lat-$r" perftest_run ib_write_lat "$OUT/dp-perftest-lat-$r.log" -s "$SIZE" -n "$ITERS" ||
      fail "ib_write_lat (round $r): $(tail -n 2 "$OUT/dp-perftest-lat-$r.log" | tr -s ' \n' ' ' | cut -c1-160)"
    say "   round $r done ($(elapsed) s)"
  done
  dsrv_stop dapl "$DAPL_IA" $DSRV_PORT_dapl
  [ $OURS = 1 ] && dsrv_stop dat2 "$OURS_IA" $DSRV_PORT_dat2
  say ""
}

dp_report() {
  local why="" retries="dapl 0, dat2 0"
  [ $OURS = 1 ] || why="$OURS_IA does not open"
  [ -f "$OUT/dp-retries" ] && read -r retries <"$OUT/dp-retries"
  # dapltest's raw: line is: op, ops, size, segments, pipeline, cpu %, ops/s, MB/s, latency
  # (us), post (us), reap (us); it prints fractions as "%d.%d" of hundredths (so "35.7"
  # means 35.07). perftest's result row follows the header line that names its columns.
  shopt -s nullglob
  awk -v why="$why" -v retries="$retries" "$AWK_LIB"'
    function hundredths(x,    p) { split(x, p, "."); return p[1] + p[2] / 100 }
    FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, p, "-"); lib = p[2]; cs = p[3] "-" p[4]; hdr = "" }
    lib != "perftest" && /^raw: / {
      line = $0; sub(/^raw: /, "", line); m = split(line, a, /, */)
      k = lib SUBSEP cs; n[k]++
      ops[k, n[k]] = hundredths(a[7]); mbs[k, n[k]] = hundredths(a[8]); lat[k, n[k]] = hundredths(a[9])
    }
    lib == "perftest" && hdr != "" { if (hdr == "bw") bw[++nbw] = $4; else { pt[++npl] = $5; pa[npl] = $6 }; hdr = "" }
    lib == "perftest" && /BW average/ { hdr = "bw" }
    lib == "perftest" && /t_typical/ { hdr = "lat" }
    function med(l, c, which,    k, i, v) {
      k = l SUBSEP c
      for (i = 1; i <= n[k]; i++) v[i] = (which == "ops") ? ops[k, i] : (which == "mbs") ? mbs[k, i] : lat[k, i]
      return median(v, n[k] + 0)
    }
    END {
      nc = split("RW-block RW-poll RR-block RR-poll", CS, " ")
      print "Data path, medians over the rounds (runs per row: " n["dapl" SUBSEP "RW-poll"] + 0 "). op/s and MB/s (2^20 B/s)"
      print "come from dapltest'\''s pipelined phase; lat is its latency phase: one operation at a"
      print "time, polled, in microseconds (the same in both modes: the mode is the first phase'\''s)."
      print ""
      fmt = "%-9s|%9s %9s %6s %-7s|%7s %7s |%8s %8s %6s %-7s\n"
      printf fmt, "", "op/s", "", "", "", "MB/s", "", "lat", "", "", ""
      printf fmt, "case", "dapl", "dat2", "ratio", "", "dapl", "dat2", "dapl", "dat2", "ratio", ""
      for (i = 1; i <= nc; i++) {
        c = CS[i]
        o1 = med("dapl", c, "ops"); o2 = med("dat2", c, "ops"); l1 = med("dapl", c, "lat"); l2 = med("dat2", c, "lat")
        r1 = ratio(o2, o1, 2); v1 = verdict(r1, ">=", 1.0); tally(v1, "dapl")
        r2 = ratio(l1, l2, 2); v2 = verdict(r2, ">=", 1.0); tally(v2, "dapl")
        printf fmt, c, num(o1), num(o2), r1, v1, num(med("dapl", c, "mbs")), num(med("dat2", c, "mbs")), num(l1), num(l2), r2, v2
        if (c == "RW-poll") { ours_mbs = med("dat2", c, "mbs"); ours_lat = l2; dapl_mbs = med("dapl", c, "mbs"); dapl_lat = l1 }
      }
      # dapltest prints the arithmetic mean of its latencies, so the mean (t_avg) of
      # ib_write_lat is the one to compare; its median (t_typical) is shown too.
      pbw = median(bw, nbw + 0); ptyp = median(pt, npl + 0); plat = median(pa, npl + 0); rtt = (plat == "") ? "" : 2 * plat
      print "ratio: dat2/dapl for op/s, dapl/dat2 for lat (higher is better for dat2; target >= 1.0)"
      print ""
      print "perftest (the limit), medians: ib_write_bw " num(pbw) " MB/s; ib_write_lat t_avg " num(plat) " us one way"
      print "  (t_typical " num(ptyp) "), so " num(rtt) " us round trip: a polled RDMA write completes after the"
      print "  responder'\''s ACK, one round trip; dapltest'\''s lat is a mean as t_avg is"
      rb = ratio(ours_mbs, pbw, 2); vb = verdict(rb, ">=", 0.9); tally(vb, "perf")
      rl = ratio(rtt, ours_lat, 2); vl = verdict(rl, ">=", 0.9); tally(vl, "perf")
      printf "  bandwidth: dat2 RW-poll / ib_write_bw %s %s (dapl: %s); latency: round trip / dat2 RW lat %s %s (dapl: %s)\n", \
        rb, vb, ratio(dapl_mbs, pbw, 2), rl, vl, ratio(rtt, dapl_lat, 2)
      print "dapltest runs tried again for want of a raw: line: " retries
      print ""
      target("dapl", "data path >= 1.0 x dapl, figures", why)
      target("perf", "data path >= 0.9 x perftest, figures", why)
    }' "$OUT"/dp-dapl-*.log "$OUT"/dp-dat2-*.log "$OUT"/dp-perftest-*.log
  shopt -u nullglob
}

# =========================================================================== instructions
# One callgrind run of bench/vm/ops per library; each counted phase leaves a dump file
# (cg-LIB.PID.N) whose "desc: Trigger: Client Request: PHASE" names it and whose "totals:"
# line holds its instructions since the stats were zeroed (its "summary:" also counts the
# untimed rounds before).
ops_measure() {
  local libs="dapl" lib ia st
  [ $OURS = 1 ] && libs+=" dat2"
  if ! command -v valgrind >/dev/null; then
    fail "valgrind is not installed (make bench-vm installs it)"
    return 1
  fi
  say "== instructions: valgrind --tool=callgrind bench/vm/ops IA $OPS_ITERS $SIZE for each of: $libs"
  for lib in $libs; do
    ia=$DAPL_IA
    [ "$lib" = dat2 ] && ia=$OURS_IA
    timed "ops-$lib" run_as "$lib" timeout 1200 valgrind --tool=callgrind --callgrind-out-file="$OUT/cg-$lib.%p" \
      "$OPS" "$ia" "$OPS_ITERS" "$SIZE" >"$OUT/ops-$lib.log" 2>"$OUT/ops-$lib.err"
    st=$?
    [ $st = 0 ] || fail "bench/vm/ops on $ia: exit status $st: $(grep -m1 '^ops:' "$OUT/ops-$lib.err" | cut -c1-200)"
    say "   $lib done ($(elapsed) s)"
  done
  say ""
}

ops_report() {
  local why=""
  [ $OURS = 1 ] || why="$OURS_IA does not open"
  shopt -s nullglob
  awk -v why="$why" "$AWK_LIB"'
    FNR == 1 { f = FILENAME; sub(/.*\//, "", f); split(f, p, "[-.]"); lib = p[2]; kind = p[1] }
    kind == "ops" && $1 == "phase" { iters[lib, $2] = $3; empty[lib, $2] = $4 }
    kind == "cg" && /^desc: Trigger: Client Request: / { name = $NF }
    kind == "cg" && /^totals: / && name != "" { ir[lib, name] = $2; name = "" }
    # per(LIB, OP, MODE): instructions per operation, the harness'"'"'s null loop subtracted, and
    # for each poll that found nothing (and the sleep after it) an iteration of empty-poll.
    function per(l, op, m,    k, z, e) {
      k = op "-" m; z = "null-" m; e = 0
      if (!((l, k) in ir) || !((l, z) in ir) || iters[l, k] + 0 == 0) return ""
      if (empty[l, k] + 0 > 0) {
        if (!((l, "empty-poll") in ir) || iters[l, "empty-poll"] + 0 == 0) return ""
        e = empty[l, k] * ir[l, "empty-poll"] / iters[l, "empty-poll"]
      }
      return (ir[l, k] - ir[l, z] - e) / iters[l, k]
    }
    function idle(l) {
      if (!((l, "empty-poll") in ir) || !((l, "null-poll") in ir) || iters[l, "empty-poll"] + 0 == 0) return ""
      return (ir[l, "empty-poll"] - ir[l, "null-poll"]) / iters[l, "empty-poll"]
    }
    END {
      print "Instructions per operation (user space, every thread of the process, callgrind): one"
      print "post + its completion; send is post_recv + post_send + both completions. poll: the"
      print "completion is ready when dat_evd_dequeue is called; wait: dat_evd_wait was blocked"
      print "when the operation was posted (the wake-up counts). The harness'"'"'s own loop is subtracted:"
      printf "null-poll %s / %s, null-wait %s / %s instructions per iteration (dapl / dat2).\n", \
        num(ir["dapl", "null-poll"] / (iters["dapl", "null-poll"] ? iters["dapl", "null-poll"] : 1)), \
        num(ir["dat2", "null-poll"] / (iters["dat2", "null-poll"] ? iters["dat2", "null-poll"] : 1)), \
        num(ir["dapl", "null-wait"] / (iters["dapl", "null-wait"] ? iters["dapl", "null-wait"] : 1)), \
        num(ir["dat2", "null-wait"] / (iters["dat2", "null-wait"] ? iters["dat2", "null-wait"] : 1))
      print ""
      fmt = "%-11s|%9s %9s |%7s %-7s|%s\n"
      printf fmt, "op", "dapl", "dat2", "ratio", "", " empty polls (dapl, dat2)"
      nops = split("write read send", O, " "); nm = split("poll wait", M, " ")
      for (i = 1; i <= nops; i++) for (j = 1; j <= nm; j++) {
        k = O[i] "-" M[j]; a = per("dapl", O[i], M[j]); b = per("dat2", O[i], M[j])
        r = ratio(b, a, 2); v = verdict(r, "<=", 1.0); tally(v, "ops")
        printf fmt, k, num(a), num(b), r, v, " " (empty["dapl", k] + 0) ", " (empty["dat2", k] + 0)
        nrow++; rname[nrow] = k; rratio[nrow] = r; rverd[nrow] = v
      }
      r = ratio(idle("dat2"), idle("dapl"), 2); v = verdict(r, "<=", 1.0); tally(v, "empty")
      printf fmt, "empty poll", num(idle("dapl")), num(idle("dat2")), r, v, " (a dequeue that finds nothing)"
      nrow++; rname[nrow] = "empty poll"; rratio[nrow] = r; rverd[nrow] = v
      print "ratio: dat2 / dapl (target <= 1.0); empty polls are subtracted (each at the empty-poll count)"
      print ""
      for (i = 1; i <= nrow; i++) {
        if (why != "") printf "target instructions dat2 <= 1.0 x dapl, %s: n/a (%s)\n", rname[i], why
        else if (rverd[i] == "") printf "target instructions dat2 <= 1.0 x dapl, %s: n/a (no figures)\n", rname[i]
        else printf "target instructions dat2 <= 1.0 x dapl, %s: %s (%s)\n", rname[i], rverd[i], rratio[i]
      }
      target("ops", "instructions per operation dat2 <= dapl, rows", why)
      target("empty", "instructions per empty dequeue dat2 <= dapl", why)
    }' "$OUT"/ops-*.log "$OUT"/cg-*.*.*
  shopt -u nullglob
}

if [ -n "$REPORT" ]; then
  compgen -G "$OUT/reg-raw-*.log" >/dev/null && { reg_report; say ""; }
  compgen -G "$OUT/reg-ucx-*.log" >/dev/null || compgen -G "$OUT/reg-fiuffd-*.log" >/dev/null && { reg_peers_report; say ""; }
  compgen -G "$OUT/dp-dapl-*.log" >/dev/null && { dp_report; say ""; }
  compgen -G "$OUT/ops-dapl.log" >/dev/null && ops_report
  exit 0
fi
case " $SKIP " in *" reg "*) ;; *) reg_measure && reg_report; say ""; [ -n "$PEERS" ] && { reg_peers_report; say ""; } ;; esac
case " $SKIP " in *" dp "*) ;; *) dp_measure && dp_report; say "" ;; esac
case " $SKIP " in *" ops "*) ;; *) ops_measure && ops_report; say "" ;; esac
say "bench-vm: $(elapsed) s in the VM"
if [ -n "$failed" ]; then
  say "bench-vm: FAILED: $failed"
  exit 1
fi
exit 0
