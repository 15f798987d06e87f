#!/usr/bin/env python3
"""The watchdog on a real kernel: Debian's kernel under qemu (TCG) with an initramfs made
here (busybox, the watchdog modules, the freshly built monitord and monctl with their shared
libraries, guest_init.sh as /init), and -device i6300esb -watchdog-action poweroff -no-reboot.

Cases, each in a fresh VM, with sleeping probes (the default; --probe spin for the other
mode), the i6300esb running all and softdog those that concern the driver:
  idle       monitord runs on an idle machine for 3x the timeout: the VM stays up, pets seen;
             a second monitord on the same device fails with EBUSY and names the usual holders
  default    monitord without a watchdog setting: it arms none (the watchdog is opt-in), the
             device never starts, the VM stays up; its own CPU time over the run is printed,
             and where the guest has a cpuidle driver, the CPUs' idle residency over 10 s with
             it stays within 2 % of 10 s without it
  busy95     every CPU about 95 % busy (bench-duty-cycle) for 3x the timeout: the VM stays up,
             and the probe figure is within 3 points of what the load achieved (/proc/stat's,
             with sleeping probes, at least that: it counts the guest kernel's work too)
  busy       a normal-priority busy loop on every CPU: the VM ends within the timeout and a
             tick or two (spin: twice the timeout, as the idle time from before the load
             counts for a timeout, and the probes still get a sliver of the CPU)
  fifo       the same with SCHED_FIFO loops (RT throttling off): the VM ends
  session, cgroup, idlecgroup
             one normal-priority loop on cpu1, in a session of its own, in a cgroup of its own
             (cgroup2, cpu controller), in a cgroup with cpu.idle=1: the VM ends as for busy
  sigterm    SIGTERM: the magic close; the VM stays up for another 3x the timeout
  sigkill    SIGKILL: no magic close; the VM ends
  nowayout   softdog loaded with nowayout=1: the status says it stays armed, and after SIGTERM
             the VM ends (the log says so, never "disarmed")
  history    the history on an ext4 disk that outlives the VM (-watchdog-action reset): every
             CPU starved until the watchdog resets the VM, whose next boot says that the run
             ended by the watchdog's reset and shows it starved in its last seconds; then the
             power cut (qemu killed) while every CPU is half busy, and another VM on the disk
             says that the run ended with the machine down, at most kSyncEvery seconds before
             the cut; the file then passes SQLite's integrity check on the host

  tests/vm/watchdog_vm.py --monitord build/daemon/monitord --monctl build/tools/monctl
      --duty-cycle build/bench/bench-duty-cycle [--case busy] [--watchdog softdog]
      [--probe spin] [--timeout 10] [--keep]

Exit status 0 when every case behaves, 1 otherwise, 77 (skip) when qemu, a kernel or busybox
is missing. Prints, per case, the time from the load (or kill) to the end of the VM.
"""
import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import vm_support as vm

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["idle", "default", "busy95", "busy", "fifo", "session", "cgroup", "idlecgroup",
         "sigterm", "sigkill", "nowayout", "history"]
# The cases of each driver: the loads and their placement do not depend on the driver. The
# softdog's: its pets and the magic close (sigterm), and its firing, with nowayout.
DRIVER_CASES = {"i6300esb": [c for c in CASES if c != "nowayout"],
                "softdog": ["sigterm", "nowayout"]}
SURVIVES = {"idle": True, "default": True, "busy95": True, "busy": False, "fifo": False,
            "session": False, "cgroup": False, "idlecgroup": False, "sigterm": True,
            "sigkill": False, "nowayout": False, "history": True}
# Room for the driver's rounding and a slow TCG guest, after the last pet.
MARGIN_S = 5.0
STARVED = ("busy", "fifo", "session", "cgroup", "idlecgroup")


def latest_end(case, timeout, probe):
    """How long after the load or the kill the VM may end, at the latest."""
    if case in STARVED and probe == "spin":
        # The last pet comes up to one timeout after the load began: idle time counts for a
        # timeout, and under a nice-0 loop a SCHED_IDLE probe still gets ~0.4 % of the CPU,
        # with which it goes on crediting that idle time.
        return 2 * timeout + MARGIN_S
    # Sleeping probes: the first tick that finds no idle time since the one before earns no
    # credit; a kill ends the pets at once.
    return timeout + MARGIN_S


