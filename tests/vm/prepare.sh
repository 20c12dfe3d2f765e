#!/bin/bash
# Prepare the Soft-RoCE test VM: host tools, a Debian kernel, its modules and
# a small busybox initramfs.  Everything lands in a cache directory (default
# build/vm/ under the repository) so that a second run only checks the stamps.
# Prints the paths of the kernel and the initramfs to boot on stdout.
#
# Environment:
#   DAT2_VM_CACHE       cache directory (default: <repo>/build/vm)
#   DAT2_VM_KERNEL_PKG  exact kernel package to use (default: the newest of
#                       linux-image-6.12-amd64 / linux-image-amd64 that apt knows)
#   DAT2_VM_NO_APT=1    never call apt-get install/update
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${DAT2_VM_CACHE:-$repo/build/vm}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

say() { printf 'vm-prepare: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Modules the guest needs, in the order we ask modprobe about them.
# crc32_generic is needed by rdma_rxe but not declared as a dependency; siw (Soft-iWARP)
# computes MPA's CRC32c through the crypto API, so crc32c_generic goes in too (a module the
# kernel has built in is skipped).
guest_modules="virtio_pci virtio_net virtio_console 9p 9pnet_virtio overlay crc32_generic crc32c_generic rdma_rxe siw rdma_ucm"

# ---------------------------------------------------------------- host tools
need_pkgs="qemu-system-x86 busybox-static rdma-core ibverbs-utils perftest
libibverbs1 librdmacm1 kmod cpio file python3 xz-utils zstd iproute2 make pahole libelf1"

missing=()
for p in $need_pkgs; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2> /dev/null || true)
    if [[ $status != *"ok installed" ]]; then
        missing+=("$p")
    fi
done

