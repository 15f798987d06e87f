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

  tests/vm/watchdog_vm.py --monitord build/daemon/monitord --monctl build/tools/monctl
      --duty-cycle build/bench/bench-duty-cycle [--case busy] [--watchdog softdog]
      [--probe spin] [--timeout 10] [--keep]

Exit status 0 when every case behaves, 1 otherwise, 77 (skip) when qemu, a kernel or busybox
is missing. Prints, per case, the time from the load (or kill) to the end of the VM.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import vm_support as vm

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["idle", "default", "busy95", "busy", "fifo", "session", "cgroup", "idlecgroup",
         "sigterm", "sigkill", "nowayout"]
# The cases of each driver: the loads and their placement do not depend on the driver. The
# softdog's: its pets and the magic close (sigterm), and its firing, with nowayout.
DRIVER_CASES = {"i6300esb": [c for c in CASES if c != "nowayout"],
                "softdog": ["sigterm", "nowayout"]}
SURVIVES = {"idle": True, "default": True, "busy95": True, "busy": False, "fifo": False,
            "session": False, "cgroup": False, "idlecgroup": False, "sigterm": True,
            "sigkill": False, "nowayout": False}
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


def make_initramfs(work, args, modules):
    root = vm.initramfs_root(work, os.path.join(HERE, "guest_init.sh"), modules,
                             dirs=("usr/bin", "run", "tmp", "etc"))
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


def run_case(case, wd, timeout, probe, kernel, initramfs, log_dir):
    """Boots one VM; returns (passed, summary)."""
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
    vm.require_tools("qemu-system-x86_64", "busybox", "cpio", "chrt", "ldd")
    kernel, modules = vm.find_kernel(["watchdog", "i6300esb", "softdog"])
    if kernel is None:
        vm.skip("no readable /boot/vmlinuz-* with the watchdog, i6300esb and softdog modules "
                "(scripts/bootstrap --test installs linux-image)")

    work = tempfile.mkdtemp(prefix="monitord-vm-")
    t0 = time.monotonic()
    try:
        initramfs = make_initramfs(work, args, modules)
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
