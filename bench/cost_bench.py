#!/usr/bin/env python3
"""What monitord costs the machine, in each probe mode, side by side with no monitord.

usage: cost_bench.py [--monitord PATH] [--seconds S] [--rounds N] [--cpus N] [--loadavg]

On this machine, otherwise idle, phases of S seconds (default 20) in rounds (default 3) whose
order rotates, so that a drift of the machine falls on every phase alike:
  none         no monitord
  sleep        monitord without a configuration, on a socket of its own: sleeping probes, no
               watchdog, no history
  sleep+hist   the same with the history on disk (--state-directory): monitord as installed
  sleep+wd     sleeping probes with a watchdog armed (a FIFO as the device, read here), so
               that they wake once a second and pet it
  spin         --probe spin: MON's spinning probes and the probe source
For each phase, once monitord is ready (its start and calibration left out):
  monitord     its CPU time, every thread and its probe process's (spin), in % of one CPU
               (the threads' run time from /proc/PID/task/*/schedstat)
  mpstat       mpstat's %idle, %user and %nice of all CPUs over the phase (mpstat S 1)
  cpuidle      the time the CPUs spent in idle states (cpuidle's state*/time), in % of the
               phase, where the machine has a cpuidle driver
  runnable     the tasks runnable on average (/proc/loadavg's running count, sampled ten
               times a second less the sampler itself): what the load average averages
  loadavg      the 1-minute load average at the end of the phase: with --loadavg the phases
               last 70 s, so that it has settled
Then monitord as installed (sleeping probes and the history) on a synthetic machine of --cpus
CPUs (default 1024: a /proc/stat rewritten ten times a second, through --proc-root and
--sys-root): its CPU time.

Goals for the default (sleep+hist): monitord at most 0.1 % of one CPU here and 0.2 % at 1024 CPUs;
mpstat's %idle within 0.5 point of the run without it; idle residency within 2 % of it. A
missed goal is reported; the exit status is 0 when everything ran, 77 when mpstat is missing,
1 when something failed.
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench_support import Failed, Machine, Process, threads_seconds, wait_answering

MODES = ("none", "sleep", "sleep+hist", "sleep+wd", "spin")
GOAL_CPU = 0.1  # % of one CPU, the default mode on this machine
GOAL_CPU_BIG = 0.2  # % of one CPU, the default mode on the synthetic machine
GOAL_IDLE_POINTS = 0.5
GOAL_RESIDENCY = 2.0  # % of the run without monitord


def children(pid):
    """The child processes of `pid` (monitord's: the spinning probes' process)."""
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(c) for c in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return kids


def schedstat_seconds(pid, with_children=True):
    """Run time of the live threads of the process and of its children, in seconds."""
    seconds = threads_seconds(pid)
    if with_children:
        seconds += sum(schedstat_seconds(c, False) for c in children(pid))
    return seconds


def idle_residency():
    """Seconds the CPUs have spent in idle states so far, or None without cpuidle."""
    files = glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/time")
    if not files:
        return None
    total = 0
    for f in files:
        try:
            with open(f) as fh:
                total += int(fh.read())
        except OSError:
            continue
    return total / 1e6


def running_tasks():
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0])


def loadavg1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class FifoReader:
    """The reading end of a FIFO that stands in for /dev/watchdog: counts the pets."""

    def __init__(self, path):
        os.mkfifo(path, 0o600)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.pets = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while not self.stopping.wait(0.05):
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                continue
            self.pets += data.count(b"\0")

    def close(self):
        self.stopping.set()
        self.thread.join()
        os.close(self.fd)


def start_daemon(args, mode, workdir, extra=()):
    sock = os.path.join(workdir, f"monitord-{mode}.sock")
    argv = [args.monitord, "--socket", sock, "--log-level", "warning", *extra]
    fifo = None
    if mode == "spin":
        argv += ["--probe", "spin"]
    elif mode.startswith("sleep+hist"):
        argv += ["--state-directory", os.path.join(workdir, f"state-{time.monotonic_ns()}")]
    elif mode == "sleep+wd":
        path = os.path.join(workdir, f"watchdog-{time.monotonic_ns()}")
        fifo = FifoReader(path)
        argv += ["--watchdog", path]
    proc = Process(f"monitord-{mode}", argv, workdir)
    wait_answering(proc, sock)
    return proc, fifo


def phase(args, mode, workdir):
    proc, fifo = start_daemon(args, mode, workdir) if mode != "none" else (None, None)
    try:
        time.sleep(2)  # the first ticks, calibration (spin) and the first pets are past
        seconds = 70 if args.loadavg else args.seconds
        mp = subprocess.Popen(["mpstat", str(seconds), "1"], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, LC_ALL="C"))
        t0 = time.monotonic()
        c0 = schedstat_seconds(proc.pid) if proc else 0.0
        r0 = idle_residency()
        pets0 = fifo.pets if fifo else 0
        samples = []
        while time.monotonic() < t0 + seconds:
            samples.append(running_tasks() - 1)  # less this sampler, running as it reads
            time.sleep(0.1)
        wall = time.monotonic() - t0
        c1 = schedstat_seconds(proc.pid) if proc else 0.0
        r1 = idle_residency()
        out, _ = mp.communicate()
        avg = next(l for l in out.splitlines() if l.startswith("Average:") and " all " in l)
        head = next(l for l in out.splitlines() if "%idle" in l).split()
        fields = avg.split()
        col = {name: i - (len(head) - len(fields)) for i, name in enumerate(head)}
        result = {
            "monitord": 100 * (c1 - c0) / wall if proc else None,
            "idle": float(fields[col["%idle"]]),
            "user": float(fields[col["%usr"]]),
            "nice": float(fields[col["%nice"]]),
            "residency": (100 * (r1 - r0) / (wall * os.cpu_count())
                          if r0 is not None and r1 is not None else None),
            "runnable": statistics.mean(samples),
            "loadavg": loadavg1(),
            "pets": (fifo.pets - pets0) / wall if fifo else None,
        }
        if proc:
            proc.check()
        return result
    finally:
        if proc:
            proc.stop()
        if fifo:
            fifo.close()


def big_machine(args, workdir):
    root = os.path.join(workdir, f"machine-{args.cpus}")
    machine = Machine(root, args.cpus)
    try:
        proc, _ = start_daemon(args, f"sleep+hist-{args.cpus}", workdir,
                               ["--proc-root", machine.proc, "--sys-root", machine.sys])
        try:
            time.sleep(3)
            t0 = time.monotonic()
            c0 = schedstat_seconds(proc.pid)
            time.sleep(args.seconds)
            c1 = schedstat_seconds(proc.pid)
            wall = time.monotonic() - t0
            proc.check()
            if machine.error:
                raise Failed(machine.error)
            return 100 * (c1 - c0) / wall
        finally:
            proc.stop()
    finally:
        machine.stop()


def fmt(v, spec):
    """v formatted as `spec` says, or "-" in as many columns."""
    if v is not None:
        return format(v, spec)
    width = spec.split(".")[0]
    return format("-", ">" + width) if width else "-"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN"))
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cpus", type=int, default=1024)
    p.add_argument("--loadavg", action="store_true", help="70 s phases: the load average settles")
    args = p.parse_args()
    if not args.monitord:
        p.error("--monitord (or MONITORD_BIN) is needed")
    if shutil.which("mpstat") is None:
        print("SKIP: mpstat is not installed (scripts/bootstrap --test installs sysstat)")
        return 77
    workdir = tempfile.mkdtemp(prefix="monitord-cost-")
    results = {m: [] for m in MODES}
    try:
        print(f"== {os.cpu_count()} CPUs, {args.rounds} rounds of "
              f"{70 if args.loadavg else args.seconds} s phases, the order rotating"
              f"{'' if idle_residency() is not None else '; no cpuidle driver here'}")
        for r in range(args.rounds):
            order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
            for mode in order:
                results[mode].append(phase(args, mode, workdir))
                x = results[mode][-1]
                print(f"  round {r + 1} {mode:9} monitord {fmt(x['monitord'], '.4f')} %  "
                      f"idle {x['idle']:.2f} %  user {x['user']:.2f} %  nice {x['nice']:.2f} %  "
                      f"residency {fmt(x['residency'], '.2f')} %  "
                      f"runnable {x['runnable']:.2f}  load1 {x['loadavg']:.2f}"
                      f"{'  pets/s ' + fmt(x['pets'], '.2f') if x['pets'] is not None else ''}",
                      flush=True)
        big = big_machine(args, workdir)
    except Failed as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def median(mode, key):
        values = [x[key] for x in results[mode] if x[key] is not None]
        return statistics.median(values) if values else None

    print("\n== medians")
    print(f"  {'mode':9} {'monitord %':>10} {'%idle':>7} {'%user':>6} {'%nice':>6} "
          f"{'residency %':>11} {'runnable':>8} {'load1':>6} {'pets/s':>6}")
    for mode in MODES:
        print(f"  {mode:9} {fmt(median(mode, 'monitord'), '10.4f')} "
              f"{median(mode, 'idle'):7.2f} {median(mode, 'user'):6.2f} "
              f"{median(mode, 'nice'):6.2f} {fmt(median(mode, 'residency'), '11.2f')} "
              f"{median(mode, 'runnable'):8.2f} {median(mode, 'loadavg'):6.2f} "
              f"{fmt(median(mode, 'pets'), '6.2f')}")
    print(f"  sleep+hist on {args.cpus} synthetic CPUs: monitord {big:.4f} % of one CPU")

    print("\n== goals (sleep+hist, the default)")
    cpu = median("sleep+hist", "monitord")
    idle_gap = median("none", "idle") - median("sleep+hist", "idle")
    res_none, res_sleep = median("none", "residency"), median("sleep+hist", "residency")
    goals = [
        (cpu <= GOAL_CPU, f"monitord {cpu:.4f} % of one CPU (at most {GOAL_CPU} %)"),
        (big <= GOAL_CPU_BIG,
         f"at {args.cpus} CPUs {big:.4f} % of one CPU (at most {GOAL_CPU_BIG} %)"),
        (abs(idle_gap) <= GOAL_IDLE_POINTS,
         f"mpstat %idle {idle_gap:+.2f} points from the run without it (within "
         f"{GOAL_IDLE_POINTS})"),
    ]
    if res_none is not None and res_sleep is not None:
        change = 100 * (res_sleep - res_none) / res_none if res_none > 0 else 0
        goals.append((abs(change) <= GOAL_RESIDENCY,
                      f"idle residency {change:+.2f} % of the run without it (within "
                      f"{GOAL_RESIDENCY} %)"))
    else:
        print("  (no cpuidle driver here: the idle residency is not measured)")
    for ok, what in goals:
        print(f"  {'PASS' if ok else 'FAIL'}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