lists_are_old() {
    # True when no package list is younger than a week.
    [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -7 2>/dev/null | head -n 1)" ]
}

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ] || [ "${DAT2_VM_NO_APT:-0}" = 1 ]; then
        die "missing packages: ${missing[*]} (install them as root)"
    fi
    if lists_are_old; then
        say "apt-get update"
        apt-get update -qq
    fi
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# ------------------------------------------------------------ kernel package
pick_kernel_pkg() {
    local meta dep policy
    for meta in linux-image-6.12-amd64 linux-image-amd64; do
        # (no grep -q or awk exit here: with pipefail the early reader
        # would turn apt-cache's SIGPIPE into a failure)
        policy=$(apt-cache policy "$meta" 2> /dev/null)
        if [[ $policy == *"Candidate: "[0-9]* ]]; then
            dep=$(apt-cache depends "$meta" 2> /dev/null |
                awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ && !n++ { print $2 }')
            if [ -n "$dep" ]; then
                printf '%s\n' "$dep"
                return 0
            fi
        fi
    done
    return 1
}

kpkg=${DAT2_VM_KERNEL_PKG:-}
if [ -z "$kpkg" ] && [ -f "$cache/kernel-pkg" ]; then
    kpkg=$(cat "$cache/kernel-pkg")
fi
if [ -z "$kpkg" ]; then
    kpkg=$(pick_kernel_pkg) || die "apt knows no linux-image-6.12-amd64 or linux-image-amd64"
fi
say "kernel package: $kpkg"

debs="$cache/debs"
kroot="$cache/kernel"
mkdir -p "$debs"
if [ ! -f "$kroot/.stamp" ] || [ "$(cat "$kroot/.stamp")" != "$kpkg" ]; then
    deb=$(find "$debs" -maxdepth 1 -name "${kpkg}_*.deb" | head -n 1)
    if [ -z "$deb" ]; then
        say "downloading $kpkg"
        (cd "$debs" && apt-get download "$kpkg" >&2)
        deb=$(find "$debs" -maxdepth 1 -name "${kpkg}_*.deb" | head -n 1)
        [ -n "$deb" ] || die "apt-get download $kpkg produced no .deb"
    fi
    say "unpacking $(basename "$deb")"
    rm -rf "$kroot" "$cache/vmlinux" "$cache"/initrd*.img
    mkdir -p "$kroot"
    dpkg -x "$deb" "$kroot"
    printf '%s\n' "$kpkg" > "$kroot/.stamp"
fi
printf '%s\n' "$kpkg" > "$cache/kernel-pkg"

kver=$(find "$kroot/lib/modules" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | tail -n 1)
[ -n "$kver" ] || die "no lib/modules/<version> in $kroot"
bzimage="$kroot/boot/vmlinuz-$kver"
[ -f "$bzimage" ] || die "missing $bzimage"
printf '%s\n' "$kver" > "$cache/kernel-version"

# ------------------------------------------------------- uncompressed vmlinux
# The bzImage setup header says where the compressed kernel lies: the
# protected-mode part starts after (setup_sects + 1) sectors, and
# payload_offset/payload_length (boot protocol 2.08+) locate the payload in it.
# We recognise the compressor by its magic bytes and keep the result only if
# it is an ELF file.  If the header looks wrong we scan for the magics.
extract_vmlinux() {
    python3 - "$1" "$2" <<'PY'
import bz2, lzma, struct, subprocess, sys, zlib

src, dst = sys.argv[1], sys.argv[2]
img = open(src, "rb").read()

def gunzip(b):
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(b)

def unxz(b):
    return lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(b)

def unlzma(b):
    return lzma.LZMADecompressor(lzma.FORMAT_ALONE).decompress(b)

def unbz2(b):
    return bz2.BZ2Decompressor().decompress(b)

def tool(*argv):
    def run(b):
        r = subprocess.run(list(argv), input=b, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
        return r.stdout
    return run

formats = [
    (b"\x1f\x8b\x08", gunzip),
    (b"\xfd7zXZ\x00", unxz),
    (b"\x28\xb5\x2f\xfd", tool("zstd", "-dcq")),
    (b"\x02\x21\x4c\x18", tool("lz4", "-dcq")),
    (b"\x89LZO", tool("lzop", "-dcq")),
    (b"BZh", unbz2),
    (b"\x5d\x00\x00", unlzma),
]

def attempt(off, length=None):
    blob = img[off:] if length is None else img[off:off + length]
    for magic, fn in formats:
        if blob.startswith(magic):
            try:
                out = fn(blob)
            except Exception:
                return None
            if out[:4] == b"\x7fELF":
                return out
    return None

result = None
if img[0x202:0x206] == b"HdrS":
    setup_sects = img[0x1F1] or 4
    pm_start = (setup_sects + 1) * 512
    payload_off, payload_len = struct.unpack_from("<II", img, 0x248)
    result = attempt(pm_start + payload_off, payload_len)

if result is None:
    for magic, _ in formats:
        pos = img.find(magic)
        while pos >= 0 and result is None:
            result = attempt(pos)
            pos = img.find(magic, pos + 1)
        if result is not None:
            break

if result is None:
    sys.exit("no ELF kernel found inside " + src)
with open(dst, "wb") as f:
    f.write(result)
PY
}

if [ ! -s "$cache/vmlinux" ] || [ "$bzimage" -nt "$cache/vmlinux" ]; then
    say "extracting vmlinux from $(basename "$bzimage")"
    extract_vmlinux "$bzimage" "$cache/vmlinux.tmp"
    mv "$cache/vmlinux.tmp" "$cache/vmlinux"
fi
kind=$(file -b "$cache/vmlinux")
[[ $kind == "ELF 64-bit"* ]] || die "$cache/vmlinux is not an ELF kernel: $kind"

# -------------------------------------------------------------------- depmod
# ------------------------------------------------------- siw (Soft-iWARP)
# Debian builds its 6.1 and 6.12 kernels without CONFIG_RDMA_SIW, so siw.ko is built here
# from Debian's source package of the same kernel version, against that kernel's headers
# packages, all downloaded and unpacked under the cache (nothing is installed on the host),
# and goes into the modules tree as updates/siw.ko. DAT2_VM_NO_SIW=1 skips it; a failure
# only leaves the VM without siw (tests/vm/check.sh then reports the siw suite as failed).
build_siw() {
    local kdeb ver abi series sb hdr p
    kdeb=$(find "$debs" -maxdepth 1 -name "${kpkg}_*.deb" | head -n 1)
    [ -n "$kdeb" ] || { say "siw: no $kpkg .deb in $debs"; return 1; }
    ver=$(dpkg-deb -f "$kdeb" Version)
    abi=${kver%-amd64}
    series=$(printf '%s\n' "$kver" | cut -d. -f1,2)
    sb="$cache/siw-build"
    rm -rf "$sb"
    mkdir -p "$sb/debs" "$sb/root" "$sb/src"
    say "siw: building siw.ko for $kver from linux-source-$series $ver"
    for p in "linux-headers-$kver" "linux-headers-$abi-common" "linux-kbuild-$abi|linux-kbuild-$series" \
        "linux-source-$series"; do
        local alt ok=0
        for alt in ${p//|/ }; do
            if (cd "$sb/debs" && apt-get download "$alt=$ver" > /dev/null 2>&1); then ok=1; break; fi
        done
        [ "$ok" = 1 ] || { say "siw: apt-get download ${p//|/ or } (version $ver) failed"; return 1; }
    done
    for p in "$sb"/debs/linux-headers-*.deb "$sb"/debs/linux-kbuild-*.deb; do
        dpkg -x "$p" "$sb/root"
    done
    dpkg-deb --fsys-tarfile "$sb"/debs/linux-source-*.deb |
        tar -xO "./usr/src/linux-source-$series.tar.xz" |
        tar -xJ -C "$sb/src" --strip-components=5 --wildcards "linux-source-$series/drivers/infiniband/sw/siw/*" ||
        { say "siw: the source package has no drivers/infiniband/sw/siw"; return 1; }
    rm -f "$sb"/debs/linux-source-*.deb
    hdr="$sb/root/usr/src/linux-headers-$kver"
    # The headers' Makefile includes the common part by its installed path.
    sed -i "s|/usr/src/|$sb/root/usr/src/|" "$hdr/Makefile"
    if ! make -C "$hdr" M="$sb/src" CONFIG_RDMA_SIW=m modules > "$sb/build.log" 2>&1; then
        say "siw: the module did not build:"
        tail -n 20 "$sb/build.log" >&2
        return 1
    fi
    mkdir -p "$kroot/lib/modules/$kver/updates"
    cp "$sb/src/siw.ko" "$kroot/lib/modules/$kver/updates/siw.ko"
    rm -rf "$sb/root" "$sb/debs"
}
if [ "${DAT2_VM_NO_SIW:-0}" != 1 ] &&
   [ -z "$(find "$kroot/lib/modules/$kver" -name 'siw.ko*' -print -quit)" ]; then
    if build_siw; then
        rm -f "$kroot/lib/modules/$kver/modules.dep"
    else
        say "siw: continuing without Soft-iWARP"
    fi
fi

if [ ! -s "$kroot/lib/modules/$kver/modules.dep" ] ||
   [ "$kroot/.stamp" -nt "$kroot/lib/modules/$kver/modules.dep" ]; then
    say "depmod $kver"
    depmod -b "$kroot" "$kver"
fi

# ----------------------------------------------------------------- initramfs
# The initramfs is named after a hash of what goes into it (this script, the
# guest's /init, busybox, the kernel version), not judged by file times: a
# fresh clone has newer files than any cache, and several work trees may share
# one cache (DAT2_VM_CACHE) without rebuilding or replacing each other's image.
key=$(cat "$0" "$here/guest-init.sh" /bin/busybox | sha256sum | cut -c1-16)
key=$(printf '%s %s %s\n' "$key" "$kver" "$(ls "$kroot/lib/modules/$kver/updates" 2> /dev/null | tr '\n' ' ')" |
    sha256sum | cut -c1-16)
initrd="$cache/initrd-$key.img"
init_src="$here/guest-init.sh"
if [ ! -s "$initrd" ]; then
    say "building initramfs $(basename "$initrd")"
    stage=$(mktemp -d "$cache/initramfs.XXXXXX")
    mkdir -p "$stage"/{bin,dev,proc,sys,mnt,modules}
    cp /bin/busybox "$stage/bin/busybox"
    cp "$init_src" "$stage/init"
    chmod 755 "$stage/init"

    # Resolve the load order once on the host; keep each module only once.
    order="$stage/modules/order"
    : > "$order"
    for m in $guest_modules; do
        { modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2> /dev/null || true; } |
            awk '$1 == "insmod" { print $2 }'
    done | awk '!seen[$0]++' | while read -r ko; do
        name=$(basename "$ko")
        case "$name" in
            *.ko.xz)  name=${name%.xz};  xz -dc "$ko" > "$stage/modules/$name" ;;
            *.ko.zst) name=${name%.zst}; zstd -dcq "$ko" > "$stage/modules/$name" ;;
            *.ko.gz)  name=${name%.gz};  gzip -dc "$ko" > "$stage/modules/$name" ;;
            *)        cp "$ko" "$stage/modules/$name" ;;
        esac
        printf '%s\n' "$name" >> "$order"
    done
    [ -s "$order" ] || { rm -rf "$stage"; die "modprobe found none of: $guest_modules"; }

    (cd "$stage" && find . -print0 | LC_ALL=C sort -z |
        cpio --null -o -H newc --quiet) | gzip -1 > "$initrd.$$.tmp"
    mv "$initrd.$$.tmp" "$initrd"
    rm -rf "$stage"
fi

say "ready: kernel $kver, $(wc -c < "$initrd") byte initramfs in $cache"
# For tests/vm/run.sh: the two files to boot.
printf '%s\n%s\n' "$cache/vmlinux" "$initrd"
