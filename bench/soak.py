#!/usr/bin/env python3
"""Soak: monitord under 50 clients for an hour (or --seconds), its resources sampled.

usage: soak.py [--monitord PATH] [--seconds S] [--clients N] [--sample S] [--warmup S]
               [--kill-every S] [--workdir DIR]

monitord runs as the test's user on a socket of its own (spinning idle probes, no watchdog),
and N client processes (50 by default) call it without pause until the end:
  oneshot     GetLoading with random options (per CPU, history, states, totals), on a new
              connection or on the one before
  status      GetStatus
  stream      GetLoading with "more": 3 to 30 ticks of it, then the connection closed
  counters    counter sessions: CollectCounters with an interval ("more"), or StartCounters,
              ReadCounters and StopCounters on one connection; a session at a time is
              counted, so most are refused with PerfRunning (a valid reply); refused with
              PermissionDenied when monitord is not root
  abandon     a streamed or one-shot GetLoading of everything, of whose reply only a few
              bytes are read before the connection is closed
  never_read  a streamed GetLoading of everything, on a small receive buffer, never read,
              held for 10 to 40 s
and one observer of the tick: a stream of GetLoading, each reply's timestamp and arrival kept
(but the first's, which comes at once with the last tick's figures).
Every --kill-every seconds (3) a client other than the observer is killed (SIGKILL) and
another of its kind started.

Every reply is checked (the NUL framing, JSON, the fields of its method, the daemon's pid and
CPUs, timestamps a second apart in a stream); anything else is an invalid reply. Every
--sample seconds (10) monitord's RSS, open descriptors and threads are read from /proc.

Goals, each a failure when missed (exit status 1): no invalid reply; monitord's RSS at the
end of the run at most 1 MiB above what it was at the end of the warm-up (--warmup, default
a fifth of the run, at most 300 s; the median of three samples each); its descriptors and
threads, once the clients are gone, what they were before they came; the loading tick never
late by more than 100 ms by the daemon's timestamps; its replies to the observer late by at
most 100 ms at the 99th percentile and never by 500 ms (an arrival also waits for the
observer process to be scheduled among the busy clients: its lateness is printed in full). A
StartCounters session outlives its connection (monctl perf start, then stop): the counters
clients sometimes stop the one another left running, and the harness stops the last.
The figures are printed either way. 77 when monitord cannot be found.
"""
import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

INTERFACE = "io.monitord.Monitor."
LATE_LIMIT = 0.100  # seconds
ARRIVAL_STALL = 0.500  # seconds
RSS_LIMIT = 1024  # KiB
KINDS = ("oneshot", "status", "stream", "counters", "abandon", "never_read")
# The share of each kind among the clients (the observer is one more).
MIX = {"oneshot": 12, "status": 8, "stream": 8, "counters": 5, "abandon": 8, "never_read": 8}
COUNTER_EVENTS = "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES,perf::PAGE-FAULTS"
# Errors a client may be given: another session counts (one at a time), or monitord may not
# count at all (not root, or perf_event_paranoid).
COUNTER_ERRORS = {INTERFACE + "PerfRunning", INTERFACE + "PermissionDenied",
                  INTERFACE + "NoPmu"}


def someone_else(err, p):
    """The error of a call on a session another client has ended (PerfNotRunning), or
    replaced by a CollectCounters of its own (which only it, or its duration, ends)."""
    return err == INTERFACE + "PerfNotRunning" or (
        err == INTERFACE + "CounterFailure" and p.get("status") == "BADSTATE")


class Invalid(Exception):
    """A reply that is not what the interface says."""


# ---- the clients ---------------------------------------------------------------------------

