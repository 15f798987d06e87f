#!/bin/busybox sh
# /init of the test VM: mounts the kernel filesystems, loads the watchdog driver named on the
# kernel command line (wd=i6300esb|softdog), runs monitord on /dev/watchdog (probe=sleep, the
# default, or spin), then the case named by case=: idle, default (monitord without a watchdog
# setting: it must arm none), busy95, busy, fifo, session, cgroup, idlecgroup (a busy loop on
# one CPU, in another session, cgroup, or cgroup with cpu.idle=1), sigterm, sigkill, nowayout
# (softdog loaded with nowayout=1, then SIGTERM), history (the history on the disk /dev/vda
# across a watchdog reset and a power cut: three boots). Lines starting with "VMTEST:" are read
# by the host (watchdog_vm.py). The VM ends by the watchdog (qemu exits: poweroff for the
# i6300esb, a reboot with -no-reboot for softdog) or, when it survives, by "poweroff -f"
# after printing "VMTEST: ALIVE".
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run /tmp
mount -t tmpfs tmpfs /run

for arg in $(cat /proc/cmdline); do
    case $arg in
        case=*) CASE=${arg#case=} ;;
        wd=*) WD=${arg#wd=} ;;
        timeout=*) TIMEOUT=${arg#timeout=} ;;
        probe=*) PROBE=${arg#probe=} ;;
    esac
done
TIMEOUT=${TIMEOUT:-10}
PROBE=${PROBE:-sleep}
say() { echo "VMTEST: $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }
die() { say "ERROR $*"; poweroff -f; }

insmod /modules/watchdog.ko || die "insmod watchdog"
if [ "$CASE" = nowayout ]; then
    insmod "/modules/$WD.ko" nowayout=1 || die "insmod $WD nowayout=1"
else
    insmod "/modules/$WD.ko" || die "insmod $WD"
fi
[ -c /dev/watchdog ] || die "no /dev/watchdog after loading $WD"

# The history case: monitord's state directory on an ext4 disk that outlives the VM
# (/dev/vda), which also counts the boots of the case.
if [ "$CASE" = history ]; then
    for m in $(cat /modules/disk.order); do
        insmod "/modules/$m.ko" || die "insmod $m"
    done
    i=0
    until [ -b /dev/vda ]; do
        i=$((i + 1))
        [ $i -lt 100 ] || die "no /dev/vda after loading virtio_blk"
        sleep 0.1
    done
    mkdir -p /var/lib/monitord
    mount -t ext4 /dev/vda /var/lib/monitord || die "mount /dev/vda"
    BOOT=$(($(cat /var/lib/monitord/boots 2>/dev/null || echo 0) + 1))
    echo $BOOT >/var/lib/monitord/boots
    sync
    say "BOOT $BOOT of the history case"
    STATE="--state-directory /var/lib/monitord"
fi

# The CPUs' time in idle states so far, in microseconds (cpuidle; empty without a driver).
residency() {
    cat /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/time 2>/dev/null |
        awk '{ t += $1 } END { if (NR) print t }'
}
# The default case: the idle residency over 10 s without monitord, for the one with it below.
if [ "$CASE" = default ]; then
    say "CPUIDLE driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)"
    r0=$(residency)
    sleep 10
    r1=$(residency)
    [ -n "$r0" ] && say "RESIDENCY_WITHOUT $((r1 - r0)) us in 10 s"
fi

# A 20 s window: busy95 reads the load of its last 20 s. The watchdog is opt-in: the default
# case gives no device, and the daemon must leave /dev/watchdog alone.
if [ "$CASE" = default ]; then
    monitord --socket /run/monitord.sock --history-seconds 20 &
else
    # shellcheck disable=SC2086  # $STATE is an option and its value, or nothing
    monitord --socket /run/monitord.sock --watchdog /dev/watchdog --watchdog-timeout "$TIMEOUT" \
        --probe "$PROBE" --history-seconds 20 ${STATE:-} &
fi
MONITORD=$!
i=0
until monctl -s /run/monitord.sock status >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] || die "monitord did not answer within 10 s"
    sleep 0.1
done
say "READY case=$CASE wd=$WD probe=$PROBE"
monctl -s /run/monitord.sock watchdog status
if [ "$CASE" = idle ]; then
    # A second daemon finds the device held (EBUSY) and must say who may hold it.
    if monitord --socket /run/second.sock --watchdog /dev/watchdog 2>&1 | grep -q RuntimeWatchdogSec; then
        say "BUSY_EXPLAINED"
    fi
fi

# Busy loops on every CPU; $1: chrt arguments for a real-time policy, or nothing.
load() {
    for cpu in $(seq 0 $(($(nproc) - 1))); do
        if [ -n "${1:-}" ]; then
            taskset -c "$cpu" chrt $1 sh -c 'while :; do :; done' &
        else
            taskset -c "$cpu" sh -c 'while :; do :; done' &
        fi
    done
}

# One busy loop on cpu1 placed as $1 says: in another session, or in a cgroup (cgroup2 with
# the cpu controller) of its own, with cpu.idle=1 for idlecgroup.
busy_elsewhere() {
    case $1 in
        session)
            setsid taskset -c 1 sh -c 'while :; do :; done' &
            ;;
        cgroup | idlecgroup)
            mount -t cgroup2 none /sys/fs/cgroup || die "mount cgroup2"
            echo +cpu >/sys/fs/cgroup/cgroup.subtree_control || die "enable the cpu controller"
            mkdir /sys/fs/cgroup/busy || die "mkdir a cgroup"
            if [ "$1" = idlecgroup ]; then
                echo 1 >/sys/fs/cgroup/busy/cpu.idle || die "cpu.idle"
            fi
            taskset -c 1 sh -c 'while :; do :; done' &
            echo $! >/sys/fs/cgroup/busy/cgroup.procs || die "move the loop into the cgroup"
            ;;
    esac
}

