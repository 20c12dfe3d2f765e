#!/usr/bin/env bash
# libdat2 on a host without rdma-core: the verbs device loads libibverbs.so.1 and
# librdmacm.so.1 at run time, so our library must load, and dat2-soft must work, without
# them. The group re-runs itself in a private mount namespace (unshare -m, root only) with
# /dev/null bind-mounted over both libraries (their real files, found with ldconfig -p;
# a library that is not installed is hidden already), and checks there:
#   hidelibs:no-link-dependency  libdat2.so.2 names neither library as NEEDED
#   hidelibs:libs-hidden         dlopen of either library fails (the premise of the rest)
#   hidelibs:program-loads       a program linked against libdat2 starts
#   hidelibs:soft-open           dat_ia_open("dat2-soft") succeeds
#   hidelibs:soft-rdma           examples/rdma.c: two processes RDMA-write and -read over
#                                dat2-soft and verify the data
#   hidelibs:verbs-conf-entry    a dat.conf entry with lib_path builtin:verbs fails to open
#   hidelibs:verbs-builtin-name  dat_ia_open("dat2-verbs-nodev-1") fails (not registered: no such
#                                device in sysfs; or, were there one, naming libibverbs.so.1)
#     (both: with a DAT error, no crash, and with DAT_DBG_TYPE=0xffff a debug message that
#     names libibverbs.so.1; SKIP "no builtin:verbs yet" while the library's debug log says
#     it has no built-in provider called builtin:verbs)
# When we are root and ip exists, the namespace gets its own network too (the example uses
# a fixed TCP port).
# Environment: DAT2_ROOT, DAT2_BUILD, DAT2_OUT, CC, CFLAGS (see c-tests/run-all.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init hidelibs
libs="libibverbs.so.1 librdmacm.so.1"
names="no-link-dependency libs-hidden program-loads soft-open soft-rdma verbs-conf-entry verbs-builtin-name"

if [ -z "${DAT2_HIDELIBS_NS:-}" ]; then
  # shellcheck disable=SC2086 # $names is a list of words
  [ "$(id -u)" = 0 ] || skip_all "needs root for unshare -m" $names
  # shellcheck disable=SC2086
  command -v unshare > /dev/null || skip_all "unshare (util-linux) not found" $names
  # shellcheck disable=SC2086
  unshare -m true 2> /dev/null || skip_all "unshare -m is not permitted here" $names
  net=()
  command -v ip > /dev/null && unshare -m -n true 2> /dev/null && net=(-n)
  # unshare makes the new namespace's mounts private: nothing below reaches the host.
  exec unshare -m "${net[@]}" env DAT2_HIDELIBS_NS=1 DAT2_HIDELIBS_NET=${#net[@]} bash "$0" "$@"
fi
[ "${DAT2_HIDELIBS_NET:-0}" != 0 ] && ip link set lo up

# ---- hide the libraries ------------------------------------------------------------------
hidden=""
for lib in $libs; do
  paths=$(ldconfig -p 2> /dev/null | awk -v l="$lib" '$1 == l { print $NF }')
  if [ -z "$paths" ]; then
    echo "# $lib is not installed: hidden already"
    continue
  fi
  for p in $paths; do
    real=$(realpath -e "$p" 2> /dev/null) || continue
    case " $hidden " in *" $real "*) continue ;; esac
    if mount --bind /dev/null "$real" 2> "$out/mount.log"; then
      hidden+=" $real"
      echo "# $lib: /dev/null over $real"
    else
      echo "# cannot bind-mount /dev/null over $real: $(head -1 "$out/mount.log")"
    fi
  done
done

# ---- build -------------------------------------------------------------------------------
# Every case needs hidetest: without it, each of them fails.
# shellcheck disable=SC2086 # $cflags and $hdr are lists of words
if ! $cc $cflags $hdr -o "$out/hidetest" "$here/hidetest.c" -L"$build" -ldat2 2> "$out/build.log"; then
  for n in $names; do fail "$n" "cannot build hidetest.c: $(head -c 300 "$out/build.log" | tr '\n' ' ')"; done
  exit 1
fi
example_built=1
# shellcheck disable=SC2086
$cc $cflags $hdr -o "$out/rdma" "$root/examples/rdma.c" -L"$build" -ldat2 2> "$out/rdma.build.log" ||
  example_built=0

run() { # log program args...: with our library, no dat.conf unless the caller sets one
  local log=$1
  shift
  env LD_LIBRARY_PATH="$build" DAT_OVERRIDE="${conf:-/nonexistent}" timeout 60 "$@" > "$log" 2>&1
}

