#!/usr/bin/env bash
# dat2-info (tools/dat2-info.c), built here with the pass's $CC $CFLAGS against our library:
# it lists and opens dat2-soft and shows its attributes; a dat.conf entry whose library is
# missing, or a built-in soft entry with a bad address, is reported as not opening with the
# library's reason; -p filters; -h, bad options and exit statuses.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init info

# Sanitizer reports go to files, not into the output dat2-info collects.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}:log_path=$out/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}:log_path=$out/ubsan"

info=$out/dat2-info
compile build "$info" "$root"/tools/dat2-info*.c -L"$build" -ldat2 || exit 1
pass build

# run NAME ARGS...: runs dat2-info against our library (environment as given by the caller),
# output in $out/NAME.out, status in $status.
status=0
run() {
  local name=$1; shift
  env -u DAT_DBG_TYPE -u DAT_DBG_DEST LD_LIBRARY_PATH="$build" timeout 30 "$info" "$@" \
    >"$out/$name.out" 2>"$out/$name.err"
  status=$?
}
# block NAME IA: the lines of IA's block in NAME's output.
block() { sed -n "/^ia_name: $2\$/,/^\$/p" "$out/$1.out"; }
# value NAME IA LABEL: the first value of LABEL in IA's block.
value() { block "$1" "$2" | sed -n "s/^    $3: *//p" | head -1; }
show() { head -c 600 "$out/$1.out" | tr '\n' '|'; }

# ---- no dat.conf: the built-in soft device --------------------------------------------
printf '# empty\n' >"$out/empty.conf"
DAT_OVERRIDE=$out/empty.conf run soft
if [ $status -eq 0 ] && [ "$(value soft dat2-soft state)" = opens ]; then
  pass soft-opens
else
  fail "soft-opens status $status: $(show soft) $(head -c 200 "$out/soft.err")"
fi
if [ "$(sed -n 1p "$out/soft.out")" = "libdat2: $build/libdat2.so.2" ] ||
   [ "$(readlink -f "$(sed -n '1s/^libdat2: //p' "$out/soft.out")")" = "$(readlink -f "$build/libdat2.so.2")" ]; then
  pass names-our-library
else
  fail "names-our-library first line: $(sed -n 1p "$out/soft.out")"
fi
if grep -qx "dat_conf: $out/empty.conf (DAT_OVERRIDE)" "$out/soft.out"; then
  pass names-dat-conf
else
  fail "names-dat-conf $(sed -n 2p "$out/soft.out")"
fi
missing=""
for field in library adapter vendor ia_address max_eps max_evds max_pzs max_lmrs max_lmr_block_size \
    max_rmrs max_message_size max_rdma_size max_iov_segments_per_dto max_rdma_read_in \
    max_rdma_read_out max_srqs provider max_private_data_size srq_supported; do
  [ -n "$(value soft dat2-soft "$field")" ] || missing="$missing $field"
done
if [ -z "$missing" ] && [ "$(value soft dat2-soft library)" = "built in" ] &&
   [ "$(value soft dat2-soft ia_address)" = 127.0.0.1 ] &&
   [ "$(value soft dat2-soft max_eps)" -gt 0 ] 2>/dev/null; then
  pass soft-attributes
else
  fail "soft-attributes missing:${missing:- none} $(block soft dat2-soft | tr '\n' '|' | head -c 600)"
fi
if block soft dat2-soft | grep -qx '    provider_attr: *DAT2_DEVICE=soft'; then
  pass soft-provider-attributes
else
  fail "soft-provider-attributes $(block soft dat2-soft | grep provider_attr | tr '\n' '|')"
fi
# a soft path's state (VAR=on: ...), and VAR=0 turning it off: case VAR on-text
path_attribute() {
  local name=$1 var=$2 on=$3 tag
  tag=soft$(echo "$var" | tr 'A-Z' 'a-z')0
  export "$var=0"
  DAT_OVERRIDE=$out/empty.conf run "$tag" -p dat2-soft
  unset "$var"
  if block soft dat2-soft | grep -q "^    provider_attr: *$var=on: $on" &&
     block "$tag" dat2-soft | grep -qx "    provider_attr: *$var=off: $var=0"; then
    pass "$name"
  else
    fail "$name $(block soft dat2-soft | grep "$var") / $(block "$tag" dat2-soft | grep "$var")"
  fi
}
path_attribute soft-shm-attribute DAT2_SOFT_SHM ''
path_attribute soft-cma-attribute DAT2_SOFT_CMA 'with peers of this user on this host that the kernel confirms'
# dat2-soft is registered thread safe and not: one block, two keys
if [ "$(grep -c '^ia_name: dat2-soft$' "$out/soft.out")" = 1 ] &&
   [ "$(block soft dat2-soft | grep -c '^    registry_key:')" = 2 ]; then
  pass one-block-per-name
