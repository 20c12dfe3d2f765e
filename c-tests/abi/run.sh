#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Part of dat2: test group "abi" - our include/dat2 headers against Debian's.
#
# Cases:
#   header-files        the 11 headers exist and carry the licence lines
#   no-copied-comments  no comment text of Debian's headers appears in ours
#   c11-pedantic:*      gcc -std=c11 -Wall -Wextra -pedantic -Werror
#   cxx17-pedantic:*    g++ -std=c++17 -Wall -Wextra -pedantic -Werror
#   fixed-macros        macros that are unusable in Debian's headers work in ours
#   abi-no-fallback     with -I include, every dat2 header comes from ours
#   abi-system-headers  ours pull in at least the system headers Debian's do
#   abi-names           same names (typedefs, tags, members, enum constants,
#                       functions, macros) in both header sets
#   abi-generate        gen_abi.py writes one program covering all of them
#   abi-compile/run-*   that program built against each header set
#   abi-diff            both runs print exactly the same thing
# Debian's headers (package libdapl-dev) are needed for the abi-* cases and
# no-copied-comments; without them those cases are skipped.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=${DAT2_ROOT:-$(cd "$here/../.." && pwd)}
out=${DAT2_OUT:-$root/build/test-out/abi}
cc=${CC:-cc}
cflags=${CFLAGS:--O1 -g -Wall -Wextra -Werror}
if [ -n "${CXX:-}" ]; then
    cxx=$CXX
elif [[ $(basename "${cc%% *}") == clang* ]]; then
    cxx=clang++
else
    cxx=g++
fi
inc=$root/include
# Debian's headers; DAT2_ABI_REF_ROOT points elsewhere (for testing the test).
ref_root=${DAT2_ABI_REF_ROOT:-/usr/include}
ref=$ref_root/dat2
mkdir -p "$out"
rm -f "$out"/abi.c "$out"/abi-debian* "$out"/abi-ours* "$out"/abi.diff

# The verdict lines of c-tests/common/lib.sh (pass, fail, skip; rc), without a prefix: this
# group's case names have none. (Not harness_init: the group runs on its own too, with the
# defaults above.)
. "$here/../common/lib.sh"
label=""
rc=0
# First lines of a log, folded onto one line for the FAIL message.
brief() { head -c 400 "$1" | tr '\n' ' '; }

headers="dat.h dat_error.h dat_ib_extensions.h dat_platform_specific.h
dat_redirection.h dat_registry.h dat_vendor_specific.h udat.h udat_config.h
udat_redirection.h udat_vendor_specific.h"

# --- header-files -----------------------------------------------------------
missing=""
for h in $headers; do
    f=$inc/dat2/$h
    if [ ! -f "$f" ]; then
        missing+=" $h(absent)"
    elif ! head -n 1 "$f" | grep -q 'SPDX-License-Identifier: MIT OR Apache-2.0' ||
         ! head -n 5 "$f" | grep -q 'Part of dat2'; then
        missing+=" $h(licence lines)"
    fi
done
extra=$(cd "$inc/dat2" && ls | grep -vxF -e "$(echo $headers | tr ' ' '\n')" || true)
if [ -z "$missing" ] && [ -z "$extra" ]; then
    pass header-files
else
    fail header-files "problems:$missing ${extra:+unexpected: $extra}"
fi

have_ref=1
[ -f "$ref/udat.h" ] || have_ref=0
have_py=1
command -v python3 >/dev/null 2>&1 || have_py=0

# --- no-copied-comments -----------------------------------------------------
if [ $have_ref = 0 ] || [ $have_py = 0 ]; then
    skip no-copied-comments "needs $ref and python3"
elif python3 "$here/gen_abi.py" copied --ref-dir "$ref" --ours-dir "$inc/dat2" \
        >"$out/copied.log" 2>&1; then
    pass no-copied-comments
else
    fail no-copied-comments "$(brief "$out/copied.log")"
fi

# --- pedantic compiles of our headers ---------------------------------------
compile_case() { # name compiler std ext headers...
    local name=$1 comp=$2 std=$3 ext=$4
    shift 4
    local src=$out/$name.$ext
    : >"$src"
    for h in "$@"; do echo "#include <dat2/$h>" >>"$src"; done
    echo "int main(void) { return 0; }" >>"$src"
    # shellcheck disable=SC2086
    if $comp $cflags -std=$std -Wall -Wextra -pedantic -Werror -I"$inc" \
            -c "$src" -o "$out/$name.o" >"$out/$name.log" 2>&1; then
        pass "$name"
    else
        fail "$name" "$(brief "$out/$name.log")"
    fi
}
sets=("udat.h" "udat.h dat_ib_extensions.h" "udat.h dat_registry.h"
      "udat.h udat_redirection.h" "udat.h dat_registry.h dat_ib_extensions.h")
labels=("udat" "udat+ib" "udat+registry" "udat+redirection" "all")
for i in "${!sets[@]}"; do
    # shellcheck disable=SC2086
    compile_case "c11-pedantic:${labels[$i]}" "$cc" c11 c ${sets[$i]}
done
if command -v "${cxx%% *}" >/dev/null 2>&1; then
    for i in "${!sets[@]}"; do
        # shellcheck disable=SC2086
        compile_case "cxx17-pedantic:${labels[$i]}" "$cxx" c++17 cc ${sets[$i]}
    done
else
    skip cxx17-pedantic "no C++ compiler ($cxx)"
fi

# --- fixed-macros -------------------------------------------------------------
# shellcheck disable=SC2086
if ! $cc $cflags -I"$inc" "$here/fixed_macros.c" -o "$out/fixed_macros" \
        >"$out/fixed_macros.log" 2>&1; then
    fail fixed-macros "compile: $(brief "$out/fixed_macros.log")"
