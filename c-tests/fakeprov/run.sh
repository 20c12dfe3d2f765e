#!/usr/bin/env bash
# Dispatch tests through a fake provider (fakeprov.c) loaded from a private dat.conf.
#   debian:good:*  the good-handle cases against Debian's libdat2
#   dat2:good:*    the same cases against ours
#   dat2:bad:*     invalid handles (ours only: Debian's library crashes on them)
# Headers: the system's <dat2/...> by default; DAT2_TEST_HEADERS=repo uses $DAT2_ROOT/include.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${DAT2_OUT:?}
cc=${CC:-gcc}
cflags=${CFLAGS:-}
case ${DAT2_TEST_HEADERS:-system} in
  repo) hdr="-I$DAT2_ROOT/include" ;;
  *) hdr="" ;;
esac
debian_lib=/usr/lib/x86_64-linux-gnu/libdat2.so.2
rc=0

# The provider is loaded into sanitized and plain programs alike: build it without
# the sanitizer flags (an uninstrumented .so loads fine into an ASan process).
plain_flags=$(printf '%s\n' $cflags | grep -v -e '^-fsanitize' -e '^-fno-sanitize' | tr '\n' ' ')
if ! $cc $plain_flags $hdr -shared -fPIC -o "$out/libfakeprov.so" "$here/fakeprov.c" 2>"$out/build-provider.log"; then
  echo "FAIL fakeprov:build-provider $(head -c 300 "$out/build-provider.log")"
  exit 1
fi
echo "PASS fakeprov:build-provider"

conf="$out/dat.conf"
cat >"$conf" <<EOF
# private registry for the fake provider
fake-ia u2.0 nonthreadsafe default $out/libfakeprov.so fake.2.0 "inst data" ""
EOF

# run LABEL MODE BINARY [env...]: runs one driver, reports a crash or a hang as a case
run() {
  local label=$1 mode=$2 bin=$3; shift 3
  env "$@" DAT_OVERRIDE="$conf" timeout 120 "$bin" "$label" "$mode" "$out/libfakeprov.so" \
    >"$out/$label-$mode.out" 2>"$out/$label-$mode.err"
  local st=$?
  cat "$out/$label-$mode.out"
  if [ $st -ne 0 ] && ! grep -q '^FAIL ' "$out/$label-$mode.out"; then
    echo "FAIL $label:$mode:exit driver exited with status $st: $(tail -c 400 "$out/$label-$mode.err" | tr '\n' ' ')"
  fi
  [ $st -eq 0 ] || rc=1
}

# Debian's library: link against it explicitly, run without LD_LIBRARY_PATH.
if [ -e "$debian_lib" ]; then
  if $cc $cflags $hdr -o "$out/fptest-debian" "$here/fptest.c" "$debian_lib" -ldl 2>"$out/build-debian.log"; then
    run debian good "$out/fptest-debian" -u LD_LIBRARY_PATH FPTEST_LIB="$(readlink -f "$debian_lib")"
  else
    echo "FAIL debian:build $(head -c 300 "$out/build-debian.log")"; rc=1
  fi
else
  echo "SKIP debian:good Debian's libdat2 is not installed (apt-get install libdapl2)"
fi

# Ours: link with -L$DAT2_BUILD -ldat2, run with LD_LIBRARY_PATH=$DAT2_BUILD.
if [ -e "${DAT2_BUILD:-}/libdat2.so" ] && [ -e "$DAT2_BUILD/libdat2.so.2" ]; then
  if $cc $cflags $hdr -o "$out/fptest-dat2" "$here/fptest.c" -L"$DAT2_BUILD" -ldat2 -ldl 2>"$out/build-dat2.log"; then
    run dat2 good "$out/fptest-dat2" LD_LIBRARY_PATH="$DAT2_BUILD" FPTEST_LIB="$(readlink -f "$DAT2_BUILD/libdat2.so.2")"
    run dat2 bad "$out/fptest-dat2" LD_LIBRARY_PATH="$DAT2_BUILD"
  else
    echo "FAIL dat2:build $(head -c 300 "$out/build-dat2.log" | tr '\n' ' ')"; rc=1
  fi
else
  echo "FAIL dat2:build no libdat2.so / libdat2.so.2 in ${DAT2_BUILD:-(DAT2_BUILD unset)}"; rc=1
fi
exit $rc
