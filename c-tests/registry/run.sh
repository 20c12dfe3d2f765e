#!/usr/bin/env bash
# Registry behaviour: dat.conf parsing, listing, opening, argument errors, dynamic
# registration, dats_get_ia_handle and dat_strerror. Each scenario runs once against
# Debian's libdat2 and once against ours; a case passes when both observed the same.
# Then checks that only make sense for ours (silence by default, debug messages,
# NULL pointers the original dereferences).
# Headers: the system's <dat2/...> by default; DAT2_TEST_HEADERS=repo uses $DAT2_ROOT/include.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init registry system
fake_dir=$here/../fakeprov

# The provider is loaded into sanitized and plain programs alike: built without the sanitizer
# flags.
compile --plain build-provider "$out/libfakeprov.so" -shared -fPIC "$fake_dir/fakeprov.c" || exit 1
lib=$out/libfakeprov.so
# a loadable library without dat_provider_init
echo 'int fake_nothing_here(void) { return 0; }' >"$out/empty.c"
compile --plain build-empty "$out/libempty.so" -shared -fPIC "$out/empty.c" || exit 1
have_debian=0
if [ -e "$debian_lib" ] &&
  compile build-debian "$out/regtest-debian" -I"$fake_dir" "$here/regtest.c" "$debian_lib" -ldl; then
  have_debian=1
fi
compile build-dat2 "$out/regtest-dat2" -I"$fake_dir" "$here/regtest.c" -L"$build" -ldat2 -ldl || exit 1

# ---- configuration files ------------------------------------------------------
tab=$'\t'
conf=$out/conf-test.conf
{
  echo "# registry test configuration"
  echo "   # an indented comment"
  echo ""
  echo "ok-plain u2.0 nonthreadsafe default $lib fake.2.0 \"plain data\" \"\""
  echo "ok-ts u2.0 threadsafe default $lib fake.2.0 \"ts data\" \"\""
  echo "ok-quoted u2.0 nonthreadsafe default \"$lib\" fake.2.0 \"with  two  blanks\" \"platform params\""
  echo "ok-escaped u2.0 nonthreadsafe default $lib fake.2.0 \"say \\\"hi\\\" now\" \"\""
  echo "ok-comment u2.0 nonthreadsafe default $lib fake.2.0 \"c\" \"\" # trailing comment"
  echo "ok-tabs${tab}u2.0${tab}nonthreadsafe${tab}default${tab}$lib${tab}fake.2.0${tab}\"tabs\"${tab}\"\""
  echo "ok-prefix-ts u2.0 threadsafeXYZ defaultXYZ $lib fake.2.0 \"prefix\" \"\""
  echo "bad-fields u2.0 nonthreadsafe default $lib fake.2.0 \"seven\""
  echo "bad-toomany u2.0 nonthreadsafe default $lib fake.2.0 \"x\" \"\" extra"
  echo "bad-api v2.0 nonthreadsafe default $lib fake.2.0 \"x\" \"\""
  echo "bad-api2 u2.x nonthreadsafe default $lib fake.2.0 \"x\" \"\""
  echo "bad-ts u2.0 maybe default $lib fake.2.0 \"x\" \"\""
  echo "bad-default u2.0 nonthreadsafe sometimes $lib fake.2.0 \"x\" \"\""
  echo "bad-provver u2.0 nonthreadsafe default $lib fake \"x\" \"\""
  echo "ok-after-bad u2.0 nonthreadsafe default $lib fake.2.0 \"after\" \"\""
  echo "skip-nondefault u2.0 nonthreadsafe nondefault $lib fake.2.0 \"x\" \"\""
  echo "skip-kdat k2.0 nonthreadsafe default $lib fake.2.0 \"x\" \"\""
  echo "dup u2.0 nonthreadsafe default /nonexistent/libfake.so fake.2.0 \"dup1\" \"\""
  echo "dup u2.0 nonthreadsafe default $lib fake.2.0 \"dup2\" \"\""
  echo "ok-v13 u1.3 nonthreadsafe default $lib fake.2.0 \"v13\" \"\""
  echo "missing-lib u2.0 nonthreadsafe default /nonexistent/libnope.so fake.2.0 \"x\" \"\""
  echo "no-init u2.0 nonthreadsafe default $out/libempty.so fake.2.0 \"x\" \"\""
  echo "not-a-library u2.0 nonthreadsafe default $out/one.conf fake.2.0 \"x\" \"\""
  echo "bare-name u2.0 nonthreadsafe default libfakeprov.so fake.2.0 \"bare\" \"\""
  echo "$(printf 'long%.0s' $(seq 70)) u2.0 nonthreadsafe default $lib fake.2.0 \"long\" \"\""
  echo "bad-quote u2.0 nonthreadsafe default $lib fake.2.0 \"x\" \"unterminated"
  echo "ok-after-quote u2.0 nonthreadsafe default $lib fake.2.0 \"after quote\" \"\""
  printf '%s' "ok-last u2.0 nonthreadsafe default $lib fake.2.0 \"eof\" \"\""
} >"$conf"
bad_fields_line=$(grep -n '^bad-fields' "$conf" | cut -d: -f1)
one=$out/one.conf
echo "fake-ia u2.0 nonthreadsafe default $lib fake.2.0 \"inst data\" \"\"" >"$one"
empty=$out/empty.conf
: >"$empty"

