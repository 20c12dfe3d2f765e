#!/usr/bin/env bash
# The Debian packages `make deb` builds (libdat2-2, libdat2-dev, dat2-utils), installed for
# real in place of Debian's libdapl2 and libdapl-dev with apt, used, removed, and Debian's
# packages restored:
#   lintian              no error, and no warning but the ones docs/packaging.md explains
#   install              apt replaces libdapl2 and libdapl-dev, keeps dapl2-utils
#   library, files       our libdat2.so.2 (by build ID) in the multiarch directory, found by
#                        the loader; headers, dat2.pc, every man page, dat2-info
#   conffile             /etc/dat.conf is ours, a conffile; its entries are listed, then the
#                        built-in providers
#   debian-provider      one of Debian's entries loads Debian's provider library once that
#                        library is there (copied from the libdapl2 package)
#   dapl2-utils-installs dapl2-utils removed and installed again on ours (its dat.conf(5) is
#                        diverted to dat.conf.dapl(5))
#   dat2-info, dtest, dtestx   on dat2-soft with the installed library and /etc/dat.conf (no
#                        LD_LIBRARY_PATH, no DAT_OVERRIDE); dtest and dtestx are Debian's, run
#                        as server and client as c-tests/programs runs them (common/pairs.sh)
#   pkg-config, shlibdeps   a program built with pkg-config's flags runs on the installed
#                        library; dpkg-shlibdeps makes it depend on "libdat2-2 | libdapl2"
#   man                  man(1) shows our pages (a .so page too) and dapl2-utils' diverted one
#   remove               apt purge leaves none of the packages' files and no diversion
#   restore              Debian's three packages installed again: dpkg --verify is clean and
#                        /etc/dat.conf is Debian's
#   restored-library     a program built with Debian's headers lists the providers of
#                        Debian's /etc/dat.conf through Debian's libdat2.so.2
#   host-untouched       the host's packages, /etc/dat.conf and libdat2 are as before
#
# All of it happens in a copy-on-write overlay of / (overlayfs, its upper layer on a tmpfs)
# in a private mount and network namespace, entered with chroot: the host's packages never
# change, whatever happens, and nothing else running on the host (other test groups, other
# checkouts' tests) sees the switch. Root only; the plain pass only. Debian's packages to
# restore are fetched with `apt-get download` (or taken from apt's cache) beforehand.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init deb
names=(lintian install library files conffile debian-provider dapl2-utils-installs dat2-info dtest dtestx
  pkg-config shlibdeps man remove restore restored-library host-untouched)
plain_only "installs packages once, in the plain pass" "${names[@]}"
[ "$(id -u)" = 0 ] || skip_all "needs root: it installs and removes packages (in an overlay of /)" "${names[@]}"
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null) || skip_all "dpkg-architecture not found (apt-get install dpkg-dev)" "${names[@]}"
for t in unshare chroot apt-get dpkg-deb dpkg-shlibdeps lintian man pkg-config ip; do
  command -v $t >/dev/null || skip_all "$t not found" "${names[@]}"
done
ours=("$build"/libdat2-2_*.deb "$build"/libdat2-dev_*.deb "$build"/dat2-utils_*.deb)
for f in "${ours[@]}"; do
  [ -f "$f" ] || { fail install "no $f: run make deb"; exit 1; }
done
debian_pkgs=(libdapl2 libdapl-dev dapl2-utils)
debs=$out/debian-debs
pkg_status() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | tr -d ' '; }

