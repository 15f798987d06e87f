// The /init of a 750 Linux under qemu-system-ppc (kernel/test-ppc750-pmu): checks that the
// kernel's 750 PMU driver (kernel/0001-...patch) agrees with libmonitor's ppc750 table, then
// powers the machine off. Prints "PMU-TEST ok|FAIL|note: ..." lines and a last line
// "PMU-TEST done: N passed, M failed", which the script on the host reads.
//
// QEMU keeps the 750's PMU registers but does not count events: counts read here are whatever
// QEMU leaves in the registers and are reported as such, not as measurements.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mon.h"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/ppc750_events.hpp"

namespace {

int passed = 0;
int failed = 0;

void check(bool ok, const char* format, ...) __attribute__((format(printf, 2, 3)));
void check(bool ok, const char* format, ...) {
    std::printf("PMU-TEST %s: ", ok ? "ok" : "FAIL");
    va_list args;
    va_start(args, format);
    std::vprintf(format, args);
    va_end(args);
    std::printf("\n");
    std::fflush(stdout);
    ++(ok ? passed : failed);
}

void note(const std::string& text) {
    std::printf("PMU-TEST note: %s\n", text.c_str());
    std::fflush(stdout);
}

std::string read_file(const char* path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// perf_event_open of a raw 750 code on this thread: the fd, or -errno.
int open_raw(std::uint64_t config, int group = -1) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_RAW;
    attr.config = config;
    attr.disabled = group < 0 ? 1 : 0;
    attr.exclude_hv = 1;
    const long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, group, 0);
    return fd < 0 ? -errno : static_cast<int>(fd);
}

// The PMU has registered: a core PMU in sysfs taking raw codes, and the 750 in cpuinfo.
void registration() {
    const std::string cpuinfo = read_file("/proc/cpuinfo");
    check(cpuinfo.find("750") != std::string::npos, "/proc/cpuinfo names a 750");
    const std::string type = read_file("/sys/bus/event_source/devices/cpu/type");
    check(std::atoi(type.c_str()) == PERF_TYPE_RAW,
          "a core PMU 'cpu' of type %d (PERF_TYPE_RAW) is registered (type file: '%s')",
          PERF_TYPE_RAW, type.c_str());
    const std::string format = read_file("/sys/bus/event_source/devices/cpu/format/pmcsel");
    check(format.starts_with("config:0-6"), "its format says pmcsel is config:0-6 ('%s')",
          format.c_str());
}

// Every code of the layout's select and counter fields opens exactly when libmonitor's table
// says a counter can hold it.
void every_code() {
    int agree = 0, disagree = 0, opened = 0;
    for (std::uint64_t pmc = 0; pmc <= 5; ++pmc) {
        for (std::uint64_t select = 0; select <= 0x1f; ++select) {
            const std::uint64_t code = (pmc << 8) | select;
            const bool table = monitor::perf::decode_ppc750_raw(code).has_value();
            const int fd = open_raw(code);
            if (fd >= 0) {
                ++opened;
                ::close(fd);
            }
            if ((fd >= 0) == table) {
                ++agree;
            } else {
                ++disagree;
                check(false, "code 0x%03llx: the table says %s, the kernel %s (%s)",
                      static_cast<unsigned long long>(code), table ? "valid" : "invalid",
                      fd >= 0 ? "opened it" : "refused it", fd >= 0 ? "" : std::strerror(-fd));
            }
        }
    }
    check(disagree == 0,
          "%d codes (PMC 0-5, selects 0x00-0x1f): %d opened, the kernel and the table agree on "
          "%d, disagree on %d",
          agree + disagree, opened, agree, disagree);
    // The threshold: PMC1 select 0x0A only.
    const int with = open_raw((20u << 12) | 0x10A);
    check(with >= 0, "PMC1 0x0A with a threshold of 20 opens");
    if (with >= 0) ::close(with);
    const int without = open_raw((20u << 12) | 0x205);
    check(without == -EINVAL, "a threshold on PMC2 0x05 is refused with EINVAL (%s)",
          without < 0 ? std::strerror(-without) : "opened");
    if (without >= 0) ::close(without);
}

