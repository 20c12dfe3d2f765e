#!/usr/bin/env bash
# dat2-info (tools/dat2-info*.c), built here with the pass's $CC $CFLAGS against our library.
# By default: a table of the IAs that open (dat2-soft), then one line per group of those that
# do not, with a count (five missing libraries are one line). -v and -p give every IA in full:
# its attributes, or the library's reason (a missing library, a built-in soft entry with a bad
# address); -p filters. --json and -o json: a document python3 parses, escaped right. -h, bad
# options and exit statuses.
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
DAT_OVERRIDE=$out/empty.conf run soft -p dat2-soft
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
   [[ "$(value soft dat2-soft ia_address)" =~ ^127\.0\.0\.1\ port\ [1-9][0-9]*$ ]] &&
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
DAT_OVERRIDE=$out/bad.conf run bad -v
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

DAT_OVERRIDE=$out/no-such.conf run missing-conf -v
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
DAT_OVERRIDE=$out/none.conf run none -v
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

# ---- the default form: what opens, then one line per reason ------------------------------------
# section NAME: the lines after "Does not open:" in NAME's output, up to the empty line.
section() { sed -n '/^Does not open:$/,/^$/p' "$out/$1.out" | sed '1d;/^$/d'; }
DAT_OVERRIDE=$out/empty.conf run table
if [ $status -eq 0 ] && grep -qE '^IA +DEVICE +LIBRARY +TRANSPORT +ADDRESS +STATE$' "$out/table.out" &&
   grep -qE '^dat2-soft +soft0 +built in +TCP +127\.0\.0\.1 port [1-9][0-9]* +opens$' "$out/table.out" &&
   ! grep -q -e '^ia_name:' -e '^Does not open' "$out/table.out" && ! [ -s "$out/table.err" ]; then
  pass default-table
else
  fail "default-table status $status: $(show table) $(head -c 200 "$out/table.err")"
fi
if [ "$(sed -n 1p "$out/table.out")" = "$(sed -n 1p "$out/soft.out")" ] &&
   grep -qx "dat_conf: $out/empty.conf (DAT_OVERRIDE)" "$out/table.out" &&
   grep -qx 'ia_names: 1' "$out/table.out"; then
  pass default-header
else
  fail "default-header $(head -3 "$out/table.out" | tr '\n' '|')"
fi

DAT_OVERRIDE=$out/bad.conf run short
gone_line="  1 dat.conf entry (gone-ia): DAT_PROVIDER_NOT_FOUND DAT_NAME_NOT_REGISTERED: cannot load provider library $nolib: $nolib: cannot open shared object file: No such file or directory"
if [ $status -eq 0 ] && [ "$(section short | wc -l)" = 2 ] && section short | grep -qxF "$gone_line" &&
   section short | grep -q "^  1 dat.conf entry (bad-soft): DAT_INVALID_ADDRESS DAT_INVALID_ADDRESS_UNSUPPORTED: .*no-such-netdev-x" &&
   grep -qE '^good-soft +soft0 +built in +TCP +127\.0\.0\.1 port [1-9][0-9]* +opens$' "$out/short.out" &&
   grep -qE '^dat2-soft +soft0' "$out/short.out"; then
  pass default-reasons
else
  fail "default-reasons status $status: $(tr '\n' '|' <"$out/short.out" | head -c 900)"
fi
if grep '^    message:' "$out/short.out" | grep -q "$out/bad.conf:6"; then
  pass default-keeps-messages
else
  fail "default-keeps-messages $(head -5 "$out/short.out" | tr '\n' '|')"
fi

# Five entries whose libraries (each another path, with another device) do not exist, and two
# soft entries on two missing network devices: two lines, with counts, the larger first.
{
  for i in 1 2 3 4 5; do
    echo "gone-$i u2.0 nonthreadsafe default $out/no/such/dir$i/libgone$i.so.2 dapl.2.0 \"mlx5_$i 1\" \"\""
  done
  echo 'bad-soft-a u2.0 nonthreadsafe default builtin:soft dat2.2.0 "no-such-netdev-a 0" ""'
  echo 'bad-soft-b u2.0 nonthreadsafe default builtin:soft dat2.2.0 "no-such-netdev-b 0" ""'
} >"$out/many.conf"
DAT_OVERRIDE=$out/many.conf run many
if [ $status -eq 0 ] && [ "$(section many | wc -l)" = 2 ] &&
   [ "$(section many | sed -n 1p)" = "  5 dat.conf entries: DAT_PROVIDER_NOT_FOUND DAT_NAME_NOT_REGISTERED: cannot load provider library <library>: <library>: cannot open shared object file: No such file or directory" ] &&
   section many | sed -n 2p | grep -q "^  2 dat.conf entries (bad-soft-a, bad-soft-b): DAT_INVALID_ADDRESS DAT_INVALID_ADDRESS_UNSUPPORTED: .*<device>" &&
   [ "$(wc -l <"$out/many.out")" -le 12 ]; then
  pass groups-with-count
else
  fail "groups-with-count status $status: $(tr '\n' '|' <"$out/many.out" | head -c 900)"
fi

DAT_OVERRIDE=$out/none.conf run none-short
if [ $status -eq 1 ] && grep -qx 'No IA opens.' "$out/none-short.out" &&
   section none-short | grep -q '^  1 dat.conf entry (dat2-soft): DAT_INVALID_ADDRESS'; then
  pass default-none-opens
else
  fail "default-none-opens status $status: $(show none-short)"
fi