class Connection:
    def __init__(self, path, rcvbuf=None):
        self.sock = socket.socket(socket.AF_UNIX)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(path)
        self.buf = b""

    def send(self, method, params=None, more=False):
        msg = {"method": INTERFACE + method, "parameters": params or {}}
        if more:
            msg["more"] = True
        self.sock.sendall(json.dumps(msg).encode() + b"\0")

    def reply(self, method):
        """The next reply, checked as a varlink message: (parameters, error name or None,
        continues)."""
        while b"\0" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise Invalid(f"{method}: the connection closed before a reply "
                              f"({len(self.buf)} bytes of one)")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        try:
            msg = json.loads(raw)
        except ValueError as e:
            raise Invalid(f"{method}: not JSON ({e}): {raw[:200]!r}")
        if not isinstance(msg, dict) or not isinstance(msg.get("parameters", {}), dict):
            raise Invalid(f"{method}: not a varlink reply: {raw[:200]!r}")
        return msg.get("parameters", {}), msg.get("error"), bool(msg.get("continues"))

    def close(self):
        self.sock.close()


def need(cond, what):
    if not cond:
        raise Invalid(what)


def check_loading(p, opts, ncpu):
    need(isinstance(p.get("window_seconds"), int), f"GetLoading: no window_seconds: {p}")
    need(isinstance(p.get("machine"), dict), f"GetLoading: no machine: {p}")
    need(isinstance(p.get("timestamp"), int), f"GetLoading: no timestamp: {p}")
    if opts.get("per_cpu"):
        need(isinstance(p.get("cpus"), list) and len(p["cpus"]) == ncpu,
             f"GetLoading: per_cpu asked, {ncpu} CPUs expected: {p.get('cpus')}")


