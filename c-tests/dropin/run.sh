#!/usr/bin/env bash
# Drop-in check: Debian's prebuilt test programs (dapl2-utils) started against our
# library behave exactly as they do against Debian's, on a host without RDMA:
# unknown provider names, and Debian's own providers (which fail to open here).
# Output is compared after normalising pids, thread ids, host names and timings.
# Plain pass only: the prebuilt programs are not built with the sanitizers.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init dropin
plain_only "prebuilt Debian programs run in the plain pass only" all
if [ ! -e "$build/libdat2.so.2" ]; then
  fail library "no libdat2.so.2 in $build"
  exit 1
fi
progs=(dtest dtestx dtestcm dtestsrq dapltest)
for p in "${progs[@]}"; do
  command -v "$p" >/dev/null || skip_all "$p not found (apt-get install dapl2-utils)" all
done

conf=$out/dat.conf
cat >"$conf" <<'EOF'
# Debian's providers: rdma_cm (cma), socket CM (scm), UD CM (ucm)
ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "ib0 0" ""
ofa-v2-mlx4_0-1 u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 "mlx4_0 1" ""
ofa-v2-mlx4_0-1u u2.0 nonthreadsafe default libdaploucm.so.2 dapl.2.0 "mlx4_0 1" ""
EOF

# Provider messages look like "host:CMA:38fc:1040d740: 191 us(191 us):  text",
# dtest lines start with its pid.
normalise() {
  sed -E \
    -e 's/^[^ :]+:(CMA|SCM|UCM|MCM):[0-9a-f]+:[0-9a-f]+: *[0-9]+ us\( *[0-9]+ us\): */<host>:\1:<pid>:<tid>: <time>: /' \
    -e 's/^[0-9]+([: ])/<pid>\1/' "$1"
}

n=0
compare_run() { # command words...
  local slug
  slug=$(echo "$*" | tr -c 'A-Za-z0-9_.\n-' '_')
  n=$((n + 1))
  local d="$out/$n-$1-debian" o="$out/$n-$1-dat2"
  env -u LD_LIBRARY_PATH -u DAT_DBG_TYPE DAT_OVERRIDE="$conf" timeout 20 "$@" >"$d.out" 2>"$d.err" </dev/null
  echo $? >"$d.rc"
  env -u DAT_DBG_TYPE LD_LIBRARY_PATH="$build" DAT_OVERRIDE="$conf" timeout 20 "$@" >"$o.out" 2>"$o.err" </dev/null
  echo $? >"$o.rc"
  local why=""
  [ "$(cat "$d.rc")" = "$(cat "$o.rc")" ] || why="exit status debian=$(cat "$d.rc") dat2=$(cat "$o.rc");"
  [ "$(cat "$d.rc")" = 124 ] && why="$why debian run timed out;"
  if ! diff <(normalise "$d.out") <(normalise "$o.out") >"$o.stdout.diff"; then
    why="$why stdout differs: $(head -4 "$o.stdout.diff" | tr '\n' '|')"
  fi
  if ! diff <(normalise "$d.err") <(normalise "$o.err") >"$o.stderr.diff"; then
    why="$why stderr differs: $(head -4 "$o.stderr.diff" | tr '\n' '|')"
  fi
  if [ -z "$why" ]; then pass "$slug"; else fail "$slug" "$why"; fi
}

for prov in nosuch ofa-v2-ib0 ofa-v2-mlx4_0-1 ofa-v2-mlx4_0-1u; do
  compare_run dtest -P "$prov"
  compare_run dtestx -P "$prov"
  compare_run dtestcm -P "$prov"
  compare_run dtestsrq -P "$prov"
  compare_run dapltest -T F -D "$prov" -f hwconn
  compare_run dapltest -T F -D "$prov" -f queryinfo
  compare_run dapltest -T F -D "$prov" -f endpoint
  compare_run dapltest -T F -D "$prov" -f mem
  compare_run dapltest -T L -D "$prov" -m 2
  compare_run dapltest -T S -D "$prov"
done
# default provider names built into the programs
compare_run dtest
compare_run dtestx
compare_run dapltest -T F -f hwconn

# The programs reference dat_*@DAT_2.0: our library must define that version.
for p in "${progs[@]}"; do
  if cat "$out"/*-"$p"-dat2.err | grep -q "no version information available"; then
    fail "no-version-warning:$p" "$(grep -h 'no version information' "$out"/*-"$p"-dat2.err | head -1)"
  else
    pass "no-version-warning:$p"
  fi
done
exit $rc
