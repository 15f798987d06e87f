#!/bin/busybox sh
# /init of the test VM: mounts the kernel filesystems, loads the watchdog driver named on the
# kernel command line (wd=i6300esb|softdog), runs monitord on /dev/watchdog, then the case
# named by case=: idle, busy95, busy, fifo, sigterm, sigkill. Lines starting with "VMTEST:" are read
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
    esac
done
TIMEOUT=${TIMEOUT:-10}
say() { echo "VMTEST: $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }
die() { say "ERROR $*"; poweroff -f; }

insmod /modules/watchdog.ko || die "insmod watchdog"
insmod "/modules/$WD.ko" || die "insmod $WD"
[ -c /dev/watchdog ] || die "no /dev/watchdog after loading $WD"

# A 20 s window: busy95 reads the load of its last 20 s.
monitord --socket /run/monitord.sock --watchdog /dev/watchdog --watchdog-timeout "$TIMEOUT" \
    --history-seconds 20 &
MONITORD=$!
i=0
until monctl -s /run/monitord.sock status >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] || die "monitord did not answer within 10 s"
    sleep 0.1
done
say "READY case=$CASE wd=$WD"
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

survive() {  # $1 seconds, showing the watchdog on the way
    end=$(($(cut -d. -f1 /proc/uptime) + $1))
    while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
        sleep 5
        monctl -s /run/monitord.sock watchdog status 2>&1 | grep -E "pets|last pet|time left"
    done
}

case $CASE in
    idle)
        survive $((3 * TIMEOUT))
        monctl -s /run/monitord.sock watchdog status
        ;;
    busy95)
        # A healthy, busy machine: 5 % idle time on every CPU is 500 ms per 10 s, five times
        # what the probes need to keep petting. Under TCG the guest's timers fire late and its
        # vCPUs lose time to the host, which lengthens the idle spans: asking for 98 % in
        # periods of 100 ms leaves the probes about 5 % (the host checks what they measured).
        say "LOAD 95 % on $(nproc) CPUs"
        bench-duty-cycle 98 $((3 * TIMEOUT + 5)) 100 &
        LOAD=$!
        survive $((3 * TIMEOUT))
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
        survive $((3 * TIMEOUT))
        ;;
    sigkill)
        kill -KILL $MONITORD
        say "KILLED"
        sleep $((6 * TIMEOUT))
        ;;
    *) die "unknown case '$CASE'" ;;
esac
say "ALIVE"
poweroff -f