def shared_libraries(binary):
    """The libraries `binary` loads, and its loader, from ldd."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def make_initramfs(work, args, modules, disk_modules):
    root = vm.initramfs_root(work, os.path.join(HERE, "guest_init.sh"),
                             {**modules, **dict(disk_modules)},
                             dirs=("usr/bin", "run", "tmp", "etc"))
    # What the history case loads to mount its disk, in order.
    with open(os.path.join(root, "modules", "disk.order"), "w") as f:
        f.write("\n".join(name for name, _ in disk_modules) + "\n")
    binaries = {"monitord": args.monitord, "monctl": args.monctl,
                "bench-duty-cycle": args.duty_cycle, "chrt": shutil.which("chrt")}
    for name, path in binaries.items():
        dest = os.path.join(root, "usr/bin", name)
        shutil.copy(path, dest)
        if shutil.which("strip"):  # debug information only makes the image slow to load
            subprocess.run(["strip", "--strip-debug", dest], check=True)
        for lib in shared_libraries(path):
            dest = os.path.join(root, lib.lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy(lib, dest)
    return vm.pack_initramfs(root, os.path.join(work, "initramfs.cpio"))


# The history's seconds are synced every kSyncEvery-th (daemon/history_store.hpp): a power cut
# loses at most that many, and the time the kill takes to land.
SYNC_EVERY_S = 10


def machine_load(second):
    """The /proc/stat source's machine load of a HistoryRunSecond, or None."""
    return next((v.get("load") for v in second["machine"] if v["source"] == "procstat"), None)


def runs_of(lines, boot):
    """The runs the guest printed (VMTEST: RUNS) in its boot-th boot of the history case."""
    current = 0
    for line in lines:
        m = re.search(r"VMTEST: BOOT (\d+)", line)
        if m:
            current = int(m.group(1))
        m = re.search(r"VMTEST: RUNS (\{.*\}) uptime=", line)
        if m and current == boot:
            return json.loads(m.group(1))["runs"]
    return None