class Client:
    def __init__(self, kind, path, ncpu, pid, log):
        self.kind, self.path, self.ncpu, self.pid = kind, path, ncpu, pid
        self.log = log
        self.calls = self.refused = 0
        self.last_count = time.monotonic()
        self.conn = None

    def note(self, line):
        self.log.write(line + "\n")
        self.log.flush()

    def count(self, refused=False):
        self.calls += 1
        self.refused += refused
        if time.monotonic() - self.last_count > 5:
            self.flush_count()

    def flush_count(self):
        self.note(f"COUNT {os.getpid()} {self.kind} {self.calls} {self.refused}")
        self.last_count = time.monotonic()

    def loading_opts(self, everything=False):
        return {k: everything or random.random() < 0.5
                for k in ("per_cpu", "history", "states", "totals")}

    def oneshot(self):
        if self.conn is None or random.random() < 0.5:
            if self.conn:
                self.conn.close()
            self.conn = Connection(self.path)
        opts = self.loading_opts()
        self.conn.send("GetLoading", opts)
        p, err, _ = self.conn.reply("GetLoading")
        need(err is None, f"GetLoading: error {err}: {p}")
        check_loading(p, opts, self.ncpu)
        self.count()
        time.sleep(random.uniform(0.02, 0.3))

    def status(self):
        c = Connection(self.path)
        c.send("GetStatus")
        p, err, _ = c.reply("GetStatus")
        c.close()
        need(err is None, f"GetStatus: error {err}: {p}")
        need(p.get("pid") == self.pid, f"GetStatus: pid {p.get('pid')}, not {self.pid}")
        need(p.get("state") == "running", f"GetStatus: state {p.get('state')}")
        need(isinstance(p.get("version"), str) and len(p.get("cpus", [])) == self.ncpu,
             f"GetStatus: {p}")
        self.count()
        time.sleep(random.uniform(0.05, 0.5))

    def stream(self):
        c = Connection(self.path)
        opts = self.loading_opts()
        c.send("GetLoading", opts, more=True)
        last = None
        for _ in range(random.randint(3, 30)):
            p, err, continues = c.reply("GetLoading")
            need(err is None, f"GetLoading more: error {err}: {p}")
            need(continues, "GetLoading more: a reply without continues")
            check_loading(p, opts, self.ncpu)
            if last is not None:
                step = (p["timestamp"] - last) / 1e6
                # The first reply is the last tick's; a second apart from then on.
                need(0.5 < step < 1.5, f"GetLoading more: replies {step:.3f} s apart")
            last = p["timestamp"]
            self.count()
        c.close()

    def counters(self):
        c = Connection(self.path)
        request = {"events": COUNTER_EVENTS, "target": {"kind": random.choice(["all", "each"])}}
        if random.random() < 0.5:
            c.send("CollectCounters", {"request": request, "duration_ms": 1000,
                                       "interval_ms": 200}, more=True)
            while True:
                p, err, continues = c.reply("CollectCounters")
                if err in COUNTER_ERRORS:
                    self.count(refused=True)
                    break
                need(err is None, f"CollectCounters: error {err}: {p}")
                need(isinstance(p.get("report", {}).get("events"), list),
                     f"CollectCounters: no report: {p}")
                self.count()
                if not continues:
                    need(p["report"].get("final"), "CollectCounters: last report not final")
                    break
        else:
            c.send("StartCounters", {"request": request})
            p, err, _ = c.reply("StartCounters")
            if err in COUNTER_ERRORS:
                self.count(refused=True)
                if err == INTERFACE + "PerfRunning" and random.random() < 0.3:
                    # The session another client started, and maybe left running: StartCounters
                    # sessions outlive their connection (monctl perf start, then stop).
                    c.send("StopCounters")
                    p, err, _ = c.reply("StopCounters")
                    need(err is None or someone_else(err, p), f"StopCounters: error {err}: {p}")
                    self.count()
            else:
                need(err is None and "plan" in p, f"StartCounters: error {err}: {p}")
                self.count()
                for _ in range(random.randint(0, 4)):
                    time.sleep(random.uniform(0.05, 0.3))
                    c.send("ReadCounters")
                    p, err, _ = c.reply("ReadCounters")
                    if someone_else(err, p):
                        break
                    need(err is None and "report" in p, f"ReadCounters: error {err}: {p}")
                    self.count()
                if random.random() < 0.8:  # else it runs on after the connection
                    c.send("StopCounters")
                    p, err, _ = c.reply("StopCounters")
                    need((err is None and p.get("report", {}).get("final"))
                         or someone_else(err, p), f"StopCounters: error {err}: {p}")
                    self.count()
        c.close()
        time.sleep(random.uniform(0.05, 0.5))

    def abandon(self):
        c = Connection(self.path)
        c.send("GetLoading", self.loading_opts(everything=True), more=random.random() < 0.5)
        c.sock.recv(random.randint(1, 200))
        c.close()
        self.count()
        time.sleep(random.uniform(0.1, 1.0))

    def never_read(self):
        c = Connection(self.path, rcvbuf=4096)
        c.send("GetLoading", self.loading_opts(everything=True), more=True)
        self.count()
        time.sleep(random.uniform(10, 40))
        c.close()

    def observe(self):
        """Every tick of a stream: its arrival (monotonic) and timestamp (the daemon's)."""
        c = Connection(self.path)
        c.send("GetLoading", {}, more=True)
        while True:
            p, err, continues = c.reply("GetLoading")
            arrived = time.monotonic()
            need(err is None and continues, f"GetLoading more: {err}: {p}")
            self.note(f"TICK {arrived:.6f} {p['timestamp']}")

    def run(self):
        step = getattr(self, self.kind)
        while True:
            try:
                step()
            except Invalid as e:
                self.note(f"INVALID {self.kind}: {e}")
                self.conn = None
            except OSError as e:
                # The daemon may close a connection it finds too slow (never_read); any
                # other kind is told nothing but by a reply.
                if self.kind != "never_read":
                    self.note(f"INVALID {self.kind}: {type(e).__name__}: {e}")
                self.conn = None
                time.sleep(0.1)


def stop_client(*_):
    raise SystemExit(0)


def client_main(args):
    signal.signal(signal.SIGTERM, stop_client)
    random.seed(args.seed)
    with open(args.log, "a") as log:
        c = Client(args.client, args.socket, args.ncpu, args.pid, log)
        try:
            c.run()
        finally:
            c.flush_count()
    return 0


