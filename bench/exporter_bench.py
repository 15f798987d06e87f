#!/usr/bin/env python3
"""Prometheus export of CPU time: monitord with monitord-exporter against node_exporter.

usage: exporter_bench.py [--monitord PATH] [--exporter PATH] [--node-exporter PATH]
                         [--cpus 2,64,256,1024] [--seconds S] [--quiet S] [--no-gzip]
                         [--accept prometheus|text] [--no-exporter]

For each machine size N, a synthetic machine: a /proc/stat and a /sys/devices/system/cpu
tree of N CPUs in a temporary directory, the counters advanced once a second by a thread of
this script (USER_HZ 100: each CPU's states grow by 100 ticks a second; the last CPU is busy
all the time, every fourth CPU idle, the others in between). monitord runs on it with
--proc-root and --sys-root (--probe off, --watchdog none), monitord-exporter asks it over its
socket, and node_exporter reads the same tree with only its cpu collector. The stat file is
rewritten in place, in one write of the same length (fixed-width numbers): monitord keeps it
open and reads it again at each tick, so a file renamed over it would never be seen.

First, with nothing scraping, monitord's own CPU time over --quiet seconds (its tick cost).
Then both exporters are scraped once a second for --seconds, side by side in the same loop
(the order alternating), asking for gzip as Prometheus does unless --no-gzip, and with the
Accept header Prometheus sends (OpenMetrics preferred; each side answers in the format it
chooses, which the report names) or, with --accept text, for the text format 0.0.4 only.
Figures per N:
CPU time per scrape (the pipeline: monitord's and monitord-exporter's together; node_exporter
alone), body bytes (uncompressed) per scrape, p50 and p99 of the scrape latency. CPU time is
the threads' run time from /proc/PID/task/*/schedstat (nanoseconds), checked against utime +
stime of /proc/PID/stat, which also counts threads that exited.

Goals: the pipeline's CPU time per scrape at most half of node_exporter's at every N; its
cost per CPU about the same from one N to the next (at the largest N at most 1.5 times what
it is at the next smaller N of at least 64 CPUs); monitord's tick at 1024 CPUs under 0.1 % of
one CPU. A missed goal is reported, not an error: the exit status is 0 when everything ran,
77 when a program is missing, 1 when something failed to run.

--no-exporter leaves monitord-exporter out: monitord's tick cost and node_exporter's figures
only, for a build that does not have the exporter.
"""
import argparse
import gzip
import http.client
import os
import re
import socket
import statistics
import sys
import tempfile
import time

import varlink_call
from bench_support import (MONITORD_BUSY, NODE_BUSY, USER_HZ, Failed, Machine, Process,
                           cpu_delta, cpu_seconds)

TARGET_RATIO = 0.5
# The Accept header of Prometheus 2.x's scrapes, and the text format alone.
ACCEPT = {
    "prometheus": "application/openmetrics-text;version=1.0.0,"
                  "application/openmetrics-text;version=0.0.1;q=0.75,"
                  "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "text": "text/plain;version=0.0.4",
}
TARGET_LINEAR = 1.5
TARGET_TICK = 0.1  # percent of one CPU at 1024 CPUs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, check, proc, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        proc.check()
        try:
            result = check()
            if result:
                return result
        except (OSError, RuntimeError, http.client.HTTPException):
            pass
        if time.monotonic() > deadline:
            raise Failed(f"{what} within {timeout} s; its log:\n" + proc.tail())
        time.sleep(0.05)


# ---- scraping -----------------------------------------------------------------------------

