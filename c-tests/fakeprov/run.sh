#!/usr/bin/env bash
# Dispatch tests through a fake provider (fakeprov.c) loaded from a private dat.conf, by
# fptest.c's two cases (the common runner, c-tests/common; each a sequence of checks):
#   debian:good:*  the good-handle checks against Debian's libdat2
#   dat2:good:*    the same checks against ours
#   dat2:bad:*     invalid handles (ours only: Debian's library crashes on them)
# Each case runs in a process of its own (c-tests/common/lib.sh run_case), and each bad-handle
# call in a child process of that, so that a crash is charged to the call that caused it.
# Headers: the system's <dat2/...> by default; DAT2_TEST_HEADERS=repo uses $DAT2_ROOT/include.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init fakeprov system
case_timeout=120

# The provider is loaded into sanitized and plain programs alike: built without the sanitizer
# flags.
compile --plain build-provider "$out/libfakeprov.so" -shared -fPIC "$here/fakeprov.c" || exit 1
pass build-provider

conf="$out/dat.conf"
cat >"$conf" <<EOF
# private registry for the fake provider
fake-ia u2.0 nonthreadsafe default $out/libfakeprov.so fake.2.0 "inst data" ""
EOF
provider=(DAT_OVERRIDE="$conf" FPTEST_PROVIDER="$out/libfakeprov.so")

# Debian's library: linked by its path, run without LD_LIBRARY_PATH.
label=debian
if [ ! -e "$debian_lib" ]; then
  skip good "Debian's libdat2 is not installed (apt-get install libdapl2)"
elif harness_compile fptest-debian "$here/fptest.c" "$debian_lib" -ldl; then
  case_lib=
  run_case good "${provider[@]}" FPTEST_LIB="$(readlink -f "$debian_lib")"
fi

# Ours: linked with -L$DAT2_BUILD -ldat2, run with LD_LIBRARY_PATH=$DAT2_BUILD.
label=dat2
case_lib=$build
if [ ! -e "$build/libdat2.so" ] || [ ! -e "$build/libdat2.so.2" ]; then
  fail build "no libdat2.so / libdat2.so.2 in $build"
elif harness_compile fptest-dat2 "$here/fptest.c" -L"$build" -ldat2 -ldl; then
  run_case good "${provider[@]}" FPTEST_LIB="$(readlink -f "$build/libdat2.so.2")"
  run_case bad "${provider[@]}"
fi
exit $rc