# ---- the harness ---------------------------------------------------------------------------

class Failed(Exception):
    pass


def sample(pid):
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.split()
    with open(f"/proc/{pid}/schedstat") as f:  # the main loop's thread: run, wait, slices
        waited = int(f.read().split()[1]) / 1e9
    return {"rss": int(status["VmRSS"][0]), "threads": int(status["Threads"][0]),
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "waited": waited}


def settled(pid):
    """sample(), with the fewest descriptors seen over a second: right after a call the daemon
    may still hold its connection (it closes it when it reads the end), and a tick opens
    files for a moment."""
    s = sample(pid)
    for _ in range(10):
        time.sleep(0.1)
        s["fds"] = min(s["fds"], len(os.listdir(f"/proc/{pid}/fd")))
    return s


def call(path, method, params=None):
    c = Connection(path)
    c.send(method, params)
    p, err, _ = c.reply(method)
    c.close()
    if err:
        raise Failed(f"{method}: {err}: {p}")
    return p


def lateness(ticks):
    """How late each tick was, in seconds: the offsets from a one-second grid, measured from
    the earliest. A tick missed altogether shows as a gap."""
    ticks = ticks[1:]  # the first reply of a stream comes at once, with the last tick's
    if len(ticks) < 2:
        return [], []
    start = ticks[0]
    offsets = [(t - start) - round(t - start) for t in ticks]
    base = min(offsets)
    gaps = [b - a for a, b in zip(ticks, ticks[1:]) if b - a > 1 + LATE_LIMIT]
    return [o - base for o in offsets], gaps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--monitord", default=os.environ.get("MONITORD_BIN", "monitord"))
    p.add_argument("--seconds", type=float, default=3600)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--sample", type=float, default=10)
    p.add_argument("--warmup", type=float)
    p.add_argument("--kill-every", type=float, default=3)
    p.add_argument("--workdir", help="keep the logs (monitord's, the clients', the ticks') "
                   "in this directory")
    p.add_argument("--client", choices=KINDS + ("observe",), help=argparse.SUPPRESS)
    p.add_argument("--socket", help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--ncpu", type=int, help=argparse.SUPPRESS)
    p.add_argument("--pid", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.client:
        return client_main(args)
    if not os.path.exists(args.monitord) and not any(
            os.path.exists(os.path.join(d, args.monitord))
            for d in os.environ.get("PATH", "").split(":")):
        print(f"SKIP: no monitord at {args.monitord} (set MONITORD_BIN or --monitord)")
        return 77
    warmup = args.warmup if args.warmup is not None else min(300.0, args.seconds / 5)
    with tempfile.TemporaryDirectory(prefix="monitord-soak-") as tmp:
        if args.workdir:
            os.makedirs(args.workdir, exist_ok=True)
            tmp = args.workdir
        try:
            return soak(args, warmup, tmp)
        except Failed as e:
            print(f"FAILED: {e}")
            return 1


def soak(args, warmup, tmp):
    sock = os.path.join(tmp, "monitord.sock")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "MONITORD_SOCKET")}
    daemon_log = os.path.join(tmp, "monitord.log")
    daemon = subprocess.Popen([args.monitord, "--socket", sock, "--watchdog", "none",
                               "--log-level", "warning"], stdin=subprocess.DEVNULL,
                              stdout=open(daemon_log, "w"), stderr=subprocess.STDOUT, env=env)

    def daemon_tail():
        with open(daemon_log) as f:
            return "".join(f.readlines()[-20:])

    def check_daemon():
        if daemon.poll() is not None:
            raise Failed(f"monitord exited with status {daemon.returncode}:\n{daemon_tail()}")

    clients = {}
    try:
        deadline = time.monotonic() + 30
        while True:
            check_daemon()
            try:
                if call(sock, "GetLoading").get("timestamp") is not None:
                    break
            except (OSError, Invalid):
                pass
            if time.monotonic() > deadline:
                raise Failed("monitord did not answer with a tick within 30 s")
            time.sleep(0.2)
        status = call(sock, "GetStatus")
        ncpu = len(status["cpus"])
        before = settled(daemon.pid)
        log = os.path.join(tmp, "clients.log")
        open(log, "w").close()
        seed = [0]

        def spawn(kind):
            seed[0] += 1
            proc = subprocess.Popen(
                [sys.executable, __file__, "--client", kind, "--socket", sock, "--log", log,
                 "--seed", str(seed[0]), "--ncpu", str(ncpu), "--pid", str(daemon.pid)],
                stdin=subprocess.DEVNULL)
            clients[proc.pid] = (kind, proc)

        total = sum(MIX.values())
        kinds = [k for k in KINDS for _ in range(round(MIX[k] * (args.clients - 1) / total))]
        kinds = (kinds * 2)[:args.clients - 1]
        observer = subprocess.Popen(
            [sys.executable, __file__, "--client", "observe", "--socket", sock, "--log",
             os.path.join(tmp, "ticks.log"), "--ncpu", str(ncpu), "--pid", str(daemon.pid)],
            stdin=subprocess.DEVNULL)
        for k in kinds:
            spawn(k)
        print(f"monitord {status['version']} (pid {daemon.pid}, {ncpu} CPUs, "
              f"{'root' if os.geteuid() == 0 else 'not root'}): {len(kinds)} clients "
              f"({', '.join(f'{kinds.count(k)} {k}' for k in KINDS)}) and a tick observer, "
              f"for {args.seconds:.0f} s; warm-up {warmup:.0f} s", flush=True)
        print(f"before the clients: RSS {before['rss']} KiB, {before['fds']} descriptors, "
              f"{before['threads']} threads", flush=True)

        start = time.monotonic()
        samples, kills = [], 0
        next_sample, next_kill = start + args.sample, start + args.kill_every
        while (now := time.monotonic()) < start + args.seconds:
            check_daemon()
            if observer.poll() is not None:
                raise Failed("the tick observer exited: its stream ended")
            if now >= next_kill:
                victims = [pid for pid, (_, proc) in clients.items() if proc.poll() is None]
                pid = random.choice(victims)
                kind, proc = clients.pop(pid)
                proc.kill()
                proc.wait()
                kills += 1
                spawn(kind)
                next_kill += args.kill_every
            if now >= next_sample:
                s = sample(daemon.pid)
                s["t"] = now - start
                samples.append(s)
                print(f"{s['t']:6.0f} s  RSS {s['rss']} KiB  {s['fds']} descriptors  "
                      f"{s['threads']} threads", flush=True)
                next_sample += args.sample
            time.sleep(max(0.0, min(next_kill, next_sample) - time.monotonic()))

        for pid, (kind, proc) in clients.items():
            proc.terminate()
        observer.terminate()
        for pid, (kind, proc) in clients.items():
            proc.wait()
        observer.wait()
        clients.clear()
        # The daemon sees the connections close and ends their sessions; a StartCounters
        # session left running outlives its connection, by design: stopped here.
        time.sleep(3)
        try:
            call(sock, "StopCounters")
        except Failed as e:
            if "PerfNotRunning" not in str(e):
                raise
        time.sleep(1)
        check_daemon()
        after = settled(daemon.pid)
        with open(os.path.join(tmp, "fds.txt"), "w") as f:
            for fd in sorted(os.listdir(f"/proc/{daemon.pid}/fd"), key=int):
                f.write(f"{fd} {os.readlink(f'/proc/{daemon.pid}/fd/{fd}')}\n")
        return report(args, warmup, tmp, before, after, samples, kills)
    finally:
        for _, proc in clients.values():
            proc.kill()
        daemon.terminate()
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()


