#!/usr/bin/env bash
# `make install` / `make uninstall` into a staging root (DESTDIR), twice: with the
# default LIBDIR and with LIBDIR=/usr/local/lib64. Checks the installed files, runs the
# installed dat2-info, builds a program with the installed dat2.pc and headers, runs it
# against the installed library, then uninstalls and checks that nothing is left. Plain
# pass only.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/lib.sh"
harness_init install
top=$root # (one_round's own root is its staging directory)
plain_only "runs in the plain pass only" all
command -v pkg-config >/dev/null || skip_all "pkg-config not installed" all

headers=(dat.h dat_error.h dat_ib_extensions.h dat_platform_specific.h dat_redirection.h dat_registry.h
  dat_vendor_specific.h udat.h udat_config.h udat_redirection.h udat_vendor_specific.h)
man1=$(cd "$top/man/man1" 2>/dev/null && ls ./*.1 2>/dev/null | sed 's|^\./||')
man3=$(cd "$top/man/man3" 2>/dev/null && ls ./*.3 2>/dev/null | sed 's|^\./||')
man5=$(cd "$top/man/man5" 2>/dev/null && ls ./*.5 2>/dev/null | sed 's|^\./||')

cat >"$out/hello.c" <<'EOF'
/* Uses the installed headers and library: prints a status string and the registry. */
#include <dat2/udat.h>
#include <stdio.h>

int main(void)
{
	const char *major = NULL, *minor = NULL;
	DAT_PROVIDER_INFO infos[8], *list[8];
	DAT_COUNT n = -1;
	DAT_RETURN rc;
	int i;

	if (dat_strerror(0x800a0064, &major, &minor) != DAT_SUCCESS)
		return 1;
	printf("%s %s\n", major, minor);
	for (i = 0; i < 8; i++)
		list[i] = &infos[i];
	rc = dat_registry_list_providers(8, &n, list);
	printf("list %#x %d\n", rc, n);
	for (i = 0; rc == DAT_SUCCESS && i < n; i++)
		printf("provider %s %u.%u\n", infos[i].ia_name, infos[i].dapl_version_major,
		       infos[i].dapl_version_minor);
	return 0;
}
EOF
cat >"$out/dat.conf" <<'EOF'
hello-ia u2.0 nonthreadsafe default libnothere.so.2 hello.2.0 "" ""
EOF

# one_round NAME LIBDIR ("" = Makefile default)
one_round() {
  local name=$1 libdir=$2 root="$out/root-$1"
  local vars=(DESTDIR="$root" PREFIX=/usr/local)
  local want_libdir=/usr/local/lib
  if [ -n "$libdir" ]; then vars+=(LIBDIR="$libdir"); want_libdir=$libdir; fi
  local L="$root$want_libdir" I="$root/usr/local/include" M="$root/usr/local/share/man"
  rm -rf "$root"

  if ! make -s -C "$top" install "${vars[@]}" >"$out/$name-install.log" 2>&1; then
    fail "$name:make-install $(tail -5 "$out/$name-install.log" | tr '\n' ' ')"
    return
  fi
  pass "$name:make-install"

  # the library, its soname link and its development link
  if [ -f "$L/libdat2.so.2.0.0" ] && [ "$(readlink "$L/libdat2.so.2")" = libdat2.so.2.0.0 ] &&
     [ "$(readlink "$L/libdat2.so")" = libdat2.so.2 ]; then
    pass "$name:library"
  else
    fail "$name:library expected $L/libdat2.so.2.0.0 and links libdat2.so.2, libdat2.so: $(ls -l "$L" 2>&1 | tr '\n' ' ')"
  fi
  # the provider library beside it (dat.conf(5): dat2's providers in another libdat2)
  if [ -f "$L/libdat2prov.so.2" ] && nm -D --defined-only "$L/libdat2prov.so.2" | grep -q ' dat_provider_init@'; then
    pass "$name:provider-library"
  else
    fail "$name:provider-library expected $L/libdat2prov.so.2 exporting dat_provider_init: $(ls -l "$L" 2>&1 | tr '\n' ' ')"
  fi
  local missing="" h m
  for h in "${headers[@]}"; do [ -f "$I/dat2/$h" ] || missing="$missing $h"; done
  local extra
  extra=$(ls "$I/dat2" 2>/dev/null | grep -v -x -F "$(printf '%s\n' "${headers[@]}")" | tr '\n' ' ')
  if [ -z "$missing" ] && [ -z "$extra" ]; then pass "$name:headers"
  else fail "$name:headers missing:${missing:- none} extra: ${extra:-none}"; fi
  missing=""
  for m in $man1; do [ -f "$M/man1/$m" ] || missing="$missing man1/$m"; done
  for m in $man3; do [ -f "$M/man3/$m" ] || missing="$missing man3/$m"; done
  for m in $man5; do [ -f "$M/man5/$m" ] || missing="$missing man5/$m"; done
  if [ -z "$man1" ] || [ -z "$man3" ] || [ -z "$man5" ]; then
    fail "$name:man-pages the repository has no man1, man3 or man5 pages"
  elif [ -n "$missing" ]; then
    fail "$name:man-pages not installed:$missing"
  else
    pass "$name:man-pages"
  fi

  # dat2-info in BINDIR, running against the installed library
  local B="$root/usr/local/bin" info_out
  if [ -x "$B/dat2-info" ]; then
    info_out=$(env -u DAT_DBG_TYPE LD_LIBRARY_PATH="$L" DAT_OVERRIDE="$out/dat.conf" timeout 20 "$B/dat2-info" 2>&1)
    if printf '%s\n' "$info_out" | grep -qx "libdat2: $L/libdat2.so.2" &&
       printf '%s\n' "$info_out" | grep -q '^ *1 dat.conf entry (hello-ia): '; then
      pass "$name:dat2-info"
    else
      fail "$name:dat2-info output: $(printf '%s' "$info_out" | head -5 | tr '\n' '|')"
    fi
  else
    fail "$name:dat2-info not installed as $B/dat2-info"
  fi

  # dat2.pc: real prefix and libdir, -I for the headers, -ldat2
  local pcdir="$L/pkgconfig" pcout
  if [ ! -f "$pcdir/dat2.pc" ]; then
    fail "$name:pkgconfig no $pcdir/dat2.pc"
    return
  fi
  if grep -q '@' "$pcdir/dat2.pc"; then fail "$name:pkgconfig unsubstituted @VAR@ in dat2.pc"; fi
  if [ "$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir dat2)" = "$want_libdir" ]; then
    pass "$name:pkgconfig-libdir"
  else
    fail "$name:pkgconfig-libdir libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir dat2), want $want_libdir"
  fi
  pcout=$(PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs dat2 2>&1)
  if [[ " $pcout " == *" -I$I "* ]] && [[ " $pcout " == *" -L$L "* ]] && [[ " $pcout " == *" -ldat2 "* ]]; then
    pass "$name:pkgconfig-flags"
  else
    fail "$name:pkgconfig-flags got '$pcout', want -I$I -L$L -ldat2"
  fi

  # build with the installed headers and library only
  # shellcheck disable=SC2086
  if ! $cc $cflags -o "$out/hello-$name" "$out/hello.c" $pcout 2>"$out/$name-cc.log"; then
    fail "$name:build $(head -c 300 "$out/$name-cc.log" | tr '\n' ' ')"
  else
    # shellcheck disable=SC2086
    if $cc $cflags -M "$out/hello.c" $pcout 2>/dev/null | tr ' \\' '\n\n' | grep 'dat2/udat.h' | grep -q "^$I/"; then
      pass "$name:build-uses-installed-headers"
    else
      fail "$name:build-uses-installed-headers <dat2/udat.h> did not come from $I"
    fi
    local res
    res=$(env -u DAT_DBG_TYPE LD_LIBRARY_PATH="$L" DAT_OVERRIDE="$out/dat.conf" timeout 20 "$out/hello-$name" 2>&1)
    # built-in providers, if any, are listed after the dat.conf entry
    if [ "$(printf '%s\n' "$res" | sed -n 1p)" = "DAT_PROVIDER_NOT_FOUND DAT_NAME_NOT_REGISTERED" ] &&
       printf '%s\n' "$res" | sed -n 2p | grep -q -E '^list 0 [1-9][0-9]*$' &&
       [ "$(printf '%s\n' "$res" | sed -n 3p)" = "provider hello-ia 2.0" ]; then
      pass "$name:run"
    else
      fail "$name:run output: $(printf '%s' "$res" | head -5 | tr '\n' '|')"
    fi
    if LD_LIBRARY_PATH="$L" ldd "$out/hello-$name" | grep -q "libdat2.so.2 => $L/libdat2.so.2"; then
      pass "$name:runs-installed-library"
    else
      fail "$name:runs-installed-library $(LD_LIBRARY_PATH="$L" ldd "$out/hello-$name" | grep libdat2)"
    fi
  fi

  if ! make -s -C "$top" uninstall "${vars[@]}" >"$out/$name-uninstall.log" 2>&1; then
    fail "$name:make-uninstall $(tail -5 "$out/$name-uninstall.log" | tr '\n' ' ')"
    return
  fi
  local left
  left=$(find "$root" ! -type d 2>/dev/null | sed "s|^$root||" | head -10 | tr '\n' ' ')
  if [ -z "$left" ]; then pass "$name:uninstall-removes-everything"; else fail "$name:uninstall-removes-everything left: $left"; fi
}

one_round default ""
one_round lib64 /usr/local/lib64
exit $rc
