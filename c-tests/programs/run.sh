#!/usr/bin/env bash
# Debian's test programs (package dapl2-utils), run unchanged against our library and its
# built-in provider dat2-soft, each as a server and a client process talking over
# 127.0.0.1: dtest, dtestx (RC and UD), dtestcm, dtestsrq (RC and UD) and dapltest
# (transaction, performance and quit clients against one dapltest server). One more dtest,
# and a dtestx -u, run between two network namespaces joined by a veth pair, as two hosts
# would. Then dtest, dtestx and dapltest -T T again through Debian's own libdat2 (no
# LD_LIBRARY_PATH) with our provider library build/libdat2prov.so.2 on the soft device
# (plugin-* cases).
#
# These programs mostly exit 0 whether they passed or not, so every case is judged from
# what both sides printed: the program's own success lines must be there and no error
# line may be. Every process runs under timeout, with line-buffered output (stdbuf) so a
# killed process still leaves its log behind.
#
# The programs use fixed TCP ports (15828 for the address exchange of dtest, dtestx and
# dtestcm, 45248 and up for connection qualifiers, 62000 and up for dapltest). The cases
# therefore run one after another, each server is reaped before the next case starts,
# and when we are root the whole group runs in a network namespace of its own, so that
# nothing else on the host can hold those ports.
#
# Prebuilt binaries, not instrumented: the plain pass only.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init programs
mkdir -p "$out"
prov=dat2-soft

dtest_variants=(
  "default:"
  "b65536-B100:-b 65536 -B 100"
  "p:-p"
  "c:-c"
  "u:-u"
  "w:-w"
  "W:-W"
  "D-b4096:-D -b 4096"
  # -W sets a burst of 1000 per size; -B after it brings that down to keep the case short.
  "W-a-b65536-B100:-W -a -b 65536 -B 100"
  "B20:-B 20"
  "t-S1:-t -S 1"
)
dapltest_t_variants=(
  "T-SR:-i 100 client SR 4096 server SR 4096"
  "T-RW:-i 100 client SR 4096 client RW 4096 1 server RW 4096 1 server SR 4096"
  "T-RR:-i 100 client SR 4096 client RR 4096 1 server RR 4096 1 server SR 4096"
  "T-V:-i 100 -V client SR 4096 server SR 4096"
  "T-P:-i 100 -P client SR 4096 server SR 4096"
  "T-Q:-i 100 -Q client SR 4096 server SR 4096"
  "T-r:-i 100 -r client SR 4096 server SR 4096"
  "T-t4-w4:-i 100 -t 4 -w 4 client SR 4096 server SR 4096"
)
# UD (IB extensions): 4 endpoints resolved both ways; -b sizes the buffers above the UD
# message limit (the EP's max_message_size is lowered to it).
dtestx_ud_variants=("u:-u" "u-b8192:-u -b 8192")
# RC, then UD (address handles, each EP sending to every peer EP through them).
srq_variants=("default:" "c4-B10:-c 4 -B 10" "u-default:-u" "u-c4-B10:-u -c 4 -B 10")
netns_names=(dtest-netns-veth dtestx-u-netns-veth)
# Through Debian's libdat2 with our provider library: dapltest -T T's first three variants.
plugin_t_variants=("${dapltest_t_variants[@]:0:3}")
plugin_names=(plugin-dtest plugin-dtestx-rc)
for v in "${plugin_t_variants[@]}"; do plugin_names+=("plugin-dapltest-${v%%:*}"); done
plugin_names+=(plugin-dapltest-quit)
dapltest_p_variants=(
  "P-RW:-i 1000 RW 4096 1"
  "P-RR:-i 1000 RR 4096 1"
  "P-RW-poll:-i 1000 -m p RW 4096 1"
  "P-RR-poll:-i 1000 -m p RR 4096 1"
  "P-RW-block:-i 1000 -m b RW 4096 1"
  "P-RR-block:-i 1000 -m b RR 4096 1"
)

