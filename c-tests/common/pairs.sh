# Running Debian's test programs (dapl2-utils) as a server and a client process, and judging
# them from what both sides printed: the pieces c-tests/programs and c-tests/deb share.
# Sourced by bash after c-tests/common/lib.sh (it uses pass, fail and $build):
#
#   . "$root/c-tests/common/pairs.sh"
#
# It installs an EXIT trap that ends the servers still running (cleanup), and defines:
#   make_cmd OPTS -- SECS PROGRAM ARGS...   the command that runs a program: sets cmd=(...)
#   run_pair NAME PORT SERVER-ARGS --- CLIENT-ARGS   one server/client pair (see below)
#   dtest_check, dtestx_rc_check            the verdicts of dtest and of dtestx (RC)
#   report NAME WHY LOGS...                 PASS when WHY is empty, else FAIL
# and the process helpers they use (alive, kill_tree, listening, busy_ports, wait_listen,
# start_server, finish_server, status_words, errors_in).

unbuf=()
command -v stdbuf >/dev/null && unbuf=(stdbuf -oL -eL)

# ---------------------------------------------------------------------------------------
# Processes and ports

servers=()    # pids of background processes not yet reaped
namespaces=() # named network namespaces we created

forget() { # pid
  local p keep=()
  for p in "${servers[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  servers=("${keep[@]}")
}

