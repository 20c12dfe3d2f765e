#!/bin/bash
# Run a command inside a qemu VM whose kernel has Soft-RoCE (rxe0 on eth0,
# address 10.0.2.15), or Soft-iWARP (siw0) with DAT2_VM_RDMA=siw0:siw.  The guest's root is the host's / (shared read-only
# over 9p) under a tmpfs overlay, so the repository, /tmp and every installed
# tool sit at the same paths, the guest may write anywhere, and its writes
# vanish with the VM.  The command's stdout and stderr are copied to ours
# while it runs and its exit status becomes ours.
#
#   tests/vm/run.sh CMD [ARG...]
#
# Environment:
#   DAT2_VM_CACHE    cache made by tests/vm/prepare.sh (default <repo>/build/vm)
#   DAT2_VM_TIMEOUT  seconds before the VM is killed (default 300); exit 124
#   DAT2_VM_MEM      guest memory (default 4G)
#   DAT2_VM_SMP      guest CPUs (default: host CPUs, at most 4)
#   DAT2_VM_RW       space-separated host directories whose guest writes must
#                    reach the host (shared read-write at the same path)
#   DAT2_VM_KEEP=1   keep the run directory (console log, job script)
#   DAT2_VM_RDMA     the RDMA devices made on eth0, "name:type" words (default
#                    "rxe0:rxe"; "siw0:siw" for Soft-iWARP instead)
# Exported variables (LD_LIBRARY_PATH, PATH, DAT2_*, ...) and the working
# directory are passed on to the command.  Exit status 125 means the VM
# never reported one; the console log tail is printed then.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: $0 CMD [ARG...]" >&2
    exit 2
fi

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${DAT2_VM_CACHE:-$repo/build/vm}
timeout_s=${DAT2_VM_TIMEOUT:-300}
mem=${DAT2_VM_MEM:-4G}
ncpu=$(nproc)
[ "$ncpu" -le 4 ] || ncpu=4
smp=${DAT2_VM_SMP:-$ncpu}

# Cheap when the cache is complete: it checks the packages and the stamps.
mapfile -t boot < <(DAT2_VM_CACHE=$cache "$here/prepare.sh")
if [ ${#boot[@]} -ne 2 ] || [ ! -s "${boot[0]}" ] || [ ! -s "${boot[1]}" ]; then
    echo "vm: tests/vm/prepare.sh did not name a kernel and an initramfs" >&2
    exit 125
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/dat2-vm.XXXXXX")
qpid=
# shellcheck disable=SC2329  # invoked through the EXIT trap
cleanup() {
    if [ -n "$qpid" ]; then
        kill -TERM "$qpid" 2> /dev/null || true
    fi
    if [ "${DAT2_VM_KEEP:-0}" = 1 ]; then
        echo "vm: run directory kept: $out" >&2
    else
        rm -rf "$out"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The job: environment, working directory, locked-memory limit, command.
{
    echo '# written by tests/vm/run.sh'
    while read -r name; do
        case "$name" in
            _ | PWD | OLDPWD | SHLVL | SHELLOPTS | BASHOPTS | BASH_*) continue ;;
        esac
        printf 'export %s=%q\n' "$name" "${!name}"
    done < <(compgen -e)
    printf 'cd %q 2> /dev/null || cd /\n' "$PWD"
    echo 'ulimit -l unlimited'
    printf '%q ' "$@"
    echo '< /dev/null > /run/dat2-vm/stdout 2> /run/dat2-vm/stderr'
    echo 'echo "$?" > /run/dat2-vm/status'
} > "$out/job.sh"
: > "$out/stdout"
: > "$out/stderr"
for link in ${DAT2_VM_RDMA:-rxe0:rxe}; do
    printf '%s %s\n' "${link%%:*}" "${link#*:}" >> "$out/rdma-links"
done

shares=(
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$out,mount_tag=vmout,security_model=none,multidevs=remap"
)
i=0
for d in ${DAT2_VM_RW:-}; do
    d=$(cd "$d" && pwd)
    shares+=(-virtfs "local,path=$d,mount_tag=rw$i,security_model=none,multidevs=remap")
    printf 'rw%d %s\n' "$i" "$d" >> "$out/rw-shares"
    i=$((i + 1))
done

# A guest kernel that dies while booting under TCG (an int3 oops in early timekeeping was
# seen once in about a hundred boots) is booted again, at most 3 times; a job that started
# (the guest wrote "started") never runs twice.
start=$(date +%s.%N)
boots=0
while :; do
    boots=$((boots + 1))
    : > "$out/console.log"
    timeout -k 10 "$timeout_s" qemu-system-x86_64 \
        -nodefaults -display none -monitor none \
        -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" -no-reboot \
        -kernel "${boot[0]}" -initrd "${boot[1]}" \
        -append "console=ttyS0 quiet panic=-1 rdinit=/init" \
        -serial "file:$out/console.log" \
        -nic user,model=virtio-net-pci \
        "${shares[@]}" &
    qpid=$!

    tail -f -s 0.2 --pid="$qpid" "$out/stdout" &
    tail_out=$!
    tail -f -s 0.2 --pid="$qpid" "$out/stderr" >&2 &
    tail_err=$!

    qrc=0
    wait "$qpid" || qrc=$?
    qpid=
    wait "$tail_out" "$tail_err" || true
    if [ -e "$out/started" ] || [ -s "$out/status" ] || [ "$boots" -ge 3 ] \
        || [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ] || ! grep -q "Kernel panic" "$out/console.log"; then
        break
    fi
    echo "vm: the guest kernel died while booting (boot $boots); booting again:" >&2
    grep -m3 -E "Oops|RIP:|Kernel panic" "$out/console.log" >&2 || true
done
secs=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')

if [ -s "$out/status" ]; then
    rc=$(cat "$out/status")
    if [ "${DAT2_VM_VERBOSE:-0}" = 1 ]; then
        echo "vm: command exited $rc, VM ran ${secs}s" >&2
    fi
    exit "$rc"
fi

if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
    echo "vm: timed out after ${timeout_s}s" >&2
    rc=124
else
    echo "vm: no exit status came back (qemu exit $qrc, ${secs}s)" >&2
    rc=125
fi
echo "vm: last lines of the console log:" >&2
tail -n 30 "$out/console.log" >&2 2> /dev/null || true
exit "$rc"