# ---- scenarios -----------------------------------------------------------------
# name | regtest scenario | DAT_OVERRIDE ("-" = unset) | provider argument
scenarios=(
  "conf|conf|$conf|$lib"
  "args|args|$one|$lib"
  "missing|list|$out/does-not-exist.conf|"
  "empty|list|$empty|"
  "system|list|-|"
  "strerror|strerror|$empty|"
)

# runone WHICH NAME SCEN OVERRIDE PROV [env...]: writes $out/WHICH-NAME.{txt,stdout,stderr}
runone() {
  local which=$1 name=$2 scen=$3 ovr=$4 prov=$5; shift 5
  # env wants every -u before the first assignment
  local unset=(-u DAT_DBG_TYPE -u DAT_DBG_DEST) set=("$@")
  if [ "$ovr" = - ]; then unset+=(-u DAT_OVERRIDE); else set+=(DAT_OVERRIDE="$ovr"); fi
  # $out is on the search path for the dat.conf entry naming a bare file name
  if [ "$which" = debian ]; then
    set+=(LD_LIBRARY_PATH="$out" REGTEST_LIB="$(readlink -f "$debian_lib")")
  else
    set+=(LD_LIBRARY_PATH="$build:$out" REGTEST_LIB="$(readlink -f "$build/libdat2.so.2")")
  fi
  local envs=("${unset[@]}" "${set[@]}")
  : >"$out/$which-$name.txt"
  env "${envs[@]}" timeout 60 "$out/regtest-$which" "$scen" "$out/$which-$name.txt" $prov \
    >"$out/$which-$name.stdout" 2>"$out/$which-$name.stderr"
  echo $? >"$out/$which-$name.status"
}