alive() { # pid: running (not gone, not a zombie)
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# Sends a signal to a process we started and to everything it started (timeout, strace
# and the program under them), children first.
kill_tree() { # signal pid
  local c
  for c in $(cat /proc/"$2"/task/*/children 2>/dev/null); do kill_tree "$1" "$c"; done
  alive "$2" && kill "-$1" "$2" 2>/dev/null
}

cleanup() {
  local p ns
  for p in "${servers[@]}"; do kill_tree TERM "$p"; done
  [ ${#servers[@]} -gt 0 ] && sleep 0.5
  for p in "${servers[@]}"; do kill_tree KILL "$p"; done
  for ns in "${namespaces[@]}"; do ip netns delete "$ns" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

listening() { # port [netns]: a TCP listener on that port
  local hex
  hex=$(printf '%04X' "$1")
  local files=(/proc/net/tcp /proc/net/tcp6)
  local check=(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }')
  if [ -n "${2:-}" ]; then
    ip netns exec "$2" "${check[@]}" "${files[@]}" 2>/dev/null
  else
    "${check[@]}" "${files[@]}" 2>/dev/null
  fi
}

# Waits up to 5 s for the given ports to be free; prints the ones still held.
busy_ports() { # [netns] ports...
  local ns=$1 p i held
  shift
  for i in $(seq 50); do
    held=""
    for p in "$@"; do listening "$p" "$ns" && held+=" $p"; done
    [ -z "$held" ] && return 0
    sleep 0.1
  done
  echo "$held"
}

# Waits until pid listens on port (returns 0), exits (1) or 10 s pass (1).
wait_listen() { # port pid [netns]
  local i
  for i in $(seq 100); do
    listening "$1" "${3:-}" && return 0
    alive "$2" || return 1
    sleep 0.1
  done
  return 1
}

# The command prefix that runs a program against our library: sets cmd=(...).
#   opts: ns=<netns> conf=<dat.conf> env=<NAME=VALUE> wrap=<word> (repeatable, in order)
# then "--", the time limit in seconds and the program with its arguments.
# pair_lib (default $build) is the LD_LIBRARY_PATH of the programs, pair_conf (default
# /nonexistent: no dat.conf, the built-in providers only) their DAT_OVERRIDE; an empty one
# leaves the variable unset (the system's libdat2.so.2 and /etc/dat.conf).
make_cmd() {
  local ns="" conf=${pair_conf-/nonexistent} envs=() wrap=() vars=()
  while [ "$1" != -- ]; do
    case $1 in
      ns=*) ns=${1#ns=} ;;
      conf=*) conf=${1#conf=} ;;
      env=*) envs+=("${1#env=}") ;;
      wrap=*) wrap+=("${1#wrap=}") ;;
    esac
    shift
  done
  shift
  local limit=$1 lib=${pair_lib-$build}
  shift
  if [ -n "$lib" ]; then vars+=(LD_LIBRARY_PATH="$lib"); else vars+=(-u LD_LIBRARY_PATH); fi
  if [ -n "$conf" ]; then vars+=(DAT_OVERRIDE="$conf"); else vars+=(-u DAT_OVERRIDE); fi
  cmd=()
  [ -n "$ns" ] && cmd=(ip netns exec "$ns")
  cmd+=(env "${vars[@]}" ${envs[@]+"${envs[@]}"}
    timeout -k 3 "$limit" ${wrap[@]+"${wrap[@]}"} ${unbuf[@]+"${unbuf[@]}"} "$@")
}

# Starts a server in the background: sets srv_pid.
start_server() { # log make_cmd-args...
  local log=$1
  shift
  make_cmd "$@"
  "${cmd[@]}" >"$log" 2>&1 </dev/null &
  srv_pid=$!
  servers+=("$srv_pid")
}

# Lets the server finish within secs, else ends it: sets srv_status (-1: we killed it).
finish_server() { # secs
  local i killed=0
  for i in $(seq $(($1 * 10))); do
    alive "$srv_pid" || break
    sleep 0.1
  done
  if alive "$srv_pid"; then
    killed=1
    kill_tree TERM "$srv_pid"
    for i in $(seq 30); do alive "$srv_pid" || break; sleep 0.1; done
    kill_tree KILL "$srv_pid"
  fi
  wait "$srv_pid" 2>/dev/null
  srv_status=$?
  forget "$srv_pid"
  [ $killed = 1 ] && srv_status=-1
}

# Words for an exit status of a process run under timeout (empty for a normal exit).
status_words() { # status who
  case $1 in
    0) ;;
    -1) echo "$2 still running: killed by the harness;" ;;
    124) echo "$2 timed out;" ;;
    125 | 126 | 127) echo "$2 could not be run (status $1);" ;;
    129 | 1[3-9][0-9]) echo "$2 killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)));" ;;
    *) ;;
  esac
}

# The first error lines of a log, on one line.
errors_in() { # log regex who
  grep -m2 -E "$2" "$1" 2>/dev/null | tr -s ' \t' ' ' | cut -c1-150 | sed "s/^/$3 printed \"/; s/\$/\";/" | tr '\n' ' '
}

report() { # name why log...
  local name=$1 why=$2
  shift 2
  if [ -z "$why" ]; then
    pass "$name"
  else
    fail "$name" "$why(logs: $*)"
  fi
}

# Runs one server/client pair: sets why_run (harness-level problems and exit statuses),
# cli_status and srv_status. The server is reaped before this returns.
#   run_pair <name> <port to wait for> <server make_cmd args> --- <client make_cmd args>
run_pair() {
  local name=$1 port=$2 ns a
  shift 2
  local sargs=() cargs=()
  while [ "$1" != --- ]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  slog=$out/$name.server.log clog=$out/$name.client.log
  why_run="" cli_status=0 srv_status=0
  rm -f "$slog" "$clog"
  ns=""
  for a in "${sargs[@]}"; do case $a in ns=*) ns=${a#ns=} ;; --) break ;; esac; done
  local held
  held=$(busy_ports "$ns" "$port" 45248 45249 31111 31112)
  if [ -n "$held" ]; then
    why_run="port(s)$held still held by an earlier process;"
    return
  fi
  start_server "$slog" "${sargs[@]}"
  if ! wait_listen "$port" "$srv_pid" "$ns"; then
    if alive "$srv_pid"; then why_run="server not listening on port $port after 10 s;"; else why_run="server exited before listening on port $port;"; fi
  else
    make_cmd "${cargs[@]}"
    "${cmd[@]}" >"$clog" 2>&1 </dev/null
    cli_status=$?
  fi
  finish_server 5
  why_run+=$(status_words "$cli_status" client)$(status_words "$srv_status" server)
}

# ---------------------------------------------------------------------------------------
# dtest: both sides print "<pid>: DAPL Test Complete. PASSED" and no error line.

dtest_errors='Err|ERR|FAIL|[Ff]ail|Couldn.t|No valid|!= |1st error'
dtest_check() { # extra words for why
  local why=$why_run f who
  for f in "$slog" "$clog"; do
    [ "$f" = "$slog" ] && who=server || who=client
    [ -s "$f" ] || { why+=" $who printed nothing;"; continue; }
    grep -qE '^[0-9]+: DAPL Test Complete\. PASSED$' "$f" || why+=" no \"DAPL Test Complete. PASSED\" from $who;"
    why+=$(errors_in "$f" "$dtest_errors" " $who")
  done
  echo "$why"
}

# dtestx (RC): write-immediate, compare-and-swap and fetch-and-add, each side printing
# "IB extension test - immed/atomic test PASSED"; the client exits 0 (dtestx exits 1 on
# any failed check).
dtestx_errors='Err|ERR|[Ff]ail|Couldn.t|unexpected| returned '
dtestx_rc_check() { # extra words for why
  local why=$why_run f who line
  [ "$cli_status" = 0 ] || why+=" client exit status $cli_status;"
  for f in "$slog" "$clog"; do
    [ "$f" = "$slog" ] && who=server || who=client
    for line in "RDMA_WRITE_WITH_IMMEDIATE_DATA test - PASSED" "CMP_SWAP test - PASSED" \
      "FETCH_ADD test - PASSED" "IB extension test - immed/atomic test PASSED"; do
      grep -qF "$line" "$f" 2>/dev/null || why+=" no \"$line\" from $who;"
    done
    why+=$(errors_in "$f" "$dtestx_errors" " $who")
  done
  echo "$why"
}
