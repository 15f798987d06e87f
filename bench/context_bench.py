#!/usr/bin/env python3
"""The CPUs' context: what sampling it costs monitord, side by side with mpstat, in one run.

usage: context_bench.py [--monitord PATH] [--seconds S] [--rounds R] [--cpus N]

Phases of S seconds (default 20), in rounds (default 3) whose order rotates, on this machine:
  monitord          monitord with its defaults, asked for the per-CPU loading once a second
                    (GetLoading per_cpu)
  monitord-context  the same, asked for the context with it (GetLoading context and per_cpu,
                    as monctl loading --context --per-cpu --watch would)
  mpstat            mpstat -I ALL -P ALL 1 (sysstat: /proc/interrupts, /proc/softirqs and
                    /proc/stat read once a second), its output thrown away
For each, the CPU time of the process over the phase (its threads' run time, schedstat), in %
of one CPU, once it is up; the context's cost is monitord-context less monitord. The bench's
own calls are its cost, not monitord's.

Then the same two monitord phases on N synthetic CPUs (default 1024: /proc/stat written ten
times a second, /proc/interrupts with 60 sources, /proc/softirqs and /proc/schedstat as such a
machine has them, through --proc-root and --sys-root): the parsing's cost at that size. The
kernel's cost of printing those files for 1,024 CPUs is not in it (regular files here).

Exit status 0 when everything ran, 77 without mpstat, 1 when something failed.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from bench_support import Asker, Failed, Machine, Process, threads_seconds, wait_answering, write


def synthetic_context(proc, ncpu):
    """The context's files of an `ncpu` machine under `proc`, as their kernel prints them."""
    header = " " * 11 + "".join(f"CPU{c:<8}" for c in range(ncpu)) + "\n"
    rows = []
    for n in range(50):
        rows.append(f"{n:>4}:" + "".join(f" {(n * 7919 + c) % 100000:>10}" for c in range(ncpu)) +
                    f"  IR-PCI-MSI {n * 2048}-edge      nvme0q{n}\n")
    for name, what in (("NMI", "Non-maskable interrupts"), ("LOC", "Local timer interrupts"),
                       ("SPU", "Spurious interrupts"), ("PMI", "Performance monitoring interrupts"),
                       ("IWI", "IRQ work interrupts"), ("RES", "Rescheduling interrupts"),
                       ("CAL", "Function call interrupts"), ("TLB", "TLB shootdowns"),
                       ("TRM", "Thermal event interrupts")):
        rows.append(f"{name:>4}:" + "".join(f" {123456 + c:>10}" for c in range(ncpu)) +
                    f"   {what}\n")
    rows.append(" ERR:          0\n MIS:          0\n")
    write(os.path.join(proc, "interrupts"), header + "".join(rows))
    soft = " " * 20 + "".join(f"CPU{c:<8}" for c in range(ncpu)) + "\n"
    for kind in ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED",
                 "HRTIMER", "RCU"):
        soft += f"{kind:>12}:" + "".join(f" {654321 + c:>10}" for c in range(ncpu)) + "\n"
    write(os.path.join(proc, "softirqs"), soft)
    sched = "version 15\ntimestamp 4295000000\n"
    for c in range(ncpu):
        sched += f"cpu{c} 0 0 123456 45678 98765 43210 987654321098 12345678901 4567890\n"
        for d in range(3):
            sched += f"domain{d} {'f' * (ncpu // 4)} " + " ".join(["1234"] * 45) + "\n"
    write(os.path.join(proc, "schedstat"), sched)
    os.makedirs(os.path.join(proc, "pressure"), exist_ok=True)
    write(os.path.join(proc, "pressure/cpu"),
          "some avg10=1.00 avg60=2.00 avg300=3.00 total=123456789\n"
          "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


def phase(args, workdir, mode, roots=None):
    sock = None
    asker = None
    if mode == "mpstat":
        proc = Process("mpstat", ["mpstat", "-I", "ALL", "-P", "ALL", "1"], workdir)
    else:
        sock = os.path.join(workdir, mode + ".sock")
        argv = [args.monitord, "--socket", sock, "--log-level", "warning"]
        if roots:
            argv += ["--proc-root", roots[0], "--sys-root", roots[1]]
        proc = Process(mode, argv, workdir)
        wait_answering(proc, sock)
        asker = Asker(sock, {"per_cpu": True, "context": True} if mode.endswith("context")
                      else {"per_cpu": True}, "context")
    try:
        time.sleep(3)  # its start, and the context's first readings
        proc.check()
        t0, c0 = time.monotonic(), threads_seconds(proc.pid)
        time.sleep(args.seconds)
        wall, c1 = time.monotonic() - t0, threads_seconds(proc.pid)
        proc.check()
        return 100 * (c1 - c0) / wall
    finally:
        if asker:
            asker.stop()
        proc.stop()


def rounds(args, workdir, modes, roots=None):
    results = {m: [] for m in modes}
    for r in range(args.rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for m in order:
            results[m].append(phase(args, workdir, m, roots))
            print(f"  round {r + 1}: {m:<18} {results[m][-1]:7.3f} % of one CPU", flush=True)
    return {m: statistics.median(v) for m, v in results.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN", "monitord"))
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cpus", type=int, default=1024)
    args = p.parse_args()
    if shutil.which("mpstat") is None:
        print("SKIP: no mpstat (Debian's sysstat)")
        return 77
    with tempfile.TemporaryDirectory(prefix="monitord-context-bench-") as workdir:
        try:
            print(f"this machine ({os.cpu_count()} CPUs): {args.rounds} rounds of "
                  f"{args.seconds:.0f} s per phase", flush=True)
            here = rounds(args, workdir, ["monitord", "monitord-context", "mpstat"])
            machine = Machine(os.path.join(workdir, "synthetic"), args.cpus)
            try:
                synthetic_context(machine.proc, args.cpus)
                print(f"{args.cpus} synthetic CPUs", flush=True)
                big = rounds(args, workdir, ["monitord", "monitord-context"],
                             (machine.proc, machine.sys))
            finally:
                machine.stop()
        except Failed as e:
            print(f"FAILED: {e}")
            return 1
    print("\nmedian, in % of one CPU:")
    print(f"  this machine: monitord {here['monitord']:.3f}, with the context asked for "
          f"{here['monitord-context']:.3f} (the context: "
          f"{here['monitord-context'] - here['monitord']:+.3f}); mpstat -I ALL -P ALL 1 "
          f"{here['mpstat']:.3f}")
    print(f"  {args.cpus} synthetic CPUs: monitord {big['monitord']:.3f}, with the context "
          f"asked for {big['monitord-context']:.3f} (the context: "
          f"{big['monitord-context'] - big['monitord']:+.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
