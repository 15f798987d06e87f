// The /init of a 750 Linux under qemu-system-ppc (kernel/test-ppc750-pmu): checks that the
// kernel's 750 PMU driver (the series in kernel/linux-*/) agrees with libmonitord's ppc750
// table and programs the registers as the 750's manual lays them out, then powers the machine
// off. Prints "PMU-TEST ok|FAIL|note: ..." lines and a last line "PMU-TEST done: N passed, M
// failed", which the script on the host reads.
//
// QEMU keeps the 750's PMU registers but does not count events: counts read here are whatever
// QEMU leaves in the registers and are reported as such, not as measurements.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <sys/ioctl.h>
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
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
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

// The PMU's registers as the driver and core-book3s programmed them, read through their
// user-mode copies (mfspr in problem state; QEMU keeps the values written): UMMCR0 936,
// UPMC1 937, UPMC2 938, UMMCR1 940, UPMC3 941, UPMC4 942.
template <int Spr>
std::uint32_t user_spr() {
    std::uint32_t value = 0;
    asm volatile("mfspr %0, %1" : "=r"(value) : "i"(Spr));
    return value;
}

struct PmuRegisters {
    std::uint32_t mmcr0 = 0;
    std::uint32_t mmcr1 = 0;
    std::uint32_t pmc[4] = {};
};

PmuRegisters read_pmu() {
    return {user_spr<936>(),
            user_spr<940>(),
            {user_spr<937>(), user_spr<938>(), user_spr<941>(), user_spr<942>()}};
}

// MMCR0 and MMCR1 as the 750's manual lays them out (IBM bit numbering; masks LSB-0 here):
// written from the manual, not from the driver's tables, so that a field the driver puts in
// the wrong place is seen.
constexpr std::uint32_t kFc = 0x80000000;      // bit 0: freeze all counters
constexpr std::uint32_t kFcs = 0x40000000;     // bit 1: freeze in supervisor state
constexpr std::uint32_t kFcp = 0x20000000;     // bit 2: freeze in problem (user) state
constexpr std::uint32_t kPmxe = 0x04000000;    // bit 5: performance monitor interrupt
constexpr std::uint32_t kFcece = 0x02000000;   // bit 6: freeze on the enabled condition
constexpr std::uint32_t kPmc1ce = 0x00008000;  // bit 16: PMC1's overflow is a condition
constexpr std::uint32_t kPmcnce = 0x00004000;  // bit 17: PMC2-4's overflows are

// The select of each counter: PMC1 bits 19-25 and PMC2 bits 26-31 of MMCR0, PMC3 bits 0-4 and
// PMC4 bits 5-9 of MMCR1; THRESHOLD bits 10-15 of MMCR0.
std::uint32_t select_of(const PmuRegisters& r, int pmc) {
    switch (pmc) {
        case 1:
            return (r.mmcr0 >> 6) & 0x7f;
        case 2:
            return r.mmcr0 & 0x3f;
        case 3:
            return (r.mmcr1 >> 27) & 0x1f;
        default:
            return (r.mmcr1 >> 22) & 0x1f;
    }
}
std::uint32_t threshold_of(const PmuRegisters& r) {
    return (r.mmcr0 >> 16) & 0x3f;
}

std::string describe(const PmuRegisters& r) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "MMCR0 %08x MMCR1 %08x PMC1 %08x PMC2 %08x PMC3 %08x PMC4 %08x", r.mmcr0, r.mmcr1,
                  r.pmc[0], r.pmc[1], r.pmc[2], r.pmc[3]);
    return text;
}

// The processor version register as /proc/cpuinfo shows it ("revision : 3.1 (pvr 0008 0301)");
// 0 when it does not.
std::uint32_t cpuinfo_pvr() {
    const std::string text = read_file("/proc/cpuinfo");
    const auto at = text.find("(pvr ");
    unsigned version = 0, revision = 0;
    if (at == std::string::npos ||
        std::sscanf(text.c_str() + at, "(pvr %x %x)", &version, &revision) != 2) {
        return 0;
    }
    return (version << 16) | revision;
}

