#!/bin/bash
# The checks of the systemd test VM, run as a service (vmtest.service) once the system is up.
# Lines starting with "VMTEST:" are read by the host (systemd_vm.py): a mark per step, the
# seconds since boot, and "VMTEST: ERROR ..." for a failed check. The host measures what only
# it can see: that the machine survives a stopped and a killed daemon.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
cd /root/vmtest || exit 1
TIMEOUT=10  # the watchdog timeout of monitord.conf's default
MARGIN=5   # the driver's rounding and a slow guest, after the last pet
say() { echo "VMTEST: $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }
show() { systemctl show monitord.service -p "$1" --value; }
errors=0
check() {  # description, command...: runs it, reports a failure, goes on
    local what=$1
    shift
    local out
    if ! out=$("$@" 2>&1); then
        say "ERROR $what: $* failed: $(echo "$out" | tail -3 | tr '\n' ' ')"
        errors=$((errors + 1))
        return 1
    fi
    return 0
}
wait_for() {  # seconds, command...: until the command succeeds
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.2
    done
}
as() { runuser -u "$1" -- "${@:2}"; }
finish() {
    journalctl -b -u monitord.service --no-pager -o short-monotonic | tail -40
    if [ $errors -eq 0 ]; then say "ALL_CHECKS_PASSED"; else say "CHECKS_FAILED $errors"; fi
    systemctl poweroff --force
    exit 0
}
trap finish EXIT

say "BOOTED systemd $(systemctl --version | head -1 | cut -d' ' -f2)"
[ -c /dev/watchdog ] || { say "ERROR no /dev/watchdog"; exit 1; }

# The root filesystem is this (build) machine's: a container's policy-rc.d would forbid
# starting services, and man-db's index rebuild takes minutes under TCG. Neither belongs to
# the machine a user installs on.
rm -f /usr/sbin/policy-rc.d /var/lib/man-db/auto-update

# Install: the package creates the group and starts the socket and the service.
check "install the packages" dpkg -i debs/*.deb || exit 1
say "INSTALLED"
check "group monitor from sysusers.d" getent group monitor
wait_for 30 systemctl is-active --quiet monitord.service ||
    say "ERROR monitord.service is $(show ActiveState)/$(show SubState) 30 s after the install"
say "READY $(show StatusText)"
check "socket /run/monitord/io.monitord.Monitor root:monitor 0660" \
    test "$(stat -c '%U:%G %a' /run/monitord/io.monitord.Monitor)" = "root:monitor 660"
# The daemon's unit as hardened as monitord(8) says: its exposure, and what the running
# daemon holds: the four capabilities (CAP_IPC_LOCK, CAP_SYS_PTRACE, CAP_SYS_ADMIN,
# CAP_PERFMON: bits 14, 19, 21 and 38), a memory ceiling of 512 MiB, the OOM killer's last
# choice.
security=$(systemd-analyze security monitord.service 2>&1 | grep -i 'overall exposure')
echo "monitord.service: $security"
check "monitord.service exposure at most 1.7" \
    systemd-analyze security --threshold=17 monitord.service
main_pid=$(show MainPID)
check "monitord's bounding set is its four capabilities" \
    grep -qx 'CapBnd:[[:space:]]*0000004000284000' "/proc/$main_pid/status"
check "monitord's OOM score adjustment -900" test "$(cat "/proc/$main_pid/oom_score_adj")" = -900
check "monitord's memory.max 512 MiB" \
    test "$(cat /sys/fs/cgroup/system.slice/monitord.service/memory.max)" = 536870912
# The defaults are safe for any machine: no watchdog armed although the machine has one (a
# watchdog resets it: it is opt-in), and probes that sleep; an idle machine stays idle.
check "no watchdog armed by default" bash -c "monctl watchdog status | grep -q 'No watchdog'"
check "sleeping probes by default" bash -c "monctl status | grep -Eq 'probes: +sleep'"
# Over the same 10 s, each unit's CPU time (cgroup2 cpu.stat), so that the machine's busy time
# is told apart: monitord's own (its probe threads included) and other units' (these checks,
# a timer's job), which do not count against it. What no unit took (the kernel's threads,
# interrupts) counts against the machine's idle time. A reading is one grep and the uptime,
# so that the units' span is mpstat's within a few milliseconds.
units_usage() {
    cat /proc/uptime
    grep -H '^usage_usec' /sys/fs/cgroup/init.scope/cpu.stat /sys/fs/cgroup/*.slice/*/cpu.stat
}
usage_before=$(units_usage)
idle=$(mpstat 10 1 | awk '/^Average:/ && $2 == "all" { print $NF }')
usage_after=$(units_usage)
read -r own others busiest span <<<"$(
    printf '%s\n' "$usage_before" "--" "$usage_after" | awk '
        $0 == "--" { after = 1; next }
        NR == 1 || (after && !up1) { if (!after) up0 = $1; else up1 = $1; next }
        {
            n = split($1, p, "/"); unit = p[n - 1]
            if (!after) { before[unit] = $2; next }
            share = ($2 - before[unit]) / 1e4  # microseconds to % of one CPU, divided below
            if (unit == "monitord.service") own = share
            else { others += share; if (share > top) { top = share; name = unit } }
        }
        END {
            s = up1 - up0
            printf "%.3f %.3f %s:%.3f %.2f\n", own / s, others / s, name ? name : "none", top / s, s
        }')"
