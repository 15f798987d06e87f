#!/usr/bin/env python3
"""Loading benchmarks of monitord: accuracy, cost to real work, the daemon's own overhead.

usage: loading_bench.py --monitord PATH --duty-cycle PATH [--window S] [--only NAME ...]

accuracy  A load generator runs a known duty cycle (0, 25, 50, 75, 100 %) on every CPU.
          With the probes spinning: the window average (avg_prev_min) of the probe and of the
          corrected procstat source. With --probe off, over another window at the same load:
          mpstat's busy %. Targets: probe within 2 points of the generated load, corrected
          procstat within 1 point of mpstat.
cost      stress-ng bogo-ops/s of a normal-priority CPU workload with the probes spinning and
          with --probe off, alternating; cyclictest p99 wake-up latency the same way. Target:
          under 1 % fewer bogo-ops/s with the probes.
overhead  monitord's own CPU time over a window, the probe threads excluded (target under
          0.1 % of one CPU), and its peak RSS (target under 8 MiB).
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import varlink_call


class Daemon:
    def __init__(self, binary, probe, window, workdir):
        self.socket = os.path.join(workdir, f"monitord-{probe}.sock")
        self.proc = subprocess.Popen(
            [binary, "--socket", self.socket, "--probe", probe,
             "--history-seconds", str(window), "--log-level", "warning",
             "--watchdog", "none"],
            stdout=subprocess.DEVNULL)
        for _ in range(500):
            if os.path.exists(self.socket):
                try:
                    self.call("GetStatus")
                    return
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError("monitord did not start")

    def call(self, method, params=None):
        return varlink_call.call(self.socket, method, params)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


def busy_percent_from_mpstat(output):
    for line in output.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[0].startswith("Average") and fields[1] == "all":
            return 100.0 - float(fields[-1])  # %idle is the last column
    raise RuntimeError("no 'Average: all' line in mpstat output:\n" + output)


def generate(args, load, seconds):
    return subprocess.Popen([args.duty_cycle, str(load), str(seconds)], stdout=subprocess.PIPE,
                            text=True)


def achieved(gen):
    out, _ = gen.communicate()
    m = re.search(r"achieved ([\d.]+)", out)
    return float(m.group(1)) if m else float("nan")


def accuracy(args, workdir):
    print(f"\n== accuracy: window {args.window} s per level and run (two runs per level)")
    print("   'achieved' is the generator's own CPU time share in that run: with the probes")
    print("   spinning the CPUs never halt and its wake-ups come sooner, so it achieves more.")
    print(f"{'load %':>7} | {'achieved':>8} {'probe':>7} {'err':>6} {'procstat':>8} |"
          f" {'achieved':>8} {'mpstat':>7} {'err':>6} | {'procstat-mpstat':>15}")
    warm = 3
    for load in (0, 25, 50, 75, 100):
        # Probes spinning: the window must cover only the generated load.
        d = Daemon(args.monitord, "spin", args.window, workdir)
        gen = generate(args, load, args.window + warm + 2)
        time.sleep(warm + args.window + 0.5)
        j = d.call("GetLoading")["machine"]
        spin_achieved = achieved(gen)
        d.stop()
        probe = j["probe"]["avg_prev_min"]
        procstat = j["procstat"]["avg_prev_min"]
        # Probes off: mpstat over the same kind of window.
        d = Daemon(args.monitord, "off", args.window, workdir)
        gen = generate(args, load, args.window + warm + 2)
        time.sleep(warm)
        mp = subprocess.run(["mpstat", "1", str(args.window)], capture_output=True, text=True,
                            env=dict(os.environ, LC_ALL="C"))
        off_achieved = achieved(gen)
        d.stop()
        mpstat = busy_percent_from_mpstat(mp.stdout)
        print(f"{load:>7} | {spin_achieved:>8.2f} {probe:>7.2f} {probe - load:>+6.2f}"
              f" {procstat:>8.2f} | {off_achieved:>8.2f} {mpstat:>7.2f} {mpstat - load:>+6.2f} |"
              f" {procstat - mpstat:>+15.2f}", flush=True)


def stress_ops(seconds):
    out = subprocess.run(["stress-ng", "--cpu", "0", "--cpu-method", "int64", "-t", str(seconds),
                          "--metrics-brief"], capture_output=True, text=True)
    for line in (out.stdout + out.stderr).splitlines():
        m = re.search(r"\bcpu\s+(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)", line)
        if m:
            return float(m.group(2))  # bogo ops/s (real time)
    raise RuntimeError("no stress-ng metrics:\n" + out.stdout + out.stderr)


def cyclictest_p99(seconds):
    out = subprocess.run(["cyclictest", "-q", "-m", "-S", "-i", "1000", "-D", str(seconds),
                          "-h", "5000"], capture_output=True, text=True)
    counts = {}
    for line in out.stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split()
        if fields[0].isdigit():
            counts[int(fields[0])] = sum(int(x) for x in fields[1:])
    total = sum(counts.values())
    if total == 0:
        raise RuntimeError("no cyclictest histogram:\n" + out.stdout + out.stderr)
    seen = 0
    for us in sorted(counts):
        seen += counts[us]
        if seen >= 0.99 * total:
            return us
    return max(counts)


def cost(args, workdir):
    seconds = max(5, args.window // 3)
    print(f"\n== cost: stress-ng --cpu 0 (every CPU), {args.rounds} alternating rounds of"
          f" {seconds} s")
    ops = {"spin": [], "off": []}
    lat = {"spin": [], "off": []}
    taken = []
    ncpu = len(os.sched_getaffinity(0))
    for _ in range(args.rounds):
        for mode in ("off", "spin"):
            d = Daemon(args.monitord, mode, args.window, workdir)
            p0 = probe_seconds(d.proc.pid)
            t0 = time.monotonic()
            ops[mode].append(stress_ops(seconds))
            if mode == "spin":
                # The direct cost: the CPU time the probes got while the workload ran.
                taken.append(100 * (probe_seconds(d.proc.pid) - p0) /
                             ((time.monotonic() - t0) * ncpu))
            lat[mode].append(cyclictest_p99(max(5, args.window // 6)))
            d.stop()
    for mode in ("off", "spin"):
        mean = statistics.mean(ops[mode])
        sd = statistics.stdev(ops[mode]) if len(ops[mode]) > 1 else 0
        print(f"  probes {mode:>4}: bogo-ops/s {mean:9.1f} +- {sd:6.1f}"
              f" (runs {', '.join(f'{x:.0f}' for x in ops[mode])});"
              f" cyclictest p99 {statistics.median(lat[mode])} us"
              f" (runs {', '.join(str(x) for x in lat[mode])})")
    loss = 100.0 * (1 - statistics.mean(ops["spin"]) / statistics.mean(ops["off"]))
    print(f"  bogo-ops/s with the probes spinning: {-loss:+.2f} % (run-to-run spread above)")
    print(f"  CPU time the probes took from the workload: {statistics.mean(taken):.3f} % of the"
          f" CPUs (runs {', '.join(f'{x:.3f}' for x in taken)}); target under 1 %")


def probe_seconds(pid):
    return cpu_seconds(pid, False) - cpu_seconds(pid, True)


def cpu_seconds(pid, skip_probes):
    """CPU time of the process's threads in seconds, from schedstat (nanoseconds)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                runtime_ns = int(f.read().split()[0])
        except FileNotFoundError:
            continue
        if skip_probes and comm.startswith("idle-probe"):
            continue
        total += runtime_ns
    return total / 1e9