case_names() {
  local v
  for v in "${dtest_variants[@]}"; do echo "dtest-${v%%:*}"; done
  echo dtest-tcp-path
  echo dtestx-rc
  for v in "${dtestx_ud_variants[@]}"; do echo "dtestx-${v%%:*}"; done
  echo dtestx-open-query
  echo dtestcm-c1000
  for v in "${srq_variants[@]}"; do echo "dtestsrq-${v%%:*}"; done
  for v in "${dapltest_t_variants[@]}" "${dapltest_p_variants[@]}"; do
    echo "dapltest-${v%%:*}"
  done
  echo dapltest-quit
  echo "${netns_names[@]}" "${plugin_names[@]}"
}

# shellcheck disable=SC2046 # one name a word
plain_only "prebuilt binaries run in the plain pass only" $(case_names)
for p in dtest dtestx dtestcm dtestsrq dapltest timeout; do
  # shellcheck disable=SC2046
  command -v "$p" >/dev/null || skip_all "$p not found (apt-get install dapl2-utils)" $(case_names)
done
if [ ! -e "$build/libdat2.so.2" ]; then
  fail library "no libdat2.so.2 in $build"
  exit 1
fi

# A network namespace of our own: the fixed ports cannot collide with anything else.
. "$root/c-tests/netns.sh"
[ -n "${DAT2_NETNS:-}" ] && echo "note: running in a private network namespace"

. "$root/c-tests/common/pairs.sh"

for v in "${dtest_variants[@]}"; do
  name=dtest-${v%%:*}
  read -r -a args <<<"${v#*:}"
  run_pair "$name" 15828 -- 25 dtest -s -P "$prov" "${args[@]}" --- \
    -- 20 dtest -h 127.0.0.1 -P "$prov" "${args[@]}"
  report "$name" "$(dtest_check)" "$slog" "$clog"
done

# The default dtest again, with cross-memory attach turned off in both processes: all data
# goes through the TCP connection. When strace is there it also proves that no process
# read or wrote the other's memory.
name=dtest-tcp-path
strace_ok=0
if command -v strace >/dev/null &&
  strace -f -qq --seccomp-bpf -e trace=process_vm_readv,process_vm_writev,getpid -o /dev/null true 2>/dev/null; then
  strace_ok=1
fi
trace_wrap() { # trace file -> words for make_cmd
  [ $strace_ok = 1 ] || return 0
  printf '%s\n' wrap=strace wrap=-f wrap=-qq wrap=--seccomp-bpf \
    wrap=-e wrap=trace=process_vm_readv,process_vm_writev,getpid wrap=-o "wrap=$1"
}
mapfile -t swrap < <(trace_wrap "$out/$name.server.trace")
mapfile -t cwrap < <(trace_wrap "$out/$name.client.trace")
rm -f "$out/$name".*.trace
run_pair "$name" 15828 env=DAT2_SOFT_CMA=0 "${swrap[@]}" -- 25 dtest -s -P "$prov" --- \
  env=DAT2_SOFT_CMA=0 "${cwrap[@]}" -- 20 dtest -h 127.0.0.1 -P "$prov"
