#!/bin/busybox sh
# /init of the systemd test VM: this machine's own root filesystem, shared read-only over 9p,
# under an overlay whose upper layer is a tmpfs, becomes the root; the packages and the checks
# staged in /stage are copied into it; then systemd starts as PID 1 (switch_root). The
# watchdog driver is loaded here so that /dev/watchdog exists when the package starts monitord.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
fail() { echo "VMTEST: ERROR $*"; poweroff -f; }

for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs \
         fscache 9pnet 9pnet_virtio 9p overlay watchdog i6300esb; do
    insmod "/modules/$m.ko" || fail "insmod $m"
done

mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose hostroot /lower ||
    fail "mount the host's root over 9p"
mount -t tmpfs -o size=512m tmpfs /upper || fail "tmpfs for the overlay"
mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot ||
    fail "overlay root"

# Services this machine's packages enabled that have no part in the checks (the test tools'
# Prometheus and node_exporter, a database, PackageKit, which apt's hook wakes at each of
# autopkgtest's installs) would only compete for the VM's CPUs: masked.
# So are the login prompts on the console: a getty that starts after the checks did hangs up
# the serial line under them (vhangup), and their marks never reach the host.
for unit in prometheus.service prometheus-node-exporter.service postgresql.service \
            packagekit.service console-getty.service serial-getty@ttyS0.service \
            getty@tty1.service; do
    ln -sf /dev/null "/newroot/etc/systemd/system/$unit"
done

# The checks run as a service once the system is up; their output goes to the console.
mkdir -p /newroot/root/vmtest /newroot/etc/systemd/system/multi-user.target.wants
cp -a /stage/. /newroot/root/vmtest/
cat >/newroot/etc/systemd/system/vmtest.service <<'UNIT'
[Unit]
Description=monitord checks under systemd
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/root/vmtest/systemd_checks.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
[Install]
WantedBy=multi-user.target
UNIT
ln -s ../vmtest.service /newroot/etc/systemd/system/multi-user.target.wants/vmtest.service

umount /proc /sys /dev
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mount -t tmpfs tmpfs /newroot/run
mount -t tmpfs tmpfs /newroot/tmp
echo "VMTEST: SWITCH_ROOT"
exec switch_root /newroot /lib/systemd/systemd
