// Tests of the /proc/stat load source: the delta computation (load_between) and
// ProcStatSource's bookkeeping of CPUs that come and go.
#include "monitor/loading/proc_stat_source.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::ScratchDir;
using test_support::write_file;

namespace fs = std::filesystem;

// user nice system idle iowait irq softirq steal guest guest_nice
CpuTimes times_of(std::initializer_list<std::uint64_t> values) {
    CpuTimes t;
    std::size_t i = 0;
    for (auto v : values) t.ticks[i++] = v;
    return t;
}

// A CPU that spent `busy` ticks in user and `idle` ticks idle since boot.
CpuTimes simple(std::uint64_t busy, std::uint64_t idle) {
    return times_of({busy, 0, 0, idle});
}

ProcStatSnapshot snapshot(const std::map<int, CpuTimes>& cpus) {
    ProcStatSnapshot snap;
    snap.columns = kCpuStateCount;
    for (const auto& [cpu, t] : cpus) {
        snap.cpus.push_back({cpu, t});
        for (std::size_t i = 0; i < kCpuStateCount; ++i) snap.machine.ticks[i] += t.ticks[i];
    }
    return snap;
}

std::vector<int> cpu_ids(const LoadSample& s) {
    std::vector<int> ids;
    for (const auto& [cpu, load] : s.cpus) ids.push_back(cpu);
    return ids;
}

bool has_cpu(const LoadSample& s, int cpu) {
    return std::any_of(s.cpus.begin(), s.cpus.end(), [&](const auto& e) { return e.first == cpu; });
}

// The load measured for `cpu`, nullopt when the CPU is absent or has no value.
std::optional<double> load_of(const LoadSample& s, int cpu) {
    for (const auto& [c, load] : s.cpus) {
        if (c == cpu) return load;
    }
    return std::nullopt;
}

// True when no CPU of `s` has a value (CPUs may be listed without one).
bool no_values(const LoadSample& s) {
    return std::none_of(s.cpus.begin(), s.cpus.end(),
                        [](const auto& e) { return e.second.has_value(); });
}

// --- load_between -----------------------------------------------------------------------

TEST(LoadBetween, BusyOverTotal) {
    // 30 busy ticks of 100.
    auto load = load_between(simple(1000, 5000), simple(1030, 5070));
    ASSERT_TRUE(load.has_value());
    EXPECT_DOUBLE_EQ(*load, 30.0);
}

TEST(LoadBetween, EveryBusyColumnCounts) {
    //                 user nice sys idle iow irq sirq steal guest gnice
    CpuTimes before = times_of({1000, 200, 300, 9000, 100, 10, 20, 5, 0, 0});
    // +10 user, +5 nice, +5 system, +60 idle, +10 iowait, +3 irq, +2 softirq, +5 steal:
    // busy = 10+5+5+3+2+5 = 30, idle = 60+10 = 70.
    CpuTimes after = times_of({1010, 205, 305, 9060, 110, 13, 22, 10, 0, 0});
    auto load = load_between(before, after);
    ASSERT_TRUE(load.has_value());
    EXPECT_DOUBLE_EQ(*load, 30.0);
}

TEST(LoadBetween, IoWaitIsIdle) {
    // 25 busy, 25 idle, 50 iowait: 25%.
    auto load =
        load_between(times_of({0, 0, 0, 0, 0, 0, 0, 0}), times_of({25, 0, 0, 25, 50, 0, 0, 0}));
    ASSERT_TRUE(load.has_value());
    EXPECT_DOUBLE_EQ(*load, 25.0);
}

TEST(LoadBetween, GuestTimeDoesNotDoubleCount) {
    // 10 ticks running a guest: the kernel adds them to both user and guest.
    CpuTimes before = times_of({500, 0, 0, 1000, 0, 0, 0, 0, 100, 40});
    CpuTimes after = times_of({510, 5, 0, 1085, 0, 0, 0, 0, 110, 45});
    // busy = 10 user + 5 nice = 15 of 100; counting guest again would give 30/115.
    auto load = load_between(before, after);
    ASSERT_TRUE(load.has_value());
    EXPECT_DOUBLE_EQ(*load, 15.0);
}

TEST(LoadBetween, FullyBusyAndFullyIdle) {
    auto busy = load_between(simple(100, 100), simple(200, 100));
    ASSERT_TRUE(busy.has_value());
    EXPECT_DOUBLE_EQ(*busy, 100.0);

    auto idle = load_between(simple(100, 100), simple(100, 200));
    ASSERT_TRUE(idle.has_value());
    EXPECT_DOUBLE_EQ(*idle, 0.0);
}

TEST(LoadBetween, NonIntegralPercent) {
    auto load = load_between(simple(0, 0), simple(1, 2));
    ASSERT_TRUE(load.has_value());
    EXPECT_DOUBLE_EQ(*load, 100.0 / 3.0);
}

