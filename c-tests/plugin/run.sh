#!/usr/bin/env bash
# The provider library build/libdat2prov.so.2 (dat2's built-in providers as a DAT provider
# library, src/plugin.rs) loaded through a private dat.conf, by pltest.c's cases (the common
# runner, c-tests/common), against both libdat2s:
#   debian:*  Debian's libdat2, linked by its path, run without LD_LIBRARY_PATH
#   dat2:*    ours, like any third-party provider library
# Debian's own programs on the provider library run in c-tests/programs (plugin-* cases).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init plugin system
case_timeout=60

names=(twice fini stale params)
plugin=$build/libdat2prov.so.2
if [ ! -e "$plugin" ]; then
  fail build "no libdat2prov.so.2 in $build (make plugin)"
  exit 1
fi
plugin=$(readlink -f "$plugin")
conf=$out/dat.conf
cat >"$conf" <<CONF
# two entries of the provider library, one with the soft device's default ia_params, one that
# names no device
dat2prov-a u2.0 nonthreadsafe default $plugin dat2.2.0 "soft 127.0.0.1 0" ""
dat2prov-b u2.0 nonthreadsafe default $plugin dat2.2.0 "soft 127.0.0.1 0" ""
dat2prov-default u2.0 nonthreadsafe default $plugin dat2.2.0 "soft" ""
dat2prov-bogus u2.0 nonthreadsafe default $plugin dat2.2.0 "bogus 1 2" ""
CONF

label=debian
if [ ! -e "$debian_lib" ]; then
  for n in "${names[@]}"; do skip "$n" "Debian's libdat2 is not installed (apt-get install libdapl2)"; done
elif harness_compile pltest-debian "$here/pltest.c" "$debian_lib"; then
  case_lib=
  for n in "${names[@]}"; do run_case "$n" DAT_OVERRIDE="$conf"; done
fi

label=dat2
case_lib=$build
if harness_compile pltest-dat2 "$here/pltest.c" -L"$build" -ldat2; then
  for n in "${names[@]}"; do run_case "$n" DAT_OVERRIDE="$conf"; done
fi
exit $rc