say "IDLE mpstat reads ${idle} % idle with monitord's defaults; over those ${span} s" \
    "monitord.service took ${own} % of one CPU, other units ${others} % (the busiest ${busiest} %)"
# Under TCG, monitord's second takes ten to twenty times its native cost (0.067 % of one CPU
# natively, bench/cost_bench.py): 0.72 % of one CPU in this VM on one host, 1.28 % on another,
# whose TCG ran these system calls and SQLite's writes slower. Held to 2 %: what this check
# catches is a default that keeps a CPU busy (spinning probes take 100 %), or a second that
# costs several times what it does; the native goal is the benchmark's.
own_max=2
awk -v o="$own" -v m="$own_max" 'BEGIN { exit !(o <= m) }' ||
    say "ERROR monitord.service took ${own} % of one CPU on an idle machine with its defaults" \
        "(at most ${own_max} % under TCG)"
awk -v i="$idle" -v o="$others" -v n="$(nproc)" 'BEGIN { exit !(i + o / n >= 99) }' ||
    say "ERROR mpstat reads ${idle} % idle on an idle machine with monitord's defaults," \
        "of which other units took ${others} % of one CPU"
# Its busiest units over the last second: none above 1 % of one CPU, monitord's own held to
# its limit above (a second of the three that follow: a timer may fire in one), but for
# vmtest.service, these checks themselves (python3 and monctl under TCG).
idle_units() {
    monctl loading --units 10 --json | python3 -c '
import json, sys
top = [t for t in json.load(sys.stdin)["units"]["top"] if t["unit"] != "vmtest.service"]
busiest = max(top, key=lambda t: t["cpu"], default={"unit": "none", "cpu": 0})
print(busiest["unit"], busiest["cpu"], len(top))'
}
unit_max() { if [ "$1" = monitord.service ]; then echo "$own_max"; else echo 1; fi; }
for attempt in 1 2 3; do
    read -r idle_top idle_max idle_listed <<<"$(idle_units)"
    idle_limit=$(unit_max "$idle_top")
    awk -v p="$idle_max" -v m="$idle_limit" 'BEGIN { exit !(p <= m) }' && break
    sleep 1
done
say "IDLE_UNITS the busiest unit of the idle machine: ${idle_top} with ${idle_max} % of one CPU" \
    "over the last second (${idle_listed} others with CPU time in the window)"
awk -v p="$idle_max" -v m="$idle_limit" 'BEGIN { exit !(p <= m) }' ||
    say "ERROR ${idle_top} has ${idle_max} % of one CPU on an idle machine, more than ${idle_limit} %"