# How long a case that must not reset the machine runs: twice the timeout, past the one
# timeout and the margin within which a machine whose pets stopped is reset.
SURVIVE=$((2 * TIMEOUT))
survive() {  # $1 seconds, showing the watchdog on the way
    end=$(($(cut -d. -f1 /proc/uptime) + $1))
    while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
        sleep 5
        monctl -s /run/monitord.sock watchdog status 2>&1 | grep -E "pets|last pet|time left"
    done
}

case $CASE in
    idle)
        survive $SURVIVE
        monctl -s /run/monitord.sock watchdog status
        ;;
    default)
        # No watchdog setting: /dev/watchdog exists but is never opened, so it never starts.
        if monctl -s /run/monitord.sock watchdog status | grep -q "No watchdog"; then
            say "NO_WATCHDOG"
        fi
        monctl -s /run/monitord.sock status | grep -i probe
        r0=$(residency)
        sleep 10
        r1=$(residency)
        [ -n "$r0" ] && say "RESIDENCY_WITH $((r1 - r0)) us in 10 s"
        sleep $((SURVIVE - 10))
        # The daemon's own CPU time over its run: clock ticks (utime + stime), and ticks a second.
        say "MONITORD_TICKS $(awk '{ print $14 + $15 }' /proc/$MONITORD/stat) $(getconf CLK_TCK 2>/dev/null || echo 100)"
        ;;
    busy95)
        # A healthy, busy machine: 5 % idle time on every CPU is 500 ms per 10 s, five times
        # what the probes need to keep petting. Under TCG the guest's timers fire late and its
        # vCPUs lose time to the host, which lengthens the idle spans: asking for 98 % in
        # periods of 100 ms leaves the probes about 5 % (the host checks what they measured).
        say "LOAD 95 % on $(nproc) CPUs"
        bench-duty-cycle 98 $((SURVIVE + 5)) 100 &
        LOAD=$!
        survive $SURVIVE
        say "MEASURED $(monctl -s /run/monitord.sock loading | awk '$1 == "all" { print $3 }')"
        wait $LOAD
        monctl -s /run/monitord.sock loading
        monctl -s /run/monitord.sock watchdog status
        ;;
    busy)
        say "LOAD normal priority on $(nproc) CPUs"
        load
        sleep $((6 * TIMEOUT))
        ;;
    fifo)
        # Without this the kernel keeps 5% of each second for normal tasks (RT throttling),
        # from which the SCHED_IDLE probes could still earn a credit every ~2 s (not
        # measured here).
        echo -1 >/proc/sys/kernel/sched_rt_runtime_us
        say "LOAD SCHED_FIFO on $(nproc) CPUs"
        load "-f 50"
        sleep $((6 * TIMEOUT))
        ;;
    sigterm)
        kill -TERM $MONITORD
        wait $MONITORD
        say "STOPPED monitord exit=$?"
        survive $SURVIVE
        ;;
    session | cgroup | idlecgroup)
        say "LOAD normal priority on cpu1, in $CASE"
        busy_elsewhere "$CASE"
        sleep $((6 * TIMEOUT))
        ;;
    sigkill)
        kill -KILL $MONITORD
        say "KILLED"
        sleep $((6 * TIMEOUT))
        ;;
    nowayout)
        # The driver cannot be stopped: the daemon must say so, and not claim to disarm it.
        if monctl -s /run/monitord.sock watchdog status | grep -q "stays armed: the driver has nowayout"; then
            say "NOWAYOUT_SHOWN"
        fi
        kill -TERM $MONITORD
        wait $MONITORD
        say "KILLED monitord stopped, exit=$?"
        sleep $((6 * TIMEOUT))
        ;;
    history)
        # The runs the history keeps, as one line of JSON for the host.
        runs() { say "RUNS $(monctl -s /run/monitord.sock watchdog history --json | tr -d ' \n')"; }
        case $BOOT in
            1)
                # Seconds of an idle machine, then every CPU starved until the watchdog resets
                # it: the seconds before the reset are the evidence, and must be on the disk.
                sleep 5
                say "LOAD normal priority on $(nproc) CPUs"
                load
                sleep $((6 * TIMEOUT))
                ;;
            2)
                # After the reset (the same VM): how the first run ended. Then every CPU half
                # busy, until the host cuts the power in the middle of the writes.
                runs
                bench-duty-cycle 50 600 100 &
                sleep 12
                say "WRITING $(date +%s)"
                sleep 600
                ;;
            3)
                # Another VM on the same disk: how the second run ended. The host reads the
                # file itself once this VM is off.
                runs
                kill -TERM $MONITORD
                wait $MONITORD
                umount /var/lib/monitord || die "umount /dev/vda"
                ;;
            *) die "boot $BOOT of the history case: the disk was not new" ;;
        esac
        ;;
    *) die "unknown case '$CASE'" ;;
esac
say "ALIVE"
poweroff -f
