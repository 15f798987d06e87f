#!/usr/bin/env python3
"""monitord's profiles side by side with Debian's `perf record` (linux-perf).

usage: profile_bench.py [--monitord PATH] [--monctl PATH] [--burner PATH] [--perf PATH]
                        [--rounds N] [--work ROUNDS] [--threads N] [--freq HZ] [--call-graph]

Needs root (the daemon samples another process) and perf in PATH. The paths default to
$MONITORD_BIN, $MONCTL_BIN and $PROFILE_BURNER_BIN; meson runs it as
`meson test -C build --benchmark profile --verbose`. The bench starts its own monitord on a
temporary socket with --probe off, so that the idle probes' CPU time stays out of the
figures.

The workload is a fixed amount of work (`bench-profile-burner --work ROUNDS THREADS`: two
functions adding 3:1, on THREADS threads), which prints its own wall and CPU time. Each round
runs it, in turn:
  alone     without sampling;
  monctl    `monctl perf profile -F HZ -- burner ...`: the daemon samples it from its exec to
            its exit and names its functions as it goes;
  perf      `perf record -F HZ -o FILE -- burner ...`, then `perf report --stdio` on FILE,
            which names the functions afterwards.
Figures per tool (medians over the rounds):
  slowdown  the workload's wall time against the same round's run alone;
  cost      the sampler's own CPU time: for monctl, the daemon's CPU time across the run (from
            /proc/PID/stat) plus monctl's own (wait4, less the workload's); for perf, perf
            record's own (wait4, less the workload's), and perf report's.
The kernel's work at each sample (the timer interrupt and the ring write) is charged to the
sampled workload, the same for both tools at the same frequency. Target: monitord's cost no
more than perf record's plus perf report's (what it takes perf to say the same), and a
slowdown no worse than perf's. About a minute with the defaults.
With --call-graph, both record call chains (`monctl perf profile -g`, `perf record -g`; the
burner has frame pointers), and perf report shows them.
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

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_timed(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL):
    """Runs argv: (its stdout, its own and its children's CPU seconds, its exit status)."""
    p = subprocess.Popen(argv, stdout=stdout, stderr=stderr, text=True)
    out = p.stdout.read() if stdout == subprocess.PIPE else ""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return out, usage.ru_utime + usage.ru_stime, p.returncode


def workload_times(out):
    """The burner's own "wall cpu" line."""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                return float(parts[0]), float(parts[1])
            except ValueError:
                pass
    raise RuntimeError(f"no times from the workload: {out!r}")


def start_daemon(monitord, socket):
    daemon = subprocess.Popen([monitord, "--socket", socket, "--probe", "off", "--watchdog",
                               "none"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(socket):
            return daemon
        time.sleep(0.1)
    daemon.kill()
    raise RuntimeError("monitord did not make its socket")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--monitord", default=os.environ.get("MONITORD_BIN"))
    ap.add_argument("--monctl", default=os.environ.get("MONCTL_BIN"))
    ap.add_argument("--burner", default=os.environ.get("PROFILE_BURNER_BIN"))
    ap.add_argument("--perf", default=shutil.which("perf"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=int, default=1500, help="rounds of work per thread")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--freq", type=int, default=4000)
    ap.add_argument("--call-graph", action="store_true", help="with call chains (-g)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: the daemon samples another process: run as root")
        return 77
    if not args.perf:
        print("SKIP: no perf in PATH (Debian's linux-perf)")
        return 77
    for name in ("monitord", "monctl", "burner"):
        if not getattr(args, name):
            print(f"--{name} or its environment variable is needed")
            return 2

    tmp = tempfile.mkdtemp(prefix="profile-bench-")
    socket = os.path.join(tmp, "io.monitord.Monitor")
    data = os.path.join(tmp, "perf.data")
    daemon = start_daemon(args.monitord, socket)
    work = [args.burner, "--work", str(args.work), str(args.threads)]
    hz = str(args.freq)
    g = ["-g"] if args.call_graph else []
    rows = {"alone": [], "monctl": [], "perf": []}
    try:
        for r in range(1, args.rounds + 1):
            out, _, _ = run_timed(work)
            alone_wall, alone_cpu = workload_times(out)
            rows["alone"].append((alone_wall, 0.0, 0.0))

            before = process_cpu(daemon.pid)
            out, cpu, code = run_timed(
                [args.monctl, "--socket", socket, "perf", "profile", "-F", hz, "-n", "3"] + g
                + ["--"] + work)
            daemon_cpu = process_cpu(daemon.pid) - before
            if code != 0:
                raise RuntimeError(f"monctl perf profile exited with {code}")
            wall, wcpu = workload_times(out)
            rows["monctl"].append((wall, daemon_cpu + (cpu - wcpu), 0.0))

            out, cpu, code = run_timed([args.perf, "record", "-q", "-F", hz, "-o", data] + g
                                       + ["--"] + work)
            if code != 0:
                raise RuntimeError(f"perf record exited with {code}")
            wall, wcpu = workload_times(out)
            _, report_cpu, code = run_timed([args.perf, "report", "-i", data, "--stdio",
                                             "--sort", "sym"])
            rows["perf"].append((wall, cpu - wcpu, report_cpu))
            print(f"round {r}: alone {alone_wall:.3f} s; "
                  f"monctl {rows['monctl'][-1][0]:.3f} s, sampler {rows['monctl'][-1][1]*1e3:.0f} ms; "
                  f"perf {wall:.3f} s, record {rows['perf'][-1][1]*1e3:.0f} ms + report "
                  f"{report_cpu*1e3:.0f} ms", flush=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)

    alone = statistics.median(w for w, _, _ in rows["alone"])
    print(f"\n{args.threads} threads x {args.work} rounds of work at {args.freq} Hz"
          f"{', with call chains' if args.call_graph else ''}, median of {args.rounds} rounds; "
          f"the workload alone: {alone:.3f} s")
    print(f"{'tool':<8} {'wall s':>8} {'slowdown':>9} {'sampler CPU ms':>15} {'report CPU ms':>14}")
    figures = {}
    for tool in ("monctl", "perf"):
        wall = statistics.median(w for w, _, _ in rows[tool])
        cost = statistics.median(c for _, c, _ in rows[tool])
        report = statistics.median(p for _, _, p in rows[tool])
        figures[tool] = (wall, cost + report)
        print(f"{tool:<8} {wall:8.3f} {100 * (wall / alone - 1):8.1f}% {cost * 1e3:15.0f} "
              f"{report * 1e3:14.0f}")
    ok_cost = figures["monctl"][1] <= figures["perf"][1]
    ok_wall = figures["monctl"][0] <= figures["perf"][0] * 1.02
    print(f"monitord's cost {'within' if ok_cost else 'ABOVE'} perf record + report's "
          f"({figures['monctl'][1] * 1e3:.0f} against {figures['perf'][1] * 1e3:.0f} ms); "
          f"slowdown {'no worse than' if ok_wall else 'WORSE than'} perf's (2 % allowed for "
          f"noise)")
    return 0 if ok_cost and ok_wall else 1


if __name__ == "__main__":
    sys.exit(main())
