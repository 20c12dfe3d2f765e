#!/usr/bin/env bash
# Drop-in check: Debian's prebuilt test programs (dapl2-utils) started against our
# library behave exactly as they do against Debian's, on a host without RDMA:
# unknown provider names, and Debian's own providers (which fail to open here).
# Output is compared after normalising pids, thread ids, host names and timings.
# Plain pass only: the prebuilt programs are not built with the sanitizers.
set -u
out=${DAT2_OUT:?}
pass=${DAT2_PASS:-plain}
if [ "$pass" != plain ]; then
  echo "SKIP dropin:all prebuilt Debian programs run in the plain pass only"
  exit 0
fi
if [ ! -e "${DAT2_BUILD:-}/libdat2.so.2" ]; then
  echo "FAIL dropin:library no libdat2.so.2 in ${DAT2_BUILD:-(DAT2_BUILD unset)}"
  exit 1
fi
progs=(dtest dtestx dtestcm dtestsrq dapltest)
for p in "${progs[@]}"; do
  if ! command -v "$p" >/dev/null; then
    echo "SKIP dropin:all $p not found (apt-get install dapl2-utils)"
    exit 0
  fi
done
rc=0

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
run_case() { # command words...
  local slug
  slug=$(echo "$*" | tr -c 'A-Za-z0-9_.\n-' '_')
  n=$((n + 1))
  local d="$out/$n-$1-debian" o="$out/$n-$1-dat2"
  env -u LD_LIBRARY_PATH -u DAT_DBG_TYPE DAT_OVERRIDE="$conf" timeout 20 "$@" >"$d.out" 2>"$d.err" </dev/null
  echo $? >"$d.rc"
  env -u DAT_DBG_TYPE LD_LIBRARY_PATH="$DAT2_BUILD" DAT_OVERRIDE="$conf" timeout 20 "$@" >"$o.out" 2>"$o.err" </dev/null
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
  if [ -z "$why" ]; then echo "PASS dropin:$slug"; else echo "FAIL dropin:$slug $why"; rc=1; fi
}

for prov in nosuch ofa-v2-ib0 ofa-v2-mlx4_0-1 ofa-v2-mlx4_0-1u; do
  run_case dtest -P "$prov"
  run_case dtestx -P "$prov"
  run_case dtestcm -P "$prov"
  run_case dtestsrq -P "$prov"
  run_case dapltest -T F -D "$prov" -f hwconn
  run_case dapltest -T F -D "$prov" -f queryinfo
  run_case dapltest -T F -D "$prov" -f endpoint
  run_case dapltest -T F -D "$prov" -f mem
  run_case dapltest -T L -D "$prov" -m 2
  run_case dapltest -T S -D "$prov"
done
# default provider names built into the programs
run_case dtest
run_case dtestx
run_case dapltest -T F -f hwconn

# The programs reference dat_*@DAT_2.0: our library must define that version.
for p in "${progs[@]}"; do
  if cat "$out"/*-"$p"-dat2.err | grep -q "no version information available"; then
    echo "FAIL dropin:no-version-warning:$p $(grep -h 'no version information' "$out"/*-"$p"-dat2.err | head -1)"
    rc=1
  else
    echo "PASS dropin:no-version-warning:$p"
  fi
done
exit $rc