TEST(LoadBetween, CountersAbove32Bits) {
    const std::uint64_t base = 1ull << 40;
    auto load = load_between(simple(base, 3 * base), simple(base + 75, 3 * base + 25));
    ASSERT_TRUE(load.has_value());
    EXPECT_DOUBLE_EQ(*load, 75.0);
}

TEST(LoadBetween, OldKernelWithFourColumns) {
    // 2.4: user nice system idle only.
    auto load = load_between(times_of({100, 10, 20, 1000}), times_of({110, 15, 25, 1080}));
    ASSERT_TRUE(load.has_value());
    EXPECT_DOUBLE_EQ(*load, 20.0);
}

TEST(LoadBetween, ZeroElapsedIsNullopt) {
    CpuTimes t = times_of({100, 10, 20, 1000, 5, 1, 2, 3, 4, 5});
    EXPECT_FALSE(load_between(t, t).has_value());
    EXPECT_FALSE(load_between(CpuTimes{}, CpuTimes{}).has_value());
}

TEST(LoadBetween, OnlyGuestChangedIsNullopt) {
    // Guest ticks outside user are not time: nothing elapsed.
    CpuTimes before = times_of({100, 10, 20, 1000, 0, 0, 0, 0, 50, 5});
    CpuTimes after = times_of({100, 10, 20, 1000, 0, 0, 0, 0, 60, 7});
    EXPECT_FALSE(load_between(before, after).has_value());
}

TEST(LoadBetween, IdleGoingBackwardsIsNullopt) {
    EXPECT_FALSE(load_between(simple(1000, 5000), simple(1050, 4990)).has_value());
}

TEST(LoadBetween, IoWaitGoingBackwardsBelowIdleIsNullopt) {
    // NO_HZ iowait accounting: iowait drops by more than idle grew.
    CpuTimes before = times_of({1000, 0, 0, 5000, 300});
    CpuTimes after = times_of({1010, 0, 0, 5005, 200});
    EXPECT_FALSE(load_between(before, after).has_value());
}

TEST(LoadBetween, BusyGoingBackwardsIsNullopt) {
    EXPECT_FALSE(load_between(simple(1000, 5000), simple(900, 5100)).has_value());
}

TEST(LoadBetween, TotalGoingBackwardsIsNullopt) {
    // After a hotplug the CPU's counters can restart lower.
    EXPECT_FALSE(load_between(simple(1000, 5000), simple(10, 40)).has_value());
    EXPECT_FALSE(load_between(simple(1000, 5000), CpuTimes{}).has_value());
}

TEST(LoadBetween, NeverOutsideZeroToHundred) {
    // Every combination of small forward and backward steps in each column.
    const std::vector<std::int64_t> steps = {-7, -1, 0, 1, 3, 50};
    CpuTimes before = times_of({1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000});
    int measured = 0;
    for (std::size_t col = 0; col < kCpuStateCount; ++col) {
        for (auto a : steps) {
            for (auto b : steps) {
                CpuTimes after = before;
                after.ticks[col] = static_cast<std::uint64_t>(1000 + a);
                auto& other = after.ticks[(col + 3) % kCpuStateCount];
                other = static_cast<std::uint64_t>(static_cast<std::int64_t>(other) + b);
                auto load = load_between(before, after);
                if (!load) continue;
                ++measured;
                EXPECT_GE(*load, 0.0) << "col " << col << " a " << a << " b " << b;
                EXPECT_LE(*load, 100.0) << "col " << col << " a " << a << " b " << b;
            }
        }
    }
    EXPECT_GT(measured, 0);
}

// --- ProcStatSource::update --------------------------------------------------------------

class ProcStatSourceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_FALSE(proc_.path().empty());
        stat_ = proc_.path() / "stat";
        write_file(stat_, "cpu  0 0 0 0\n");
        auto source = ProcStatSource::open(proc_.path());
        ASSERT_TRUE(source.has_value()) << source.error().to_string();
        source_ = std::move(*source);
    }

    ScratchDir proc_;
    fs::path stat_;
    std::unique_ptr<ProcStatSource> source_;
};

TEST_F(ProcStatSourceTest, Name) {
    EXPECT_EQ(source_->name(), "procstat");
}

TEST_F(ProcStatSourceTest, FirstUpdateOnlySetsTheBaseline) {
    auto s = source_->update(snapshot({{0, simple(100, 100)}, {1, simple(200, 200)}}));
    EXPECT_FALSE(s.machine.has_value());
    EXPECT_TRUE(no_values(s));
}