else
  fail "one-block-per-name $(grep -c '^ia_name: dat2-soft$' "$out/soft.out") blocks"
fi
# nothing to report: no message or reason lines, and stderr is empty
if ! grep -q -e '^    message:' -e '^    reason:' -e '^    log:' "$out/soft.out" && ! [ -s "$out/soft.err" ]; then
  pass quiet-when-fine
else
  fail "quiet-when-fine $(grep -e message: -e reason: -e log: "$out/soft.out" | head -3 | tr '\n' '|') $(head -c 200 "$out/soft.err")"
fi

# ---- verbose --------------------------------------------------------------------------
DAT_OVERRIDE=$out/empty.conf run verbose -v
if [ $status -eq 0 ] && [ -n "$(value verbose dat2-soft max_recv_per_srq)" ] &&
   [ -n "$(value verbose dat2-soft optimal_buffer_alignment)" ] &&
   [ "$(block verbose dat2-soft | grep -c '^    evd_stream_merging_supported:')" = 6 ]; then
  pass verbose
else
  fail "verbose status $status: $(block verbose dat2-soft | tail -5 | tr '\n' '|')"
fi

# ---- entries that do not open ------------------------------------------------------------
nolib=$out/no/such/dir/libdapl-missing.so.2
cat >"$out/bad.conf" <<EOF
# dat2-info test: a missing provider library, a soft entry with a bad address, a good one,
# and a line the library skips
gone-ia u2.0 nonthreadsafe default $nolib dapl.2.0 "mlx5_0 1" ""
bad-soft u2.0 nonthreadsafe default builtin:soft dat2.2.0 "no-such-netdev-x 0" ""
good-soft u2.0 nonthreadsafe default builtin:soft dat2.2.0 "127.0.0.1 0" ""
broken u2.0 nonthreadsafe default
EOF
DAT_OVERRIDE=$out/bad.conf run bad
if [ $status -eq 0 ] && [ "$(value bad gone-ia state)" = "does not open" ]; then
  pass missing-library-does-not-open
else
  fail "missing-library-does-not-open status $status: $(block bad gone-ia | tr '\n' '|')"
fi
if [ "$(value bad gone-ia error)" = "0x800a0064 DAT_PROVIDER_NOT_FOUND DAT_NAME_NOT_REGISTERED" ]; then
  pass missing-library-error-names
else
  fail "missing-library-error-names '$(value bad gone-ia error)'"
fi
if block bad gone-ia | grep '^    reason:' | grep -qF "$nolib"; then
  pass missing-library-reason-names-path
else
  fail "missing-library-reason-names-path $(block bad gone-ia | tr '\n' '|')"
fi
if [ "$(value bad gone-ia library)" = "$nolib ($out/bad.conf line 3)" ] &&
   [ "$(value bad gone-ia ia_params)" = '"mlx5_0 1"' ]; then
  pass missing-library-conf-line
else
  fail "missing-library-conf-line '$(value bad gone-ia library)' '$(value bad gone-ia ia_params)'"
fi
if [ "$(value bad bad-soft state)" = "does not open" ] &&
   block bad bad-soft | grep '^    reason:' | grep -q 'no-such-netdev-x' &&
   [ "$(value bad bad-soft error)" = "0x80120061 DAT_INVALID_ADDRESS DAT_INVALID_ADDRESS_UNSUPPORTED" ]; then
  pass bad-address-reason
else
  fail "bad-address-reason $(block bad bad-soft | tr '\n' '|')"
fi
if [ "$(value bad good-soft state)" = opens ] && [ "$(value bad dat2-soft state)" = opens ]; then
  pass others-still-open
else
  fail "others-still-open good-soft '$(value bad good-soft state)' dat2-soft '$(value bad dat2-soft state)'"
fi
if grep '^    message:' "$out/bad.out" | grep -q "$out/bad.conf:6"; then
  pass reports-skipped-line
else
  fail "reports-skipped-line $(head -5 "$out/bad.out" | tr '\n' '|')"