# ---- the library itself ------------------------------------------------------------------
needed=$(LC_ALL=C readelf -d "$build/libdat2.so.2" 2> /dev/null | awk '/\(NEEDED\)/ { print $NF }' | tr -d '[]')
if [ -z "$needed" ] && ! LC_ALL=C readelf -d "$build/libdat2.so.2" > /dev/null 2>&1; then
  fail no-link-dependency "readelf cannot read $build/libdat2.so.2"
elif echo "$needed" | grep -qE 'libibverbs|librdmacm'; then
  fail no-link-dependency "libdat2.so.2 needs $(echo "$needed" | grep -E 'libibverbs|librdmacm' | tr '\n' ' ')"
else
  pass no-link-dependency
fi

why=""
for lib in $libs; do
  run "$out/dlopen-$lib.log" "$out/hidetest" dlopen "$lib"
  st=$?
  [ "$st" = 1 ] || why+=" dlopen $lib: $(head -1 "$out/dlopen-$lib.log") (status $st);"
done
if [ -z "$why" ]; then pass libs-hidden; else fail libs-hidden "the libraries are not hidden:$why"; fi

# The program is linked against libdat2 only: that it runs at all shows the library loads.
run "$out/open-soft.log" "$out/hidetest" open dat2-soft
st=$?
if [ "$st" = 0 ] || [ "$st" = 1 ] || [ "$st" = 2 ]; then
  pass program-loads
else
  fail program-loads "status $st: $(head -2 "$out/open-soft.log" | tr '\n' ' ')"
fi
if [ "$st" = 0 ]; then
  pass soft-open
else
  fail soft-open "$(head -1 "$out/open-soft.log") $(died "$st")"
fi

if [ "$example_built" = 0 ]; then
  fail soft-rdma "cannot build examples/rdma.c: $(head -c 300 "$out/rdma.build.log" | tr '\n' ' ')"
else
  run "$out/rdma.log" "$out/rdma" 65536
  st=$?
  if [ "$st" = 0 ] && grep -q "RDMA example: PASSED" "$out/rdma.log" &&
    grep -q "data read back verified" "$out/rdma.log"; then
    pass soft-rdma
  else
    fail soft-rdma "status $st $(died "$st"), log $out/rdma.log: $(tail -2 "$out/rdma.log" | tr '\n' ' ')"
  fi
fi

# ---- the verbs device without its libraries ----------------------------------------------
# Judges one attempt to open a verbs IA: sets why, or skip_why when the library has no verbs
# device at all yet.
verbs_attempt() { # log ia
  local log=$1 ia=$2 st
  run "$log" env DAT_DBG_TYPE=0xffff DAT_DBG_DEST=1 "$out/hidetest" open "$ia"
  st=$?
  why="" skip_why=""
  if grep -q "no built-in provider is called builtin:verbs" "$log"; then
    skip_why="no builtin:verbs yet"
    return
  fi
  case $st in
    1) ;;
    0) why+=" dat_ia_open($ia) succeeded without the libraries;" ;;
    2) why+=" dat_ia_open($ia) returned a status that is not an error: $(grep -m1 '^dat_ia_open' "$log");" ;;
    *) why+=" hidetest $(died "$st") (status $st);" ;;
  esac
  grep -q 'libibverbs\.so\.1' "$log" ||
    why+=" no debug message names libibverbs.so.1 (DAT_DBG_TYPE=0xffff; log $log);"
}

conf=$out/verbs.conf
printf '%s\n' 'hidden-verbs u2.0 nonthreadsafe default builtin:verbs dat2.2.0 "nodev 1" ""' > "$conf"
verbs_attempt "$out/verbs-conf.log" hidden-verbs
conf_skip=$skip_why
if [ -n "$skip_why" ]; then skip verbs-conf-entry "$skip_why"
elif [ -z "$why" ]; then pass verbs-conf-entry
else fail verbs-conf-entry "${why# }"; fi
conf=""

verbs_attempt "$out/verbs-name.log" dat2-verbs-nodev-1
# Whether the library knows builtin:verbs shows in the dat.conf case's log; a built-in
# name that nothing answers to says nothing of the kind.
[ -n "$conf_skip" ] && skip_why=$conf_skip
# Built-in verbs names come from the ports sysfs shows (not from the libraries): for a device
# that is not there, the name is simply not registered.
if [ -z "$skip_why" ] && [ ! -e /sys/class/infiniband/nodev ] &&
  grep -q '^dat_ia_open dat2-verbs-nodev-1: 0x800a0064 ' "$out/verbs-name.log"; then
  why=""
fi
if [ -n "$skip_why" ]; then skip verbs-builtin-name "$skip_why"
elif [ -z "$why" ]; then pass verbs-builtin-name
else fail verbs-builtin-name "${why# }"; fi

exit $rc