TEST_F(ProcStatSourceTest, SecondUpdateGivesMachineAndPerCpuLoads) {
    source_->update(snapshot({{0, simple(100, 100)}, {1, simple(200, 200)}, {2, simple(0, 0)}}));
    // cpu0: 10 of 100, cpu1: 50 of 100, cpu2: 100 of 100; machine: 160 of 300.
    auto s = source_->update(
        snapshot({{0, simple(110, 190)}, {1, simple(250, 250)}, {2, simple(100, 0)}}));
    ASSERT_TRUE(s.machine.has_value());
    EXPECT_DOUBLE_EQ(*s.machine, 160.0 * 100.0 / 300.0);
    ASSERT_EQ(cpu_ids(s), (std::vector<int>{0, 1, 2}));
    ASSERT_TRUE(s.cpus[0].second.has_value());
    ASSERT_TRUE(s.cpus[1].second.has_value());
    ASSERT_TRUE(s.cpus[2].second.has_value());
    EXPECT_DOUBLE_EQ(*s.cpus[0].second, 10.0);
    EXPECT_DOUBLE_EQ(*s.cpus[1].second, 50.0);
    EXPECT_DOUBLE_EQ(*s.cpus[2].second, 100.0);
}

TEST_F(ProcStatSourceTest, EachUpdateMeasuresFromThePreviousOne) {
    source_->update(snapshot({{0, simple(0, 0)}}));
    auto s1 = source_->update(snapshot({{0, simple(20, 80)}}));
    auto s2 = source_->update(snapshot({{0, simple(90, 110)}}));
    ASSERT_TRUE(load_of(s1, 0).has_value());
    ASSERT_TRUE(load_of(s2, 0).has_value());
    EXPECT_DOUBLE_EQ(*load_of(s1, 0), 20.0);
    EXPECT_DOUBLE_EQ(*load_of(s2, 0), 70.0);
}

TEST_F(ProcStatSourceTest, MissingCpuIsAbsentAndRestartsFromANewBaseline) {
    source_->update(snapshot({{0, simple(0, 0)}, {1, simple(100, 100)}, {2, simple(0, 0)}}));
    auto all = source_->update(
        snapshot({{0, simple(10, 90)}, {1, simple(120, 180)}, {2, simple(40, 60)}}));
    ASSERT_EQ(cpu_ids(all), (std::vector<int>{0, 1, 2}));
    EXPECT_DOUBLE_EQ(load_of(all, 1).value_or(-1), 20.0);

    // cpu1 goes offline.
    auto without = source_->update(snapshot({{0, simple(20, 180)}, {2, simple(80, 120)}}));
    EXPECT_EQ(cpu_ids(without), (std::vector<int>{0, 2}));
    EXPECT_FALSE(has_cpu(without, 1));
    EXPECT_DOUBLE_EQ(load_of(without, 0).value_or(-1), 10.0);
    EXPECT_DOUBLE_EQ(load_of(without, 2).value_or(-1), 40.0);
    // The machine is the CPUs measured over the whole interval: cpu0 and cpu2, 50 busy of
    // 200 (the kernel's machine line, their sum, went backwards: it is not used).
    EXPECT_DOUBLE_EQ(without.machine.value_or(-1), 25.0);

    // cpu1 comes back: its first reading only sets the baseline. Measured from its last
    // reading before it left, the load would be 180 of 300 = 60%.
    auto back = source_->update(
        snapshot({{0, simple(30, 270)}, {1, simple(300, 300)}, {2, simple(120, 180)}}));
    EXPECT_FALSE(load_of(back, 1).has_value());
    EXPECT_DOUBLE_EQ(load_of(back, 0).value_or(-1), 10.0);
    EXPECT_DOUBLE_EQ(load_of(back, 2).value_or(-1), 40.0);

    // The next reading is measured from that baseline: 10 of 100.
    auto next = source_->update(
        snapshot({{0, simple(40, 360)}, {1, simple(310, 390)}, {2, simple(160, 240)}}));
    ASSERT_EQ(cpu_ids(next), (std::vector<int>{0, 1, 2}));
    ASSERT_TRUE(load_of(next, 1).has_value());
    EXPECT_DOUBLE_EQ(*load_of(next, 1), 10.0);
}

TEST_F(ProcStatSourceTest, NewCpuOnlySetsItsBaseline) {
    source_->update(snapshot({{0, simple(0, 0)}}));
    auto s1 = source_->update(snapshot({{0, simple(50, 50)}, {1, simple(5000, 5000)}}));
    EXPECT_FALSE(load_of(s1, 1).has_value());
    EXPECT_DOUBLE_EQ(load_of(s1, 0).value_or(-1), 50.0);

    auto s2 = source_->update(snapshot({{0, simple(60, 140)}, {1, simple(5025, 5075)}}));
    ASSERT_TRUE(load_of(s2, 1).has_value());
    EXPECT_DOUBLE_EQ(*load_of(s2, 1), 25.0);
}