why=$(dtest_check)
if [ $strace_ok = 1 ]; then
  for side in server client; do
    # A line reads "<tid> process_vm_readv(<target pid>, ...": reading one's own memory is
    # fine (the library probes its own pages and copies into them from any of its threads,
    # having asked getpid() first, which the trace also shows), another process's is not.
    peer=$(awk '$2 ~ /^getpid\(/ { own[$NF] = 1 }
        $2 ~ /^process_vm_(readv|writev)\(/ { split($2, a, "("); t = a[2]; sub(/,.*/, "", t); tgt[++m] = t }
        END { for (i = 1; i <= m; i++) if (!(tgt[i] in own)) n++; print n + 0 }' \
      "$out/$name.$side.trace" 2>/dev/null)
    [ "${peer:-0}" -gt 0 ] && why+=" $side made $peer cross-memory calls into the peer with DAT2_SOFT_CMA=0;"
  done
fi
report "$name" "$why" "$slog" "$clog"

# ---------------------------------------------------------------------------------------
# dtestx: write-immediate, compare-and-swap and fetch-and-add, each side printing
# "IB extension test - immed/atomic test PASSED"; the client exits 0 (dtestx exits 1 on
# any failed check).

dtestx_rc_case() { # name
  name=$1
  run_pair "$name" 15828 -- 25 dtestx -s -P "$prov" --- -- 20 dtestx -h 127.0.0.1 -P "$prov"
  report "$name" "${lib_why:-}$(dtestx_rc_check)" "$slog" "$clog"
}
dtestx_rc_case dtestx-rc

# dtestx -u: the unreliable datagram service. Both sides create a service point (the server
# 31112, the client 31111) and resolve the other's four times from their first EP (the
# server learns the client's address over 15828), accept the other's four requests, then
# each sends its RMR triplet as a datagram to every address handle and checks what arrives
# (40 bytes of GRH first). Each side prints "IB extension test - UD test PASSED" and exits 0.
dtestx_ud_check() { # extra words for why
  local why=$why_run f who line
  [ "$cli_status" = 0 ] || why+=" client exit status $cli_status;"
  [ "$srv_status" = 0 ] || why+=" server exit status $srv_status;"
  for f in "$slog" "$clog"; do
    [ "$f" = "$slog" ] && who=server || who=client
    for line in "Connected! 4 endpoints" "IB extension test - UD test PASSED"; do
      grep -qF "$line" "$f" 2>/dev/null || why+=" no \"$line\" from $who;"
    done
    why+=$(errors_in "$f" "$dtestx_errors" " $who")
  done
  echo "$why"
}
for v in "${dtestx_ud_variants[@]}"; do
  name=dtestx-${v%%:*}
  read -r -a args <<<"${v#*:}"
  run_pair "$name" 15828 -- 25 dtestx -s -P "$prov" "${args[@]}" --- -- 20 dtestx -c -h 127.0.0.1 -P "$prov" "${args[@]}"
  report "$name" "$(dtestx_ud_check)" "$slog" "$clog"
done

# dtestx -q: open_query/close_query on the provider, no peer. It prints the provider's
# specific attributes and exits 0.
name=dtestx-open-query
log=$out/$name.log
make_cmd -- 20 dtestx -q -P "$prov"
"${cmd[@]}" >"$log" 2>&1 </dev/null
st=$?
why=$(status_words $st dtestx)
[ $st = 0 ] || why+=" exit status $st;"
grep -qE "Open_Query: $prov num_attrs = [1-9][0-9]*" "$log" || why+=" no \"Open_Query: $prov num_attrs = <n>\" with n > 0;"
grep -qE 'Open_Query: Provider Specific Attribute\[0\] [^=]+=' "$log" || why+=" no provider specific attribute listed;"
why+=$(errors_in "$log" "$dtestx_errors" " dtestx")
report "$name" "$why" "$log"

# ---------------------------------------------------------------------------------------
# dtestcm: 1000 connections accepted, established and torn down.

name=dtestcm-c1000
run_pair "$name" 15828 -- 25 dtestcm -s -P "$prov" -c 1000 --- -- 20 dtestcm -h 127.0.0.1 -P "$prov" -c 1000
why=$why_run
for f in "$slog" "$clog"; do
  [ "$f" = "$slog" ] && who=Server || who=Client
  grep -qF "ALL 1000 CONNECTED on $who!" "$f" 2>/dev/null || why+=" no \"ALL 1000 CONNECTED on $who!\";"
  grep -qF "DAPL Connection Test Complete." "$f" 2>/dev/null || why+=" no \"DAPL Connection Test Complete.\" from ${who,,};"
  why+=$(errors_in "$f" 'Err|ERR|[Ff]ail|Couldn.t|invalid|No valid' " ${who,,}")
done
report "$name" "$why" "$slog" "$clog"

# ---------------------------------------------------------------------------------------
# dtestsrq: receives through a shared receive queue. No address exchange: the server
# listens on its connection qualifier 45248 and the client connects to it directly. With
# -u the EPs are UD: the server accepts each resolution on the EP its private data names, and
# the messages are datagrams of the MTU (4096 bytes, received as 4136).

for v in "${srq_variants[@]}"; do
  name=dtestsrq-${v%%:*}
  read -r -a args <<<"${v#*:}"
  run_pair "$name" 45248 -- 25 dtestsrq -s -P "$prov" "${args[@]}" --- \
    -- 20 dtestsrq -h 127.0.0.1 -P "$prov" "${args[@]}"
  conns=1 kind=RC
  for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
      -c) conns=${args[i + 1]} ;;
      -u) kind=UD ;;
    esac
  done
  why=$why_run
  for f in "$slog" "$clog"; do
    [ "$f" = "$slog" ] && who=server || who=client
    [ -e "$f" ] || continue
    grep -qF "ALL $conns CONNECTED on $who!" "$f" || why+=" no \"ALL $conns CONNECTED on $who!\";"
    grep -qF " DAPL $kind SRQ Test Complete." "$f" || why+=" no \"DAPL $kind SRQ Test Complete.\" from $who;"
    why+=$(errors_in "$f" 'Err|ERR|[Ff]ail|unable|[Ii]nvalid' " $who")
  done
  report "$name" "$why" "$slog" "$clog"
