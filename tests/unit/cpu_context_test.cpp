// The CPU's context: described /proc and /sys texts of a four-CPU machine read twice, the
// kernel's quirks (32-bit interrupt counts that wrap, a CPU that comes online, machine-wide
// rows), bad text, injected roots, and this machine's own files.
#include "monitor/loading/cpu_context.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;
using test_support::ScratchDir;
using test_support::write_file;

std::string stat(int running, int blocked) {
    return "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 99 1 2\nctxt 5\n"
           "procs_running " +
           std::to_string(running) + "\nprocs_blocked " + std::to_string(blocked) + "\n";
}

std::string pressure(std::uint64_t total_us, const char* avg10 = "12.50") {
    return std::string("some avg10=") + avg10 +
           " avg60=3.00 avg300=1.25 total=" + std::to_string(total_us) +
           "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
}

// /proc/schedstat (version 15 on): each cpu line's eighth count is the run-queue wait in ns.
std::string schedstat(const std::vector<std::uint64_t>& run_delay_ns) {
    std::string s = "version 15\ntimestamp 4295000000\n";
    for (std::size_t c = 0; c < run_delay_ns.size(); ++c) {
        s += "cpu" + std::to_string(c) + " 0 0 100 50 60 30 123456 " +
             std::to_string(run_delay_ns[c]) + " 77\n";
        s += "domain0 00000003 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 "
             "25 26 27 28 29 30 31 32 33 34 35 36\n";
    }
    return s;
}

// /proc/interrupts as x86 prints it: numbered lines with a chip and the device, named ones
// with a count per CPU, and ERR/MIS with one count for the machine.
std::string interrupts(const std::vector<int>& cpus, std::uint64_t timer, std::uint64_t nic,
                       std::uint64_t loc, std::uint64_t err) {
    std::string s = "       ";
    for (int c : cpus) s += "    CPU" + std::to_string(c) + " ";
    s += "\n";
    auto row = [&](const std::string& name, const std::vector<std::uint64_t>& v,
                   const std::string& what) {
        s += name + ":";
        for (auto x : v) s += " " + std::to_string(x);
        s += "   " + what + "\n";
    };
    std::vector<std::uint64_t> t(cpus.size(), 0), n(cpus.size(), 0), l(cpus.size(), loc);
    t[0] = timer;              // the timer on the first CPU only
    n[cpus.size() - 1] = nic;  // the network card on the last
    row("  0", t, "IO-APIC   2-edge      timer");
    row(" 24", n, "PCI-MSI 49152-edge      eth0-rx-0");
    row("LOC", l, "Local timer interrupts");
    row("ERR", {err}, "");
    return s;
}

std::string softirqs(std::size_t cpus, std::uint64_t timer, std::uint64_t net_rx) {
    std::string s = "                    ";
    for (std::size_t c = 0; c < cpus; ++c) s += "CPU" + std::to_string(c) + "       ";
    s += "\n";
    for (const char* kind : {"HI", "TIMER", "NET_TX", "NET_RX", "SCHED"}) {
        s += std::string("      ") + kind + ":";
        for (std::size_t c = 0; c < cpus; ++c) {
            const std::uint64_t v = std::string(kind) == "TIMER"              ? timer
                                    : std::string(kind) == "NET_RX" && c == 1 ? net_rx
                                                                              : 0;
            s += "  " + std::to_string(v);
        }
        s += "\n";
    }
    return s;
}

// The figures of `cpu`; cpu -1 and none when the sample has none.
CpuContextFigures find_cpu(const CpuContextSample& s, int cpu) {
    for (const auto& c : s.cpus) {
        if (c.cpu == cpu) return c;
    }
    return {.cpu = -1};
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const auto& l) { return l.find(what) != std::string::npos; });
}

