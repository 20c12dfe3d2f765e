#!/bin/busybox sh
# /init of the test VM's initramfs (installed there by tests/vm/prepare.sh).
# Loads the modules, mounts the host's / read-only over 9p, brings up eth0
# with a Soft-RoCE device on it, runs the job that tests/vm/run.sh left in
# the writable "vmout" share inside a chroot of the host tree, powers off.

/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

log() { echo "vm-init: $*" > /dev/console; }

# Shut down without caring whether anything before worked: qemu runs with
# -no-reboot and the kernel with panic=-1, so either way the VM ends.
finish() {
    sync
    poweroff -f
    sleep 5
    echo o > /proc/sysrq-trigger
}

while read -r m; do
    insmod "/modules/$m" || log "insmod $m failed"
done < /modules/order

p9="trans=virtio,version=9p2000.L,msize=262144"
root=/mnt
mkdir -p /lower /rw
if ! mount -t 9p -o "$p9,ro" hostroot /lower; then
    log "cannot mount the host root share"
    finish
fi
# Writes anywhere go to a tmpfs layer over the read-only host tree, so the
# guest sees the host's files (its /tmp too) and the host is never changed.
mount -t tmpfs -o mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
if mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay "$root"; then
    overlay=1
else
    log "overlay failed; host tree read-only, /tmp empty"
    overlay=0
    mount --move /lower "$root"
fi

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount -t devtmpfs devtmpfs "$root/dev"
mount -t devpts -o gid=5,mode=620 devpts "$root/dev/pts" 2> /dev/null
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm" 2> /dev/null
if [ "$overlay" = 0 ]; then
    for d in /tmp /var/tmp; do
        mount -t tmpfs -o mode=1777 tmpfs "$root$d"
    done
fi
mount -t tmpfs -o mode=755 tmpfs "$root/run"

job="$root/run/dat2-vm"
mkdir -p "$job"
if ! mount -t 9p -o "$p9" vmout "$job"; then
    log "cannot mount the job share"
    finish
fi

# Extra writable host directories, one "tag path" pair a line.
if [ -f "$job/rw-shares" ]; then
    while read -r tag path; do
        [ -n "$tag" ] || continue
        mkdir -p "$root$path" 2> /dev/null
        mount -t 9p -o "$p9" "$tag" "$root$path" || log "cannot mount $path"
    done < "$job/rw-shares"
fi

ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2 dev eth0
# The RDMA devices on eth0, one "name type" pair a line (tests/vm/run.sh writes them from
# DAT2_VM_RDMA): Soft-RoCE (rxe0) unless the job asks for another, such as Soft-iWARP (siw0).
links="rxe0 rxe"
[ -s "$job/rdma-links" ] && links=$(cat "$job/rdma-links")
echo "$links" | while read -r name type; do
    [ -n "$name" ] || continue
    if ! chroot "$root" rdma link add "$name" type "$type" netdev eth0; then
        log "rdma link add $name type $type failed"
    fi
done

# The host boots again only when the guest died before this mark (tests/vm/run.sh).
: > "$job/started"
chroot "$root" /bin/bash /run/dat2-vm/job.sh
echo "$?" > "$job/init-status"
finish