# ---- --json ----------------------------------------------------------------------------------
# json NAME CHECK: parses NAME's output with python3 and runs the Python statements CHECK on it
# (as d); prints what failed.
json() {
  python3 - "$out/$1.out" "$2" <<'PY'
import json, re, sys
raw = open(sys.argv[1], "rb").read()
try:
    d = json.loads(raw.decode("utf-8"))
except Exception as e:
    sys.exit("not JSON: %s: %r" % (e, raw[:300]))
ias = {i["name"]: i for i in d["ias"]}
try:
    exec(sys.argv[2])
except AssertionError as e:
    sys.exit("assertion: %s" % e)
except Exception as e:
    sys.exit("%s: %s" % (type(e).__name__, e))
PY
}
if command -v python3 >/dev/null; then
  DAT_OVERRIDE=$out/bad.conf run json --json
  why=$(json json '
assert d["dat_conf"] == sys.argv[1].rsplit("/", 1)[0] + "/bad.conf" and d["dat_conf_override"] is True, d["dat_conf"]
assert d["ia_names"] == 4 and len(d["ias"]) == 4 and d["opened"] == 2, (d["ia_names"], d["opened"])
g = ias["gone-ia"]
assert g["opens"] is False and g["state"] == "does not open", g
assert g["error"] == {"code": 0x800a0064, "name": "DAT_PROVIDER_NOT_FOUND", "subtype": "DAT_NAME_NOT_REGISTERED"}, g["error"]
assert g["library"].endswith("/libdapl-missing.so.2") and g["dat_conf_entries"][0]["line"] == 3, g
assert any("cannot load provider library" in r for r in g["reason"]), g["reason"]
s = ias["dat2-soft"]
assert s["opens"] is True and s["state"] == "opens" and s["builtin"] is True and s["library"] is None, s
# A soft IA listens on a port of its own (one the system picks: "127.0.0.1 0").
assert (s["device"], s["transport"]) == ("soft0", "TCP") and re.fullmatch(r"127\.0\.0\.1 port [1-9][0-9]*", s["address"]), s
assert s["ia_attr"]["max_eps"] > 0 and s["ia_attr"]["ia_address"] == s["address"], s["ia_attr"]
assert s["provider_attr"]["provider_specific_attr"]["DAT2_DEVICE"] == "soft", s["provider_attr"]
assert len(s["provider_attr"]["evd_stream_merging_supported"]) == 6
assert len(s["registry_keys"]) == 2
assert ias["bad-soft"]["error"]["name"] == "DAT_INVALID_ADDRESS"
assert sorted((n["count"], n["ias"][0]) for n in d["not_opening"]) == [(1, "bad-soft"), (1, "gone-ia")], d["not_opening"]
assert any("skipped" in m or ":6" in m for m in d["messages"]), d["messages"]
' 2>&1)
  if [ $status -eq 0 ] && [ -z "$why" ] && python3 -m json.tool "$out/json.out" >/dev/null; then
    pass json
  else
    fail "json status $status: $why"
  fi

  DAT_OVERRIDE=$out/bad.conf run json-o -o json
  why=$(json json-o 'assert sorted(ias) == ["bad-soft", "dat2-soft", "gone-ia", "good-soft"], sorted(ias)' 2>&1)
  if [ $status -eq 0 ] && [ -z "$why" ]; then pass json-o-alias; else fail "json-o-alias status $status: $why"; fi

  DAT_OVERRIDE=$out/bad.conf run json-p --json -p gone-ia
  why=$(json json-p 'assert list(ias) == ["gone-ia"] and d["opened"] == 0 and d["not_opening"][0]["count"] == 1, d' 2>&1)
  if [ $status -eq 1 ] && [ -z "$why" ]; then pass json-p; else fail "json-p status $status: $why"; fi

  DAT_OVERRIDE=$out/many.conf run json-many --json
  why=$(json json-many '
n = d["not_opening"][0]
assert n["count"] == 5 and n["dat_conf_entries"] == 5 and n["ias"] == ["gone-%d" % i for i in range(1, 6)], n
assert n["reason"].startswith("cannot load provider library <library>: "), n["reason"]
' 2>&1)
  if [ $status -eq 0 ] && [ -z "$why" ]; then pass json-groups; else fail "json-groups status $status: $why"; fi

  # Names and messages with a quote, a backslash, a tab, a control byte and a byte that is not
  # UTF-8 (dat.conf quotes and escapes fields).
  printf '%s\n' 'a"q u2.0 nonthreadsafe default "/no/such/lib\"q\\b.so" dapl.2.0 "x 1" ""' \
    '"t	ab" u2.0 nonthreadsafe default /no/such/libtab.so dapl.2.0 "x 1" ""' >"$out/esc.conf"
  printf 'ctl u2.0 nonthreadsafe default /no/such/\001c\377.so dapl.2.0 "x 1" ""\n' >>"$out/esc.conf"
  DAT_OVERRIDE=$out/esc.conf run json-escape --json
  why=$(json json-escape '
assert ias["a\"q"]["library"] == "/no/such/lib\"q\\b.so", ias["a\"q"]["library"]
assert any("/no/such/lib\"q\\b.so" in r for r in ias["a\"q"]["reason"]), ias["a\"q"]["reason"]
assert "t\tab" in ias, sorted(ias)
assert ias["ctl"]["library"] == "/no/such/\x01c\ufffd.so", repr(ias["ctl"]["library"])
assert b"\x01" not in raw and b"\t" not in raw and b"\\u0001" in raw
' 2>&1)
  if [ -z "$why" ]; then pass json-escaping; else fail "json-escaping status $status: $why"; fi
else
  for c in json json-o-alias json-p json-groups json-escaping; do skip "$c" "no python3"; done
fi
run badform -o yaml
if [ $status -eq 2 ] && grep -q '^usage: dat2-info' "$out/badform.err"; then pass bad-form; else fail "bad-form status $status"; fi

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
