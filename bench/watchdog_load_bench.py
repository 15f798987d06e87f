#!/usr/bin/env python3
"""How often monitord pets its watchdog on a busy machine, in each probe mode: pets per
second and the longest time between two pets, with every CPU busy at a known duty cycle, and
under a normal-priority loop on one CPU placed in the bench's session, in another session, in
another cgroup under the cpu controller, or in a cgroup with cpu.idle=1.

usage: watchdog_load_bench.py --monitord PATH --duty-cycle PATH [--timeout S] [--window S]
                              [--probe sleep|spin ...] [--load PERCENT|hog|session|cgroup|idlecgroup ...]

A FIFO stands in for /dev/watchdog (each pet is a byte written to it). For each load,
bench-duty-cycle keeps every CPU busy for that share of every period (100 ms on average), the
pets are counted over the window after a settling time of one timeout, and the window's
average load is read from the daemon (the probe source with spinning probes, procstat with
sleeping ones; its history window is the bench's window). "hog" is a normal-priority loop
that never sleeps on every CPU; "session", "cgroup" and "idlecgroup" one on the last CPU, in
a session of its own, in a cgroup of its own directly under the root of the cpu controller's
hierarchy (cgroup v1's, or v2 with +cpu; root only), with cpu.idle=1 for idlecgroup.
Expected with the default 10 s timeout: pets keep coming up to 99 % (a credit needs 100 ms of
idle time within the timeout), never more than a timeout apart; none at 99.6 % and under the
loops, wherever they run, with sleeping probes (the kernel's idle time); spinning probes
compete with a loop of another group by the groups' weights (monitord(8)).
Exit status 1 when a load of 98 % or less let a gap reach the timeout, or a loop on a CPU left
the pets going with sleeping probes.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

import varlink_call

PLACEMENTS = ("session", "cgroup", "idlecgroup")


class FifoWatchdog:
    """Reads the FIFO the daemon pets, keeping the time of every pet."""

    def __init__(self, path):
        self.path = path
        os.mkfifo(path, 0o600)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.times = []
        self.stop = False
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while not self.stop:
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                data = None
            if data:
                now = time.monotonic()
                self.times.extend([now] * data.count(b"\0"))
            else:
                time.sleep(0.01)

    def close(self):
        self.stop = True
        self.thread.join()
        os.close(self.fd)


def online_cpus():
    cpus = []
    with open("/sys/devices/system/cpu/online") as f:
        for part in f.read().strip().split(","):
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpu_cgroup_root():
    """The root of the hierarchy with the cpu controller and whether it is cgroup2, or
    (None, why)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if rest and rest[0] == "cgroup" and "cpu" in rest[2].split(","):
                return fields[4], False
    for line in open("/proc/self/mountinfo"):
        head, _, tail = line.partition(" - ")
        if tail.split()[0] == "cgroup2":
            root = head.split()[4]
            with open(os.path.join(root, "cgroup.controllers")) as f:
                if "cpu" not in f.read().split():
                    return None, "cgroup2 without the cpu controller"
            with open(os.path.join(root, "cgroup.subtree_control"), "w") as f:
                f.write("+cpu")
            return root, True
    return None, "no cgroup hierarchy with the cpu controller"


class Loop:
    """A normal-priority loop on `cpu`, placed as `where` says."""

    def __init__(self, cpu, where):
        self.cgroup = None
        cmd = ["taskset", "-c", str(cpu), "sh", "-c", "while :; do :; done"]
        self.proc = subprocess.Popen(cmd, start_new_session=(where == "session"))
        if where in ("cgroup", "idlecgroup"):
            root, _ = cpu_cgroup_root()
            self.root = root
            self.cgroup = os.path.join(root, f"monitord-bench-{os.getpid()}")
            os.mkdir(self.cgroup)
            if where == "idlecgroup":
                with open(os.path.join(self.cgroup, "cpu.idle"), "w") as f:
                    f.write("1")
            with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
                f.write(str(self.proc.pid))

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        if self.cgroup:
            for _ in range(50):
                try:
                    os.rmdir(self.cgroup)
                    break
                except OSError:
                    time.sleep(0.1)


