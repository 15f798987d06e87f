#!/usr/bin/env python3
"""monitord installed from its Debian package under a real systemd: Debian's kernel under
qemu (TCG) boots this machine's own root filesystem, shared read-only over 9p beneath a tmpfs
overlay, with systemd as PID 1 and an i6300esb watchdog (-watchdog-action poweroff
-no-reboot: a watchdog that fires ends the VM). systemd_checks.sh runs inside as a service:

  install    dpkg -i of the packages: group monitor, socket and service started, READY; by
             default no watchdog armed (although the VM has one), sleeping probes, and mpstat
             reads at least 99 % idle
  autopkgtest  the packages' debian/tests (packaging/debian/tests/smoke: the service, monctl
             status and loading, the exporter's /metrics, a MON program built against
             libmonitord-dev with pkg-config), run as autopkgtest runs them, or by autopkgtest
             itself (its null runner) with --autopkgtest-runner, 100 s more under TCG
  spin       spinning probes beside a busy unit with CPUWeight= on cpu1: placed in
             monitord.slice (CPUWeight=idle), the unit keeps 98.5 % of the CPU it had alone,
             and the probe source reads cpu1 at least 95 % busy
  access     `monctl status` for a member of monitor; refused, naming the group, for another
  exporter   the exporter's socket enabled by its package; a scrape by a user outside the
             group starts it (a dynamic user, not root) and gets monitord's figures; its
             unit's systemd-analyze security exposure is at most 2.0
  reload     `systemctl reload` applies a changed control-group (the member may then count,
             also her own command: CAP_SYS_PTRACE); a bad file keeps the old settings
  armed      then the watchdog named in monitord.conf (default timeout, 10 s): armed, the
             journal says who can reset the machine, the exporter's scrape shows it, a
             reload keeps it armed and petted (the longest gap between pets is printed; past
             4 s, every 2 s, who held the CPUs and where monitord's threads waited)
  stop       `systemctl stop` disarms the watchdog: the VM survives 2.5x the timeout; the
             socket stopped with the service, so neither monctl nor the exporter's scrape
             (monitord_up 0) starts the daemon again
  socket     once monitord.socket is started, the first `monctl` starts the daemon
  kill       `systemctl kill -s KILL`: systemd restarts the daemon, which pets the watchdog
             before it fires: the VM survives 2.5x the timeout
  starve     a busy unit with CPUWeight= pinned to cpu1: the pets stop, and the watchdog ends
             the VM within the timeout and a margin

  tests/vm/systemd_vm.py --debs DIR [--keep] [--autopkgtest-runner]

DIR holds the .deb files; when it has none newer than --monitord (the build's daemon), they
are built there first with scripts/build-deb. Exit status 0 when every check passes, 1
otherwise, 77 (skip) when qemu, a kernel with the 9p, overlay and i6300esb modules, systemd,
the Debian packaging tools or (with --autopkgtest-runner) autopkgtest are missing.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import vm_support as vm

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
MODULES = ["virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev",
           "virtio_pci", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p", "overlay",
           "watchdog", "i6300esb"]
# The marks the checks print, in order; the VM must still be up at each.
MARKS = ["BOOTED", "INSTALLED", "READY", "IDLE", "IDLE_UNITS", "AUTOPKGTEST", "SPIN_FAIR", "UNITS",
         "ACCESS", "EXPORTER", "MEMBER_RULES", "RELOADED", "BAD_RELOAD_KEPT_SETTINGS", "ARMED",
         "PET_GAPS", "STOPPED",
         "SURVIVED_STOP", "SOCKET_ACTIVATED", "KILLED", "RESTARTED", "SURVIVED_KILL",
         "ALL_CHECKS_PASSED", "STARVED"]
TIMEOUT_S = 10  # monitord's default watchdog timeout
# After the starvation began: a tick or two for the last pet, the timeout, and the driver's
# rounding and a slow guest.
STARVED_END_S = TIMEOUT_S + 8
BUDGET_S = 900  # boot, install and checks take ~3 min under TCG on 2 CPUs


def debs_in(directory, newer_than):
    debs = glob.glob(os.path.join(directory, "*.deb"))
    if not debs or not any(os.path.basename(d).startswith("monitord_") for d in debs):
        return []
    if newer_than and min(os.path.getmtime(d) for d in debs) < os.path.getmtime(newer_than):
        return []
    return debs


def make_initramfs(work, debs, modules, autopkgtest_runner):
    root = vm.initramfs_root(work, os.path.join(HERE, "systemd_init.sh"), modules,
                             dirs=("stage/debs",))
    for deb in debs:
        shutil.copy(deb, os.path.join(root, "stage/debs"))
    shutil.copy(os.path.join(HERE, "systemd_checks.sh"), os.path.join(root, "stage"))
    # The source package's debian/ directory, for autopkgtest (its tests/control and tests).
    shutil.copytree(os.path.join(TOP, "packaging", "debian"),
                    os.path.join(root, "stage", "src", "debian"))
    if autopkgtest_runner:
        open(os.path.join(root, "stage", "autopkgtest-runner"), "w").close()
    return vm.pack_initramfs(root, os.path.join(work, "initramfs.cpio"))


def vm_command(kernel, initramfs):
    masked = ["serial-getty@ttyS0.service", "getty@tty1.service", "postgresql.service",
              "apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer"]
    cmdline = ("console=ttyS0 panic=-1 quiet systemd.show_status=false "
               + " ".join(f"systemd.mask={u}" for u in masked))
    return [
        "qemu-system-x86_64", "-accel", "tcg", "-m", "1024", "-smp", "2",
        "-kernel", kernel, "-initrd", initramfs, "-append", cmdline,
        "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,"
                   "multidevs=remap",
        "-device", "i6300esb", "-watchdog-action", "poweroff",
        "-nographic", "-no-reboot",
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--debs", required=True, help="directory of the .deb files")
    p.add_argument("--monitord", help="build/daemon/monitord: rebuild debs older than it")
    p.add_argument("--keep", action="store_true", help="keep the work directory and log")
    p.add_argument("--autopkgtest-runner", action="store_true",
                   help="run debian/tests with autopkgtest itself (its null runner): 100 s more")
    args = p.parse_args()
    vm.require_tools("qemu-system-x86_64", "busybox", "cpio")
    if args.autopkgtest_runner:
        vm.require_tools("autopkgtest")
    if not os.path.exists("/lib/systemd/systemd"):
        vm.skip("no /lib/systemd/systemd to boot (scripts/bootstrap --test installs systemd)")
    kernel, modules = vm.find_kernel(MODULES)
    if kernel is None:
        vm.skip("no readable /boot/vmlinuz-* with the virtio, 9p, overlay and i6300esb modules "
                "(scripts/bootstrap --test installs linux-image)")
    t0 = time.monotonic()
    debs = debs_in(args.debs, args.monitord)
    if not debs:
        vm.require_tools("dpkg-buildpackage", "dh")
        print(f"building the packages into {args.debs} (scripts/build-deb)", flush=True)
        subprocess.run([os.path.join(TOP, "scripts/build-deb"), args.debs], check=True)
        debs = debs_in(args.debs, None)
    print(f"packages: {', '.join(os.path.basename(d) for d in sorted(debs))} "
          f"({time.monotonic() - t0:.0f} s)", flush=True)

    work = tempfile.mkdtemp(prefix="monitord-systemd-vm-")
    log_path = os.path.join(work, "vm.log")
    initramfs = make_initramfs(work, debs, modules, args.autopkgtest_runner)
    t1 = time.monotonic()
    marks, lines, wall = vm.boot(vm_command(kernel, initramfs), log_path, BUDGET_S,
                                 echo_marks=True)
    problems = [l for l in lines if "VMTEST: ERROR" in l or "VMTEST: CHECKS_FAILED" in l]
    missing = [m for m in MARKS if m not in marks]
    if missing:
        problems.append(f"never reached {missing[0]} (the VM ended or hung before it)")
    for name, start in (("STOPPED", "SURVIVED_STOP"), ("KILLED", "SURVIVED_KILL")):
        if name in marks and start in marks:
            print(f"  {name.lower()}: the VM was still up {marks[start] - marks[name]:.1f} s later")
    for mark in ("IDLE", "IDLE_UNITS", "AUTOPKGTEST", "SPIN_FAIR", "UNITS"):
        said = [l for l in lines if f"VMTEST: {mark}" in l]
        if said:
            print(f"  {said[0].split('VMTEST: ', 1)[1]}")
    if "STARVED" in marks:
        ended = wall - marks["STARVED"]
        print(f"  starved: the watchdog ended the VM {ended:.1f} s after the busy unit began")
        if ended > STARVED_END_S:
            problems.append(f"the VM ended {ended:.1f} s after the busy unit began, later than "
                            f"{STARVED_END_S} s")
    print(f"VM: {wall:.0f} s; systemd suite: {time.monotonic() - t0:.0f} s of wall time "
          f"(packages {t1 - t0:.0f} s)")
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        print("last lines of the console:\n  " + "\n  ".join(lines[-40:]))
    if problems or args.keep:
        print(f"log kept in {log_path}")
    else:
        shutil.rmtree(work)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