def report(args, warmup, tmp, before, after, samples, kills):
    failures = []
    counts, invalid = {}, []
    with open(os.path.join(tmp, "clients.log")) as f:
        for line in f:
            word, _, rest = line.partition(" ")
            if word == "COUNT":
                pid, kind, calls, refused = rest.split()
                counts[int(pid)] = (kind, int(calls), int(refused))
            elif word == "INVALID":
                invalid.append(rest.strip())
    by_kind = {k: [0, 0] for k in KINDS}
    for kind, calls, refused in counts.values():
        by_kind[kind][0] += calls
        by_kind[kind][1] += refused
    print("replies checked: " + ", ".join(
        f"{k} {c}" + (f" ({r} refused)" if r else "") for k, (c, r) in by_kind.items()))
    print(f"clients killed: {kills}")
    if invalid:
        failures.append(f"{len(invalid)} invalid replies, the first: {invalid[:5]}")
    if not all(c for c, _ in by_kind.values()):
        failures.append(f"a kind of client got no reply: {by_kind}")

    arrived, stamps = [], []
    with open(os.path.join(tmp, "ticks.log")) as f:
        for line in f:
            word, *rest = line.split()
            if word == "TICK":
                arrived.append(float(rest[0]))
                stamps.append(int(rest[1]) / 1e6)
            elif word == "INVALID":
                failures.append(f"the tick observer: {' '.join(rest)}")
    expected = args.seconds
    print(f"ticks observed: {len(stamps)} in {expected:.0f} s; monitord's loop waited "
          f"{(after['waited'] - before['waited']) * 1000:.0f} ms in all for a CPU (schedstat)")
    if len(stamps) < expected - 2:
        failures.append(f"{len(stamps)} ticks in {expected:.0f} s")
    for name, ticks in (("timestamp", stamps), ("arrival", arrived)):
        late, gaps = lateness(ticks)
        if not late:
            continue
        p99 = sorted(late)[int(len(late) * 0.99)]
        over = sum(1 for x in late if x > LATE_LIMIT)
        print(f"tick lateness by {name}: max {max(late) * 1000:.1f} ms, p99 "
              f"{p99 * 1000:.1f} ms, median {statistics.median(late) * 1000:.1f} ms; "
              f"{over} of {len(late)} over {LATE_LIMIT * 1000:.0f} ms")
        if name == "timestamp" and (max(late) > LATE_LIMIT or gaps):
            failures.append(f"a tick {max(late) * 1000:.0f} ms late"
                            + (f"; gaps of {gaps} s" if gaps else ""))
        # An arrival also waits for the observer to be scheduled, among 50 busy clients: the
        # daemon holding its replies back shows in the p99, or as a long stall.
        if name == "arrival" and (p99 > LATE_LIMIT or max(late) > ARRIVAL_STALL):
            failures.append(f"replies of the tick late: p99 {p99 * 1000:.0f} ms, max "
                            f"{max(late) * 1000:.0f} ms")

    settled = [s for s in samples if s["t"] >= warmup]
    if len(settled) >= 6:
        first = statistics.median(s["rss"] for s in settled[:3])
        last = statistics.median(s["rss"] for s in settled[-3:])
        print(f"RSS: {first:.0f} KiB after the warm-up, {last:.0f} KiB at the end "
              f"(growth {last - first:+.0f} KiB; highest {max(s['rss'] for s in samples)} "
              f"KiB), {after['rss']} KiB once the clients were gone")
        if last - first > RSS_LIMIT:
            failures.append(f"RSS grew by {last - first:.0f} KiB after the warm-up")
    else:
        failures.append(f"only {len(settled)} samples after the warm-up: a longer run needed")
    print(f"descriptors: {before['fds']} before, up to {max(s['fds'] for s in samples)} "
          f"with the clients, {after['fds']} after; threads: {before['threads']} before, up "
          f"to {max(s['threads'] for s in samples)}, {after['threads']} after")
    for key in ("fds", "threads"):
        if after[key] != before[key]:
            failures.append(f"{key}: {before[key]} before the clients, {after[key]} after")
    for f in failures:
        print(f"FAILED: {f}")
    print("soak: " + ("goals met" if not failures else f"{len(failures)} goals missed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