done

# ---------------------------------------------------------------------------------------
# dapltest: one server (-T S), then transaction (-T T) and performance (-T P) clients, one
# after another, and a quit client (-T Q) that must make the server exit.

dapltest_errors='[Ee]rror|ERROR|FAIL|[Ff]ailed|Warning|bad |mismatch|Invalid|USAGE|syntax'
dsrv_n=0
dapltest_server_start() {
  dsrv_n=$((dsrv_n + 1))
  dslog=$out/dapltest-server-$dsrv_n.log
  local held
  held=$(busy_ports "" 62000)
  [ -n "$held" ] && { dsrv_why="port 62000 still held;"; return 1; }
  start_server "$dslog" -- 120 dapltest -T S -D "$prov"
  dsrv_pid=$srv_pid
  if ! wait_listen 62000 "$dsrv_pid"; then
    if alive "$dsrv_pid"; then
      dsrv_why="dapltest server not listening on 62000 after 10 s;"
    else
      dsrv_why="dapltest server exited before listening on 62000, first lines: $(head -2 "$dslog" | tr -s ' \t\n' ' ' | cut -c1-150);"
    fi
    return 1
  fi
  dsrv_why=""
}
# Counts lines of the current server log matching a pattern.
dcount() { grep -cE "$1" "$dslog" 2>/dev/null; }
# Waits up to 3 s for the server log to hold more than n lines matching the pattern.
dwait_count() { # pattern n
  local i
  for i in $(seq 30); do [ "$(dcount "$1")" -gt "$2" ] && return 0; sleep 0.1; done
  return 1
}
# After a client: sets dwords to what went wrong on the server's side, and restarts the
# server if it died, so that the next case still has one. (Not to be called in a $(...):
# the restart must happen in this shell.)
dserver_after() { # pattern count-before
  dwords=""
  dwait_count "$1" "$2" || dwords+=" the server did not print \"${1//\\/}\" for this client;"
  if ! alive "$dsrv_pid"; then
    srv_pid=$dsrv_pid
    finish_server 0
    dwords+=" the server died ($(status_words "$srv_status" "" | sed "s/^ *//; s/;$//"); exit status $srv_status; log $dslog);"
    dapltest_server_start || dwords+=" restart failed: $dsrv_why"
  fi
}