def overhead(args, workdir):
    print(f"\n== overhead: monitord over {args.window} s, probes spinning, no clients")
    d = Daemon(args.monitord, "spin", args.window, workdir)
    pid = d.proc.pid
    t0 = time.monotonic()
    c0 = cpu_seconds(pid, True)
    time.sleep(args.window)
    c1 = cpu_seconds(pid, True)
    t1 = time.monotonic()
    with open(f"/proc/{pid}/status") as f:
        hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
    d.stop()
    cpu = c1 - c0
    print(f"  CPU time without the probes: {cpu * 1000:.1f} ms in {t1 - t0:.1f} s ="
          f" {100 * cpu / (t1 - t0):.4f} % of one CPU (target under 0.1 %)")
    print(f"  peak RSS: {hwm / 1024:.1f} MiB (target under 8 MiB)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN"))
    p.add_argument("--duty-cycle", default=os.environ.get("DUTY_CYCLE_BIN"))
    p.add_argument("--window", type=int, default=60, help="seconds per measurement (60)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds for cost (3)")
    p.add_argument("--only", nargs="*", default=["accuracy", "cost", "overhead"])
    args = p.parse_args()
    if not args.monitord or not args.duty_cycle:
        p.error("give --monitord and --duty-cycle (or MONITORD_BIN and DUTY_CYCLE_BIN)")
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.only:
            {"accuracy": accuracy, "cost": cost, "overhead": overhead}[name](args, workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