def start_load(load, seconds, duty_cycle):
    if load == "hog":
        return [Loop(c, "same") for c in online_cpus()]
    if load in PLACEMENTS:
        return [Loop(online_cpus()[-1], load)]
    # Periods of 100 ms on average: with shorter ones late wake-ups cut the busy time more.
    return [subprocess.Popen([duty_cycle, str(load), str(seconds), "100"],
                             stdout=subprocess.PIPE, text=True)]


def run_mode(args, mode, loads, work):
    sock = os.path.join(work, f"monitord-{mode}.sock")
    fifo = FifoWatchdog(os.path.join(work, f"watchdog-{mode}"))
    daemon = subprocess.Popen(
        [args.monitord, "--socket", sock, "--watchdog", fifo.path, "--probe", mode,
         "--watchdog-timeout", str(args.timeout), "--history-seconds", str(args.window),
         "--log-level", "warning"], stdout=subprocess.DEVNULL)
    source = "probe" if mode == "spin" else "procstat"
    failed = False
    try:
        for _ in range(500):
            if fifo.times:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("monitord did not pet within 10 s")
        print(f"\n== probes {mode}: timeout {args.timeout} s, window {args.window} s, "
              f"{len(online_cpus())} CPUs; the load as the {source} source read it")
        print(f"{'load':>10} {'achieved':>9} {source:>8} {'pets':>5} {'pets/s':>7} "
              f"{'longest gap':>12}")
        for load in loads:
            procs = start_load(load, args.timeout + args.window + 1, args.duty_cycle)
            time.sleep(args.timeout)  # idle time from before the load counts for a timeout
            start = time.monotonic()
            time.sleep(args.window)
            end = time.monotonic()
            measured = varlink_call.call(sock, "GetLoading")["machine"][source]["avg_prev_min"]
            achieved = "-"
            for proc in procs:
                if isinstance(proc, Loop):
                    proc.stop()
                else:
                    out, _ = proc.communicate()
                    achieved = out.split()[-1] if out.strip() else "-"
            pets = [t for t in fifo.times if start <= t <= end]
            marks = [start] + pets + [end]
            gap = max(b - a for a, b in zip(marks, marks[1:]))
            print(f"{load:>10} {achieved:>9} {measured:8.1f} {len(pets):5} "
                  f"{len(pets) / (end - start):7.2f} {gap:10.2f} s", flush=True)
            percent = load not in ("hog",) + PLACEMENTS
            if percent and float(load) <= 98 and gap >= args.timeout:
                failed = True
            if not percent and mode == "sleep" and pets:
                failed = True
            time.sleep(2)  # the pets resume before the next load
        return failed
    finally:
        daemon.terminate()
        daemon.wait()
        fifo.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN"))
    p.add_argument("--duty-cycle", default=os.environ.get("DUTY_CYCLE_BIN"))
    p.add_argument("--timeout", type=int, default=10)
    p.add_argument("--window", type=int, default=30)
    p.add_argument("--probe", action="append", choices=["sleep", "spin"],
                   help="probe mode (default: both)")
    p.add_argument("--load", action="append",
                   help="percent busy, hog, session, cgroup or idlecgroup (default: 90 95 98 "
                        "99 99.6 hog, and the placements when run as root)")
    args = p.parse_args()
    if not args.monitord or not args.duty_cycle:
        p.error("--monitord and --duty-cycle are needed")
    loads = args.load or ["90", "95", "98", "99", "99.6", "hog"]
    if not args.load:
        loads.append("session")
        root, why = cpu_cgroup_root() if os.geteuid() == 0 else (None, "not root")
        if root:
            loads += ["cgroup", "idlecgroup"]
        else:
            print(f"(the cgroup placements are left out: {why})")
    work = tempfile.mkdtemp(prefix="monitord-watchdog-bench-")
    failed = False
    for mode in args.probe or ["sleep", "spin"]:
        failed = run_mode(args, mode, loads, work) or failed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