# The transaction clients: dapltest_t_cases PREFIX VARIANT... (cases PREFIXdapltest-<name>).
dapltest_t_cases() {
local prefix=$1 v
shift
for v in "$@"; do
  name=${prefix}dapltest-${v%%:*}
  read -r -a args <<<"${v#*:}"
  log=$out/$name.log
  if [ -n "$dsrv_why" ]; then
    report "$name" "$dsrv_why" "$dslog"
    continue
  fi
  before=$(dcount 'Transaction Test Finished for this client')
  make_cmd -- 20 dapltest -T T -s 127.0.0.1 -D "$prov" "${args[@]}"
  "${cmd[@]}" >"$log" 2>&1 </dev/null
  st=$?
  if grep -q 'Invalid Transaction Test Parameter: Q' "$log"; then
    skip "$name" "this dapltest has no -Q option (it says \"Invalid Transaction Test Parameter: Q\")"
    continue
  fi
  why=$(status_words $st client)
  [ $st = 0 ] || why+=" exit status $st;"
  threads=1 eps=1 reads=0 writes=0
  for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
      -t) threads=${args[i + 1]} ;;
      -w) eps=${args[i + 1]} ;;
      RR) reads=1 ;;
      RW) writes=1 ;;
    esac
  done
  grep -qF -- "----- Stats ---- : $threads threads, $eps EPs" "$log" ||
    why+=" no \"----- Stats ---- : $threads threads, $eps EPs\";"
  grep -qE '^Total WQE +: +[0-9.]+ WQE/Sec' "$log" || why+=" no \"Total WQE\" line;"
  grep -qF 'DT_cs_Client: ========== End of Work -- Client Exiting' "$log" || why+=" no \"End of Work\" line;"
  # MB moved by each kind of operation: sends always, reads and writes when asked for.
  total() { awk -F: -v k="$1" '$1 ~ "^Total " k " *$" { split($2, a, " "); print ((a[1] + 0 > 0) ? 1 : 0) }' "$log"; }
  [ "$(total Send)" = 1 ] || why+=" Total Send is not above 0;"
  [ "$(total 'RDMA Read')" = $reads ] || why+=" Total RDMA Read is $( [ $reads = 1 ] && echo 0 || echo 'above 0');"
  [ "$(total 'RDMA Write')" = $writes ] || why+=" Total RDMA Write is $( [ $writes = 1 ] && echo 0 || echo 'above 0');"
  why+=$(errors_in "$log" "$dapltest_errors" " client")
  dserver_after 'Transaction Test Finished for this client' "$before"
  why+=$dwords
  report "$name" "$why" "$log" "$dslog"
done
}
dapltest_server_start || true
dapltest_t_cases "" "${dapltest_t_variants[@]}"

for v in "${dapltest_p_variants[@]}"; do
  name=dapltest-${v%%:*}
  read -r -a args <<<"${v#*:}"
  log=$out/$name.log
  if [ -n "$dsrv_why" ]; then
    report "$name" "$dsrv_why" "$dslog"
    continue
  fi
  before=$(dcount 'Finished performance test\.  Exiting\.')
  make_cmd -- 20 dapltest -T P -s 127.0.0.1 -D "$prov" "${args[@]}"
  "${cmd[@]}" >"$log" 2>&1 </dev/null
  st=$?
  why=$(status_words $st client)
  [ $st = 0 ] || why+=" exit status $st;"
  mode=blocking op="" iters=""
  for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
      -m) [ "${args[i + 1]}" = p ] && mode=polling ;;
      -i) iters=${args[i + 1]} ;;
      RR | RW) op=${args[i]} ;;
    esac
  done
  # raw: <op>, <operations>, <segment size>, <segments>, <pipeline>, <cpu>, <ops/s>, <MB/s>, ...
  grep -qE "^raw: $op, $iters, 4096, 1, [0-9]+, [0-9.]+, [0-9.]*[1-9][0-9.]*, [0-9.]*[1-9]" "$log" ||
    why+=" no \"raw: $op, $iters, 4096, 1, ...\" line with non-zero rates;"
  grep -qE "^ +Mode +: $mode\$" "$log" || why+=" no \"Mode : $mode\";"
  grep -qF 'DT_cs_Client: ========== End of Work -- Client Exiting' "$log" || why+=" no \"End of Work\" line;"
  why+=$(errors_in "$log" "$dapltest_errors" " client")
  dserver_after 'Finished performance test\.  Exiting\.' "$before"
  why+=$dwords
  report "$name" "$why" "$log" "$dslog"