// Four counters: a group of four events, one per counter, opens; a fifth member does not; two
// events that both need PMC2 do not go in one group.
void groups() {
    const std::uint64_t codes[] = {0x105, 0x205, 0x305, 0x405, 0x001};
    std::vector<int> fds;
    int leader = -1;
    for (int i = 0; i < 4; ++i) {
        const int fd = open_raw(codes[i], leader);
        check(fd >= 0, "group member %d (0x%03llx) opens", i + 1,
              static_cast<unsigned long long>(codes[i]));
        if (fd < 0) break;
        if (leader < 0) leader = fd;
        fds.push_back(fd);
    }
    if (fds.size() == 4) {
        const int fifth = open_raw(codes[4], leader);
        check(fifth < 0, "a fifth event in the group is refused (%s)",
              fifth < 0 ? std::strerror(-fifth) : "it opened");
        if (fifth >= 0) ::close(fifth);
    }
    for (int fd : fds) ::close(fd);

    const int a = open_raw(0x205);
    const int b = a >= 0 ? open_raw(0x206, a) : -1;
    check(a >= 0 && b < 0, "two PMC2 events in one group are refused (%s)",
          b < 0 ? std::strerror(-b) : "the second opened");
    if (b >= 0) ::close(b);
    if (a >= 0) ::close(a);

    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
    attr.disabled = 1;
    const long cycles = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    check(cycles >= 0, "the kernel's generic 'cycles' opens on the 750 PMU (%s)",
          cycles < 0 ? std::strerror(errno) : "ok");
    if (cycles >= 0) ::close(static_cast<int>(cycles));
}

// libmonitor's processor check lets ppc750 events count here.
void catalog() {
    auto c = monitor::perf::EventCatalog::create();
    check(c.has_value(), "the event catalog starts");
    if (!c) return;
    auto spec = c->resolve("ppc750::L1_ICACHE_MISSES");
    check(spec.has_value(), "ppc750::L1_ICACHE_MISSES resolves");
    if (!spec) return;
    auto countable = c->countable(*spec);
    check(countable.has_value(), "libmonitor says the ppc750 table counts on this machine%s%s",
          countable ? "" : ": ", countable ? "" : countable.error().message.c_str());
}

std::atomic<int> collected{0};
MON_perf_stats collected_stats{};

// The MON API end to end: a session started, counted and stopped, then a collection whose
// callback comes from the POLL task.
void mon_api() {
    check(MON_initialize() == MON_SUCCESS, "MON_initialize (%s)", MON_last_error());
    check(MON_start(nullptr, nullptr) == MON_SUCCESS, "MON_start (%s)", MON_last_error());
    MON_perf_config config{{"ppc750::CYCLES", "ppc750::L1_ICACHE_MISSES",
                            "ppc750::L1_DCACHE_MISSES", "ppc750::BRANCHES_MISPREDICTED"},
                           MON_PERF_THREAD,
                           0,
                           0};
    const MON_status started = MON_start_perf_mon(&config);
    check(started == MON_SUCCESS, "MON_start_perf_mon with four ppc750 events, one per PMC: %s %s",
          MON_status_name(started), MON_last_error());
    volatile unsigned sink = 0;
    for (unsigned i = 0; i < 2'000'000; ++i) sink = sink + i;
    MON_perf_stats stats{};
    const MON_status stopped = MON_stop_perf_mon(&stats);
    check(stopped == MON_SUCCESS, "MON_stop_perf_mon: %s %s", MON_status_name(stopped),
          MON_last_error());
    for (int set = 0; set < MON_PERF_SETS; ++set) {
        check(stats.counts[set].running_ns > 0 && stats.counts[set].enabled_ns > 0,
              "set %d (%s) was on a counter for %llu of %llu ns", set + 1, config.events[set],
              stats.counts[set].running_ns, stats.counts[set].enabled_ns);
        note("set " + std::to_string(set + 1) + " read " + std::to_string(stats.counts[set].count) +
             " (QEMU does not count 750 events: not a measurement)");
    }

    const MON_status collecting = MON_collect_perf_stats(
        &config, 200, &collected_stats,
        [](MON_status status, const MON_perf_stats*, void*) {
            collected = status == MON_SUCCESS ? 1 : -1;
        },
        nullptr);
    check(collecting == MON_SUCCESS, "MON_collect_perf_stats for 200 ms: %s %s",
          MON_status_name(collecting), MON_last_error());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (collected == 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    check(collected == 1, "the collection's callback came with MON_SUCCESS");
    check(collected_stats.duration_ns >= 200'000'000ull, "it counted for %llu ns (200 ms asked)",
          collected_stats.duration_ns);
    check(MON_stop() == MON_SUCCESS, "MON_stop (%s)", MON_last_error());
    check(MON_shutdown() == MON_SUCCESS, "MON_shutdown (%s)", MON_last_error());
}

}  // namespace

int main() {
    const bool as_init = ::getpid() == 1;
    if (as_init) {
        ::mount("proc", "/proc", "proc", 0, nullptr);
        ::mount("sysfs", "/sys", "sysfs", 0, nullptr);
    }
    registration();
    every_code();
    groups();
    catalog();
    mon_api();
    std::printf("PMU-TEST done: %d passed, %d failed\n", passed, failed);
    std::fflush(stdout);
    if (as_init) {
        ::sync();
        ::reboot(LINUX_REBOOT_CMD_POWER_OFF);
    }
    return failed == 0 ? 0 : 1;
}
