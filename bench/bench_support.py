"""What the benchmarks share: a synthetic machine of N CPUs for monitord's --proc-root and
--sys-root (a /proc/stat whose counters a thread advances, ten times a second, rewritten in
place), processes started and stopped with their logs kept, and the CPU time of a process."""
import os
import signal
import subprocess
import threading
import time

USER_HZ = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The states of /proc/stat's cpu lines, in their order.
STATES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
          "guest_nice")
# Busy time: every state but idle and iowait. node_exporter's user and nice include guest
# time as the kernel's do; monitord's do not and it has guest and guest_nice apart.
NODE_BUSY = ("user", "nice", "system", "irq", "softirq", "steal")
MONITORD_BUSY = NODE_BUSY + ("guest", "guest_nice")
WIDTH = 12  # digits of every counter, so that the file keeps its length


class Failed(Exception):
    """Something did not run: the bench exits 1."""


# ---- the synthetic machine ----------------------------------------------------------------

def ticks_per_second(cpu, ncpu):
    """USER_HZ ticks a second in each state for one CPU (they add up to 100)."""
    rate = dict.fromkeys(STATES, 0)
    if cpu == ncpu - 1:
        busy = 100  # the busy CPU of the sanity check
    elif cpu % 4 == 0:
        busy = 1  # idle but for some kernel work
    else:
        busy = 5 + (cpu * 37) % 90
    if busy >= 4:
        rate["system"] = busy // 4
        rate["softirq"] = 1 if busy >= 20 else 0
        rate["user"] = busy - rate["system"] - rate["softirq"]
    else:
        rate["system"] = busy
    rate["iowait"] = 2 if cpu % 8 == 3 and busy <= 98 else 0
    rate["idle"] = 100 - busy - rate["iowait"]
    return [rate[s] for s in STATES]


