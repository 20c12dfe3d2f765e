#!/usr/bin/env bash
# A set-user-ID program ignores the caller's environment (issue 21): a set-user-ID root copy of
# sectest.c, started as user nobody with DAT_OVERRIDE naming a dat.conf whose library writes a
# marker file when it is loaded, and DAT_DBG_TYPE/DAT_DBG_DEST set, must not load that library
# nor log anything. The same program without the set-user-ID bit, started the same way, is the
# control: it must load the library and log, or the test proves nothing. dat2-info, built the
# same way, must neither report nor load the override in a secure process, and must finish
# (it starts itself again to capture the library's messages, which it must not try there).
#
# The programs are linked with an absolute rpath to a copy of $DAT2_BUILD/libdat2.so.2 in a
# directory nobody can read (the loader ignores LD_LIBRARY_PATH in a set-user-ID program), and
# each run prints the libdat2 it mapped: a run that did not map ours fails.
# Needs root (to make the set-user-ID copy and to become nobody), setpriv (util-linux), the
# user nobody, and a file system mounted without nosuid; skips with the reason otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init secure

setuid_cases=(setuid:secure setuid:exit setuid:loads-ours setuid:override-ignored setuid:nothing-logged
  info-setuid:exit info-setuid:override-ignored)
control_cases=(control:exit control:loads-ours control:override-honoured control:debug-logged
  info-control:override-honoured)
all_cases=("${control_cases[@]}" "${setuid_cases[@]}")
[ "$(id -u)" = 0 ] || skip_all "not root: cannot make a set-user-ID root program nor become nobody" "${all_cases[@]}"
command -v setpriv >/dev/null || skip_all "no setpriv (util-linux)" "${all_cases[@]}"
nobody_uid=$(id -u nobody 2>/dev/null) && nobody_gid=$(id -g nobody 2>/dev/null) ||
  skip_all "no user nobody" "${all_cases[@]}"
if [ ! -e "$build/libdat2.so.2" ]; then
  fail library "no libdat2.so.2 in $build (run make)"
  exit 1
fi

as_nobody=(setpriv --reuid="$nobody_uid" --regid="$nobody_gid" --clear-groups)
nosuid() { python3 -c 'import os, sys; sys.exit(0 if os.statvfs(sys.argv[1]).f_flag & os.ST_NOSUID else 1)' "$1"; }

# A fresh directory on a file system that honours the set-user-ID bit, which nobody can read:
# beside this group's output if that will do (CI: the repository's file system), else under
# /tmp or /var/tmp. It holds the programs, the library's copy, the dat.conf and the marker;
# the logs stay in $out. Removed at the end, so no set-user-ID root program outlives the test.
dir=""
why_none=""
for base in "$out" /tmp /var/tmp; do
  if nosuid "$base"; then
    why_none+="$base is on a nosuid mount; "
    continue
  fi
  d=$(mktemp -d "$base/dat2-secure.XXXXXX") || continue
  chmod 0755 "$d"
  if "${as_nobody[@]}" test -r "$d" -a -x "$d"; then
    dir=$d
    break
  fi
  why_none+="nobody cannot reach $base; "
  rmdir "$d"
done
[ -n "$dir" ] || skip_all "no directory for a set-user-ID program: $why_none" "${all_cases[@]}"
trap 'rm -rf "$dir"' EXIT
echo "# programs in $dir (the build directory $build is $(nosuid "$build" && echo nosuid || echo suid-capable))"

mkdir "$dir/mark"
chown "$nobody_uid:$nobody_gid" "$dir/mark"
marker=$dir/mark/loaded
cp "$build/libdat2.so.2" "$dir/libdat2.so.2"
chmod 0644 "$dir/libdat2.so.2"
cmp -s "$build/libdat2.so.2" "$dir/libdat2.so.2" || { fail copy "the copy of $build/libdat2.so.2 differs"; exit 1; }
compile --plain build-marker "$dir/libmarker.so" -shared -fPIC -DMARKER="\"$marker\"" "$here/marker.c" || exit 1
compile build-sectest "$dir/sectest" "$here/sectest.c" -L"$build" -ldat2 -Wl,-rpath,"$dir" || exit 1
compile build-info "$dir/dat2-info" "$root"/tools/dat2-info*.c -L"$build" -ldat2 -Wl,-rpath,"$dir" || exit 1
for p in sectest dat2-info; do
  cp "$dir/$p" "$dir/$p-suid"
  chown root:root "$dir/$p" "$dir/$p-suid"
  chmod 0755 "$dir/$p"
  chmod 4755 "$dir/$p-suid"
done
cat >"$dir/dat.conf" <<EOF
# the caller's own dat.conf: its library must not be loaded into a set-user-ID program
ofa-v2-ib0 u2.0 nonthreadsafe default $dir/libmarker.so dapl.2.0 "ib0 0" ""
EOF
chmod 0644 "$dir/dat.conf" "$dir/libmarker.so"