fi
if [ "$(sed -n 's/^ia_names: //p' "$out/bad.out")" = 4 ]; then
  pass counts-names
else
  fail "counts-names $(grep '^ia_names:' "$out/bad.out")"
fi

DAT_OVERRIDE=$out/no-such.conf run missing-conf
if [ $status -eq 0 ] && grep '^    message:' "$out/missing-conf.out" | grep -qF "$out/no-such.conf" &&
   [ "$(value missing-conf dat2-soft state)" = opens ]; then
  pass missing-dat-conf-reported
else
  fail "missing-dat-conf-reported status $status: $(show missing-conf)"
fi

# ---- -p ------------------------------------------------------------------------------
DAT_OVERRIDE=$out/bad.conf run only-gone -p gone-ia
if [ $status -eq 1 ] && [ "$(grep -c '^ia_name:' "$out/only-gone.out")" = 1 ] &&
   [ "$(value only-gone gone-ia state)" = "does not open" ]; then
  pass p-filters-exit-1
else
  fail "p-filters-exit-1 status $status: $(grep '^ia_name:' "$out/only-gone.out" | tr '\n' '|')"
fi
DAT_OVERRIDE=$out/bad.conf run only-soft -p dat2-soft
if [ $status -eq 0 ] && [ "$(grep '^ia_name:' "$out/only-soft.out")" = "ia_name: dat2-soft" ]; then
  pass p-filters-exit-0
else
  fail "p-filters-exit-0 status $status: $(grep '^ia_name:' "$out/only-soft.out" | tr '\n' '|')"
fi
DAT_OVERRIDE=$out/bad.conf run only-none -p no-such-ia
if [ $status -eq 1 ] && ! grep -q '^ia_name:' "$out/only-none.out" && grep -q "no-such-ia" "$out/only-none.err"; then
  pass p-unknown-name
else
  fail "p-unknown-name status $status: $(head -c 200 "$out/only-none.err")"
fi

# ---- nothing opens: exit 1 -----------------------------------------------------------------
cat >"$out/none.conf" <<EOF
dat2-soft u2.0 nonthreadsafe default builtin:soft dat2.2.0 "no-such-netdev-y 0" ""
dat2-soft u2.0 threadsafe default builtin:soft dat2.2.0 "no-such-netdev-y 0" ""
EOF
DAT_OVERRIDE=$out/none.conf run none
if [ $status -eq 1 ] && [ "$(value none dat2-soft state)" = "does not open" ]; then
  pass exit-1-when-none-opens
else
  fail "exit-1-when-none-opens status $status: $(show none)"
fi

# ---- the user's own DAT_DBG_TYPE is kept, and -h / bad options ---------------------------------
DAT_DBG_TYPE=0x4 DAT_OVERRIDE=$out/bad.conf LD_LIBRARY_PATH="$build" timeout 30 "$info" -p gone-ia \
  >"$out/dbg.out" 2>&1
if block dbg gone-ia | grep '^    reason:' | grep -qF "$nolib"; then
  pass user-dbg-type-kept
else
  fail "user-dbg-type-kept $(block dbg gone-ia | tr '\n' '|')"
fi
run help -h
if [ $status -eq 0 ] && grep -q '^usage: dat2-info' "$out/help.out"; then pass help; else fail "help status $status"; fi
run badopt -Q
if [ $status -eq 2 ] && grep -q '^usage: dat2-info' "$out/badopt.err"; then pass bad-option; else fail "bad-option status $status"; fi

# ---- the make target builds the same program ------------------------------------------------
if [ -x "$build/dat2-info" ]; then
  DAT_OVERRIDE=$out/empty.conf env -u DAT_DBG_TYPE LD_LIBRARY_PATH="$build" timeout 30 "$build/dat2-info" \
    -p dat2-soft >"$out/made.out" 2>&1
  st=$?
  if [ $st -eq 0 ] && [ "$(value made dat2-soft state)" = opens ]; then
    pass make-built
  else
    fail "make-built status $st: $(show made)"
  fi
else
  skip make-built "no $build/dat2-info (run make tools)"
fi

if ls "$out"/asan* "$out"/ubsan* >/dev/null 2>&1; then
  fail "sanitizers $(cat "$out"/asan* "$out"/ubsan* 2>/dev/null | head -c 600 | tr '\n' '|')"
fi
exit $rc