done

# The quit client, which must make the server exit: dapltest_quit NAME.
dapltest_quit() {
name=$1
log=$out/$name.log
if [ -n "$dsrv_why" ]; then
  report "$name" "$dsrv_why" "$dslog"
else
  make_cmd -- 20 dapltest -T Q -s 127.0.0.1 -D "$prov"
  "${cmd[@]}" >"$log" 2>&1 </dev/null
  st=$?
  why=$(status_words $st client)
  grep -qF 'DT_cs_Client: ========== End of Work -- Client Exiting' "$log" || why+=" no \"End of Work\" line;"
  why+=$(errors_in "$log" "$dapltest_errors" " client")
  srv_pid=$dsrv_pid
  finish_server 10
  [ "$srv_status" = 0 ] || why+=" $(status_words "$srv_status" server) server exit status $srv_status;"
  grep -qE "DT_cs_Server \($prov\): +Exiting\." "$dslog" || why+=" server did not print \"DT_cs_Server ($prov): Exiting.\";"
  report "$name" "$why" "$log" "$dslog"
fi
}
dapltest_quit dapltest-quit

# ---------------------------------------------------------------------------------------
# Two hosts: network namespaces joined by a veth pair, 10.77.0.1 and 10.77.0.2, each with
# a dat.conf entry for the soft device on its own address: dtest (RC over TCP) and dtestx -u
# (UD: resolution over TCP, datagrams over UDP between the two addresses).

skip_why=""
if [ "$(id -u)" != 0 ]; then
  skip_why="needs root for ip netns"
elif ! command -v ip >/dev/null; then
  command -v apt-get >/dev/null && timeout 300 apt-get install -y iproute2 >"$out/apt.log" 2>&1
  command -v ip >/dev/null || skip_why="ip (iproute2) not available"
fi
if [ -n "$skip_why" ]; then
  for name in "${netns_names[@]}"; do skip "$name" "$skip_why"; done