class Machine:
    """/proc/stat and /sys/devices/system/cpu of `ncpu` CPUs under `root`, the counters
    advanced once a second by a thread until stop()."""

    UPTIME = 86400  # seconds of counters at the start, as on a machine up for a day
    # Writes a second: more often than monitord's tick, as the kernel's counters grow all the
    # time. (Written once a second, some of monitord's one-second intervals would see no
    # change and others two seconds' worth.)
    STEPS_A_SECOND = 10

    def __init__(self, root, ncpu):
        self.ncpu = ncpu
        self.proc = os.path.join(root, "proc")
        self.sys = os.path.join(root, "sys")
        cpu_dir = os.path.join(self.sys, "devices/system/cpu")
        os.makedirs(self.proc)
        os.makedirs(cpu_dir)
        cpu_list = f"0-{ncpu - 1}\n"
        for name, text in (("online", cpu_list), ("present", cpu_list), ("possible", cpu_list),
                           ("offline", "\n"), ("isolated", "\n"), ("kernel_max", "8191\n")):
            write(os.path.join(cpu_dir, name), text)
        # Topology as any Linux machine has it (two packages, two threads a core); no
        # thermal_throttle (only Intel's bare metal has it), so node_exporter looks for it and
        # goes on.
        for c in range(ncpu):
            topo = os.path.join(cpu_dir, f"cpu{c}", "topology")
            os.makedirs(topo)
            package = 0 if c < max(1, ncpu // 2) else 1
            write(os.path.join(topo, "physical_package_id"), f"{package}\n")
            write(os.path.join(topo, "core_id"), f"{(c % max(1, ncpu // 2)) // 2}\n")
        self.rates = [ticks_per_second(c, ncpu) for c in range(ncpu)]
        # One format for the whole file; the values of each write fill it in.
        field = f" %0{WIDTH}d"
        self.template = "".join(
            ["cpu " + field * len(STATES) + "\n"] +
            [f"cpu{c}" + field * len(STATES) + "\n" for c in range(ncpu)] +
            ["intr" + field * 65 + "\n", "ctxt" + field + "\n", "btime 1718102754\n",
             "processes" + field + "\n", "procs_running 2\nprocs_blocked 0\n",
             "softirq" + field * 11 + "\n"])
        self.flat_rates = [r for rates in self.rates for r in rates]
        self.steps = self.UPTIME * self.STEPS_A_SECOND
        self.error = None
        self.stat_path = os.path.join(self.proc, "stat")
        text = self.stat_text()
        self.length = len(text)
        write(self.stat_path, text)
        self.fd = os.open(self.stat_path, os.O_WRONLY | os.O_CLOEXEC)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stat_text(self):
        steps, per = self.steps, self.STEPS_A_SECOND
        ncpu, nstates = self.ncpu, len(STATES)
        # Each counter is its rate times the time so far, in whole ticks.
        values = [r * steps // per for r in self.flat_rates]
        total = [sum(values[i::nstates]) for i in range(nstates)]
        seconds = steps // per
        return self.template % tuple(
            total + values + [1000 * seconds * ncpu] + [0] * 64 + [2000 * seconds * ncpu,
                              10 * seconds, 300 * seconds * ncpu] + [0] * 10)

    def run(self):
        start = time.monotonic()
        period = 1 / self.STEPS_A_SECOND
        n = 0
        while not self.stopping.wait(max(0.0, start + (n + 1) * period - time.monotonic())):
            n += 1
            self.steps += 1
            data = self.stat_text().encode()
            if len(data) != self.length or os.pwrite(self.fd, data, 0) != len(data):
                self.error = "the synthetic /proc/stat could not be rewritten in place"
                return

    def busy_rate(self, cpu):
        """Busy seconds a second of `cpu`, as written."""
        rate = dict(zip(STATES, self.rates[cpu]))
        return sum(rate[s] for s in NODE_BUSY) / USER_HZ

    def stop(self):
        self.stopping.set()
        self.thread.join()
        os.close(self.fd)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


# ---- processes ----------------------------------------------------------------------------

def child_env():
    env = dict(os.environ)
    for name in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
                 "MONITORD_SOCKET"):
        env.pop(name, None)
    return env


class Process:
    """A program the bench runs, its output in a log of `workdir` (only its errors with
    `quiet`: a peer's output is thrown away, as a user's terminal would not keep it)."""

    def __init__(self, name, argv, workdir, quiet=False):
        self.name = name
        self.log = os.path.join(workdir, name + ".log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL if quiet else log,
                                         stderr=log if quiet else subprocess.STDOUT,
                                         env=child_env())
        self.pid = self.proc.pid

    def check(self):
        if self.proc.poll() is not None:
            raise Failed(f"{self.name} exited with status {self.proc.returncode}:\n"
                         + self.tail())

    def tail(self):
        try:
            with open(self.log) as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_answering(proc, sock, timeout=20):
    """Waits until the monitord of `proc` answers GetStatus at `sock`; stops it and raises
    Failed when it exits or does not answer within `timeout` seconds."""
    import varlink_call  # beside this file, as the benchmarks import it

    deadline = time.monotonic() + timeout
    while True:
        proc.check()
        try:
            varlink_call.call(sock, "GetStatus")
            return
        except OSError:
            if time.monotonic() > deadline:
                proc.stop()
                raise Failed(f"{proc.name} did not answer within {timeout} s:\n{proc.tail()}")
            time.sleep(0.1)


def threads_seconds(pid):
    """Run time of the live threads of the process, from schedstat, in seconds."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise Failed(f"process {pid} is gone")
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9


def cpu_seconds(pid):
    """(run time of the live threads from schedstat, utime + stime from stat) in seconds."""
    precise = threads_seconds(pid)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    coarse = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    return precise, coarse


def cpu_delta(before, after):
    """CPU seconds between two cpu_seconds(): the precise figure, unless threads that exited
    took more than the coarse figure's two ticks of rounding."""
    precise = after[0] - before[0]
    coarse = after[1] - before[1]
    return coarse if coarse > precise + 2 / CLK_TCK else precise


class Asker:
    """GetLoading with `params` once a second, in a thread of the bench, as a client watching
    a figure would; every reply must carry `key` when `params` asks for it."""

    def __init__(self, sock, params, key):
        self.sock, self.params, self.key = sock, params, key
        self.error = None
        self.last = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        import varlink_call  # beside this file, as the benchmarks import it

        while not self.stopping.wait(1.0):
            try:
                r = varlink_call.call(self.sock, "GetLoading", self.params)
                if (self.key in r) != (self.key in self.params):
                    self.error = f"no {self.key} in the reply: {r}"
                    return
                self.last = r.get(self.key)
            except Exception as e:  # noqa: BLE001 (reported as the phase's failure)
                self.error = str(e)
                return

    def stop(self):
        self.stopping.set()
        self.thread.join()
        if self.error:
            raise Failed(f"asking for the {self.key}: {self.error}")
