// Tests of ProbeSet with real probe threads on this machine's CPUs 0 and 1: following the
// online CPUs, generations, the excluded CPU time, the `only` restriction and Off mode.
#include "monitor/loading/probe_set.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::wait_until;

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool usable_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(cpu, &set);
}

#define REQUIRE_CPUS_0_AND_1() \
    if (!usable_cpu(0) || !usable_cpu(1)) GTEST_SKIP() << "needs cpu0 and cpu1 available"

// Number of this process's threads named "idle-probe/<cpu>".
std::size_t probe_threads(int cpu) {
    const std::string name = "idle-probe/" + std::to_string(cpu);
    std::size_t n = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc/self/task", ec)) {
        std::ifstream in(entry.path() / "comm");
        std::string comm;
        if (std::getline(in, comm) && comm == name) ++n;
    }
    return n;
}

std::vector<int> cpus_of(const std::vector<ProbeReading>& readings) {
    std::vector<int> cpus;
    for (const auto& r : readings) cpus.push_back(r.cpu);
    return cpus;
}

std::optional<ProbeReading> reading_of(const ProbeSet& set, int cpu) {
    for (auto& r : set.read()) {
        if (r.cpu == cpu) return r;
    }
    return std::nullopt;
}

constexpr auto kCalibrationWait = 10000ms;  // generous: the machine may be busy

TEST(ProbeSet, StartsAProbePerOnlineCpu) {
    REQUIRE_CPUS_0_AND_1();
    ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{});
    EXPECT_EQ(set.mode(), ProbeMode::Spin);
    EXPECT_TRUE(set.read().empty());
    set.set_online({0, 1});
    auto readings = set.read();
    ASSERT_EQ(cpus_of(readings), (std::vector<int>{0, 1}));
    EXPECT_NE(readings[0].generation, 0u);
    EXPECT_NE(readings[1].generation, 0u);
    EXPECT_NE(readings[0].generation, readings[1].generation);

    ASSERT_TRUE(set.wait_calibrated(kCalibrationWait));
    for (const auto& r : set.read()) {
        EXPECT_EQ(r.state, ProbeState::Running) << "cpu" << r.cpu << ": " << r.error;
        EXPECT_TRUE(r.baseline.has_value()) << "cpu" << r.cpu;
        EXPECT_TRUE(r.error.empty());
    }
    // Setting the same CPUs again changes nothing.
    set.set_online({1, 0});
    auto again = set.read();
    ASSERT_EQ(cpus_of(again), (std::vector<int>{0, 1}));
    EXPECT_EQ(again[0].generation, readings[0].generation);
    EXPECT_EQ(again[1].generation, readings[1].generation);
}

TEST(ProbeSet, WaitCalibratedIsQuick) {
    REQUIRE_CPUS_0_AND_1();
    ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{});
    set.set_online({0, 1});
    const auto start = Clock::now();
    EXPECT_TRUE(set.wait_calibrated(kCalibrationWait));
    EXPECT_LT(Clock::now() - start, 5s);
}

TEST(ProbeSet, WaitCalibratedTimesOut) {
    REQUIRE_CPUS_0_AND_1();
    CalibrationPlan endless;
    endless.passes = 1 << 30;
    endless.min_passes = 1 << 30;
    endless.budget = 1h;
    ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{}, std::nullopt, endless);
    set.set_online({0});
    const auto start = Clock::now();
    EXPECT_FALSE(set.wait_calibrated(200ms));
    EXPECT_GE(Clock::now() - start, 200ms);
    // The destructor stops a calibrating probe too.
}

TEST(ProbeSet, FollowsCpusGoingAndComing) {
    REQUIRE_CPUS_0_AND_1();
    ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{});
    set.set_online({0, 1});
    ASSERT_TRUE(set.wait_calibrated(kCalibrationWait));
    const auto first = set.read();
    ASSERT_EQ(first.size(), 2u);
    // Give cpu1's probe some CPU time to keep.
    ASSERT_TRUE(wait_until([&] { return set.excluded_cpu_ns(1) > 2'000'000; }, 5s));

    const std::uint64_t before = set.excluded_cpu_ns(1);
    set.set_online({0});
    EXPECT_EQ(cpus_of(set.read()), (std::vector<int>{0}));
    EXPECT_EQ(set.read()[0].generation, first[0].generation);  // cpu0's probe stays
    EXPECT_TRUE(wait_until([] { return probe_threads(1) == 0; }, 3s));

    // The stopped probe's CPU time stays counted, and no longer grows.
    const std::uint64_t retired = set.excluded_cpu_ns(1);
    EXPECT_GE(retired, before);
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(set.excluded_cpu_ns(1), retired);

    set.set_online({0, 1});
    auto back = reading_of(set, 1);
    ASSERT_TRUE(back.has_value());
    EXPECT_NE(back->generation, first[1].generation);
    EXPECT_GT(back->generation, first[0].generation);
    ASSERT_TRUE(set.wait_calibrated(kCalibrationWait));
    EXPECT_EQ(reading_of(set, 1)->state, ProbeState::Running);

    // Cumulative over both probes of cpu1: never below what the first one used.
    std::uint64_t last = set.excluded_cpu_ns(1);
    EXPECT_GE(last, retired);
    for (int i = 0; i < 20; ++i) {
        std::this_thread::sleep_for(5ms);
        const std::uint64_t now = set.excluded_cpu_ns(1);
        EXPECT_GE(now, last);
        last = now;
    }
    EXPECT_TRUE(wait_until([&] { return set.excluded_cpu_ns(1) > retired; }, 5s));
}

