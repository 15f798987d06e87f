#!/usr/bin/env python3
"""Each CPU's busiest tasks: what sampling them costs monitord at 10,000 tasks, side by side
with top, in one run.

usage: tasks_bench.py [--monitord PATH] [--duty-cycle PATH] [--processes P] [--threads T]
                      [--seconds S] [--rounds R]

The machine is given P single-threaded processes (default 2,000 sleeping `sleep`s) and T
threads (default 8,000) in processes of 1,000: every one asleep but one process of 100
threads that each wake and work a little every second (a server with many threads, a few
busy), and a process busy for 10 % of every CPU (bench-duty-cycle): about 10,000 tasks whose
CPU time grows every second as a real machine's does. Then phases of S seconds (default 20),
in rounds (default 3) whose order rotates:
  monitord        monitord with its defaults, asked for the per-CPU loading once a second
  monitord-tasks  the same, asked for each CPU's 3 busiest tasks with it (GetLoading tasks=3,
                  as monctl loading --tasks --watch would)
  top             top -b -d 1 (procps: a refresh a second, every process), output thrown away
  top-H           top -H -b -d 1 (every thread)
For each, the CPU time of the process over the phase (its threads' run time, schedstat), in %
of one CPU, once it is up. The tasks' cost is monitord-tasks less monitord.

Goal: the tasks' cost no more than top -b -d 1's. Exit status 0 when everything ran (a missed
goal is reported), 77 without top, 1 when something failed.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_support import Asker, Failed, Process, threads_seconds, wait_answering

# A process of `n` threads asleep; with `busy`, each wakes once a second and works ~1 ms.
THREADS = """
import sys, threading, time
n, busy = int(sys.argv[1]), sys.argv[2] == "busy"
def sleeper():
    time.sleep(86400)
def worker():
    while True:
        time.sleep(1)
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass
for _ in range(n):
    threading.Thread(target=worker if busy else sleeper, daemon=True).start()
print("ready", flush=True)
time.sleep(86400)
"""


class Tasks:
    """The bench's tasks: sleeping processes, processes of sleeping threads, one of busy
    ones, and a duty cycle on every CPU."""

    def __init__(self, args):
        self.procs = []
        try:
            for _ in range(args.processes):
                self.procs.append(subprocess.Popen(["sleep", "86400"]))
            left = args.threads - 100
            groups = [("busy", 100)]
            while left > 0:
                groups.append(("sleep", min(1000, left)))
                left -= groups[-1][1]
            for kind, n in groups:
                p = subprocess.Popen([sys.executable, "-c", THREADS, str(n), kind],
                                     stdout=subprocess.PIPE, text=True)
                self.procs.append(p)
                if p.stdout.readline().strip() != "ready":
                    raise Failed(f"a process of {n} threads did not start")
            self.procs.append(subprocess.Popen([args.duty_cycle, "10", "86400"]))
        except BaseException:
            self.stop()
            raise

    def stop(self):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def count_tasks():
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass
    return n


def phase(args, workdir, mode):
    asker = None
    if mode.startswith("top"):
        argv = ["top", "-b", "-d", "1"] + (["-H"] if mode == "top-H" else [])
        proc = Process(mode, argv, workdir, quiet=True)
    else:
        sock = os.path.join(workdir, mode + ".sock")
        proc = Process(mode, [args.monitord, "--socket", sock, "--log-level", "warning"],
                       workdir)
        wait_answering(proc, sock)
        asker = Asker(sock, {"per_cpu": True, "tasks": 3} if mode == "monitord-tasks"
                      else {"per_cpu": True}, "tasks")
    try:
        time.sleep(3)  # its start, and the tasks' first readings
        proc.check()
        t0, c0 = time.monotonic(), threads_seconds(proc.pid)
        time.sleep(args.seconds)
        wall, c1 = time.monotonic() - t0, threads_seconds(proc.pid)
        proc.check()
        seen = None
        if asker and asker.last:
            seen = asker.last.get("count")
        return 100 * (c1 - c0) / wall, seen
    finally:
        if asker:
            asker.stop()
        proc.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN", "monitord"))
    p.add_argument("--duty-cycle", default=os.environ.get("DUTY_CYCLE_BIN", "bench-duty-cycle"))
    p.add_argument("--processes", type=int, default=2000)
    p.add_argument("--threads", type=int, default=8000)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if shutil.which("top") is None:
        print("SKIP: no top (Debian's procps)")
        return 77
    modes = ["monitord", "monitord-tasks", "top", "top-H"]
    results = {m: [] for m in modes}
    tasks = None
    try:
        tasks = Tasks(args)
        print(f"{count_tasks()} tasks on this machine ({os.cpu_count()} CPUs): "
              f"{args.rounds} rounds of {args.seconds:.0f} s per phase", flush=True)
        with tempfile.TemporaryDirectory(prefix="monitord-tasks-bench-") as workdir:
            for r in range(args.rounds):
                order = modes[r % len(modes):] + modes[:r % len(modes)]
                for m in order:
                    cpu, seen = phase(args, workdir, m)
                    results[m].append(cpu)
                    print(f"  round {r + 1}: {m:<15} {cpu:7.3f} % of one CPU"
                          + (f"  ({seen} tasks seen)" if seen is not None else ""), flush=True)
    except Failed as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        if tasks:
            tasks.stop()
    med = {m: statistics.median(v) for m, v in results.items()}
    cost = med["monitord-tasks"] - med["monitord"]
    print("\nmedian, in % of one CPU:")
    print(f"  monitord {med['monitord']:.3f}, asked for the tasks {med['monitord-tasks']:.3f} "
          f"(the tasks: {cost:+.3f}); top -b -d 1 {med['top']:.3f}; top -H -b -d 1 "
          f"{med['top-H']:.3f}")
    if cost > med["top"]:
        print(f"GOAL MISSED: the tasks cost {cost:.3f} % of one CPU, more than top's "
              f"{med['top']:.3f} %")
    else:
        print(f"goal met: the tasks cost {cost / max(med['top'], 1e-9) * 100:.0f} % of "
              "top -b -d 1's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