if [ -z "${DAT2_DEB_INSIDE:-}" ]; then
  # ---- on the host: lintian, Debian's packages, then everything else inside the overlay.
  # lintian reads the .deb files only; it runs while the packages are tried in the overlay.
  log=$out/lintian.log
  lintian --pedantic --display-info "${ours[@]}" >"$log" 2>&1 &
  lintian_pid=$!
  lintian_verdict() {
    local lst errors warnings
    wait $lintian_pid
    lst=$?
    # Warnings docs/packaging.md explains (section "Debian packages").
    local kept='initial-upload-closes-no-bugs'
    errors=$(grep -E '^E: ' "$log" | head -5 | tr '\n' ' ')
    warnings=$(grep -E '^W: ' "$log" | grep -v -E " ($kept) " | head -5 | tr '\n' ' ')
    if [ -n "$errors$warnings" ]; then
      fail lintian "${errors:+errors: $errors}${warnings:+warnings not explained in docs/packaging.md: $warnings}(log: $log)"
    elif [ $lst != 0 ]; then
      fail lintian "lintian exited $lst: $(tail -2 "$log" | tr '\n' ' ')"
    else
      pass lintian "$(grep -c -E '^W: ' "$log") kept warnings, $(grep -c -E '^[IP]: ' "$log") notes"
    fi
  }
  ovl=""
  trap 'lintian_verdict; [ -z "$ovl" ] || rmdir "$ovl" 2>/dev/null' EXIT

  for p in "${debian_pkgs[@]}"; do
    [ "$(pkg_status "$p")" = ii ] || skip_all "Debian's $p is not installed, so there is nothing to replace and restore" "${names[@]:1}"
  done
  version=$(dpkg-query -W -f='${Version}' libdapl2)
  mkdir -p "$debs"
  (cd "$debs" && apt-get download -q "${debian_pkgs[@]/%/=$version}" >"$out/download.log" 2>&1)
  for p in "${debian_pkgs[@]}"; do
    f=$(ls "$debs/${p}_"*.deb 2>/dev/null | head -1)
    [ -n "$f" ] || f=$(ls /var/cache/apt/archives/"${p}_${version//:/%3a}"_*.deb 2>/dev/null | head -1)
    [ -n "$f" ] || skip_all "cannot get Debian's $p $version to restore it (apt-get download: $(tail -1 "$out/download.log"))" "${names[@]:1}"
    [ -f "$debs/$(basename "$f")" ] || cp "$f" "$debs/"
  done

  state() { # what must not change on the host
    {
      md5sum /var/lib/dpkg/status /etc/dat.conf "/usr/lib/$ma/libdat2.so.2" 2>&1
      dpkg-divert --list 2>&1 | sort
    } | md5sum
  }
  before=$(state)
  ovl=$(mktemp -d /tmp/dat2-deb.XXXXXX)
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --net --fork -- bash -c '
    set -e
    ovl=$1 out=$2 script=$3
    mount -t tmpfs -o size=4g,mode=0755 dat2-deb "$ovl"
    mkdir "$ovl/upper" "$ovl/work" "$ovl/root"
    mount -t overlay overlay -o "lowerdir=/,upperdir=$ovl/upper,workdir=$ovl/work" "$ovl/root"
    r=$ovl/root
    for d in proc dev sys; do mount --rbind "/$d" "$r/$d"; done
    mount -t tmpfs tmpfs "$r/run"
    mount -t tmpfs tmpfs "$r/tmp"
    mkdir -p "$r$out"
    mount --bind "$out" "$r$out"
    ip link set lo up
    exec chroot "$r" env DAT2_DEB_INSIDE=1 bash "$script"
  ' overlay "$ovl" "$out" "$here/run.sh" >"$out/inside.log" 2>&1
  inner=$?
  cat "$out/inside.log"
  [ $inner = 0 ] || rc=1
  # Every case of the overlay part has its verdict, even when that part broke off.
  for n in "${names[@]:1:${#names[@]}-2}"; do
    grep -q -E "^(PASS|FAIL|SKIP) deb:$n( |\$)" "$out/inside.log" ||
      fail "$n" "no verdict: the part in the overlay exited $inner: $(grep -v -E '^(PASS|FAIL|SKIP|#) ' "$out/inside.log" | tail -2 | tr '\n' ' ')"
  done
  after=$(state)
  if [ "$before" = "$after" ]; then
    pass host-untouched
  else
    fail host-untouched "the host's dpkg status, /etc/dat.conf, libdat2.so.2 or diversions changed"
  fi
  exit $rc
fi