TEST(ProbeSet, ExcludedTimeOfAProbeIsItsCpuTime) {
    REQUIRE_CPUS_0_AND_1();
    ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{});
    set.set_online({0, 1});
    ASSERT_TRUE(set.wait_calibrated(kCalibrationWait));
    ASSERT_TRUE(wait_until([&] { return set.excluded_cpu_ns(0) > 0; }, 5s));
    // Read in this order, each value bounds the next.
    const std::uint64_t a = set.excluded_cpu_ns(0);
    const std::uint64_t b = reading_of(set, 0)->cpu_ns;
    const std::uint64_t c = set.excluded_cpu_ns(0);
    EXPECT_LE(a, b);
    EXPECT_LE(b, c);
    EXPECT_EQ(set.excluded_cpu_ns(7), 0u);  // never probed
}

TEST(ProbeSet, OnlyRestrictsTheCpus) {
    REQUIRE_CPUS_0_AND_1();
    // Unsorted, and naming a CPU that is not online.
    ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{}, std::vector<int>{5, 1});
    set.set_online({0, 1});
    EXPECT_EQ(cpus_of(set.read()), (std::vector<int>{1}));
    ASSERT_TRUE(set.wait_calibrated(kCalibrationWait));
    EXPECT_EQ(probe_threads(0), 0u);
    EXPECT_EQ(set.excluded_cpu_ns(0), 0u);
    set.set_online({0});
    EXPECT_TRUE(set.read().empty());
}

TEST(ProbeSet, OffStartsNothing) {
    // A thread of an earlier test stays listed in /proc/self/task for a moment after its join.
    ASSERT_TRUE(wait_until([] { return probe_threads(0) + probe_threads(1) == 0; }, 3s));
    ProbeSet set(ProbeMode::Off, ProbeThreadAttr{});
    set.set_online({0, 1});
    EXPECT_TRUE(set.read().empty());
    EXPECT_TRUE(set.wait_calibrated(0ms));
    EXPECT_EQ(set.excluded_cpu_ns(0), 0u);
    EXPECT_EQ(set.excluded_cpu_ns(1), 0u);
    EXPECT_EQ(probe_threads(0) + probe_threads(1), 0u);
}

TEST(ProbeSet, SleepProbes) {
    REQUIRE_CPUS_0_AND_1();
    // What is tested is which probe a reading wakes, not the idle priority: at SCHED_IDLE a
    // CPU kept busy by the tests beside this one (under qemu-ppc) gave the woken probe no
    // time within 2 s. The ordinary policy runs it within a scheduling period.
    ProbeSet set(ProbeMode::Sleep, ProbeThreadAttr{.policy = SCHED_OTHER, .nice = 0});
    set.set_online({0, 1});
    ASSERT_TRUE(set.wait_calibrated(kCalibrationWait));
    for (const auto& r : set.read()) {
        EXPECT_EQ(r.state, ProbeState::Running) << "cpu" << r.cpu;
        EXPECT_FALSE(r.baseline.has_value());
    }
    // Each wakes at the readings of its own CPU's idle time, and only then.
    for (int i = 1; i <= 2; ++i) {
        set.publish_idle(1, static_cast<std::uint64_t>(i) * 1'000'000'000, Clock::now());
        EXPECT_TRUE(wait_until([&] { return reading_of(set, 1)->count == std::uint64_t(i); },
                               kCalibrationWait));
    }
    set.publish_idle(7, 1, Clock::now());  // no probe there: ignored
    EXPECT_EQ(reading_of(set, 0)->count, 0u);
}

TEST(ProbeSet, NonexistentCpuReadsFailed) {
    if (!usable_cpu(0) || usable_cpu(1000)) GTEST_SKIP() << "needs cpu0 and no cpu1000";
    ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{});
    set.set_online({0, 1000});
    EXPECT_EQ(cpus_of(set.read()), (std::vector<int>{0, 1000}));
    // A failed probe is not pending.
    ASSERT_TRUE(set.wait_calibrated(kCalibrationWait));
    auto bad = reading_of(set, 1000);
    ASSERT_TRUE(bad.has_value());
    EXPECT_EQ(bad->state, ProbeState::Failed);
    EXPECT_NE(bad->error.find("cpu1000"), std::string::npos) << bad->error;
    EXPECT_EQ(bad->count, 0u);
    auto good = reading_of(set, 0);
    ASSERT_TRUE(good.has_value());
    EXPECT_EQ(good->state, ProbeState::Running) << good->error;
    EXPECT_TRUE(good->error.empty());

    // Taking the bad CPU away again is fine too.
    const std::uint64_t excluded = set.excluded_cpu_ns(1000);
    set.set_online({0});
    EXPECT_EQ(cpus_of(set.read()), (std::vector<int>{0}));
    EXPECT_GE(set.excluded_cpu_ns(1000), excluded);
}

TEST(ProbeSet, DestructorStopsEveryProbe) {
    REQUIRE_CPUS_0_AND_1();
    {
        ProbeSet set(ProbeMode::Spin, ProbeThreadAttr{});
        set.set_online({0, 1});
        // In whatever state they are: on a busy CPU a probe may still be calibrating (under
        // qemu-user beside another test, for more than kCalibrationWait), and must stop too.
        ASSERT_TRUE(wait_until([] { return probe_threads(0) == 1 && probe_threads(1) == 1; }, 5s));
    }
    EXPECT_TRUE(wait_until([] { return probe_threads(0) + probe_threads(1) == 0; }, 3s));
}

}  // namespace
}  // namespace monitor