# Its busiest tasks likewise (the first request starts their sampling; monctl waits for the
# figures): none above 1 % of one CPU but these checks' own, and monitord's, whose reading of
# every process is what is asked for here (said, not held to 1 %: under TCG a read takes
# tens of times what it takes on a CPU; bench/tasks_bench.py measures it natively). The
# kernel counts a task's time in clock ticks (10 ms), each rounded down: a task that ran a
# fraction of a tick can show a whole one, 1 % over a second a few milliseconds long or
# short; so what is checked is that none ran more than one tick in the interval.
idle_tasks() {
    monctl loading --tasks 5 --json | python3 -c '
import json, sys
tasks = json.load(sys.stdin)["tasks"]
own = ("vmtest.service", "monitord.service")
top = [t for t in tasks["top"] if t.get("unit") not in own]
busiest = max(top, key=lambda t: t["load"], default={"comm": "none", "load": 0})
ms = busiest["load"] * tasks["interval"] * 10
monitord = sum(t["load"] for t in tasks["top"] if t.get("unit") == "monitord.service")
print(busiest["comm"].replace(" ", "_"), busiest.get("unit", "-"), busiest["load"],
      f"{ms:.1f}", len(top), monitord)'
}
for attempt in 1 2 3; do
    read -r idle_task idle_task_unit idle_task_max idle_task_ms idle_tasks_listed \
        idle_task_monitord <<<"$(idle_tasks)"
    awk -v ms="$idle_task_ms" 'BEGIN { exit !(ms <= 10.1) }' && break
    sleep 1
done
say "IDLE_TASKS the busiest task of the idle machine: ${idle_task} (${idle_task_unit}) with" \
    "${idle_task_max} % of one CPU over the last second, ${idle_task_ms} ms" \
    "(${idle_tasks_listed} listed); monitord's own threads, reading them: ${idle_task_monitord} %"
awk -v ms="$idle_task_ms" 'BEGIN { exit !(ms <= 10.1) }' ||
    say "ERROR ${idle_task} ran ${idle_task_ms} ms (${idle_task_max} % of one CPU) in a second" \
        "on an idle machine, more than one clock tick (1 %)"
# The packages' own autopkgtest (debian/tests: the service, monctl, the exporter's /metrics, a
# MON program built against libmonitord-dev with pkg-config), against the packages installed
# above, before the watchdog is armed. By default each test of debian/tests/control runs as
# autopkgtest runs it, as root with its AUTOPKGTEST_TMP and AUTOPKGTEST_ARTIFACTS, once its
# Depends are found installed: about 10 s. With systemd_vm.py --autopkgtest-runner, autopkgtest
# itself runs them (its null runner), which costs 100 s more here under TCG (the dependencies
# through an apt install of its own, a command at a time through its runner). Not given the
# .debs: the null runner would reinstall them from a local apt repository and, as it cannot
# revert the machine, end with an apt-get update of the network's archives.
start=$SECONDS
control=/root/vmtest/src/debian/tests/control
if [ -e /root/vmtest/autopkgtest-runner ]; then
    if autopkgtest --no-built-binaries --output-dir /tmp/autopkgtest /root/vmtest/src/ -- null \
        >/tmp/autopkgtest.log 2>&1; then
        summary=$(tr -s ' \n' ' ' </tmp/autopkgtest/summary)
        say "AUTOPKGTEST (autopkgtest's null runner) ${summary}in $((SECONDS - start)) s"
    else
        rc=$?
        tail -30 /tmp/autopkgtest.log
        say "ERROR autopkgtest exited $rc: $(tr -s ' \n' ' ' </tmp/autopkgtest/summary 2>/dev/null)"
        errors=$((errors + 1))
    fi
else
    results=""
    for dep in $(sed -n '/^Depends:/,/^[^ ]/{/^ /p}' "$control" | tr -d ' ,'); do
        [ "$(dpkg-query -W -f='${db:Status-Status}' "$dep" 2>/dev/null)" = installed ] ||
            { say "ERROR the test dependency $dep is not installed"; errors=$((errors + 1)); }
    done
    for t in $(sed -n 's/^Tests: *//p' "$control" | tr -d ','); do
        out=/tmp/autopkgtest/$t
        mkdir -p "$out/tmp" "$out/artifacts"
        if AUTOPKGTEST_TMP=$out/tmp AUTOPKGTEST_ARTIFACTS=$out/artifacts \
            "/root/vmtest/src/debian/tests/$t" >"$out.log" 2>&1; then
            results="$results $t PASS"
        else
            tail -30 "$out.log"
            say "ERROR debian/tests/$t failed"
            errors=$((errors + 1))
            results="$results $t FAIL"
        fi
    done
    say "AUTOPKGTEST${results} in $((SECONDS - start)) s"
fi

