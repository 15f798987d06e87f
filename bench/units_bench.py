#!/usr/bin/env python3
"""CPU time per unit: what it costs monitord, side by side with systemd-cgtop, in one run.

usage: units_bench.py [--monitord PATH] [--duty-cycle PATH] [--units N] [--busy PERCENT]
                      [--seconds S] [--rounds R]

As root: N cgroups (default 300) made as the units of a slice of the bench's own
(monitord-bench.slice/bench-K.service) in every hierarchy either tool reads CPU time from:
the cgroup2 tree (the root, or unified/ on a hybrid machine), and the v1 cpuacct and
name=systemd hierarchies where they are mounted (systemd-cgtop reads those on a machine that
is not all cgroup2). Every tenth holds a sleeping process, and the first a process busy for
PERCENT (default 10) of every CPU (bench-duty-cycle), so that the slice's time grows every
second as a real machine's does (it stays in the root cgroup while the units are gone). Then
phases of S seconds (default 20), in rounds (default 3) whose order rotates, so that a drift
of the machine falls on every phase alike:
  monitord-0   monitord with its defaults, the bench's cgroups removed (the machine's own
               units only)
  monitord-N   monitord with its defaults and the N units
  cgtop        systemd-cgtop -b -d 1 (a refresh a second, as monitord's tick) with the N units
For each, the CPU time of the process over the phase (its threads' run time, schedstat), in %
of one CPU, once it is up (its start left out). The units' cost is monitord-N less monitord-0.

Goal: the units' cost at most 0.05 % of one CPU with 300 units. The exit status is 0 when
everything ran (a missed goal is reported), 77 without root, a cgroup tree or
systemd-cgtop, 1 when something failed.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import varlink_call
from bench_support import Failed, Process, threads_seconds, wait_answering

GOAL = 0.05  # % of one CPU for 300 units
SLICE = "monitord-bench.slice"


def hierarchies():
    """The directories the bench makes its units in: the cgroup2 tree, then v1 cpuacct and
    name=systemd where mounted."""
    roots = []
    for p in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(p, "cgroup.controllers")):
            roots.append(p)
            break
    for name in ("cpuacct", "cpu,cpuacct", "systemd"):
        p = os.path.join("/sys/fs/cgroup", name)
        if os.path.ismount(p) and p not in roots:
            roots.append(p)
    return roots


class Units:
    """N cgroups in each hierarchy, every tenth with a sleeping process, the first with the
    busy one."""

    def __init__(self, roots, n, busy):
        self.roots, self.n, self.busy, self.sleepers = roots, n, busy, []

    def place_busy(self, cgroup):
        if self.busy is None:
            return
        for root in self.roots:
            with open(os.path.join(root, cgroup, "cgroup.procs"), "w") as f:
                f.write(str(self.busy.pid))

    def make(self):
        for root in self.roots:
            for k in range(self.n):
                os.makedirs(os.path.join(root, SLICE, f"bench-{k}.service"), exist_ok=True)
        for k in range(0, self.n, 10):
            p = subprocess.Popen(["sleep", "3600"])
            self.sleepers.append(p)
            for root in self.roots:
                with open(os.path.join(root, SLICE, f"bench-{k}.service", "cgroup.procs"),
                          "w") as f:
                    f.write(str(p.pid))
        self.place_busy(os.path.join(SLICE, "bench-0.service"))

    def remove(self):
        self.place_busy("")
        for p in self.sleepers:
            p.kill()
            p.wait()
        self.sleepers = []
        for root in self.roots:
            base = os.path.join(root, SLICE)
            if not os.path.isdir(base):
                continue
            for k in range(self.n):
                d = os.path.join(base, f"bench-{k}.service")
                for _ in range(50):
                    try:
                        os.rmdir(d)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:  # a process killed a moment ago still in it
                        time.sleep(0.02)
            os.rmdir(base)


def start_monitord(args, workdir, name):
    sock = os.path.join(workdir, name + ".sock")
    proc = Process(name, [args.monitord, "--socket", sock, "--log-level", "warning"], workdir)
    wait_answering(proc, sock)
    return proc, sock


def phase(args, workdir, mode, units):
    if mode == "monitord-0":
        units.remove()
    elif not units.sleepers:
        units.make()
    if mode == "cgtop":
        proc = Process("cgtop", ["systemd-cgtop", "-b", "-d", "1", "-n", "100000"], workdir)
        time.sleep(2)
        proc.check()
        sock = None
    else:
        proc, sock = start_monitord(args, workdir, mode)
        time.sleep(2)  # its first ticks: the units' baseline readings
    try:
        seen = None
        if sock:
            seen = varlink_call.call(sock, "GetLoading", {"units": 1})["units"]["count"]
        t0, c0 = time.monotonic(), threads_seconds(proc.pid)
        time.sleep(args.seconds)
        wall, c1 = time.monotonic() - t0, threads_seconds(proc.pid)
        return 100 * (c1 - c0) / wall, seen
    finally:
        if mode == "cgtop":
            proc.proc.send_signal(signal.SIGINT)
        proc.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN", "monitord"))
    p.add_argument("--duty-cycle", default=os.environ.get("DUTY_CYCLE_BIN", "bench-duty-cycle"))
    p.add_argument("--units", type=int, default=300)
    p.add_argument("--busy", type=float, default=10,
                   help="%% of every CPU the first unit's process is busy for (0: none)")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if os.geteuid() != 0:
        print("SKIP: making cgroups takes root")
        return 77
    roots = hierarchies()
    if not roots:
        print("SKIP: no cgroup tree under /sys/fs/cgroup")
        return 77
    if shutil.which("systemd-cgtop") is None:
        print("SKIP: no systemd-cgtop (Debian's systemd package)")
        return 77
    print(f"{args.units} units in {', '.join(roots)}, one {args.busy:g} % busy on every CPU; "
          f"{args.rounds} rounds of {args.seconds:.0f} s per phase", flush=True)
    modes = ["monitord-0", "monitord-N", "cgtop"]
    results = {m: [] for m in modes}
    busy = None
    if args.busy > 0:
        busy = subprocess.Popen([args.duty_cycle, str(args.busy), "86400"])
    units = Units(roots, args.units, busy)
    try:
        with tempfile.TemporaryDirectory(prefix="monitord-units-") as workdir:
            for r in range(args.rounds):
                order = modes[r % len(modes):] + modes[:r % len(modes)]
                for mode in order:
                    cpu, seen = phase(args, workdir, mode, units)
                    results[mode].append(cpu)
                    print(f"round {r + 1} {mode:<11} {cpu:7.3f} % of one CPU"
                          + (f"  ({seen} units seen)" if seen is not None else ""), flush=True)
    except Failed as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        units.remove()
        if busy is not None:
            busy.kill()
            busy.wait()
    med = {m: statistics.median(v) for m, v in results.items()}
    cost = med["monitord-N"] - med["monitord-0"]
    print(f"\nmedians, % of one CPU: monitord without the units {med['monitord-0']:.3f}, with "
          f"{args.units} units {med['monitord-N']:.3f}; systemd-cgtop -d 1 {med['cgtop']:.3f}")
    print(f"the units' cost in monitord: {cost:.3f} % of one CPU "
          f"({cost / max(med['cgtop'], 1e-9) * 100:.0f} % of systemd-cgtop's)")
    goal = GOAL * args.units / 300
    if cost > goal:
        print(f"GOAL MISSED: the units cost {cost:.3f} % of one CPU, more than {goal:.3f} %")
    else:
        print(f"goal met: at most {goal:.3f} % of one CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