# compare NAME: one case ("LABEL:NAME:KEY") per key Debian reported
compare() {
  awk -v name="$label:$1" '
    FNR == NR { k = $1; sub(/^[^ ]* ?/, ""); deb[k] = $0; order[++n] = k; next }
    { k = $1; sub(/^[^ ]* ?/, ""); ours[k] = $0 }
    function cut(s) { return length(s) > 240 ? substr(s, 1, 240) "..." : s }
    END {
      bad = 0
      for (i = 1; i <= n; i++) {
        k = order[i]
        if (!(k in ours)) { printf "FAIL %s:%s missing from our run (debian: %s)\n", name, k, cut(deb[k]); bad = 1; continue }
        if (k ~ /#ge$/) {
          if (ours[k] + 0 >= deb[k] + 0) printf "PASS %s:%s\n", name, k
          else { printf "FAIL %s:%s debian=%s dat2=%s\n", name, k, deb[k], ours[k]; bad = 1 }
          continue
        }
        if (ours[k] == deb[k] || (k ~ /#prefix$/ && index(ours[k], deb[k]) == 1)) {
          printf "PASS %s:%s\n", name, k; continue
        }
        # show the first differing ";"-separated element (dat_strerror tables)
        nd = split(deb[k], d, ";"); split(ours[k], o, ";")
        for (j = 1; j <= nd && d[j] == o[j]; j++) ;
        if (nd > 1) printf "FAIL %s:%s element %d: debian=%s dat2=%s\n", name, k, j - 1, d[j], o[j]
        else printf "FAIL %s:%s debian=%s dat2=%s\n", name, k, cut(deb[k]), cut(ours[k])
        bad = 1
      }
      exit bad
    }' "$out/debian-$1.txt" "$out/dat2-$1.txt" || rc=1
}

for s in "${scenarios[@]}"; do
  IFS='|' read -r name scen ovr prov <<<"$s"
  runone dat2 "$name" "$scen" "$ovr" "$prov"
  st=$(cat "$out/dat2-$name.status")
  [ "$st" = 0 ] || fail "$name:exit our run exited with $st: $(tail -c 300 "$out/dat2-$name.stderr" | tr '\n' ' ')"
  # a library prints nothing unless asked to (DAT_DBG_TYPE unset)
  if [ -s "$out/dat2-$name.stdout" ] || [ -s "$out/dat2-$name.stderr" ]; then
    fail "$name:silent our library printed: $(cat "$out/dat2-$name.stdout" "$out/dat2-$name.stderr" | head -3 | tr '\n' '|')"
  else
    pass "$name:silent"
  fi
  if [ $have_debian = 1 ]; then
    runone debian "$name" "$scen" "$ovr" "$prov"
    if ! grep -q '^end ok' "$out/debian-$name.txt"; then
      fail "$name:debian-run Debian's library did not finish (status $(cat "$out/debian-$name.status"))"
      continue
    fi
    compare "$name"
  else
    skip "$name:compare" "Debian's libdat2 is not installed"
  fi
done

# ---- Debian prints ERROR-class messages by default; with DAT_DBG_TYPE=0 it is silent
# too, so the comparison of printed output is only meaningful at that setting.
if [ $have_debian = 1 ]; then
  for s in "conf|conf|$conf|$lib" "missing|list|$out/does-not-exist.conf|"; do
    IFS='|' read -r name scen ovr prov <<<"$s"
    runone debian "$name-dbg0" "$scen" "$ovr" "$prov" DAT_DBG_TYPE=0
    runone dat2 "$name-dbg0" "$scen" "$ovr" "$prov" DAT_DBG_TYPE=0
    d=$(cat "$out/debian-$name-dbg0.stdout" "$out/debian-$name-dbg0.stderr" | wc -c)
    o=$(cat "$out/dat2-$name-dbg0.stdout" "$out/dat2-$name-dbg0.stderr" | wc -c)
    if [ "$d" = 0 ] && [ "$o" = 0 ]; then pass "$name:dbg0-both-silent"
    else fail "$name:dbg0-both-silent debian printed $d bytes, ours $o bytes with DAT_DBG_TYPE=0"; fi
  done
fi

# ---- ours only ------------------------------------------------------------------
runone dat2 ours ours "$empty" ""
expect_key() { # file key value
  local got
  got=$(awk -v k="$2" '$1 == k { sub(/^[^ ]* /, ""); print; exit }' "$1")
  if [ "$got" = "$3" ]; then pass "$2"; else fail "$2 got '${got:-(missing)}' want '$3'"; fi
}
expect_key "$out/dat2-ours.txt" ours.strerror.major_null 0x80060026
expect_key "$out/dat2-ours.txt" ours.add.info_null 0x80060026
expect_key "$out/dat2-ours.txt" ours.remove.info_null.type 0x60000

# With DAT_DBG_TYPE=0xff every message is a "DAT Registry: " line, and a corrupt
# dat.conf line is reported with its file and line number.
runone dat2 conf-dbgff conf "$conf" "$lib" DAT_DBG_TYPE=0xff
msgs=$out/dat2-conf-dbgff.stdout
if [ ! -s "$msgs" ]; then
  fail "dbgff:messages nothing printed with DAT_DBG_TYPE=0xff"
elif grep -v -q '^DAT Registry: ' "$msgs"; then
  fail "dbgff:prefix line without the prefix: $(grep -v '^DAT Registry: ' "$msgs" | head -1)"
else
  pass dbgff:prefix
fi
if grep -F "$conf" "$msgs" | grep -q -E "(:$bad_fields_line([^0-9]|\$)|line $bad_fields_line([^0-9]|\$))"; then
  pass dbgff:bad-line-location
else
  fail "dbgff:bad-line-location no message names $conf and line $bad_fields_line"
fi
if [ -s "$out/dat2-conf-dbgff.stderr" ]; then
  fail "dbgff:stderr messages went to stderr: $(head -1 "$out/dat2-conf-dbgff.stderr")"
else
  pass dbgff:stdout-only
fi
exit $rc
