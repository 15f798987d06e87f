// Tests of the /proc/stat figures with the idle probes' CPU time taken out: load_between's
// excluded ticks, and ProcStatSource over a temporary proc root with a made-up exclusion.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "monitor/loading/cpu_time_exclusion.hpp"
#include "monitor/loading/proc_stat_source.hpp"
#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::stat_text;
using test_support::Ticks;

namespace fs = std::filesystem;

constexpr std::uint64_t kSecond = 1'000'000'000;  // ns
constexpr std::uint64_t kTick = kSecond / 100;    // ns, at USER_HZ 100

// A CPU that spent `busy` ticks in user and `idle` ticks idle since boot.
CpuTimes simple(std::uint64_t busy, std::uint64_t idle) {
    CpuTimes t;
    t[CpuState::User] = busy;
    t[CpuState::Idle] = idle;
    return t;
}

// Excluded CPU time the test sets per CPU.
class FakeExclusion final : public CpuTimeExclusion {
  public:
    std::uint64_t excluded_cpu_ns(int cpu) const override {
        auto it = ns.find(cpu);
        return it == ns.end() ? 0 : it->second;
    }
    std::map<int, std::uint64_t> ns;
};

std::optional<double> load_of(const LoadSample& s, int cpu) {
    for (const auto& [c, load] : s.cpus) {
        if (c == cpu) return load;
    }
    return std::nullopt;
}

// --- load_between with excluded ticks ----------------------------------------------------

TEST(LoadBetweenExcluded, HandComputed) {
    // Busy all 100 ticks, 95 of them the probe's: 5%.
    EXPECT_DOUBLE_EQ(load_between(simple(1000, 1000), simple(1100, 1000), 95).value_or(-1), 5.0);
    // 60 busy, 40 idle, 30 of the busy excluded: 30%.
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(60, 40), 30).value_or(-1), 30.0);
    // Fractions of a tick count.
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(50, 50), 12.5).value_or(-1), 37.5);
    // Nothing excluded: as before.
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(60, 40), 0).value_or(-1), 60.0);
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(60, 40)).value_or(-1), 60.0);
}

TEST(LoadBetweenExcluded, NeverBelowZero) {
    // More excluded than there was busy time: 0, not negative.
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(50, 50), 80).value_or(-1), 0.0);
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(0, 100), 1).value_or(-1), 0.0);
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(100, 0), 1e18).value_or(-1), 0.0);
}

TEST(LoadBetweenExcluded, NegativeExclusionIsIgnored) {
    EXPECT_DOUBLE_EQ(load_between(simple(0, 0), simple(60, 40), -30).value_or(-1), 60.0);
}

TEST(LoadBetweenExcluded, NoIntervalStaysNullopt) {
    EXPECT_FALSE(load_between(simple(10, 10), simple(10, 10), 5).has_value());
    EXPECT_FALSE(load_between(simple(10, 10), simple(5, 20), 5).has_value());
}

// --- ProcStatSource with an exclusion ------------------------------------------------------

class ProcStatCorrectionTest : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_FALSE(root_.empty()); }

    // Rewrites <root>/stat in place, as procfs changes under an open descriptor.
    void write_stat(const std::map<int, Ticks>& cpus) {
        std::ofstream out(root_ / "stat", std::ios::binary | std::ios::trunc);
        out << stat_text(cpus);
    }

    std::unique_ptr<ProcStatSource> open(const CpuTimeExclusion* exclude, double user_hz) {
        auto source = ProcStatSource::open(root_, exclude, user_hz);
        EXPECT_TRUE(source.has_value()) << source.error().to_string();
        return source ? std::move(*source) : nullptr;
    }

    LoadSample sample(ProcStatSource& source) {
        auto s = source.sample();
        EXPECT_TRUE(s.has_value()) << s.error().to_string();
        return s ? *s : LoadSample{};
    }

    test_support::ScratchDir scratch_{"procstat_correction"};
    const fs::path root_ = scratch_.path();
};