TEST(CpuContext, TwoReadingsGiveTheRatesOfTheInterval) {
    CpuContextText before{stat(3, 0),
                          pressure(1'000'000),
                          schedstat({0, 0, 0, 0}),
                          interrupts({0, 1, 2, 3}, 1000, 5000, 100, 7),
                          softirqs(4, 10, 0),
                          {{0, "2400000\n"}, {1, "1200000\n"}}};
    // Two seconds later: 0.5 s of pressure, cpu2's queue held 3 waiting tasks on average,
    // the timer fired 200 times on cpu0, the card 3000 times on cpu3, each CPU's local timer
    // 500 times, two errors; the timer softirq 250 times a CPU, NET_RX 40 times on cpu1.
    CpuContextText now{stat(5, 1),
                       pressure(1'500'000),
                       schedstat({0, 200'000'000, 6'000'000'000, 0}),
                       interrupts({0, 1, 2, 3}, 1200, 8000, 1100, 9),
                       softirqs(4, 510, 80),
                       {{0, "2400000\n"}, {1, "3000000\n"}}};
    const auto s = CpuContext::figure(now, &before, 2.0);
    EXPECT_TRUE(s.unavailable.empty()) << s.unavailable.front();
    EXPECT_EQ(s.seconds, 2.0);
    EXPECT_EQ(s.procs_running, 5u);
    EXPECT_EQ(s.procs_blocked, 1u);
    ASSERT_TRUE(s.pressure_some);
    EXPECT_DOUBLE_EQ(*s.pressure_some, 0.25) << "0.5 s of pressure over 2 s";
    EXPECT_DOUBLE_EQ(s.pressure_avg10.value_or(-1), 12.5);
    EXPECT_DOUBLE_EQ(s.pressure_avg60.value_or(-1), 3.0);
    EXPECT_DOUBLE_EQ(s.pressure_avg300.value_or(-1), 1.25);
    ASSERT_TRUE(s.waiting);
    EXPECT_DOUBLE_EQ(*s.waiting, 3.1);
    ASSERT_EQ(s.cpus.size(), 4u);
    EXPECT_DOUBLE_EQ(find_cpu(s, 2).waiting.value_or(-1), 3.0);
    EXPECT_DOUBLE_EQ(find_cpu(s, 1).waiting.value_or(-1), 0.1);
    EXPECT_DOUBLE_EQ(find_cpu(s, 0).frequency_mhz.value_or(-1), 2400);
    EXPECT_DOUBLE_EQ(find_cpu(s, 1).frequency_mhz.value_or(-1), 3000) << "the clock now";
    EXPECT_FALSE(find_cpu(s, 2).frequency_mhz) << "no cpufreq for cpu2";

    // Interrupts: (200 + 3000 + 4 x 1000 + 2) / 2 s, busiest source first.
    ASSERT_TRUE(s.interrupts);
    EXPECT_DOUBLE_EQ(*s.interrupts, 3601.0);
    ASSERT_EQ(s.interrupt_sources.size(), 4u);
    EXPECT_EQ(s.interrupt_sources[0].source, "LOC");
    EXPECT_DOUBLE_EQ(s.interrupt_sources[0].per_second, 2000.0);
    EXPECT_EQ(s.interrupt_sources[0].description, "Local timer interrupts");
    EXPECT_EQ(s.interrupt_sources[1].source, "24");
    EXPECT_EQ(s.interrupt_sources[1].description, "PCI-MSI 49152-edge eth0-rx-0");
    EXPECT_DOUBLE_EQ(s.interrupt_sources[1].per_second, 1500.0);
    EXPECT_EQ(s.interrupt_sources[2].source, "0");
    EXPECT_EQ(s.interrupt_sources[3].source, "ERR");
    EXPECT_DOUBLE_EQ(s.interrupt_sources[3].per_second, 1.0) << "a count for the machine";
    EXPECT_DOUBLE_EQ(find_cpu(s, 0).interrupts.value_or(-1), 600.0);
    EXPECT_DOUBLE_EQ(find_cpu(s, 3).interrupts.value_or(-1), 2000.0);
    EXPECT_EQ(find_cpu(s, 3).top_interrupt, "24");
    EXPECT_EQ(find_cpu(s, 1).top_interrupt, "LOC");

    ASSERT_TRUE(s.softirqs);
    EXPECT_DOUBLE_EQ(*s.softirqs, 4 * 250.0 + 40.0);
    ASSERT_EQ(s.softirq_kinds.size(), 2u) << "the kinds that ran";
    EXPECT_EQ(s.softirq_kinds[0].source, "TIMER");
    EXPECT_EQ(s.softirq_kinds[1].source, "NET_RX");
    EXPECT_DOUBLE_EQ(find_cpu(s, 1).softirqs.value_or(-1), 290.0);
}

TEST(CpuContext, AFirstReadingHasNoRates) {
    CpuContextText once{stat(2, 0),        pressure(5),
                        schedstat({1, 2}), interrupts({0, 1}, 1, 1, 1, 0),
                        softirqs(2, 1, 1), {{0, "800000"}}};
    const auto s = CpuContext::figure(once, nullptr, 0);
    EXPECT_EQ(s.seconds, 0.0);
    EXPECT_EQ(s.procs_running, 2u);
    EXPECT_TRUE(s.pressure_avg10) << "the kernel's own averages need no interval";
    EXPECT_FALSE(s.pressure_some);
    EXPECT_FALSE(s.waiting);
    EXPECT_FALSE(s.interrupts);
    EXPECT_FALSE(s.softirqs);
    EXPECT_TRUE(s.interrupt_sources.empty());
    ASSERT_EQ(s.cpus.size(), 2u);
    EXPECT_DOUBLE_EQ(s.cpus[0].frequency_mhz.value_or(-1), 800);
    EXPECT_FALSE(s.cpus[0].waiting);
}

// The kernel keeps interrupt counts per CPU in an unsigned int and prints them with %u.
TEST(CpuContext, InterruptCountsThatWrapAt32BitsStillGrow) {
    CpuContextText before{"", "", "", interrupts({0}, 0xffffff00ULL, 0, 0, 0), "", {}};
    CpuContextText now{"", "", "", interrupts({0}, 0x100, 0, 0, 0), "", {}};
    const auto s = CpuContext::figure(now, &before, 1.0);
    ASSERT_TRUE(s.interrupts);
    EXPECT_DOUBLE_EQ(*s.interrupts, 512.0) << "0x100 past the wrap of 0xffffff00";
}

// cpu2 came online between the readings: its column is new, and has no rate yet; the others
// keep theirs, matched by CPU number, not by column.
TEST(CpuContext, ACpuThatCameOnlineHasNoRateYet) {
    CpuContextText before{"", "", "", interrupts({0, 3}, 100, 100, 10, 0), "", {}};
    CpuContextText now{"", "", "", interrupts({0, 2, 3}, 300, 700, 20, 0), "", {}};
    const auto s = CpuContext::figure(now, &before, 1.0);
    ASSERT_TRUE(s.interrupts);
    EXPECT_DOUBLE_EQ(find_cpu(s, 0).interrupts.value_or(-1), 200.0 + 10.0);
    EXPECT_DOUBLE_EQ(find_cpu(s, 3).interrupts.value_or(-1), 600.0 + 10.0);
    EXPECT_DOUBLE_EQ(find_cpu(s, 2).interrupts.value_or(-1), 0.0);
    EXPECT_DOUBLE_EQ(*s.interrupts, 820.0);
}

// Text that is not the kernel's: that file's figures are left out, said naming the file and
// the line; the others stand.
TEST(CpuContext, BadTextIsSaidNamingTheFileAndLine) {
    CpuContextText good{stat(1, 0),        pressure(0),
                        schedstat({0, 0}), interrupts({0, 1}, 1, 1, 1, 0),
                        softirqs(2, 1, 1), {}};
    struct Case {
        const char* what;
        CpuContextText text;
        const char* said;
    };
    auto with = [&](auto change) {
        CpuContextText t = good;
        change(t);
        return t;
    };
    const std::vector<Case> cases = {
        {"a count that is not a number", with([](auto& t) { t.stat = "procs_running lots\n"; }),
         "/proc/stat: line 1"},
        {"psi without its total",
         with([](auto& t) { t.pressure = "some avg10=1.00 avg60=1.00 avg300=1.00\n"; }),
         "/proc/pressure/cpu: line 1"},
        {"a short cpu line", with([](auto& t) { t.schedstat = "version 15\ncpu0 1 2 3\n"; }),
         "/proc/schedstat: line 2"},
        {"a header that is not CPUs",
         with([](auto& t) { t.interrupts = "   CPU0  GPU1\n  0: 1 2 timer\n"; }),
         "/proc/interrupts: line 1"},
        {"a row with a count missing",
         with([](auto& t) { t.softirqs = "   CPU0  CPU1  CPU2\n  HI: 1 2\n"; }),
         "/proc/softirqs: line 2"},
        {"a row without a source", with([](auto& t) { t.interrupts = "   CPU0\n 1 2 3\n"; }),
         "/proc/interrupts: line 2"},
    };
    for (const auto& c : cases) {
        const auto s = CpuContext::figure(c.text, &good, 1.0);
        EXPECT_TRUE(mentions(s.unavailable, c.said))
            << c.what << ": " << testing::PrintToString(s.unavailable);
        EXPECT_TRUE(s.pressure_some || std::string(c.said).find("pressure") != std::string::npos)
            << c.what << ": the other files stand";
    }
    // Nothing at all, or a file of NULs: no figures, no crash.
    const auto empty = CpuContext::figure(CpuContextText{}, &good, 1.0);
    EXPECT_FALSE(empty.interrupts);
    EXPECT_TRUE(empty.cpus.empty());
    const auto nuls = CpuContext::figure(CpuContextText{std::string(8, '\0'),
                                                        std::string(8, '\0'),
                                                        std::string(8, '\0'),
                                                        std::string(8, '\0'),
                                                        std::string(8, '\0'),
                                                        {{0, std::string(3, '\0')}}},
                                         &good, 1.0);
    EXPECT_FALSE(nuls.interrupts);
}

// Injected roots: the files of a machine the test describes, read through open and sample.
TEST(CpuContext, InjectedRootsAreReadAndWhatIsMissingIsSaid) {
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty());
    const auto proc = dir.path() / "proc";
    const auto sys = dir.path() / "sys";
    write_file(proc / "stat", stat(2, 0));
    write_file(proc / "schedstat", schedstat({0, 0}));
    write_file(proc / "interrupts", interrupts({0, 1}, 10, 10, 10, 0));
    write_file(proc / "softirqs", softirqs(2, 5, 5));
    write_file(sys / "devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "1800000\n");
    auto ctx = CpuContext::open(proc, sys);
    ASSERT_TRUE(ctx) << ctx.error().to_string();
    const auto t0 = std::chrono::steady_clock::time_point{} + 100s;
    auto first = ctx->sample(t0);
    ASSERT_TRUE(first) << first.error().to_string();
    EXPECT_TRUE(mentions(first->unavailable, "/proc/pressure/cpu"));
    EXPECT_TRUE(mentions(first->unavailable, "CONFIG_PSI"));
    EXPECT_DOUBLE_EQ(find_cpu(*first, 1).frequency_mhz.value_or(-1), 1800);
    EXPECT_FALSE(first->interrupts);

    write_file(proc / "schedstat", schedstat({250'000'000, 0}));
    write_file(proc / "interrupts", interrupts({0, 1}, 110, 10, 60, 0));
    write_file(sys / "devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "900000\n");
    auto second = ctx->sample(t0 + 500ms);
    ASSERT_TRUE(second) << second.error().to_string();
    EXPECT_EQ(second->seconds, 0.5);
    EXPECT_DOUBLE_EQ(find_cpu(*second, 0).waiting.value_or(-1), 0.5);
    EXPECT_DOUBLE_EQ(second->interrupts.value_or(-1), (100.0 + 100.0) / 0.5);
    EXPECT_DOUBLE_EQ(find_cpu(*second, 1).frequency_mhz.value_or(-1), 900) << "read again";
    EXPECT_FALSE(find_cpu(*second, 0).frequency_mhz);

    // No cpufreq anywhere: said once, as what a VM lacks.
    ScratchDir bare;
    write_file(bare.path() / "proc/schedstat", schedstat({0}));
    auto vm = CpuContext::open(bare.path() / "proc", bare.path() / "sys");
    ASSERT_TRUE(vm);
    auto s = vm->sample(t0);
    ASSERT_TRUE(s);
    EXPECT_TRUE(mentions(s->unavailable, "no cpufreq driver"));
}

TEST(CpuContext, ARootWithNothingOfItIsRefused) {
    ScratchDir dir;
    auto ctx = CpuContext::open(dir.path() / "proc", dir.path() / "sys");
    ASSERT_FALSE(ctx);
    EXPECT_EQ(ctx.error().status, Status::BadArg);
    EXPECT_NE(ctx.error().message.find((dir.path() / "proc").string()), std::string::npos)
        << ctx.error().message;
}

// This machine's own files: the timer interrupts, the readers themselves running, and PSI
// where the kernel has it; a spinner beside as many busy threads as CPUs presses on them.
TEST(CpuContext, ThisMachinesFiles) {
    auto ctx = CpuContext::open("/proc", "/sys");
    ASSERT_TRUE(ctx) << ctx.error().to_string();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(ctx->sample(start));
    std::atomic<bool> stop{false};
    std::vector<std::thread> spinners;
    const unsigned n = std::max(1u, std::thread::hardware_concurrency()) * 2;
    for (unsigned i = 0; i < n; ++i) {
        spinners.emplace_back([&] {
            volatile std::uint64_t sink = 0;
            while (!stop.load(std::memory_order_relaxed)) sink = sink + 1;
        });
    }
    std::this_thread::sleep_for(500ms);
    auto s = ctx->sample(std::chrono::steady_clock::now());
    stop = true;
    for (auto& t : spinners) t.join();
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_NEAR(s->seconds, 0.5, 0.25);
    ASSERT_TRUE(s->procs_running);
    EXPECT_GE(*s->procs_running, n / 2) << "the spinners are runnable";
    ASSERT_TRUE(s->interrupts) << testing::PrintToString(s->unavailable);
    EXPECT_GT(*s->interrupts, 0.0) << "the timer ticks at least";
    EXPECT_FALSE(s->cpus.empty());
    if (std::filesystem::exists("/proc/pressure/cpu")) {
        ASSERT_TRUE(s->pressure_some);
        EXPECT_GT(*s->pressure_some, 0.3) << "twice as many spinners as CPUs wait half the time";
    }
    if (std::filesystem::exists("/proc/schedstat")) {
        ASSERT_TRUE(s->waiting);
        EXPECT_GT(*s->waiting, 0.5);
    }
    std::printf(
        "procs_running %llu, psi some %.2f, waiting %.2f, %.0f interrupts/s, %.0f "
        "softirqs/s; unavailable: %s\n",
        static_cast<unsigned long long>(*s->procs_running), s->pressure_some.value_or(-1),
        s->waiting.value_or(-1), *s->interrupts, s->softirqs.value_or(-1),
        testing::PrintToString(s->unavailable).c_str());
}

}  // namespace
}  // namespace monitor