class Scraper:
    def __init__(self, name, port, use_gzip, accept):
        self.name = name
        self.port = port
        self.use_gzip = use_gzip
        self.accept = accept
        self.content_type = None  # as the last answer said
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.latencies = []
        self.wire_bytes = []
        self.body_bytes = []

    def get(self):
        """One GET /metrics: (body text, seconds it took, bytes on the wire)."""
        headers = {"Accept": ACCEPT[self.accept]}
        if self.use_gzip:
            headers["Accept-Encoding"] = "gzip"
        for attempt in (0, 1):
            t0 = time.perf_counter()
            try:
                self.conn.request("GET", "/metrics", headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()  # a closed keep-alive connection: once more on a new one
                if attempt:
                    raise
                continue
            took = time.perf_counter() - t0
            if resp.status != 200:
                raise Failed(f"{self.name}: GET /metrics answered {resp.status}")
            self.content_type = resp.getheader("Content-Type", "")
            body = gzip.decompress(raw) if resp.getheader("Content-Encoding") == "gzip" else raw
            return body.decode(), took, len(raw)

    def scrape(self):
        text, took, wire = self.get()
        self.latencies.append(took)
        self.wire_bytes.append(wire)
        self.body_bytes.append(len(text.encode()))
        return text

    def close(self):
        self.conn.close()


SAMPLE = re.compile(r"^(\w+)\{([^}]*)\}\s+(\S+)", re.M)
LABEL = re.compile(r'(\w+)="([^"]*)"')


def cpu_seconds_of(text, metric, label, cpu):
    """{state: seconds} of one CPU from the samples of `metric` in an exposition."""
    out = {}
    for name, labels, value in SAMPLE.findall(text):
        if name != metric:
            continue
        lab = dict(LABEL.findall(labels))
        if lab.get("cpu", "").removeprefix("cpu") == str(cpu) and label in lab:
            out[lab[label]] = float(value)
    return out


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def monitord_totals(sock, cpu):
    reply = varlink_call.call(sock, "GetLoading", {"per_cpu": True, "totals": True})
    for c in reply.get("cpus") or []:
        if c["cpu"] == cpu and c.get("procstat") and c["procstat"].get("state_seconds"):
            return c["procstat"]["state_seconds"]
    raise Failed(f"monitord's GetLoading has no state_seconds for cpu{cpu}")


# ---- one machine size ---------------------------------------------------------------------

def run_size(args, ncpu, workdir):
    root = tempfile.mkdtemp(prefix=f"cpus{ncpu}-", dir=workdir)
    machine = Machine(root, ncpu)
    procs = []
    scrapers = []
    try:
        sock = os.path.join(root, "monitord.sock")
        monitord = Process(f"monitord-{ncpu}", [
            args.monitord, "--socket", sock, "--probe", "off", "--watchdog", "none",
            "--log-level", "warning", "--proc-root", machine.proc, "--sys-root", machine.sys],
            root)
        procs.append(monitord)
        status = wait_until("monitord answered no GetStatus",
                            lambda: varlink_call.call(sock, "GetStatus"), monitord)
        if len(status["cpus"]) != ncpu:
            raise Failed(f"monitord sees {len(status['cpus'])} CPUs, not {ncpu}")

        def sampled():
            p = varlink_call.call(sock, "GetLoading")["machine"].get("procstat")
            return p and p["samples"] >= 2
        wait_until("monitord took no two samples", sampled, monitord)

        # monitord alone, nothing asking it anything.
        c0, t0 = cpu_seconds(monitord.pid), time.monotonic()
        time.sleep(args.quiet)
        c1, t1 = cpu_seconds(monitord.pid), time.monotonic()
        monitord.check()
        tick_percent = 100 * cpu_delta(c0, c1) / (t1 - t0)

        node_port = free_port()
        node = Process(f"node_exporter-{ncpu}", [
            args.node_exporter, "--collector.disable-defaults", "--collector.cpu",
            "--path.procfs", machine.proc, "--path.sysfs", machine.sys,
            "--web.listen-address", f"127.0.0.1:{node_port}"], root)
        procs.append(node)
        targets = [("node_exporter", node,
                    Scraper("node_exporter", node_port, args.gzip, args.accept))]
        if not args.no_exporter:
            exp_port = free_port()
            exporter = Process(f"monitord-exporter-{ncpu}", [
                args.exporter, "--listen", f"127.0.0.1:{exp_port}", "--socket", sock], root)
            procs.append(exporter)
            targets.insert(0, ("monitord-exporter", exporter,
                               Scraper("monitord-exporter", exp_port, args.gzip, args.accept)))
        scrapers = [s for _, _, s in targets]
        # Up, and one scrape each that does not count (first-time allocations).
        for name, proc, scraper in targets:
            wait_until(f"{name} served no /metrics", lambda s=scraper: s.get(), proc)
        time.sleep(0.5)

        busy_cpu = ncpu - 1
        m_before = monitord_totals(sock, busy_cpu)
        mt0 = time.monotonic()
        cpu0 = {name: cpu_seconds(proc.pid) for name, proc, _ in targets}
        cpu0["monitord"] = cpu_seconds(monitord.pid)
        first, last = {}, {}
        start = time.monotonic()
        for i in range(args.seconds):
            delay = start + i - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            order = targets if i % 2 == 0 else targets[::-1]
            for name, proc, scraper in order:
                when = time.monotonic()
                text = scraper.scrape()
                if i == 0:
                    first[name] = (when, text)
                elif i == args.seconds - 1:
                    last[name] = (when, text)
        cpu1 = {name: cpu_seconds(proc.pid) for name, proc, _ in targets}
        cpu1["monitord"] = cpu_seconds(monitord.pid)
        mt1 = time.monotonic()
        m_after = monitord_totals(sock, busy_cpu)
        for p in procs:
            p.check()
        if machine.error:
            raise Failed(machine.error)
    finally:
        for s in scrapers:
            s.close()
        for p in reversed(procs):
            p.stop()
        machine.stop()

    n = args.seconds
    used = {name: cpu_delta(cpu0[name], cpu1[name]) for name in cpu0}
    result = {"ncpu": ncpu, "tick_percent": tick_percent, "scrapes": n, "rows": {}}
    for name, _, scraper in targets:
        result["rows"][name] = {
            "cpu_ms": 1000 * used[name] / n,
            "bytes": statistics.mean(scraper.body_bytes),
            "wire": statistics.mean(scraper.wire_bytes),
            "p50": 1000 * percentile(scraper.latencies, 50),
            "p99": 1000 * percentile(scraper.latencies, 99),
            "format": scraper.content_type.split(";")[0],
        }
    # monitord's share of the pipeline: all its CPU time while scraped, the ticks included,
    # since node_exporter reads /proc/stat itself at each scrape.
    result["monitord_ms"] = 1000 * used["monitord"] / n
    if "monitord-exporter" in result["rows"]:
        result["rows"]["monitord-exporter"]["exporter_ms"] = \
            result["rows"]["monitord-exporter"]["cpu_ms"]
        result["rows"]["monitord-exporter"]["cpu_ms"] += result["monitord_ms"]

    # The same machine? The busy CPU's busy seconds a second, as each one reports it.
    rates = {"written": machine.busy_rate(busy_cpu)}
    rates["monitord (varlink totals)"] = (
        sum(m_after[s] for s in MONITORD_BUSY) - sum(m_before[s] for s in MONITORD_BUSY)) \
        / (mt1 - mt0)
    for name, metric, label, busy in (
            ("node_exporter", "node_cpu_seconds_total", "mode", NODE_BUSY),
            ("monitord-exporter", "monitord_cpu_seconds_total", "mode", MONITORD_BUSY)):
        if name not in first or name not in last:
            continue
        (ta, a), (tb, b) = first[name], last[name]
        sa = cpu_seconds_of(a, metric, label, busy_cpu)
        sb = cpu_seconds_of(b, metric, label, busy_cpu)
        if not sa or not sb:
            raise Failed(f"{name}'s scrape has no {metric} of cpu {busy_cpu}")
        rates[name] = (sum(sb.get(s, 0) for s in busy) - sum(sa.get(s, 0) for s in busy)) \
            / (tb - ta)
    result["busy_cpu"] = busy_cpu
    result["rates"] = rates
    return result


# ---- report -------------------------------------------------------------------------------

def report(args, results):
    pipeline = "monitord-exporter"
    print(f"\n== exporter: {args.seconds} scrapes a second apart per size, gzip "
          f"{'asked' if args.gzip else 'not asked'}, Accept as {args.accept} asks; monitord's "
          f"tick measured over {args.quiet} s unscraped")
    for r in results:
        print(f"\n{r['ncpu']} CPUs: monitord's tick {r['tick_percent']:.4f} % of one CPU; "
              f"monitord while scraped {r['monitord_ms']:.3f} ms a scrape")
        print(f"  {'':<26} {'CPU ms/scrape':>13} {'per CPU us':>10} {'body bytes':>10}"
              f" {'wire bytes':>10} {'p50 ms':>7} {'p99 ms':>7}")
        for name, row in r["rows"].items():
            label = "monitord + exporter" if name == pipeline else name
            print(f"  {label:<26} {row['cpu_ms']:>13.3f} {1000 * row['cpu_ms'] / r['ncpu']:>10.3f}"
                  f" {row['bytes']:>10.0f} {row['wire']:>10.0f} {row['p50']:>7.2f}"
                  f" {row['p99']:>7.2f}  {row['format']}")
            if name == pipeline:
                print(f"  {'  of which the exporter':<26} {row['exporter_ms']:>13.3f}")
        print(f"  busy seconds a second of cpu{r['busy_cpu']}: " + ", ".join(
            f"{k} {v:.3f}" for k, v in r["rates"].items()))

    print("\n== goals")
    if any(pipeline in r["rows"] for r in results):
        ok = True
        for r in results:
            p = r["rows"][pipeline]["cpu_ms"]
            ne = r["rows"]["node_exporter"]["cpu_ms"]
            ratio = p / ne if ne else float("inf")
            ok = ok and ratio <= TARGET_RATIO
            print(f"  {r['ncpu']:>5} CPUs: pipeline {p:.3f} ms, node_exporter {ne:.3f} ms a"
                  f" scrape: {ratio:.2f} of it")
        print(f"  {'PASS' if ok else 'FAIL'}: pipeline CPU per scrape at most"
              f" {TARGET_RATIO:.1f} of node_exporter's at every size")
        linear(results, pipeline)
    else:
        print("  (no monitord-exporter: the pipeline's goals are not measured)")
        linear(results, "node_exporter")
    at = [r for r in results if r["ncpu"] == 1024]
    if at:
        t = at[0]["tick_percent"]
        print(f"  {'PASS' if t < TARGET_TICK else 'FAIL'}: monitord's tick at 1024 CPUs"
              f" {t:.4f} % of one CPU (goal under {TARGET_TICK} %)")
    else:
        print("  (1024 CPUs not run: the tick goal is not measured)")


def linear(results, name):
    """Cost per CPU at each size, and whether the largest size's is near the one before."""
    label = "pipeline" if name == "monitord-exporter" else name
    per = [(r["ncpu"], 1000 * r["rows"][name]["cpu_ms"] / r["ncpu"]) for r in results]
    print(f"  {label} CPU per scrape per CPU: " +
          ", ".join(f"{n} CPUs {us:.3f} us" for n, us in per))
    big = sorted((n, us) for n, us in per if n >= 64)
    if len(big) < 2:
        print("  (fewer than two sizes of 64 CPUs or more: linearity is not judged)")
        return
    (n1, a), (n2, b) = big[-2], big[-1]
    ok = b <= TARGET_LINEAR * a
    print(f"  {'PASS' if ok else 'FAIL'}: {label} cost about linear in CPUs: per CPU at {n2}"
          f" {b / a:.2f} times that at {n1} (goal at most {TARGET_LINEAR})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN"))
    p.add_argument("--exporter", default=os.environ.get("MONITORD_EXPORTER_BIN"))
    p.add_argument("--node-exporter", default=os.environ.get(
        "NODE_EXPORTER_BIN", "/usr/bin/prometheus-node-exporter"))
    p.add_argument("--cpus", default="2,64,256,1024", help="machine sizes (2,64,256,1024)")
    p.add_argument("--seconds", type=int, default=60, help="scrapes per size, one a second (60)")
    p.add_argument("--quiet", type=int, default=30,
                   help="seconds of monitord unscraped per size, for its tick cost (30)")
    p.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=True,
                   help="ask for gzip as Prometheus does (default yes)")
    p.add_argument("--accept", choices=sorted(ACCEPT), default="prometheus",
                   help="the Accept header: Prometheus's own (prometheus), or text 0.0.4 only")
    p.add_argument("--no-exporter", action="store_true",
                   help="leave monitord-exporter out: tick cost and node_exporter only")
    args = p.parse_args()
    try:
        sizes = [int(x) for x in args.cpus.split(",")]
    except ValueError:
        p.error("--cpus takes numbers separated by commas, e.g. 2,64,256,1024")
    if not sizes or min(sizes) < 1 or args.seconds < 2 or args.quiet < 1:
        p.error("give at least one size of 1 CPU or more, --seconds 2 or more, --quiet 1 or more")
    if not args.monitord:
        p.error("give --monitord (or MONITORD_BIN)")
    for what, path in (("monitord", args.monitord), ("node_exporter", args.node_exporter)) + (
            () if args.no_exporter else (("monitord-exporter", args.exporter),)):
        if not path or not os.access(path, os.X_OK):
            hint = " (Debian's prometheus-node-exporter)" if what == "node_exporter" else ""
            print(f"SKIP: {what}{hint} is not there: {path or 'no path given'}")
            return 77

    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="monitord-exporter-bench-") as workdir:
            for n in sizes:
                print(f"{n} CPUs ...", flush=True)
                results.append(run_size(args, n, workdir))
    except Failed as e:
        print(f"ERROR: {e}")
        return 1
    report(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