# ---- inside the overlay (chroot, private network namespace) -----------------------------
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
unset LD_LIBRARY_PATH DAT_OVERRIDE DAT_DBG_TYPE
hdr="" # programs build with the installed headers, not the repository's
. "$root/c-tests/common/pairs.sh"
pkgdir=/usr/lib/$ma
# apt with the local .deb files only: no network, and the same version in the archive
# cannot win over the file.
mkdir -p "$out/sources.list.d" && : >"$out/sources.list"
apt_q() {
  apt-get -y -q --no-install-recommends -o Dpkg::Use-Pty=0 -o Dir::Etc::SourceList="$out/sources.list" \
    -o Dir::Etc::SourceParts="$out/sources.list.d" "$@" </dev/null
}
build_id() { readelf -n "$1" 2>/dev/null | sed -n 's/.*Build ID: //p'; }
debfile() { ls "$debs/${1}_"*.deb | head -1; }
# The file the loader takes for a program's libdat2.so.2 (/lib is /usr/lib on Debian 12).
ldd_dat2() { readlink -f "$(ldd "$1" 2>/dev/null | awk '$1 == "libdat2.so.2" { print $3 }')"; }
# The entries of a dat.conf, in order.
conf_names() { awk '!/^[ \t]*#/ && NF { print $1 }' "$1"; }

cat >"$out/list.c" <<'EOF'
/* Prints the IA names the registry lists, one per line. */
#include <dat2/udat.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	enum { MAX = 512 };
	DAT_PROVIDER_INFO *infos = calloc(MAX, sizeof *infos);
	DAT_PROVIDER_INFO *list[MAX];
	DAT_COUNT n = 0, i;

	if (!infos)
		return 2;
	for (i = 0; i < MAX; i++)
		list[i] = &infos[i];
	if (dat_registry_list_providers(MAX, &n, list) != DAT_SUCCESS)
		return 1;
	for (i = 0; i < n; i++)
		printf("%s\n", infos[i].ia_name);
	free(infos);
	return 0;
}
EOF

# install ---------------------------------------------------------------------------------
if ! apt_q install "${ours[@]}" >"$out/install.log" 2>&1; then
  fail install "apt-get install failed: $(tail -3 "$out/install.log" | tr '\n' ' ')"
  exit 1
fi
why=""
for p in libdat2-2 libdat2-dev dat2-utils dapl2-utils; do
  [ "$(pkg_status $p)" = ii ] || why+=" $p is $(pkg_status $p), not installed;"
done
for p in libdapl2 libdapl-dev; do
  [ "$(pkg_status $p)" = ii ] && why+=" $p is still installed;"
done
report install "$why" "$out/install.log"

# library, files --------------------------------------------------------------------------
why=""
[ "$(readlink -f "$pkgdir/libdat2.so.2")" = "$pkgdir/libdat2.so.2.0.0" ] || why+=" $pkgdir/libdat2.so.2 is not a link to libdat2.so.2.0.0;"
[ "$(readlink "$pkgdir/libdat2.so")" = libdat2.so.2 ] || why+=" no $pkgdir/libdat2.so -> libdat2.so.2;"
want=$(build_id "$build/libdat2.so.2.0.0") have=$(build_id "$pkgdir/libdat2.so.2.0.0")
[ -n "$want" ] && [ "$want" = "$have" ] || why+=" installed build ID '$have', ours '$want';"
[ "$(dpkg -S "$pkgdir/libdat2.so.2.0.0" 2>/dev/null | cut -d: -f1)" = libdat2-2 ] || why+=" libdat2.so.2.0.0 not owned by libdat2-2;"
[ "$(ldd_dat2 "$(command -v dtest)")" = "$pkgdir/libdat2.so.2.0.0" ] || why+=" dtest loads '$(ldd_dat2 "$(command -v dtest)")';"
report library "$why"