TEST_F(ProcStatCorrectionTest, CorrectedPerCpuAndMachine) {
    FakeExclusion ex;
    ex.ns = {{0, 5 * kSecond}, {1, 1 * kSecond}};
    write_stat({{0, {1000, 1000}}, {1, {500, 500}}});
    auto source = open(&ex, 100);
    ASSERT_NE(source, nullptr);
    auto first = sample(*source);
    EXPECT_FALSE(first.machine.has_value());
    EXPECT_FALSE(load_of(first, 0).has_value());

    // cpu0: 80 busy of 100, 60 of them the probe's (600 ms): 20%.
    // cpu1: 50 busy of 100, 10 of them the probe's (100 ms): 40%.
    // machine: 130 busy of 200, 70 excluded: 30%.
    write_stat({{0, {1080, 1020}}, {1, {550, 550}}});
    ex.ns = {{0, 5 * kSecond + 60 * kTick}, {1, 1 * kSecond + 10 * kTick}};
    auto s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 20.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 40.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 30.0);

    // The probes used nothing this time: the plain figures. cpu0 10 of 100, cpu1 30 of 100.
    write_stat({{0, {1090, 1110}}, {1, {580, 620}}});
    s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 10.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 30.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 20.0);
}

TEST_F(ProcStatCorrectionTest, WithoutAnExclusion) {
    write_stat({{0, {1000, 1000}}, {1, {500, 500}}});
    auto source = open(nullptr, 100);
    ASSERT_NE(source, nullptr);
    sample(*source);
    write_stat({{0, {1080, 1020}}, {1, {550, 550}}});
    auto s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 80.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 50.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 65.0);
}

TEST_F(ProcStatCorrectionTest, UserHzConvertsNanosecondsToTicks) {
    // At USER_HZ 1000 a tick is 1 ms: 250 ms of probe time are 250 ticks of 1000.
    FakeExclusion ex;
    write_stat({{0, {0, 0}}});
    auto source = open(&ex, 1000);
    ASSERT_NE(source, nullptr);
    sample(*source);
    write_stat({{0, {500, 500}}});
    ex.ns[0] = kSecond / 4;
    auto s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 25.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 25.0);
}

TEST_F(ProcStatCorrectionTest, ExcludedMoreThanBusyIsZero) {
    FakeExclusion ex;
    write_stat({{0, {100, 100}}});
    auto source = open(&ex, 100);
    ASSERT_NE(source, nullptr);
    sample(*source);
    // 40 busy ticks, 41 ticks of probe time (the two clocks disagree by a tick).
    write_stat({{0, {140, 160}}});
    ex.ns[0] = 41 * kTick;
    auto s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 0.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 0.0);
}

TEST_F(ProcStatCorrectionTest, MachineExcludesNoMoreThanEachCpuWasBusy) {
    FakeExclusion ex;
    write_stat({{0, {100, 100}}, {1, {100, 100}}});
    auto source = open(&ex, 100);
    ASSERT_NE(source, nullptr);
    sample(*source);
    // cpu0: 10 busy of 100, but 15 ticks of probe time: 0%.
    // cpu1: 90 busy of 100, no probe time: 90%.
    // The machine did 90 ticks of real work in 200: 45%. cpu0's surplus of 5 ticks is not
    // cpu1's, and taking it from the machine's busy time would give 85 of 200.
    write_stat({{0, {110, 190}}, {1, {190, 110}}});
    ex.ns[0] = 15 * kTick;
    auto s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 0.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 90.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 45.0);
}

TEST_F(ProcStatCorrectionTest, ExclusionGoingBackwardsIsNotApplied) {
    FakeExclusion ex;
    ex.ns[0] = 10 * kSecond;
    write_stat({{0, {1000, 1000}}});
    auto source = open(&ex, 100);
    ASSERT_NE(source, nullptr);
    sample(*source);
    write_stat({{0, {1060, 1040}}});
    ex.ns[0] = 9 * kSecond;  // should never happen; must not give a value out of range
    auto s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 60.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 60.0);
}

TEST_F(ProcStatCorrectionTest, CpuWithoutExcludedTimeIsUncorrected) {
    // Only cpu1 is probed (the `only` restriction): cpu0's figure is the plain one.
    FakeExclusion ex;
    write_stat({{0, {0, 0}}, {1, {0, 0}}});
    auto source = open(&ex, 100);
    ASSERT_NE(source, nullptr);
    sample(*source);
    write_stat({{0, {70, 30}}, {1, {100, 0}}});
    ex.ns[1] = 80 * kTick;
    auto s = sample(*source);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 70.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 20.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 45.0);  // 170 - 80 = 90 of 200
}

}  // namespace
}  // namespace monitor
