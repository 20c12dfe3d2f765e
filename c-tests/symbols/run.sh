#!/usr/bin/env bash
# ELF interface of our libdat2.so.2 against Debian's: the same exported function
# names, each name@@DAT_2.0, the soname, the DAT_2.0 version definition, and Debian's
# prebuilt programs resolving every dat_* reference against our file.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init symbols
ours=$build/libdat2.so.2
debian=/usr/lib/x86_64-linux-gnu/libdat2.so.2.0.0

if [ ! -e "$ours" ]; then
  fail library "no libdat2.so.2 in $build"
  exit 1
fi
for tool in nm readelf ldd; do
  command -v $tool >/dev/null || skip_all "$tool not installed" all
done

# "name@@VERSION TYPE" for every defined dynamic symbol, sorted
defined() { nm -D --defined-only --with-symbol-versions "$1" | awk '{print $3, $2}' | sort; }
defined "$ours" >"$out/ours.syms"

# 1. every export is a function bound to DAT_2.0 as the default version
bad=$(awk '$1 !~ /@@DAT_2\.0$/ || $2 != "T"' "$out/ours.syms")
if [ -z "$bad" ]; then pass "all-at-at-DAT_2.0"; else fail "all-at-at-DAT_2.0 not name@@DAT_2.0 functions: $(echo "$bad" | head -5 | tr '\n' ' ')"; fi
n=$(wc -l <"$out/ours.syms")
if [ "$n" = 74 ]; then pass "count-74"; else fail "count-74 $n exported symbols"; fi

# 2. the same names as Debian's (whose extra absolute DAT_2.0 symbol is not a function)
if [ -e "$debian" ]; then
  defined "$debian" | awk '$2 != "A" {print $1}' >"$out/debian.names"
  awk '{print $1}' "$out/ours.syms" >"$out/ours.names"
  if diff "$out/debian.names" "$out/ours.names" >"$out/names.diff"; then
    pass "same-set-as-debian"
  else
    fail "same-set-as-debian missing(<)/extra(>): $(grep '^[<>]' "$out/names.diff" | head -10 | tr '\n' ' ')"
  fi
else
  skip same-set-as-debian "Debian's libdat2 is not installed"
fi

# 3. soname and version definition
soname=$(readelf -d "$ours" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ "$soname" = libdat2.so.2 ]; then pass soname; else fail "soname '$soname'"; fi
if readelf -V "$ours" | sed -n '/\.gnu\.version_d/,/\.gnu\.version_r/p' | grep -q 'Name: DAT_2.0'; then
  pass "verdef-DAT_2.0"
else
  fail "verdef-DAT_2.0 readelf -V shows no DAT_2.0 version definition"
fi

# 4. the build directory holds the real file and both links
if [ -f "$build/libdat2.so.2.0.0" ] && [ "$(readlink "$build/libdat2.so.2")" = libdat2.so.2.0.0 ] &&
   [ "$(readlink "$build/libdat2.so")" = libdat2.so.2 ]; then
  pass "file-and-links"
else
  fail "file-and-links expected libdat2.so.2.0.0, libdat2.so.2 -> libdat2.so.2.0.0, libdat2.so -> libdat2.so.2"
fi

# 5. Debian's programs resolve every reference (versioned dat_*@DAT_2.0) against ours
for p in dtest dtestx dtestcm dtestsrq dapltest; do
  bin=$(command -v $p) || { skip "ldd-r:$p" "not installed (dapl2-utils)"; continue; }
  res=$(LD_LIBRARY_PATH="$build" ldd -r "$bin" 2>&1)
  if printf '%s\n' "$res" | grep -q -E 'undefined symbol|version .* not found|no version information'; then
    fail "ldd-r:$p $(printf '%s\n' "$res" | grep -E 'undefined|version' | head -2 | tr '\n' ' ')"
  elif ! printf '%s\n' "$res" | grep -q "libdat2.so.2 => $build/libdat2.so.2"; then
    fail "ldd-r:$p does not resolve libdat2.so.2 to $build: $(printf '%s\n' "$res" | grep libdat2)"
  else
    pass "ldd-r:$p"
  fi
done
exit $rc