# run NAME PROGRAM: PROGRAM as nobody, in an environment of the caller's choosing only;
# $out/NAME.stdout, .stderr, .status, and $out/NAME.marker (the marker's text, if any).
run() {
  local name=$1 program=$2
  rm -f "$marker"
  env -i PATH=/usr/bin:/bin DAT_OVERRIDE="$dir/dat.conf" DAT_DBG_TYPE=0xff DAT_DBG_DEST=1 \
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    timeout 60 "${as_nobody[@]}" "$program" >"$out/$name.stdout" 2>"$out/$name.stderr" </dev/null
  echo $? >"$out/$name.status"
  rm -f "$out/$name.marker"
  [ -e "$marker" ] && cp "$marker" "$out/$name.marker"
  return 0
}
first() { cat "$@" 2>/dev/null | head -c 300 | tr '\n' '|'; }
exit_ok() { # NAME: the run ended by itself with status 0
  local st
  st=$(<"$out/$1.status")
  if [ "$st" = 0 ]; then pass "$1:exit"; else fail "$1:exit" "status $st $(died "$st"): $(first "$out/$1.stderr")"; fi
}
loads_ours() { # CASE NAME
  local got
  got=$(sed -n 's/^sectest libdat2 //p' "$out/$2.stdout")
  if [ "$got" = "$dir/libdat2.so.2" ]; then pass "$1"; else fail "$1" "mapped '${got:-no libdat2}', not $dir/libdat2.so.2"; fi
}

# ---- control: the same program without the set-user-ID bit honours the environment -------
run control "$dir/sectest"
exit_ok control
loads_ours control:loads-ours control
if grep -q "^loaded euid $nobody_uid\$" "$out/control.marker" 2>/dev/null; then
  pass control:override-honoured
else
  fail control:override-honoured "DAT_OVERRIDE's library was not loaded (marker: $(first "$out/control.marker" 2>/dev/null))"
fi
if grep -q '^DAT Registry: ' "$out/control.stdout"; then
  pass control:debug-logged
else
  fail control:debug-logged "DAT_DBG_TYPE=0xff DAT_DBG_DEST=1 logged nothing: $(first "$out/control.stdout")"
fi
# dat2-info reports the override, and opens its entry
run info-control "$dir/dat2-info"
if [ -e "$out/info-control.marker" ] && grep -q '^dat_conf: .*(DAT_OVERRIDE)' "$out/info-control.stdout"; then
  pass info-control:override-honoured
else
  fail info-control:override-honoured "$(first "$out/info-control.stdout" "$out/info-control.stderr")"
fi

# ---- the set-user-ID root copies ignore it -------------------------------------------------
run setuid "$dir/sectest-suid"
if ! grep -q '^sectest secure 1 euid 0$' "$out/setuid.stdout"; then
  if [ "$(<"$out/setuid.status")" = 0 ]; then
    skip_all "the kernel did not run it set-user-ID root ($(first "$out/setuid.stdout")): no_new_privs, a user namespace or a nosuid mount" \
      "${setuid_cases[@]}"
  fi
  fail setuid:secure "exit status $(<"$out/setuid.status"): $(first "$out/setuid.stdout" "$out/setuid.stderr")"
else
  pass setuid:secure
fi
exit_ok setuid
loads_ours setuid:loads-ours setuid
if [ -e "$out/setuid.marker" ]; then
  fail setuid:override-ignored "DAT_OVERRIDE's library was loaded: $(first "$out/setuid.marker")"
elif ! grep -q '^sectest open ' "$out/setuid.stdout"; then
  fail setuid:override-ignored "dat_ia_open did not return: $(first "$out/setuid.stderr")"
else
  pass setuid:override-ignored
fi
# Each of our messages is a "DAT Registry: " line (the control run shows them). A provider of
# /etc/dat.conf (Debian's, where libdapl2 is installed) may print on its own: not ours.
if grep -q 'DAT Registry' "$out/setuid.stdout" "$out/setuid.stderr"; then
  fail setuid:nothing-logged "$(grep -h 'DAT Registry' "$out/setuid.stdout" "$out/setuid.stderr" | head -c 300 | tr '\n' '|')"
else
  pass setuid:nothing-logged
fi

# dat2-info: in a secure process it reads its variables with secure_getenv, so it must not
# start itself again (it would never find the descriptors of its first start), and it must
# neither report nor load the override.
run info-setuid "$dir/dat2-info-suid"
exit_ok info-setuid
if [ -e "$out/info-setuid.marker" ] || grep -q 'DAT_OVERRIDE' "$out/info-setuid.stdout"; then
  fail info-setuid:override-ignored "$(first "$out/info-setuid.marker" "$out/info-setuid.stdout" 2>/dev/null)"
else
  pass info-setuid:override-ignored
fi
exit $rc