why=""
for h in "$root"/include/dat2/*.h; do
  cmp -s "$h" "/usr/include/dat2/${h##*/}" || why+=" /usr/include/dat2/${h##*/} differs or is missing;"
done
[ -f "$pkgdir/pkgconfig/dat2.pc" ] || why+=" no $pkgdir/pkgconfig/dat2.pc;"
n=0
for m in "$root"/man/man[1-8]/*.[1-8]; do
  s=${m##*.} n=$((n + 1))
  [ -f "/usr/share/man/man$s/${m##*/}.gz" ] || why+=" no /usr/share/man/man$s/${m##*/}.gz;"
done
[ -x /usr/bin/dat2-info ] || why+=" no /usr/bin/dat2-info;"
report files "$why"
[ -z "$why" ] && echo "# $n man pages installed"

# conffile --------------------------------------------------------------------------------
why=""
dpkg-query -W -f='${Conffiles}\n' libdat2-2 | grep -q '^ /etc/dat.conf ' || why+=" /etc/dat.conf is not a conffile of libdat2-2;"
cmp -s "$root/packaging/deb/dat.conf" /etc/dat.conf || why+=" /etc/dat.conf is not packaging/deb/dat.conf;"
compile list "$out/list-ours" "$out/list.c" $(pkg-config --cflags --libs dat2) || why+=" list.c does not build;"
"$out/list-ours" >"$out/list-ours.out" 2>&1 || why+=" list-ours failed;"
entries=$(conf_names /etc/dat.conf | wc -l)
[ "$entries" -gt 50 ] || why+=" only $entries entries in /etc/dat.conf;"
if [ "$(head -n "$entries" "$out/list-ours.out")" != "$(conf_names /etc/dat.conf)" ]; then
  why+=" the registry does not list /etc/dat.conf's $entries entries first, in order;"
fi
tail -n +"$((entries + 1))" "$out/list-ours.out" | grep -qx dat2-soft || why+=" dat2-soft not listed after them;"
report conffile "$why" "$out/list-ours.out"

# debian-provider: one of Debian's entries, with Debian's cma provider library present.
why=""
info_ofa() { timeout 30 dat2-info -p ofa-v2-ib0 >"$out/$1" 2>&1; }
info_ofa dat2-info-ofa-missing.log
grep -q 'cannot load provider library.*libdaplofa.so.2' "$out/dat2-info-ofa-missing.log" ||
  why+=" without libdaplofa.so.2 dat2-info does not say it cannot load it;"
dpkg-deb -x "$(debfile libdapl2)" "$out/libdapl2-files"
cp -a "$out/libdapl2-files/$pkgdir"/libdaplofa.so.2* "$pkgdir/" && ldconfig
info_ofa dat2-info-ofa.log
if ! grep -q "library: .*libdaplofa.so.2 (/etc/dat.conf line" "$out/dat2-info-ofa.log"; then
  why+=" dat2-info shows no library line for ofa-v2-ib0;"
elif grep -q 'cannot load provider library' "$out/dat2-info-ofa.log"; then
  why+=" libdaplofa.so.2 still does not load: $(grep -m1 'cannot load' "$out/dat2-info-ofa.log");"
fi
rm -f "$pkgdir"/libdaplofa.so.2* && ldconfig
report debian-provider "$why" "$out/dat2-info-ofa.log"

# dapl2-utils-installs --------------------------------------------------------------------
why=""
apt_q remove dapl2-utils >"$out/utils.log" 2>&1 || why+=" apt-get remove dapl2-utils failed;"
apt_q install "$(debfile dapl2-utils)" >>"$out/utils.log" 2>&1 || why+=" apt-get install dapl2-utils failed;"
[ "$(pkg_status dapl2-utils)" = ii ] || why+=" dapl2-utils is $(pkg_status dapl2-utils);"
dpkg-divert --list | grep -q 'dat.conf.5.gz to /usr/share/man/man5/dat.conf.dapl.5.gz by libdat2-2' || why+=" no diversion of dat.conf.5.gz;"
dmd5=$(awk '$2 == "usr/share/man/man5/dat.conf.5.gz" { print $1 }' /var/lib/dpkg/info/dapl2-utils.md5sums)
[ "$(md5sum </usr/share/man/man5/dat.conf.dapl.5.gz | cut -d' ' -f1)" = "$dmd5" ] || why+=" dat.conf.dapl.5.gz is not dapl2-utils' page;"
report dapl2-utils-installs "$why" "$out/utils.log"

# dat2-info, dtest, dtestx ---------------------------------------------------------------
dat2-info -p dat2-soft >"$out/dat2-info.log" 2>&1
st=$?
why=""
[ $st = 0 ] || why+=" exit status $st;"
used=$(sed -n 's/^libdat2: //p' "$out/dat2-info.log")
[ "$(readlink -f "$used")" = "$pkgdir/libdat2.so.2.0.0" ] || why+=" it used libdat2 '$used';"
grep -qx "dat_conf: /etc/dat.conf" "$out/dat2-info.log" || why+=" no \"dat_conf: /etc/dat.conf\";"
grep -qE '^ +state: +opens$' "$out/dat2-info.log" || why+=" dat2-soft does not open;"
report dat2-info "$why" "$out/dat2-info.log"

pair_lib="" pair_conf="" # the installed library and /etc/dat.conf
run_pair dtest 15828 -- 25 dtest -s -P dat2-soft --- -- 20 dtest -h 127.0.0.1 -P dat2-soft
report dtest "$(dtest_check)" "$slog" "$clog"
run_pair dtestx 15828 -- 25 dtestx -s -P dat2-soft --- -- 20 dtestx -h 127.0.0.1 -P dat2-soft
report dtestx "$(dtestx_rc_check)" "$slog" "$clog"

# pkg-config, shlibdeps -------------------------------------------------------------------
why=""
flags=$(pkg-config --cflags --libs dat2 2>&1)
[[ " $flags " == *" -ldat2 "* ]] || why+=" pkg-config --cflags --libs dat2 gave '$flags';"
[ "$(pkg-config --variable=libdir dat2)" = "$pkgdir" ] || why+=" libdir is $(pkg-config --variable=libdir dat2);"
[ -x "$out/list-ours" ] || why+=" the program did not build;"
[ "$(ldd_dat2 "$out/list-ours")" = "$pkgdir/libdat2.so.2.0.0" ] || why+=" it loads '$(ldd_dat2 "$out/list-ours")';"
[ -s "$out/list-ours.out" ] || why+=" it listed nothing;"
report pkg-config "$why"

mkdir -p "$out/shlibdeps/debian"
printf 'Source: t\n\nPackage: t\nArchitecture: any\n' >"$out/shlibdeps/debian/control"
dep=$(cd "$out/shlibdeps" && dpkg-shlibdeps -O "$out/list-ours" 2>"$out/shlibdeps.log")
if [[ $dep == *"libdat2-2 (>= "*") | libdapl2"* ]]; then
  pass shlibdeps "${dep#shlibs:Depends=}"
else
  fail shlibdeps "dpkg-shlibdeps gave: '$dep' $(head -c 300 "$out/shlibdeps.log")"
fi

# man -------------------------------------------------------------------------------------
why=""
page() { MANPAGER=cat MANWIDTH=100 man "$@" 2>&1; }
page 3 dat_ia_query >"$out/man-ia-query.txt"
grep -qE 'dat_ia_query +- +query an interface adapter' "$out/man-ia-query.txt" || why+=" man 3 dat_ia_query: $(head -c 200 "$out/man-ia-query.txt" | tr '\n' ' ');"
page 3 dat_get_handle_type | grep -q 'dat_get_handle_type()  *stores' || why+=" man 3 dat_get_handle_type (a .so page) does not show the page;"
page 5 dat.conf | grep -q 'builtin:soft' || why+=" man 5 dat.conf is not ours;"
page 7 dat2 | grep -q 'dat2-soft' || why+=" man 7 dat2 missing;"
page 1 dat2-info | grep -q 'dat2-info' || why+=" man 1 dat2-info missing;"
page 5 dat.conf.dapl | grep -q 'DAT' || why+=" man 5 dat.conf.dapl (dapl2-utils' page) missing;"
report man "$why" "$out/man-ia-query.txt"

# remove ----------------------------------------------------------------------------------
why=""
files=$(dpkg -L libdat2-2 libdat2-dev dat2-utils 2>/dev/null | grep '^/' | while read -r f; do [ -d "$f" ] || echo "$f"; done)
if ! apt_q purge libdat2-2 libdat2-dev dat2-utils >"$out/remove.log" 2>&1; then
  why+=" apt-get purge failed: $(tail -2 "$out/remove.log" | tr '\n' ' ');"
fi
for p in libdat2-2 libdat2-dev dat2-utils; do
  [ -z "$(pkg_status $p)" ] || [ "$(pkg_status $p)" = un ] || [ "$(pkg_status $p)" = pn ] || why+=" $p is $(pkg_status $p);"
done
left=$(echo "$files" | while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done | head -5 | tr '\n' ' ')
[ -z "$left" ] || why+=" left behind: $left;"
[ "$(echo "$files" | wc -w)" -gt 90 ] || why+=" only $(echo "$files" | wc -w) files were listed;"
dpkg-divert --list | grep -q libdat2-2 && why+=" the diversion is still there;"
report remove "$why" "$out/remove.log"

# restore ---------------------------------------------------------------------------------
why=""
if ! apt_q install "$(debfile libdapl2)" "$(debfile libdapl-dev)" "$(debfile dapl2-utils)" >"$out/restore.log" 2>&1; then
  why+=" apt-get install failed: $(tail -2 "$out/restore.log" | tr '\n' ' ');"
fi
for p in "${debian_pkgs[@]}"; do
  [ "$(pkg_status "$p")" = ii ] || why+=" $p is $(pkg_status "$p");"
done
bad=$(dpkg --verify "${debian_pkgs[@]}" 2>&1 | head -5 | tr '\n' ' ')
[ -z "$bad" ] || why+=" dpkg --verify: $bad;"
cmd5=$(dpkg-query -W -f='${Conffiles}\n' libdapl2 | awk '$1 == "/etc/dat.conf" { print $2 }')
[ -n "$cmd5" ] && [ "$(md5sum </etc/dat.conf | cut -d' ' -f1)" = "$cmd5" ] || why+=" /etc/dat.conf is not Debian's;"
[ "$(dpkg -S /usr/share/man/man5/dat.conf.5.gz 2>/dev/null)" = "dapl2-utils: /usr/share/man/man5/dat.conf.5.gz" ] ||
  why+=" dat.conf.5.gz is not dapl2-utils' again;"
report restore "$why" "$out/restore.log"

# restored-library: Debian's headers, Debian's libdat2.so.2, Debian's dat.conf.
why=""
compile list-debian "$out/list-debian" "$out/list.c" -ldat2 || why+=" list.c does not build with Debian's headers;"
[ "$(ldd_dat2 "$out/list-debian")" = "$pkgdir/libdat2.so.2.0.0" ] || why+=" it loads '$(ldd_dat2 "$out/list-debian")';"
[ "$(dpkg -S "$pkgdir/libdat2.so.2.0.0" 2>/dev/null | cut -d: -f1)" = libdapl2 ] || why+=" libdat2.so.2.0.0 is not libdapl2's;"
"$out/list-debian" >"$out/list-debian.out" 2>&1 || why+=" it failed: $(head -c 200 "$out/list-debian.out");"
[ "$(cat "$out/list-debian.out")" = "$(conf_names /etc/dat.conf)" ] ||
  why+=" it does not list exactly Debian's $(conf_names /etc/dat.conf | wc -l) entries ($(wc -l <"$out/list-debian.out") names);"
[ "$(ldd_dat2 "$(command -v dtest)")" = "$pkgdir/libdat2.so.2.0.0" ] || why+=" dtest does not load $pkgdir/libdat2.so.2.0.0;"
report restored-library "$why" "$out/list-debian.out"
exit $rc