elif "$out/fixed_macros" >"$out/fixed_macros.out" 2>&1; then
    pass fixed-macros
else
    fail fixed-macros "$(brief "$out/fixed_macros.out")"
fi

# --- ABI comparison with Debian's headers -----------------------------------
abi_cases="abi-no-fallback abi-system-headers abi-names abi-generate abi-compile-debian abi-compile-ours
abi-run-debian abi-run-ours abi-diff"
if [ $have_ref = 0 ] || [ $have_py = 0 ]; then
    for c in $abi_cases; do skip "$c" "needs $ref (libdapl-dev) and python3"; done
    exit $rc
fi

# Every dat2 header must resolve to ours, never fall back to /usr/include.
printf '%s\n' '#include <dat2/udat.h>' '#include <dat2/dat_registry.h>' \
    '#include <dat2/dat_ib_extensions.h>' >"$out/deps.c"
if $cc -M -I"$inc" "$out/deps.c" >"$out/deps.txt" 2>"$out/deps.log"; then
    deps=$(tr ' \\' '\n\n' <"$out/deps.txt" | grep '/dat2/' | sort -u)
    bad=$(echo "$deps" | grep -v "^$inc/dat2/" || true)
    seen=$(echo "$deps" | grep -c "^$inc/dat2/" || true)
    if [ -z "$bad" ] && [ "$seen" -eq 11 ]; then
        pass abi-no-fallback
    else
        fail abi-no-fallback "ours seen: $seen of 11; from elsewhere: $(echo $bad)"
    fi
else
    fail abi-no-fallback "$(brief "$out/deps.log")"
fi

# Programs may rely on the system headers Debian's pull in (stdio.h for
# FILE and printf, sys/socket.h, stddef.h, stdarg.h...): ours must pull in
# at least the same ones, for udat.h alone and for all three headers.
sysmiss=""
for set in "udat.h" "udat.h dat_registry.h dat_ib_extensions.h"; do
    : >"$out/sys.c"
    for h in $set; do echo "#include <dat2/$h>" >>"$out/sys.c"; done
    # Debian's dat_ib_extensions.h needs struct sockaddr_in6 from the caller.
    [[ $set == *dat_ib* ]] && sed -i '1i #include <netinet/in.h>' "$out/sys.c"
    refinc=""
    [ "$ref_root" != /usr/include ] && refinc="-I$ref_root"
    # shellcheck disable=SC2086
    $cc -M $refinc "$out/sys.c" 2>/dev/null | tr ' \\' '\n\n' | grep '^/' |
        grep -v '/dat2/' | sort -u >"$out/sys-debian.txt"
    $cc -M -I"$inc" "$out/sys.c" 2>/dev/null | tr ' \\' '\n\n' | grep '^/' |
        grep -v '/dat2/' | sort -u >"$out/sys-ours.txt"
    m=$(comm -23 "$out/sys-debian.txt" "$out/sys-ours.txt" | tr '\n' ' ')
    [ -n "$m" ] && sysmiss+="[$set] $m"
done
if [ -s "$out/sys-debian.txt" ] && [ -z "$sysmiss" ]; then
    pass abi-system-headers
else
    fail abi-system-headers "not pulled in by ours: ${sysmiss:-no dependency list}"
fi

py=(python3 "$here/gen_abi.py")
if "${py[@]}" names --ref "$ref_root" --ours "$inc" --work "$out" --cc "$cc" \
        >"$out/names.log" 2>&1; then
    pass abi-names
else
    fail abi-names "$(grep -v '^inventory' "$out/names.log" | head -n 8 | tr '\n' ';')"
fi
grep '^inventory' "$out/names.log" || true

if ! "${py[@]}" gen --ref "$ref_root" --ours "$inc" --work "$out" --cc "$cc" \
        --out "$out/abi.c" >"$out/gen.log" 2>&1; then
    fail abi-generate "$(brief "$out/gen.log")"
    for c in abi-compile-debian abi-compile-ours abi-run-debian abi-run-ours abi-diff; do
        skip "$c" "no program"
    done
    exit $rc
fi
pass abi-generate

built=""
for side in debian ours; do
    incflag=""
    [ $side = ours ] && incflag="-I$inc"
    [ $side = debian ] && [ "$ref_root" != /usr/include ] && incflag="-I$ref_root"
    # shellcheck disable=SC2086
    if $cc $cflags $incflag "$out/abi.c" -o "$out/abi-$side" \
            >"$out/compile-$side.log" 2>&1; then
        pass "abi-compile-$side"
        built+=" $side"
    else
        fail "abi-compile-$side" "$(grep -m 3 'error' "$out/compile-$side.log" | tr '\n' ' ')"
    fi
done
for side in debian ours; do
    if [[ " $built " != *" $side "* ]]; then
        skip "abi-run-$side" "not built"
    elif "$out/abi-$side" >"$out/abi-$side.out" 2>"$out/abi-$side.err"; then
        pass "abi-run-$side"
    else
        fail "abi-run-$side" "exit $?: $(brief "$out/abi-$side.err")"
    fi
done
if [ -s "$out/abi-debian.out" ] && [ -s "$out/abi-ours.out" ]; then
    if diff -u "$out/abi-debian.out" "$out/abi-ours.out" >"$out/abi.diff"; then
        lines=$(wc -l <"$out/abi-ours.out")
        pass abi-diff
        echo "abi-diff: $lines output lines identical"
    else
        fail abi-diff "$(grep -c '^[-+][^-+]' "$out/abi.diff") lines differ; see $out/abi.diff: $(grep '^[-+][^-+]' "$out/abi.diff" | head -n 4 | tr '\n' ';')"
    fi
else
    skip abi-diff "missing output"
fi
exit $rc