TEST_F(ProcStatSourceTest, RegressingCounterGivesNoValue) {
    source_->update(snapshot({{0, simple(1000, 1000)}, {1, simple(1000, 1000)}}));
    // cpu1's idle went backwards: no value for it, nor for the machine it is part of.
    auto s = source_->update(snapshot({{0, simple(1010, 1090)}, {1, simple(1100, 900)}}));
    ASSERT_EQ(cpu_ids(s), (std::vector<int>{0, 1}));
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 10.0);
    EXPECT_FALSE(s.cpus[1].second.has_value());
    EXPECT_FALSE(s.machine.has_value());

    // The regressed reading is the new baseline.
    auto next = source_->update(snapshot({{0, simple(1020, 1180)}, {1, simple(1150, 950)}}));
    EXPECT_DOUBLE_EQ(load_of(next, 1).value_or(-1), 50.0);
    ASSERT_TRUE(next.machine.has_value());
    EXPECT_DOUBLE_EQ(*next.machine, 30.0);  // 60 busy of 200
}

TEST_F(ProcStatSourceTest, NoTimeElapsedGivesNoValue) {
    auto snap = snapshot({{0, simple(10, 10)}});
    source_->update(snap);
    auto s = source_->update(snap);
    EXPECT_FALSE(s.machine.has_value());
    EXPECT_FALSE(load_of(s, 0).has_value());
}

// --- ProcStatSource::open and sample() ---------------------------------------------------

TEST(ProcStatSourceFile, SamplesTheRewrittenFile) {
    ScratchDir proc;
    ASSERT_FALSE(proc.path().empty());
    const fs::path stat = proc.path() / "stat";
    write_file(stat,
               "cpu  2000 0 1000 7000 0 0 0 0 0 0\n"
               "cpu0 1000 0 500 3500 0 0 0 0 0 0\n"
               "cpu1 1000 0 500 3500 0 0 0 0 0 0\n"
               "intr 12345\nctxt 678\n");

    auto source = ProcStatSource::open(proc.path());
    ASSERT_TRUE(source.has_value()) << source.error().to_string();
    auto baseline = (*source)->sample();
    ASSERT_TRUE(baseline.has_value()) << baseline.error().to_string();
    EXPECT_FALSE(baseline->machine.has_value());
    EXPECT_TRUE(no_values(*baseline));

    // cpu0: +20 user +10 system +70 idle = 30%; cpu1: +90 user +10 idle = 90%;
    // machine: 120 busy of 200 = 60%.
    write_file(stat,
               "cpu  2110 0 1010 7080 0 0 0 0 0 0\n"
               "cpu0 1020 0 510 3570 0 0 0 0 0 0\n"
               "cpu1 1090 0 500 3510 0 0 0 0 0 0\n"
               "intr 12399\nctxt 700\n");
    auto s1 = (*source)->sample();
    ASSERT_TRUE(s1.has_value()) << s1.error().to_string();
    ASSERT_TRUE(s1->machine.has_value());
    EXPECT_DOUBLE_EQ(*s1->machine, 60.0);
    ASSERT_EQ(cpu_ids(*s1), (std::vector<int>{0, 1}));
    EXPECT_DOUBLE_EQ(load_of(*s1, 0).value_or(-1), 30.0);
    EXPECT_DOUBLE_EQ(load_of(*s1, 1).value_or(-1), 90.0);

    // A malformed file is an error and leaves the baseline alone.
    write_file(stat, "cpu  oops\n");
    auto bad = (*source)->sample();
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.error().status, Status::BadData);

    // cpu1 offline; measured from the last good reading.
    // cpu0: +5 user +45 idle = 10%; machine: 5 busy of 50 = 10%.
    write_file(stat,
               "cpu  1025 0 510 3615 0 0 0 0 0 0\n"
               "cpu0 1025 0 510 3615 0 0 0 0 0 0\n");
    auto s2 = (*source)->sample();
    ASSERT_TRUE(s2.has_value()) << s2.error().to_string();
    EXPECT_EQ(cpu_ids(*s2), (std::vector<int>{0}));
    EXPECT_DOUBLE_EQ(load_of(*s2, 0).value_or(-1), 10.0);
    // The machine is cpu0 alone now (the kernel's machine line dropped by cpu1's counters).
    EXPECT_DOUBLE_EQ(s2->machine.value_or(-1), 10.0);
}

TEST(ProcStatSourceFile, OpenOnMissingRootFails) {
    ScratchDir proc;
    ASSERT_FALSE(proc.path().empty());
    auto source = ProcStatSource::open(proc.path() / "missing");
    ASSERT_FALSE(source.has_value());
    EXPECT_EQ(source.error().status, Status::NoDev) << source.error().to_string();
}

}  // namespace
}  // namespace monitor