// The revisions that must not take the performance monitor interrupt beside the decrementer's:
// every PVR version 0x0008 part (the MPC750/755 user's manual, appendix C; 750CXe DD2.x erratum
// 13) and the 750FX before DD2.3. The driver counts there without overflow conditions, and
// sets them only for a group that samples.
bool interrupt_unsafe(std::uint32_t pvr) {
    const std::uint32_t version = pvr >> 16;
    return version == 0x0008 || (version == 0x7000 && (pvr & 0xff0f) < 0x0203);
}

struct GroupCase {
    const char* what;
    std::vector<std::uint64_t> codes;
    bool exclude_user = false;
    bool exclude_kernel = false;
    std::uint64_t sample_period = 0;  // the leader's
    // What the registers must hold while the group counts: each counter's select (0: unused).
    std::uint32_t selects[4] = {};
    std::uint32_t threshold = 0;
};

// Opens `c`'s events as one group on this thread, enables it, reads the registers while it
// counts, then disables and closes it; nullopt when the group did not open.
std::optional<PmuRegisters> registers_while_counting(const GroupCase& c) {
    std::vector<int> fds;
    auto close_all = [&] {
        for (int fd : fds) ::close(fd);
    };
    for (std::size_t i = 0; i < c.codes.size(); ++i) {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_RAW;
        attr.config = c.codes[i];
        attr.disabled = i == 0 ? 1 : 0;
        attr.exclude_user = c.exclude_user ? 1 : 0;
        attr.exclude_kernel = c.exclude_kernel ? 1 : 0;
        attr.exclude_hv = 1;
        if (i == 0) attr.sample_period = c.sample_period;
        const long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, fds.empty() ? -1 : fds[0], 0);
        if (fd < 0) {
            check(false, "%s: event 0x%llx does not open (%s)", c.what,
                  static_cast<unsigned long long>(c.codes[i]), std::strerror(errno));
            close_all();
            return std::nullopt;
        }
        fds.push_back(static_cast<int>(fd));
    }
    ::ioctl(fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
    const PmuRegisters counting = read_pmu();
    ::ioctl(fds[0], PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
    close_all();
    return counting;
}

// While each group counts, the registers hold what the events ask: the selects in the
// manual's fields, the threshold, the freeze bits of the exclude flags, the overflow
// conditions of the counters in use, and a sampling counter preloaded to overflow after its
// period; once they are closed, the counters are frozen.
void registers() {
    const std::uint32_t pvr = cpuinfo_pvr();
    const bool unsafe = interrupt_unsafe(pvr);
    char pvr_text[64];
    std::snprintf(pvr_text, sizeof pvr_text, "PVR %08x: %s", pvr,
                  unsafe ? "counting groups without overflow conditions" : "overflow conditions");
    note(pvr_text);
    check(pvr != 0, "/proc/cpuinfo gives the PVR (%08x)", pvr);
    const std::vector<GroupCase> cases{
        {.what = "one event on each counter, kernel excluded",
         .codes = {0x105, 0x205, 0x305, 0x405},
         .exclude_kernel = true,
         .selects = {5, 5, 5, 5}},
        {.what = "the counters' own events, user excluded",
         .codes = {0x108, 0x20a, 0x311, 0x40e},
         .exclude_user = true,
         .selects = {0x08, 0x0a, 0x11, 0x0e}},
        {.what = "L1 load misses over a threshold of 20 cycles on PMC1",
         .codes = {(20u << 12) | 0x10a},
         .selects = {0x0a, 0, 0, 0},
         .threshold = 20},
        {.what = "cycles on PMC4 sampled every 1000",
         .codes = {0x401},
         .sample_period = 1000,
         .selects = {0, 0, 0, 1}},
    };
    for (const auto& c : cases) {
        const auto r = registers_while_counting(c);
        if (!r) continue;
        note(std::string{c.what} + ": " + describe(*r));
        for (int pmc = 1; pmc <= 4; ++pmc) {
            check(select_of(*r, pmc) == c.selects[pmc - 1], "%s: PMC%d's select is 0x%02x (%s)",
                  c.what, pmc, c.selects[pmc - 1], describe(*r).c_str());
        }
        check(threshold_of(*r) == c.threshold, "%s: THRESHOLD is %u (%s)", c.what, c.threshold,
              describe(*r).c_str());
        check((r->mmcr0 & kFc) == 0, "%s: the counters are not frozen (FC clear)", c.what);
        check(((r->mmcr0 & kFcs) != 0) == c.exclude_kernel, "%s: FCS %s", c.what,
              c.exclude_kernel ? "set (kernel excluded)" : "clear");
        check(((r->mmcr0 & kFcp) != 0) == c.exclude_user, "%s: FCP %s", c.what,
              c.exclude_user ? "set (user excluded)" : "clear");
        // Overflow conditions for the counters in use, unless the group only counts on a
        // revision that must not take the interrupt.
        const bool conditions = c.sample_period != 0 || !unsafe;
        const bool pmc1 = conditions && c.selects[0] != 0;
        const bool others =
            conditions && (c.selects[1] != 0 || c.selects[2] != 0 || c.selects[3] != 0);
        check(((r->mmcr0 & kPmc1ce) != 0) == pmc1, "%s: PMC1CE %s", c.what,
              pmc1 ? "set (PMC1 in use)" : "clear");
        check(((r->mmcr0 & kPmcnce) != 0) == others, "%s: PMCnCE %s", c.what,
              others ? "set (PMC2-4 in use)" : "clear");
        // core-book3s takes the overflow interrupt with every group, and freezes on it.
        check((r->mmcr0 & (kPmxe | kFcece)) == (kPmxe | kFcece), "%s: PMXE and FCECE set", c.what);
        if (c.sample_period != 0) {
            const std::uint32_t preload = 0x80000000u - static_cast<std::uint32_t>(c.sample_period);
            check(r->pmc[3] == preload, "%s: PMC4 holds 0x%08x, 0x80000000 - %llu (%s)", c.what,
                  preload, static_cast<unsigned long long>(c.sample_period), describe(*r).c_str());
        }
    }
    const PmuRegisters after = read_pmu();
    check((after.mmcr0 & kFc) != 0, "once the groups are closed the counters are frozen (%s)",
          describe(after).c_str());
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

// The hardware check (--hardware, on a board): counts that a 750 gives exactly. Each measure
// counts user mode only, once over a block of code and once over the block twice; the
// difference is what one block did, exactly, whatever the enable and disable calls around it
// count. Blocks are straight-line assembly: no branch, so no folded branch either.
#define MON_REPT(n, insn) ".rept " #n "\n\t" insn "\n\t.endr\n\t"

void block_addi(int twice) {
    unsigned x = 0;
    asm volatile(MON_REPT(1000, "addi %0, %0, 1") : "+r"(x));
    if (twice) asm volatile(MON_REPT(1000, "addi %0, %0, 1") : "+r"(x));
}
void block_eieio(int twice) {
    asm volatile(MON_REPT(1000, "eieio")::: "memory");
    if (twice) asm volatile(MON_REPT(1000, "eieio")::: "memory");
}
void block_sync(int twice) {
    asm volatile(MON_REPT(100, "sync")::: "memory");
    if (twice) asm volatile(MON_REPT(100, "sync")::: "memory");
}
unsigned reservation = 0;
void block_stwcx(int twice) {
    unsigned* at = &reservation;
    unsigned v = 0;
    asm volatile(MON_REPT(100, "lwarx %0, 0, %1\n\tstwcx. %0, 0, %1")
                 : "=&r"(v)
                 : "r"(at)
                 : "cr0", "memory");
    if (twice) {
        asm volatile(MON_REPT(100, "lwarx %0, 0, %1\n\tstwcx. %0, 0, %1")
                     : "=&r"(v)
                     : "r"(at)
                     : "cr0", "memory");
    }
}

// The counts of `codes` (a group, user mode only) over block(twice); empty when the group does
// not open or a read fails.
std::vector<std::uint64_t> count_block(const std::vector<std::uint64_t>& codes, void (*block)(int),
                                       int twice) {
    std::vector<int> fds;
    std::vector<std::uint64_t> counts;
    for (std::uint64_t code : codes) {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_RAW;
        attr.config = code;
        attr.disabled = fds.empty() ? 1 : 0;
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        const long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, fds.empty() ? -1 : fds[0], 0);
        if (fd < 0) break;
        fds.push_back(static_cast<int>(fd));
    }
    if (fds.size() == codes.size()) {
        ::ioctl(fds[0], PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
        ::ioctl(fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
        block(twice);
        ::ioctl(fds[0], PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
        for (int fd : fds) {
            std::uint64_t value = 0;
            if (::read(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) break;
            counts.push_back(value);
        }
    }
    for (int fd : fds) ::close(fd);
    if (counts.size() != codes.size()) counts.clear();
    return counts;
}

// What one block counts on each of `codes`: the difference of the two runs (the least of three
// tries, so that an interrupt's or a context switch's user-mode work in one run does not
// count); empty when a run failed.
std::vector<std::int64_t> per_block(const std::vector<std::uint64_t>& codes, void (*block)(int)) {
    std::vector<std::int64_t> best;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const auto once = count_block(codes, block, 0);
        const auto twice = count_block(codes, block, 1);
        if (once.empty() || twice.empty()) return {};
        for (std::size_t i = 0; i < codes.size(); ++i) {
            const auto d = static_cast<std::int64_t>(twice[i]) - static_cast<std::int64_t>(once[i]);
            if (best.size() <= i) {
                best.push_back(d);
            } else if (std::llabs(d) < std::llabs(best[i])) {
                best[i] = d;
            }
        }
    }
    return best;
}

// The checks of the hardware, with `record` called for each (what, expected, got). On QEMU,
// which does not count, they must fail: the init run shows that they can.
void hardware(const std::function<void(const char*, std::int64_t, std::int64_t)>& record,
              std::chrono::seconds cycles_limit) {
    struct Measure {
        const char* what;
        std::vector<std::uint64_t> codes;
        void (*block)(int);
        std::int64_t expected;
    };
    const std::vector<Measure> measures{
        {"instructions completed (select 2) on PMC1-4 over 1000 addi",
         {0x102, 0x202, 0x302, 0x402},
         block_addi,
         1000},
        {"eieio completed (PMC1 0x05) over 1000 eieio", {0x105}, block_eieio, 1000},
        {"sync completed (PMC4 0x0B) over 100 sync", {0x40b}, block_sync, 100},
        {"stwcx. completed (PMC3 0x0A) over 100 lwarx/stwcx.", {0x30a}, block_stwcx, 100},
    };
    for (const auto& m : measures) {
        const auto got = per_block(m.codes, m.block);
        if (got.empty()) {
            record(m.what, m.expected, -1);
            continue;
        }
        for (std::size_t i = 0; i < got.size(); ++i) {
            char what[160];
            std::snprintf(what, sizeof what, "%s: PMC%u", m.what,
                          static_cast<unsigned>((m.codes[i] >> 8) & 7));
            record(what, m.expected, got[i]);
        }
    }
    // Past 2^31 cycles: PMC1 counts cycles in user mode while this thread spins, read every
    // 100 ms; the count must grow past 2^31 without going back (the kernel folds the 32-bit
    // counter's overflows, or its wraps between reads, into 64 bits).
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_RAW;
    attr.config = 0x101;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    const long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    std::uint64_t last = 0;
    bool monotonic = fd >= 0;
    const auto until = std::chrono::steady_clock::now() + cycles_limit;
    while (fd >= 0 && last <= (3ull << 30) && std::chrono::steady_clock::now() < until) {
        const auto step = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        volatile unsigned spin = 0;
        while (std::chrono::steady_clock::now() < step) spin = spin + 1;
        std::uint64_t value = 0;
        if (::read(static_cast<int>(fd), &value, sizeof value) !=
            static_cast<ssize_t>(sizeof value)) {
            monotonic = false;
            break;
        }
        monotonic = monotonic && value >= last;
        last = value;
    }
    if (fd >= 0) ::close(static_cast<int>(fd));
    record("user-mode cycles on PMC1 grow past 3 * 2^30 in the time given, never going back", 1,
           monotonic && last > (3ull << 30) ? 1 : 0);
}

std::atomic<int> collected{0};
MON_perf_stats collected_stats{};
// Set: the collection's callback does not return until it is cleared (held_poll says it runs).
std::atomic<bool> hold_poll{false};
std::atomic<bool> held_poll{false};

void on_collected(MON_status status, const MON_perf_stats*, void*) {
    collected = status == MON_SUCCESS ? 1 : -1;
    while (hold_poll) {
        held_poll = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

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
    char name[64] = "";
    check(MON_get_perf_event(1, name, sizeof name) == MON_SUCCESS &&
              std::string{name} == "ppc750::CYCLES",
          "MON_get_perf_event(1) says ppc750::CYCLES: '%s'", name);
    // A call in the wrong state says, as fields, where it is valid and where MON is.
    MON_error_info info{};
    check(MON_start(nullptr, nullptr) == MON_BADSTATE && MON_last_error_info(&info) == 0 &&
              info.valid_states == MON_STATE_INITIALIZED && info.state == MON_STATE_RUNNING &&
              std::string{info.call} == "MON_start",
          "MON_start while running: MON_BADSTATE, valid in 0x%x (initialized), MON in 0x%x "
          "(running), call '%s'",
          info.valid_states, info.state, info.call);
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

    // The collection counts L1 load misses over a threshold on PMC1: the name says the threshold
    // the counter was granted.
    config.events[0] = "ppc750::L1_LOAD_MISSES_OVER_THRESHOLD:threshold=16";
    const MON_status collecting =
        MON_collect_perf_stats(&config, 200, &collected_stats, on_collected, nullptr);
    check(collecting == MON_SUCCESS, "MON_collect_perf_stats for 200 ms: %s %s",
          MON_status_name(collecting), MON_last_error());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (collected == 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    check(collected == 1, "the collection's callback came with MON_SUCCESS");
    check(collected_stats.duration_ns >= 200'000'000ull, "it counted for %llu ns (200 ms asked)",
          collected_stats.duration_ns);
    check(MON_get_perf_event(1, name, sizeof name) == MON_SUCCESS &&
              std::string{name} == "ppc750::L1_LOAD_MISSES_OVER_THRESHOLD:threshold=16",
          "MON_get_perf_event(1) after the collection: '%s'", name);

    // A callback that does not return keeps the POLL task: MON_stop says so, and the next one,
    // once it has returned, stops MON.
    hold_poll = true;
    const MON_status holding = MON_collect_perf_stats(&config, 50, nullptr, on_collected, nullptr);
    check(holding == MON_SUCCESS, "MON_collect_perf_stats for 50 ms: %s %s",
          MON_status_name(holding), MON_last_error());
    const auto until_held = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!held_poll && std::chrono::steady_clock::now() < until_held) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const MON_status unjoined = MON_stop();
    info = MON_error_info{};
    (void)MON_last_error_info(&info);
    check(unjoined == MON_TSKJOIN && std::string{info.task} == "POLL" && info.cpu == -1,
          "MON_stop with the POLL task in a callback: %s, task '%s', cpu %d (%s)",
          MON_status_name(unjoined), info.task, info.cpu, MON_last_error());
    hold_poll = false;
    check(MON_stop() == MON_SUCCESS, "MON_stop (%s)", MON_last_error());
    check(MON_shutdown() == MON_SUCCESS, "MON_shutdown (%s)", MON_last_error());
}

}  // namespace

int main(int argc, char** argv) {
    const bool as_init = ::getpid() == 1;
    if (as_init) {
        ::mount("proc", "/proc", "proc", 0, nullptr);
        ::mount("sysfs", "/sys", "sysfs", 0, nullptr);
    }
    if (argc == 2 && std::strcmp(argv[1], "--hardware") == 0) {
        // On a board: what a 750 counts exactly.
        hardware(
            [](const char* what, std::int64_t expected, std::int64_t got) {
                check(got == expected, "%s: %lld (%lld expected)", what,
                      static_cast<long long>(got), static_cast<long long>(expected));
            },
            std::chrono::seconds(60));
        std::printf("PMU-TEST done: %d passed, %d failed\n", passed, failed);
        return failed == 0 ? 0 : 1;
    }
    registration();
    every_code();
    groups();
    registers();
    catalog();
    mon_api();
    // The board's check, where nothing counts: it must fail, or it could pass on a board
    // without counting either.
    int wrong = 0;
    hardware(
        [&wrong](const char* what, std::int64_t expected, std::int64_t got) {
            if (got != expected) ++wrong;
            note(std::string{"--hardware: "} + what + ": " + std::to_string(got) + " (" +
                 std::to_string(expected) + " on a 750)");
        },
        std::chrono::seconds(2));
    check(wrong > 0, "the --hardware check fails where nothing counts (%d of its checks did)",
          wrong);
    std::printf("PMU-TEST done: %d passed, %d failed\n", passed, failed);
    std::fflush(stdout);
    if (as_init) {
        ::sync();
        ::reboot(LINUX_REBOOT_CMD_POWER_OFF);
    }
    return failed == 0 ? 0 : 1;
}
