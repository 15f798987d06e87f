#!/usr/bin/env python3
"""How often monitord pets its watchdog on a busy machine: pets per second and the longest
time between two pets, with every CPU busy at a known duty cycle, next to the load the
probes measured over the same window.

usage: watchdog_load_bench.py --monitord PATH --duty-cycle PATH [--timeout S] [--window S]
                              [--load PERCENT ...]

A FIFO stands in for /dev/watchdog (each pet is a byte written to it). For each load,
bench-duty-cycle keeps every CPU busy for that share of every period (100 ms on average), the
pets are counted over the window after a settling time of one timeout, and the probe source's
window average is read from the daemon (its history window is the bench's window). "hog" is
a normal-priority loop on every CPU that never sleeps. Expected with the default 10 s
timeout: pets keep coming up to 99 % (a credit needs 100 ms of idle time within the
timeout), never more than a timeout apart; none under the hog.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

import varlink_call


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


def start_load(load, seconds, duty_cycle):
    if load == "hog":
        return [subprocess.Popen(["taskset", "-c", str(c), "sh", "-c", "while :; do :; done"])
                for c in online_cpus()]
    # Periods of 100 ms on average: with shorter ones late wake-ups cut the busy time more.
    return [subprocess.Popen([duty_cycle, str(load), str(seconds), "100"],
                             stdout=subprocess.PIPE, text=True)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN"))
    p.add_argument("--duty-cycle", default=os.environ.get("DUTY_CYCLE_BIN"))
    p.add_argument("--timeout", type=int, default=10)
    p.add_argument("--window", type=int, default=30)
    p.add_argument("--load", action="append",
                   help="percent busy, or hog (default: 90 95 98 99 99.6 hog)")
    args = p.parse_args()
    if not args.monitord or not args.duty_cycle:
        p.error("--monitord and --duty-cycle are needed")
    loads = args.load or ["90", "95", "98", "99", "99.6", "hog"]

    work = tempfile.mkdtemp(prefix="monitord-watchdog-bench-")
    sock = os.path.join(work, "monitord.sock")
    fifo = FifoWatchdog(os.path.join(work, "watchdog"))
    daemon = subprocess.Popen(
        [args.monitord, "--socket", sock, "--watchdog", fifo.path,
         "--watchdog-timeout", str(args.timeout), "--history-seconds", str(args.window),
         "--log-level", "warning"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if fifo.times:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("monitord did not pet within 10 s")
        print(f"timeout {args.timeout} s, window {args.window} s, {len(online_cpus())} CPUs")
        print(f"{'load':>6} {'achieved':>9} {'probe':>7} {'pets':>5} {'pets/s':>7} "
              f"{'longest gap':>12}")
        failed = False
        for load in loads:
            procs = start_load(load, args.timeout + args.window + 1, args.duty_cycle)
            time.sleep(args.timeout)  # a credit under way may complete within a timeout
            start = time.monotonic()
            time.sleep(args.window)
            end = time.monotonic()
            probe = varlink_call.call(sock, "GetLoading")["machine"]["probe"]["avg_prev_min"]
            achieved = "-"
            for proc in procs:
                if load == "hog":
                    proc.kill()
                    proc.wait()
                else:
                    out, _ = proc.communicate()
                    achieved = out.split()[-1] if out.strip() else "-"
            pets = [t for t in fifo.times if start <= t <= end]
            marks = [start] + pets + [end]
            gap = max(b - a for a, b in zip(marks, marks[1:]))
            print(f"{load:>6} {achieved:>9} {probe:7.1f} {len(pets):5} "
                  f"{len(pets) / (end - start):7.2f} {gap:10.2f} s", flush=True)
            if load != "hog" and float(load) <= 98 and gap >= args.timeout:
                failed = True
        return 1 if failed else 0
    finally:
        daemon.terminate()
        daemon.wait()
        fifo.close()


if __name__ == "__main__":
    sys.exit(main())