def run_history(wd, timeout, probe, kernel, initramfs, log_dir):
    """The history across a watchdog reset and a power cut: two VMs on one disk, three boots.
    Returns (passed, summary)."""
    disk = os.path.join(log_dir, "history-disk.img")
    with open(disk, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", disk], check=True)
    base = [
        "qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-smp", "2",
        "-kernel", kernel, "-initrd", initramfs,
        "-append", f"console=ttyS0 panic=-1 quiet case=history wd={wd} timeout={timeout} "
                   f"probe={probe}",
        "-nographic", "-device", "i6300esb",
        "-drive", f"file={disk},format=raw,if=virtio",
    ]
    problems = []
    # The first VM: the watchdog resets it (qemu reboots the guest, and the i6300esb keeps the
    # flag that says so), its second boot runs until the power is cut.
    log1 = os.path.join(log_dir, f"vm-{wd}-history-1.log")
    marks1, lines1, wall1 = vm.boot(base + ["-watchdog-action", "reset"], log1,
                                    120 + 12 * timeout, kill_after=("WRITING", 5.0))
    writing = next((int(m.group(1)) for l in lines1
                    for m in [re.search(r"VMTEST: WRITING (\d+)", l)] if m), None)
    if "KILL" not in marks1 or writing is None:
        problems.append("the first VM never reached the writes of its second boot")
    # The guest's clock at the cut: the mark's time plus what the host waited after it.
    cut = writing + marks1["KILL"] - marks1["WRITING"] if "KILL" in marks1 and writing else None
    # The second VM on the same disk: a new machine, whose i6300esb says nothing of a reset.
    log2 = os.path.join(log_dir, f"vm-{wd}-history-2.log")
    _, lines2, wall2 = vm.boot(base + ["-no-reboot", "-watchdog-action", "poweroff"], log2,
                               60 + 6 * timeout)
    for lines in (lines1, lines2):
        problems += [l for l in lines if "VMTEST: ERROR" in l][:1]
        problems += [l.strip() for l in lines if re.search(r"[Hh]istory.*(malformed|corrupt)", l)]

    starved = half = None
    after_reset = runs_of(lines1, 2)
    if not after_reset or len(after_reset) < 2:
        problems.append("the boot after the reset showed no run before its own")
    else:
        first = after_reset[-2]
        loads = [machine_load(s) for s in first.get("last_seconds", [])]
        starved = sum(1 for l in loads if l is not None and l >= 90)
        if first["ended"] != "watchdog_reset":
            problems.append(f"the run before the reset ended {first['ended']!r}, "
                            "not 'watchdog_reset'")
        # Its pets were late from the load on: every second synced, so the seconds of the
        # starved machine are on the disk, not lost with the reset.
        if starved < 5:
            problems.append(f"{starved} of the last seconds before the reset were starved "
                            f"(at least 5 of {len(loads)} expected): {loads}")
    after_cut = runs_of(lines2, 3)
    lost = None
    if not after_cut or len(after_cut) < 3:
        problems.append("the VM after the power cut did not show the three runs")
    else:
        second = after_cut[-2]
        if second["ended"] != "machine_down":
            problems.append(f"the run cut off ended {second['ended']!r}, not 'machine_down'")
        loads = [machine_load(s) for s in second.get("last_seconds", [])]
        half = [l for l in loads if l is not None]
        if not half or not all(30 <= l <= 75 for l in half):
            problems.append(f"the last seconds before the cut were not half busy: {loads}")
        if cut is not None and second.get("last") is not None:
            lost = cut - second["last"] / 1e6
            if lost > SYNC_EVERY_S + 3:
                problems.append(f"the cut lost {lost:.1f} s of the history, more than "
                                f"{SYNC_EVERY_S} s and the kill's own")
    # The file as SQLite itself finds it, read out of the disk image (debugfs) on the host.
    integrity = history_integrity(disk, log_dir)
    if integrity != "ok":
        problems.append(f"the history file after the cut: {integrity}")
    verdict = "ok" if not problems else "FAILED: " + "; ".join(problems)
    what = (f"reset: {starved} starved seconds kept; cut: "
            f"{'-' if lost is None else f'{lost:.1f} s'} lost, "
            f"{len(half) if half else 0} half-busy seconds; integrity {integrity}")
    summary = f"{wd:9} {'history':10} {what}  VM {wall1 + wall2:5.1f} s  {verdict}"
    if problems:
        summary += f"\n  logs: {log1}, {log2}\n  " + "\n  ".join(lines1[-15:] + lines2[-15:])
    return not problems, summary


def history_integrity(disk, work):
    """SQLite's integrity check of the history file on the ext4 image `disk`, copied out with
    debugfs (with its write-ahead log, when there is one): "ok", or what is wrong."""
    out = os.path.join(work, "history-copy")
    os.makedirs(out, exist_ok=True)
    for name in ("history.db", "history.db-wal"):
        subprocess.run(["debugfs", "-R", f"dump /{name} {os.path.join(out, name)}", disk],
                       capture_output=True, check=False)
    path = os.path.join(out, "history.db")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return "no history.db on the disk"
    if os.path.exists(path + "-wal") and os.path.getsize(path + "-wal") == 0:
        os.remove(path + "-wal")
    try:
        db = sqlite3.connect(path)
        result = db.execute("PRAGMA integrity_check").fetchone()[0]
        runs = db.execute("SELECT count(*) FROM runs").fetchone()[0]
        db.close()
    except sqlite3.Error as e:
        return f"SQLite: {e}"
    if result != "ok":
        return result
    return "ok" if runs == 3 else f"{runs} runs in the file, not 3"


def run_case(case, wd, timeout, probe, kernel, initramfs, log_dir):
    """Boots one VM; returns (passed, summary)."""
    if case == "history":
        return run_history(wd, timeout, probe, kernel, initramfs, log_dir)
    cmd = [
        "qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-smp", "2",
        "-kernel", kernel, "-initrd", initramfs,
        "-append", f"console=ttyS0 panic=-1 quiet case={case} wd={wd} timeout={timeout} "
                   f"probe={probe}",
        "-nographic", "-no-reboot", "-watchdog-action", "poweroff",
    ]
    if wd == "i6300esb":
        cmd += ["-device", "i6300esb"]
    budget = 60 + 12 * timeout  # boot + the longest case + the margin, generously
    log_path = os.path.join(log_dir, f"vm-{wd}-{case}.log")
    marks, lines, wall = vm.boot(cmd, log_path, budget)
    pets = [int(m.group(1)) for l in lines for m in [re.search(r"pets:\s+(\d+)", l)] if m]
    errors = [l for l in lines if "VMTEST: ERROR" in l]
    alive = "ALIVE" in marks
    since = next((marks[m] for m in ("LOAD", "KILLED", "STOPPED", "READY") if m in marks), None)
    after = wall - since if since is not None else float("nan")
    expected = SURVIVES[case]
    problems = []
    if errors:
        problems.append(errors[0])
    if "READY" not in marks:
        problems.append("monitord never became ready")
    elif alive != expected:
        problems.append("the VM survived" if alive else "the VM ended")
    # The idle case runs twice the timeout: pets about once a second, three quarters of them
    # at least under TCG's late timers.
    if case == "idle" and (not pets or max(pets) < 3 * timeout // 2):
        problems.append(f"too few pets seen: {max(pets) if pets else 0}")
    if case == "idle" and "BUSY_EXPLAINED" not in marks:
        problems.append("a second monitord on the held device did not explain EBUSY")
    if case == "default" and "NO_WATCHDOG" not in marks:
        problems.append("monitord without a watchdog setting armed one")
    # The CPUs' idle residency over 10 s without monitord and 10 s with its defaults, where the
    # guest has a cpuidle driver: within 2 % (a spinning probe would leave none).
    residency = {}
    for l in lines:
        m = re.search(r"VMTEST: RESIDENCY_(WITHOUT|WITH) (\d+) us", l)
        if m:
            residency[m.group(1)] = int(m.group(2))
    if case == "default" and len(residency) == 2 and residency["WITHOUT"] > 0:
        change = 100.0 * (residency["WITH"] - residency["WITHOUT"]) / residency["WITHOUT"]
        print(f"  idle residency {residency['WITHOUT'] / 1e6:.2f} s in 10 s without monitord, "
              f"{residency['WITH'] / 1e6:.2f} s with its defaults ({change:+.2f} %)")
        if abs(change) > 2:
            problems.append(f"the idle residency changed by {change:+.2f} % with monitord")
    if case == "nowayout":
        if "NOWAYOUT_SHOWN" not in marks:
            problems.append("the status did not say that a nowayout driver stays armed")
        if not any("stays armed" in l for l in lines):
            problems.append("the log did not say that the watchdog stays armed")
        if any("disarmed" in l for l in lines):
            problems.append("the log claimed to disarm a nowayout driver")
    end = latest_end(case, timeout, probe)
    if not expected and not alive and since is not None and after > end:
        problems.append(f"the VM ended {after:.1f} s after, later than {end:.0f} s")
    # The load the probes measured over the last 20 s of it (the daemon's window).
    measured = [float(m.group(1)) for l in lines
                for m in [re.search(r"VMTEST: MEASURED ([\d.]+)", l)] if m]
    # What the load itself achieved (its threads' CPU time over its run): under TCG the guest
    # loses time to the host from run to run, 91-95 % here for 98 % asked, so the probes are
    # held to what the load did, not to what it was asked.
    achieved = [float(m.group(1)) for l in lines
                for m in [re.search(r"achieved ([\d.]+)", l)] if m]
    if case == "busy95" and "LOAD" not in marks:
        problems.append("the load never started")
    elif case == "busy95" and (not measured or not achieved):
        problems.append("no figure from the probes or from the load")
    elif case == "busy95" and achieved[0] < 85:
        problems.append(f"the load reached only {achieved[0]:.1f} % busy: not a busy machine")
    elif case == "busy95" and probe == "spin" and abs(measured[0] - achieved[0]) > 3:
        problems.append(f"the probes measured {measured[0]:.1f} % busy, the load achieved "
                        f"{achieved[0]:.1f} %")
    elif case == "busy95" and probe == "sleep" and measured[0] < achieved[0] - 3:
        # /proc/stat counts the load and everything else the guest's kernel does (its timer
        # interrupts are costly under TCG): at least what the load achieved.
        problems.append(f"/proc/stat measured {measured[0]:.1f} % busy, less than the load's "
                        f"{achieved[0]:.1f} %")
    verdict = "ok" if not problems else "FAILED: " + "; ".join(problems)
    what_load = (f" ({measured[0]:.1f} % busy, the load {achieved[0]:.1f} %)"
                 if measured and achieved else f" ({measured[0]:.1f} % busy)" if measured else "")
    what = f"stayed up{what_load}" if alive else f"ended {after:.1f} s after the {'load' if 'LOAD' in marks else 'kill' if 'KILLED' in marks else 'start'}"
    ticks = [l.split("MONITORD_TICKS", 1)[1].split("uptime=")[0].strip() for l in lines
             if "VMTEST: MONITORD_TICKS" in l]
    if ticks and len(ticks[0].split()) == 2:
        used, hz = (int(x) for x in ticks[0].split())
        what += f"; monitord took {used / hz:.2f} s of CPU in its run (under TCG)"
    summary = (f"{wd:9} {case:10} {what:40} pets seen {max(pets) if pets else 0:4}  "
               f"VM {wall:5.1f} s  {verdict}")
    if problems:
        summary += f"\n  log: {log_path}\n  " + "\n  ".join(lines[-25:])
    return not problems, summary


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN"))
    p.add_argument("--monctl", default=os.environ.get("MONCTL_BIN"))
    p.add_argument("--duty-cycle", default=os.environ.get("DUTY_CYCLE_BIN"))
    p.add_argument("--case", action="append", choices=CASES)
    p.add_argument("--watchdog", action="append", choices=["i6300esb", "softdog"])
    p.add_argument("--timeout", type=int, default=10)
    p.add_argument("--probe", choices=["sleep", "spin"], default="sleep")
    p.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = p.parse_args()
    if not args.monitord or not args.monctl or not args.duty_cycle:
        p.error("--monitord, --monctl and --duty-cycle are needed")
    vm.require_tools("qemu-system-x86_64", "busybox", "cpio", "chrt", "ldd", "mkfs.ext4",
                     "debugfs")
    kernel, modules = vm.find_kernel(["watchdog", "i6300esb", "softdog"])
    if kernel is None:
        vm.skip("no readable /boot/vmlinuz-* with the watchdog, i6300esb and softdog modules "
                "(scripts/bootstrap --test installs linux-image)")
    # The history case's disk: virtio's block device and ext4 (with crc32c for its checksums).
    disk_modules = vm.with_dependencies(kernel, ["virtio_pci", "virtio_blk", "crc32c_generic",
                                                 "ext4"])
    if disk_modules is None:
        vm.skip(f"{kernel}'s modules lack virtio_pci, virtio_blk, crc32c_generic or ext4")

    work = tempfile.mkdtemp(prefix="monitord-vm-")
    t0 = time.monotonic()
    try:
        initramfs = make_initramfs(work, args, modules, disk_modules)
        print(f"kernel {kernel}, initramfs {os.path.getsize(initramfs) // 1024} KiB, "
              f"timeout {args.timeout} s, probes {args.probe}", flush=True)
        ok = True
        for wd in args.watchdog or ["i6300esb", "softdog"]:
            for case in args.case or DRIVER_CASES[wd]:
                passed, summary = run_case(case, wd, args.timeout, args.probe, kernel,
                                           initramfs, work)
                print(summary, flush=True)
                ok = ok and passed
        print(f"VM suite: {time.monotonic() - t0:.0f} s of wall time")
        if not ok or args.keep:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work)
        return 0 if ok else 1
    except BaseException:
        print(f"logs kept in {work}")
        raise


if __name__ == "__main__":
    sys.exit(main())