# Spinning probes, asked for, beside a busy unit with CPUWeight= pinned to cpu1 (which turns
# the cpu controller on): the daemon moves its probes' process into monitord.slice with
# CPUWeight=idle, and the unit keeps its CPU. Measured over 10 s of wall time alone and 10 s
# beside the probes: the unit's CPU time from its cgroup's cpu.stat, and the time cpu1's probe
# thread ran from its schedstat (nanoseconds: the kernel's own run time of the thread). The
# probe must have taken at most 1.5 % of cpu1 (in the unit's own cgroup it would take half),
# and the probe source must read cpu1 busy. (The unit's share alone and beside, compared, is
# within the guest's timer noise of each other: 104 % and 102 % were read under TCG.)
usage() { awk '/^usage_usec/ { print $2 }' /sys/fs/cgroup/system.slice/busy.service/cpu.stat; }
now_us() { echo $(($(date +%s%N) / 1000)); }
ran_us() { if [ -n "$1" ]; then echo $(($(cut -d' ' -f1 "$1/schedstat") / 1000)); else echo 0; fi; }
probe_thread() {  # /proc/PID/task/TID of the probes' process's thread named $1
    local t
    for t in /proc/[0-9]*/task/[0-9]*; do
        [ "$(cat "${t%/task/*}/comm" 2>/dev/null)" = monitord-probes ] &&
            [ "$(cat "$t/comm" 2>/dev/null)" = "$1" ] && { echo "$t"; return 0; }
    done
    return 1
}
shares() {  # thread dir or "": the busy unit's and the thread's share of a CPU over 10 s, in per mille
    local w0 u0 r0 w1 u1 r1
    w0=$(now_us) u0=$(usage) r0=$(ran_us "$1")
    sleep 10
    w1=$(now_us) u1=$(usage) r1=$(ran_us "$1")
    echo "$(((u1 - u0) * 1000 / (w1 - w0))) $(((r1 - r0) * 1000 / (w1 - w0)))"
}
check "a busy unit with CPUWeight= on cpu1" \
    systemd-run --unit=busy.service -p CPUWeight=100 taskset -c 1 sh -c 'while :; do :; done'
sleep 2
read -r alone _ <<<"$(shares "")"
cp /etc/monitord/monitord.conf /root/monitord.conf.shipped
printf '[loading]\nprobe = "spin"\n' >/etc/monitord/monitord.conf
check "systemctl restart with spinning probes" systemctl restart monitord.service
wait_for 20 bash -c "monctl status | grep -q 'below /monitord.slice with cpu.idle=1'" ||
    say "ERROR the spinning probes were not placed in monitord.slice: $(monctl status | grep -A1 probes)"
sleep 3
thread=$(probe_thread idle-probe/1) || say "ERROR no thread named idle-probe/1"
read -r beside taken <<<"$(shares "$thread")"
probe=$(monctl loading --per-cpu --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(next(c["probe"]["avg_prev_min"] for c in d["cpus"] if c["cpu"] == 1))')
permille() { printf '%d.%d' $(($1 / 10)) $(($1 % 10)); }
say "SPIN_FAIR the busy unit had $(permille "$alone") % of cpu1 alone and $(permille "$beside") %" \
    "beside the spinning probes, whose cpu1 thread ran $(permille "$taken") % of the time;" \
    "the probe source read ${probe} % busy"
monctl status
if [ -z "$thread" ] || [ "$taken" -gt 15 ]; then
    say "ERROR the spinning probe took $(permille "$taken") % of cpu1 from a busy unit (at most 1.5 %)"
fi
awk -v p="$probe" 'BEGIN { exit !(p >= 95) }' ||
    say "ERROR the probe source read the busy cpu1 ${probe} % busy"
# The busy unit is the busiest unit, with nearly all of a CPU, as the hardened daemon reads
# the units' CPU time from the cgroup tree.
units=$(monctl loading --units 3 --json | python3 -c '
import json, sys
u = json.load(sys.stdin)["units"]
top = u["top"][0] if u["top"] else {"unit": "none", "cpu": 0}
print(top["unit"], top["cpu"], u["count"], u.get("accounting"))')
read -r top_unit top_cpu unit_count accounting <<<"$units"
say "UNITS the busiest of ${unit_count} units: ${top_unit} with ${top_cpu} % of one CPU (${accounting})"
if [ "$top_unit" != busy.service ] || ! awk -v p="$top_cpu" 'BEGIN { exit !(p >= 90) }'; then
    say "ERROR the busiest unit is ${top_unit} with ${top_cpu} %, not busy.service with 90 % or more"
    monctl loading --units 5
fi
# And its shell is cpu1's busiest task, with its unit. A task's time is counted in clock
# ticks, which this TCG guest loses when the host is busy (one reading in CI: 89 % where the
# cgroup's nanoseconds said 98 %): the best of three seconds.
for attempt in 1 2 3; do
    tasks=$(monctl loading --tasks 3 --json | python3 -c '
import json, sys
t = [x for x in json.load(sys.stdin)["tasks"]["top"] if x["cpu"] == 1]
top = t[0] if t else {"comm": "none", "load": 0}
print(top["comm"].replace(" ", "_"), top.get("unit", "-"), top["load"])')
    read -r task_comm task_unit task_load <<<"$tasks"
    [ "$task_unit" = busy.service ] && awk -v p="$task_load" 'BEGIN { exit !(p >= 90) }' && break
    sleep 1
done
say "TASKS cpu1's busiest task: ${task_comm} of ${task_unit} with ${task_load} % of one CPU"
if [ "$task_unit" != busy.service ] || ! awk -v p="$task_load" 'BEGIN { exit !(p >= 90) }'; then
    say "ERROR cpu1's busiest task is ${task_comm} of ${task_unit} with ${task_load} %," \
        "not busy.service's with 90 % or more"
    monctl loading --tasks 3
fi
# A session on the busy unit (its cgroup, found by its name), paused and resumed
# (PauseCounters, ResumeCounters): its task-clock stands still while paused, though the unit
# spins on, and grows again once resumed.
read_count() {
    monctl perf read --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["report"]["events"][0]["value"]["count"])'
}
if check "perf start on busy.service" monctl perf start -e perf::TASK-CLOCK --unit busy.service; then
    sleep 1
    check "perf pause" monctl perf pause
    at_pause=$(read_count)
    sleep 2
    paused=$(read_count)
    check "perf resume" monctl perf resume
    sleep 1
    resumed=$(read_count)
    monctl perf stop
    say "UNIT_PAUSE busy.service's task-clock: ${at_pause} ns at the pause, ${paused} 2 s later," \
        "${resumed} 1 s after the resume"
    if [ -z "$at_pause" ] || [ "$at_pause" != "$paused" ] || [ "$at_pause" -le 0 ] ||
        [ "${resumed:-0}" -le "$paused" ]; then
        say "ERROR a paused session on busy.service counted on, or a resumed one did not"
    fi
fi
systemctl stop busy.service
cp /root/monitord.conf.shipped /etc/monitord/monitord.conf
# A unit's CPU pressure (its cgroup2 cpu.pressure): two spinners of one unit on one CPU, one
# always waiting for the other, press on it for the whole of 12 s: PSI's 10-second average
# climbs towards 100 % (70 % after 12 s), and the unit lists it.
check "a crowded unit on cpu0" systemd-run --unit=crowded.service taskset -c 0 \
    sh -c 'while :; do :; done & while :; do :; done'
sleep 12
crowded=$(monctl loading --units 5 --json | python3 -c '
import json, sys
u = [t for t in json.load(sys.stdin)["units"]["top"] if t["unit"] == "crowded.service"]
print(u[0].get("pressure", "none") if u else "unlisted")')
say "UNIT_PRESSURE crowded.service, two spinners on one CPU: ${crowded} % (avg10)"
awk -v p="$crowded" 'BEGIN { exit !(p + 0 == p && p >= 30) }' ||
    say "ERROR crowded.service's pressure is ${crowded}, not 30 % or more"
systemctl stop crowded.service

# Access, the exporter and reloads, with the daemon as installed (sleeping probes again, no
# watchdog: these checks do not test it, and their work on this slow guest must not be what
# decides whether it survives).
check "systemctl restart as shipped" systemctl restart monitord.service

# Access: members of monitor read; others are refused and told why.
useradd -m alice && usermod -aG monitor alice
useradd -m bob
check "a member of monitor reads the status" as alice monctl status
out=$(as bob monctl status 2>&1) && say "ERROR bob (not in monitor) was let in"
echo "$out" | grep -q "group monitor" || say "ERROR the refusal does not name the group: $out"
echo "bob: $out"
say "ACCESS"

# The exporter: its socket is enabled by its package; the first scrape, by a user outside
# the group monitor, starts the service, which runs as a user of its own in that group.
check "monitord-exporter.socket enabled" systemctl is-enabled --quiet monitord-exporter.socket
check "monitord-exporter.socket listening" systemctl is-active --quiet monitord-exporter.socket
scrape=$(as bob curl -sS --max-time 20 http://localhost:10750/metrics 2>&1)
echo "$scrape" | grep -q '^monitord_up 1$' || say "ERROR bob's scrape lacks monitord_up 1: $(echo "$scrape" | head -3)"
echo "$scrape" | grep -q '^monitord_cpu_seconds_total{cpu="0",mode="idle"} ' ||
    say "ERROR bob's scrape lacks the CPU time by state"
euser=$(ps -o user= -p "$(systemctl show monitord-exporter.service -p MainPID --value)")
[ -n "$euser" ] && [ "$euser" != root ] || say "ERROR monitord-exporter runs as '$euser'"
security=$(systemd-analyze security monitord-exporter.service 2>&1 | grep -i 'overall exposure')
echo "monitord-exporter.service runs as $euser; $security"
check "monitord-exporter.service exposure at most 2.0" \
    systemd-analyze security --threshold=20 monitord-exporter.service
say "EXPORTER"

# Counting: system-wide as root (the unit's capabilities; Debian's kernel is at
# perf_event_paranoid 3), refused for alice until the configuration's control-group names
# her group.
check "system-wide counting as root" \
    monctl perf collect -e perf::TASK-CLOCK,perf::CONTEXT-SWITCHES --duration 1s
out=$(as alice monctl perf collect -e perf::TASK-CLOCK --duration 1s 2>&1) &&
    say "ERROR alice could count before the reload"
echo "alice before the reload: $out"
# The [access] section, in a file of its own (the shipped one has every section, its keys
# commented out: a table named twice is refused); the bad reload below adds a key to it, and
# the watchdog's section comes after it.
cat >/etc/monitord/monitord.conf <<'CONF'
[access]
control-group = "monitor"
CONF
before_pid=$(show MainPID)
# A process of alice's own: the daemon (root, CAP_SYS_PTRACE) counts it for her, which her own
# perf could not at level 3.
as alice sh -c 'echo $$ >/tmp/alice-sleep.pid; exec sleep 120' &
sleeper=$!
wait_for 5 test -s /tmp/alice-sleep.pid
alice_pid=$(cat /tmp/alice-sleep.pid)
check "systemctl reload" systemctl reload monitord.service
wait_for 10 as alice monctl perf collect -e perf::TASK-CLOCK --pid "$alice_pid" --duration 1s ||
    say "ERROR alice still cannot count 10 s after systemctl reload"
[ "$(show MainPID)" = "$before_pid" ] || say "ERROR the reload restarted the daemon"
check "the daemon counts alice's process" as alice monctl perf collect \
    -e perf::TASK-CLOCK,perf::CONTEXT-SWITCHES --pid "$alice_pid" --duration 1s
# But no more than her own perf could at this level: not root's process, not every CPU
# (perf_event_paranoid above 0), and user mode only (above 1).
out=$(as alice monctl perf collect -e perf::TASK-CLOCK --pid 1 --duration 100ms 2>&1) &&
    say "ERROR alice counted root's process"
echo "$out" | grep -q "not yours" || say "ERROR alice's refusal for pid 1 says: $out"
out=$(as alice monctl perf profile -a --duration 100ms 2>&1) &&
    say "ERROR alice profiled every CPU at perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)"
echo "$out" | grep -q "perf_event_paranoid 0 or below" || say "ERROR alice's refusal for -a says: $out"
out=$(as alice monctl --json perf profile --pid "$alice_pid" --duration 200ms 2>&1) ||
    say "ERROR alice could not profile her own process: $out"
echo "$out" | grep -q '"event": *"perf::CPU-CLOCK:u"' ||
    say "ERROR alice's profile is not of user mode only: $out"
say "MEMBER_RULES"
# Her own command, counted by monctl itself with her privileges: at level 3 the kernel
# refuses, and the message must say what would do.
if [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -ge 3 ]; then
    out=$(as alice monctl perf stat -e perf::TASK-CLOCK -- true 2>&1) &&
        say "ERROR alice counted at perf_event_paranoid 3"
    echo "$out" | grep -q CAP_SYS_ADMIN || say "ERROR the refusal does not name CAP_SYS_ADMIN: $out"
    echo "alice's own command: $out"
fi
say "RELOADED"
# A bad file: the reload is refused, the daemon keeps its settings and says where.
cp /etc/monitord/monitord.conf /root/monitord.conf.good
echo 'socket-group = "no-such-group"' >>/etc/monitord/monitord.conf
systemctl reload monitord.service
sleep 2
check "still running after a bad reload" systemctl is-active --quiet monitord.service
check "the old settings after a bad reload" as alice monctl perf collect -e perf::TASK-CLOCK \
    --pid "$alice_pid" --duration 1s
kill "$alice_pid" $sleeper 2>/dev/null
journalctl -b -u monitord.service --no-pager | grep -q "monitord.conf:" ||
    say "ERROR the journal does not name the bad file"
cp /root/monitord.conf.good /etc/monitord/monitord.conf
say "BAD_RELOAD_KEPT_SETTINGS"
# Now the watchdog, as an administrator arms it: named in the configuration.
cat >>/etc/monitord/monitord.conf <<'CONF'

[watchdog]
device = "/dev/watchdog"
CONF
check "systemctl restart with the watchdog configured" systemctl restart monitord.service
check "watchdog armed" bash -c "monctl watchdog status | grep -q ': armed'"
journalctl -b -u monitord.service --no-pager | grep -q "any process of any user that keeps one CPU busy" ||
    say "ERROR the journal does not say who can reset the machine"
monctl watchdog status
monctl watchdog status | grep -q "timeout: *$TIMEOUT s" ||
    say "ERROR the watchdog timeout is not $TIMEOUT s: $(monctl watchdog status | grep timeout)"
say "ARMED"
# While armed: every 2 s, the last pet's age; past 4 s (or no answer), who holds the CPUs and
# where monitord's threads wait, so that a failure says why the pets stopped.
watch_pets() {
    while sleep 2; do
        local status age
        status=$(timeout 5 monctl watchdog status 2>&1)
        age=$(echo "$status" | sed -n 's/^ *last pet: *\([0-9.]*\) s ago.*/\1/p')
        awk -v a="${age:-99}" 'BEGIN { exit !(a > 4) }' || continue
        say "WATCH last pet ${age:-unknown} s ago: $(echo "$status" | grep -E 'policy|pets:' | tr -s ' \n' ' ')"
        local pid
        pid=$(show MainPID)
        ps -L -o tid,stat,pcpu,wchan:30,comm -p "$pid" | sed 's/^/WATCH /'
        cat "/proc/$pid/stack" 2>/dev/null | sed 's/^/WATCH main: /'
        top -b -n 2 -d 1 -w 120 | awk '/^top -/ { n++ } n == 2' | sed -n '7,14p' | sed 's/^/WATCH /'
    done
}
watch_pets &
watcher=$!
# The exporter sees it armed; a reload keeps it armed and petted.
scrape=$(as bob curl -sS --max-time 20 http://localhost:10750/metrics 2>&1)
echo "$scrape" | grep -q '^monitord_watchdog_armed 1$' || say "ERROR the scrape lacks the armed watchdog"
armed_pid=$(show MainPID)
check "systemctl reload while armed" systemctl reload monitord.service
sleep $((TIMEOUT * 3 / 2))
[ "$(show MainPID)" = "$armed_pid" ] || say "ERROR the reload restarted the daemon"
check "still armed after the reload" bash -c "monctl watchdog status | grep -q ': armed'"
say "PET_GAPS since armed: $(monctl watchdog status | grep 'near misses' | sed 's/^ *near misses: *//')"
kill $watcher 2>/dev/null

# Stop: the daemon disarms the watchdog (magic close); the machine must survive the timeout.
# No monctl until the end of the wait: it would start the daemon through the socket.
check "systemctl stop" systemctl stop monitord.service
say "STOPPED"
sleep $((TIMEOUT * 5 / 2))
say "SURVIVED_STOP"

# Stopped means stopped: the socket went with the service, so neither a client nor the
# exporter's scrape starts the daemon (and re-arms the watchdog); the exporter says it is down.
[ "$(show ActiveState)" = inactive ] || say "ERROR monitord.service is $(show ActiveState)"
[ "$(systemctl show monitord.socket -p ActiveState --value)" = inactive ] ||
    say "ERROR monitord.socket is $(systemctl show monitord.socket -p ActiveState --value) after the stop"
out=$(as alice monctl status 2>&1) && say "ERROR monctl status reached a stopped monitord: $out"
scrape=$(as bob curl -sS --max-time 20 http://localhost:10750/metrics 2>&1)
echo "$scrape" | grep -q '^monitord_up 0$' ||
    say "ERROR the scrape of a stopped monitord lacks monitord_up 0: $(echo "$scrape" | head -3)"
sleep 1
[ "$(show ActiveState)" = inactive ] || say "ERROR a client started the stopped monitord"

# Socket activation: once the socket is started, the first client starts the daemon.
check "systemctl start monitord.socket" systemctl start monitord.socket
check "monctl status starts the daemon through the socket" as alice monctl status
check "the daemon is active after the first client" systemctl is-active --quiet monitord.service
say "SOCKET_ACTIVATED"
wait_for 10 bash -c "monctl watchdog status | grep -q ': armed'" ||
    say "ERROR the activated daemon did not arm the watchdog"
monctl watchdog status | grep -q "timeout: *$TIMEOUT s" ||
    say "ERROR the activated daemon's watchdog timeout is not $TIMEOUT s: $(monctl watchdog status | grep timeout)"

# SIGKILL: no magic close; systemd restarts the daemon, which pets again before the timeout.
pid=$(show MainPID)
restarts=$(show NRestarts)
check "systemctl kill -s KILL" systemctl kill -s KILL monitord.service
say "KILLED"
start=$SECONDS
wait_for 20 bash -c "[ \"\$(systemctl show monitord.service -p NRestarts --value)\" -gt $restarts ] &&
    systemctl is-active --quiet monitord.service" ||
    say "ERROR systemd did not restart the daemon within 20 s"
say "RESTARTED after $((SECONDS - start)) s, pid $pid -> $(show MainPID)"
sleep $((TIMEOUT * 5 / 2))
check "watchdog petted after the restart" bash -c "monctl watchdog status | grep -q ': armed'"
say "SURVIVED_KILL"

# The history on disk, in the directory StateDirectory= made: the last minute's seconds, read
# by a member of monitor, across the kill and the restart (its seconds missing are gaps).
check "history in /var/lib/monitord" test -s /var/lib/monitord/history.db
journalctl -b -u monitord.service --no-pager | grep -q "History of every second in /var/lib/monitord/history.db" ||
    say "ERROR the journal does not say where the history is"
kept() {  # seconds back: "kept missing" of the history's seconds since then, as alice
    as alice monctl loading --since "-$1s" --history --json | python3 -c '
import json, sys
h = json.load(sys.stdin)["machine"]["procstat"]["history"]
print(sum(v is not None for v in h), sum(v is None for v in h))'
}
history=$(kept 60)
say "HISTORY the last minute as alice: ${history% *} seconds kept, ${history#* } missing (the daemon stopped, activated, killed and restarted within it)"
# The last 20 s are the restarted daemon's (it has run for 2.5 timeouts): all kept but the
# second being written.
history=$(kept 20)
say "HISTORY the last 20 s: ${history% *} kept, ${history#* } missing"
[ "${history% *}" -ge 18 ] 2>/dev/null || say "ERROR the history holds ${history% *} of the last 20 s"

# Last, as it ends the VM: a busy unit with CPUWeight= (the cpu controller on) pinned to cpu1.
# The sleeping probes take the kernel's idle time, which no weight distorts: cpu1 earns no
# credit, the pets stop under policy all, and the watchdog ends the VM within the timeout and
# a tick or two (the host times it).
trap - EXIT
journalctl -b -u monitord.service --no-pager -o short-monotonic | tail -40
if [ $errors -eq 0 ]; then say "ALL_CHECKS_PASSED"; else say "CHECKS_FAILED $errors"; fi
systemd-run --unit=busy.service -p CPUWeight=1000 taskset -c 1 sh -c 'while :; do :; done'
say "STARVED"
sleep $((TIMEOUT * 4))
say "ERROR the machine survived a busy unit on cpu1 for $((TIMEOUT * 4)) s"
monctl watchdog status
systemctl poweroff --force