else
  name=dtest-netns-veth
  na=dat2p-a-$$ nb=dat2p-b-$$ va=d2pa$$ vb=d2pb$$
  setup_log=$out/$name.setup.log
  if ip netns add "$na" >"$setup_log" 2>&1 && namespaces+=("$na") &&
    ip netns add "$nb" >>"$setup_log" 2>&1 && namespaces+=("$nb") &&
    ip link add "$va" netns "$na" type veth peer name "$vb" netns "$nb" >>"$setup_log" 2>&1 &&
    ip -n "$na" addr add 10.77.0.1/24 dev "$va" >>"$setup_log" 2>&1 &&
    ip -n "$nb" addr add 10.77.0.2/24 dev "$vb" >>"$setup_log" 2>&1 &&
    ip -n "$na" link set lo up && ip -n "$nb" link set lo up &&
    ip -n "$na" link set "$va" up >>"$setup_log" 2>&1 &&
    ip -n "$nb" link set "$vb" up >>"$setup_log" 2>&1; then
    printf 'soft-ns u2.0 nonthreadsafe default builtin:soft dat2.2.0 "%s 0" ""\n' 10.77.0.1 >"$out/netns.a.conf"
    printf 'soft-ns u2.0 nonthreadsafe default builtin:soft dat2.2.0 "%s 0" ""\n' 10.77.0.2 >"$out/netns.b.conf"
    run_pair "$name" 15828 ns="$na" conf="$out/netns.a.conf" -- 25 dtest -s -P soft-ns -b 65536 -B 100 --- \
      ns="$nb" conf="$out/netns.b.conf" -- 20 dtest -h 10.77.0.1 -P soft-ns -b 65536 -B 100
    why=$(dtest_check)
    grep -qF "Local Address AF_INET - 10.77.0.1 port" "$slog" 2>/dev/null || why+=" server's IA address is not 10.77.0.1;"
    grep -qF "Query EP: REMOTE addr 10.77.0.2" "$slog" 2>/dev/null || why+=" server's peer is not 10.77.0.2;"
    grep -qF "Query EP: REMOTE addr 10.77.0.1" "$clog" 2>/dev/null || why+=" client's peer is not 10.77.0.1;"
    report "$name" "$why" "$slog" "$clog"
    name=dtestx-u-netns-veth
    run_pair "$name" 15828 ns="$na" conf="$out/netns.a.conf" -- 25 dtestx -s -u -P soft-ns --- \
      ns="$nb" conf="$out/netns.b.conf" -- 20 dtestx -c -u -h 10.77.0.1 -P soft-ns
    why=$(dtestx_ud_check)
    grep -qF "Remote Client Net Address: 10.77.0.2" "$slog" 2>/dev/null || why+=" server's peer is not 10.77.0.2;"
    grep -qF "Remote Server Net Address: 10.77.0.1" "$clog" 2>/dev/null || why+=" client's peer is not 10.77.0.1;"
    report "$name" "$why" "$slog" "$clog"
  else
    for name in "${netns_names[@]}"; do skip "$name" "cannot set up the namespaces and veth pair: $(head -1 "$setup_log")"; done
  fi
  for ns in "${namespaces[@]}"; do ip netns delete "$ns" 2>/dev/null; done
  namespaces=()
fi

# ---------------------------------------------------------------------------------------
# Debian's libdat2 with our provider library (src/plugin.rs): a dat.conf entry naming
# build/libdat2prov.so.2 by its absolute path, ia_params "soft 127.0.0.1 0", and no
# LD_LIBRARY_PATH, so that the programs load Debian's libdat2 and it loads the provider
# library as it loads dapl's.

plugin=$build/libdat2prov.so.2
if [ ! -e "$debian_lib" ]; then
  for name in "${plugin_names[@]}"; do skip "$name" "Debian's libdat2 is not installed (apt-get install libdapl2)"; done
elif [ ! -e "$plugin" ]; then
  for name in "${plugin_names[@]}"; do fail "$name" "no libdat2prov.so.2 in $build (make plugin)"; done
else
  printf 'dat2prov-soft u2.0 nonthreadsafe default %s dat2.2.0 "soft 127.0.0.1 0" ""\n' "$(readlink -f "$plugin")" >"$out/plugin.conf"
  # pairs.sh's make_cmd: no LD_LIBRARY_PATH (an empty pair_lib), and this dat.conf.
  pair_conf=$out/plugin.conf pair_lib="" prov=dat2prov-soft
  # Which libdat2 the programs get without LD_LIBRARY_PATH: Debian's, or these cases prove nothing.
  which_lib=$(env -u LD_LIBRARY_PATH ldd "$(command -v dtest)" | awk '$1 == "libdat2.so.2" { print $3 }')
  lib_why=""
  [ "$(readlink -f "$which_lib")" = "$(readlink -f "$debian_lib")" ] || lib_why=" dtest loads libdat2.so.2 from \"$which_lib\", not Debian's $debian_lib;"
  name=plugin-dtest
  run_pair "$name" 15828 -- 25 dtest -s -P "$prov" --- -- 20 dtest -h 127.0.0.1 -P "$prov"
  report "$name" "$lib_why$(dtest_check)" "$slog" "$clog"
  dtestx_rc_case plugin-dtestx-rc
  dapltest_server_start || true
  dapltest_t_cases plugin- "${plugin_t_variants[@]}"
  dapltest_quit plugin-dapltest-quit
  unset pair_conf pair_lib
  prov=dat2-soft
fi

exit $rc
