// Tests of the probe load source with scripted probe readings and a made-up clock:
// load = 100 - 100 x probe CPU time / interval, and when there is no value.
#include "monitor/loading/probe_source.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace monitor {
namespace {

using namespace std::chrono_literals;
using Clock = ProbeSource::Clock;
using Readings = std::vector<ProbeReading>;

constexpr std::uint64_t kMs = 1'000'000;  // ns

ProbeReading probe(int cpu, std::uint64_t cpu_ns, std::uint64_t generation = 1,
                   ProbeState state = ProbeState::Running) {
    ProbeReading r;
    r.cpu = cpu;
    r.generation = generation;
    r.state = state;
    r.cpu_ns = cpu_ns;
    return r;
}

// A ProbeSource whose readings and clock the test sets before each sample.
class ProbeSourceTest : public ::testing::Test {
  protected:
    ProbeSourceTest() { reset(); }

    // A new source, without previous readings.
    void reset() {
        source_ = std::make_unique<ProbeSource>([this] { return next_; }, [this] { return now_; });
    }

    // Samples with these readings, `step` after the previous sample.
    LoadSample sample(Readings readings, Clock::duration step = 1s) {
        next_ = std::move(readings);
        now_ += step;
        auto s = source_->sample();
        EXPECT_TRUE(s.has_value());
        return s ? *s : LoadSample{};
    }

    static std::optional<double> load_of(const LoadSample& s, int cpu) {
        for (const auto& [c, load] : s.cpus) {
            if (c == cpu) return load;
        }
        return std::nullopt;
    }

    Readings next_;
    Clock::time_point now_{std::chrono::hours(100)};
    std::unique_ptr<ProbeSource> source_;
};

TEST(ProbeLoad, HandComputed) {
    using Ns = std::chrono::duration<double, std::nano>;
    EXPECT_DOUBLE_EQ(*probe_load(250ms, 1s), 75.0);
    EXPECT_DOUBLE_EQ(*probe_load(0ms, 1s), 100.0);
    EXPECT_DOUBLE_EQ(*probe_load(1s, 1s), 0.0);
    EXPECT_DOUBLE_EQ(*probe_load(Ns(1), Ns(3)), 100.0 - 100.0 / 3.0);
    EXPECT_DOUBLE_EQ(*probe_load(1500ms, 1s), 0.0);  // clamped
    EXPECT_DOUBLE_EQ(*probe_load(-1s, 1s), 100.0);   // clamped
    EXPECT_FALSE(probe_load(1s, 0s).has_value());
    EXPECT_FALSE(probe_load(0s, -1s).has_value());
}

TEST_F(ProbeSourceTest, Name) {
    EXPECT_EQ(source_->name(), "probe");
}

TEST_F(ProbeSourceTest, FirstSampleListsCpusWithoutValues) {
    auto s = sample({probe(0, 100 * kMs), probe(1, 200 * kMs)});
    ASSERT_EQ(s.cpus.size(), 2u);
    EXPECT_EQ(s.cpus[0].first, 0);
    EXPECT_EQ(s.cpus[1].first, 1);
    EXPECT_FALSE(s.cpus[0].second.has_value());
    EXPECT_FALSE(s.cpus[1].second.has_value());
    EXPECT_FALSE(s.machine.has_value());
}

TEST_F(ProbeSourceTest, HandComputedLoads) {
    sample({probe(0, 1000 * kMs), probe(1, 5000 * kMs)});
    // cpu0's probe ran 250 ms of the second: 75%; cpu1's 500 ms: 50%.
    auto s = sample({probe(0, 1250 * kMs), probe(1, 5500 * kMs)});
    ASSERT_TRUE(load_of(s, 0).has_value());
    ASSERT_TRUE(load_of(s, 1).has_value());
    EXPECT_DOUBLE_EQ(*load_of(s, 0), 75.0);
    EXPECT_DOUBLE_EQ(*load_of(s, 1), 50.0);
    ASSERT_TRUE(s.machine.has_value());
    EXPECT_DOUBLE_EQ(*s.machine, 62.5);

    // Over two seconds: cpu0 ran 1.5 s (25%), cpu1 not at all (100%).
    s = sample({probe(0, 2750 * kMs), probe(1, 5500 * kMs)}, 2s);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 25.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 100.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 62.5);

    // Half a second, cpu0 ran 100 ms: 80%; cpu1 all of it: 0%.
    s = sample({probe(0, 2850 * kMs), probe(1, 6000 * kMs)}, 500ms);
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 80.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 0.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 40.0);
}

// A calibrating probe spins at SCHED_IDLE already: it measures as a running one does, so that
// a CPU busy from the start, where calibration may never end, still reads busy.
TEST_F(ProbeSourceTest, ACalibratingProbeMeasures) {
    sample({probe(0, 0, 1, ProbeState::Calibrating), probe(1, 0)});
    auto s = sample({probe(0, 100 * kMs, 1, ProbeState::Calibrating), probe(1, 100 * kMs)});
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 90.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 90.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 90.0);
    // Calibrated since.
    s = sample({probe(0, 300 * kMs), probe(1, 300 * kMs)});
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 80.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 80.0);
}

TEST_F(ProbeSourceTest, NotRunningAtTheEndGivesNoValue) {
    for (auto st :
         {ProbeState::Starting, ProbeState::Displaced, ProbeState::Failed, ProbeState::Stopped}) {
        reset();
        sample({probe(0, 1000 * kMs), probe(1, 1000 * kMs)});
        auto s = sample({probe(0, 1100 * kMs, 1, st), probe(1, 1100 * kMs)});
        EXPECT_FALSE(load_of(s, 0).has_value()) << probe_state_name(st);
        EXPECT_TRUE(load_of(s, 1).has_value()) << probe_state_name(st);
        // A failed probe leaves its CPU out of the machine figure; any other state without
        // a value makes the machine a gap.
        EXPECT_EQ(s.machine.has_value(), st == ProbeState::Failed) << probe_state_name(st);
        // Back to running: the interval started with the probe not running.
        s = sample({probe(0, 1200 * kMs), probe(1, 1200 * kMs)});
        EXPECT_FALSE(load_of(s, 0).has_value()) << probe_state_name(st);
        s = sample({probe(0, 1300 * kMs), probe(1, 1300 * kMs)});
        EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 90.0) << probe_state_name(st);
    }
}

TEST_F(ProbeSourceTest, ReplacedProbeGivesNoValue) {
    sample({probe(0, 900 * kMs, 1), probe(1, 0, 2)});
    // cpu0's probe was replaced: the new thread's CPU time starts from zero, so the lower
    // count is no regression but another thread, and the one above would be nonsense too.
    auto s = sample({probe(0, 50 * kMs, 3), probe(1, 100 * kMs, 2)});
    EXPECT_FALSE(load_of(s, 0).has_value());
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 90.0);
    EXPECT_FALSE(s.machine.has_value());
    // A replacement whose time happens to be above the old one gives nothing either.
    s = sample({probe(0, 900 * kMs, 4), probe(1, 200 * kMs, 2)});
    EXPECT_FALSE(load_of(s, 0).has_value());
    // The same thread at both ends again.
    s = sample({probe(0, 1100 * kMs, 4), probe(1, 300 * kMs, 2)});
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 80.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 85.0);
}

TEST_F(ProbeSourceTest, CpuTimeRegressionGivesNoValue) {
    sample({probe(0, 500 * kMs)});
    auto s = sample({probe(0, 400 * kMs)});
    EXPECT_FALSE(load_of(s, 0).has_value());
    EXPECT_FALSE(s.machine.has_value());
    // The next interval starts from the lower reading.
    s = sample({probe(0, 700 * kMs)});
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 70.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 70.0);
}

TEST_F(ProbeSourceTest, MachineOnlyWhenEveryCpuHasAValue) {
    sample({probe(0, 0), probe(1, 0), probe(2, 0)});
    auto s = sample({probe(0, 100 * kMs), probe(1, 200 * kMs), probe(2, 600 * kMs)});
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 70.0);  // mean of 90, 80 and 40

    // One CPU without a value: none for the machine, although the others have one.
    s = sample(
        {probe(0, 200 * kMs), probe(1, 300 * kMs, 1, ProbeState::Displaced), probe(2, 700 * kMs)});
    EXPECT_TRUE(load_of(s, 0).has_value());
    EXPECT_TRUE(load_of(s, 2).has_value());
    EXPECT_FALSE(s.machine.has_value());
}

TEST_F(ProbeSourceTest, AFailedProbeLeavesItsCpuOutOfTheMachine) {
    // cpu1 is outside the process's cpuset, say: its probe never starts.
    const auto failed = ProbeState::Failed;
    sample({probe(0, 0), probe(1, 0, 1, failed)});
    auto s = sample({probe(0, 400 * kMs), probe(1, 0, 1, failed)});
    EXPECT_FALSE(load_of(s, 1).has_value());
    ASSERT_TRUE(s.machine.has_value());
    EXPECT_DOUBLE_EQ(*s.machine, 60.0);  // cpu0 alone: idle 400 ms of 1 s
}

TEST_F(ProbeSourceTest, OnlyFailedProbesGiveNoMachine) {
    const auto failed = ProbeState::Failed;
    sample({probe(0, 0, 1, failed)});
    auto s = sample({probe(0, 0, 1, failed)});
    EXPECT_FALSE(s.machine.has_value());
}

TEST_F(ProbeSourceTest, NewCpuHasNoValueAtFirst) {
    sample({probe(0, 0)});
    auto s = sample({probe(0, 100 * kMs), probe(1, 100 * kMs, 2)});
    ASSERT_EQ(s.cpus.size(), 2u);
    EXPECT_TRUE(load_of(s, 0).has_value());
    EXPECT_FALSE(s.cpus[1].second.has_value());
    EXPECT_FALSE(s.machine.has_value());
    s = sample({probe(0, 200 * kMs), probe(1, 200 * kMs, 2)});
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 90.0);
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 90.0);
}

TEST_F(ProbeSourceTest, CpuThatWentAwayIsNotListed) {
    sample({probe(0, 0), probe(1, 0)});
    auto s = sample({probe(0, 100 * kMs)});
    ASSERT_EQ(s.cpus.size(), 1u);
    EXPECT_EQ(s.cpus[0].first, 0);
    // The machine is the CPUs that are probed now.
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 90.0);
}

TEST_F(ProbeSourceTest, ValuesClampToZeroAndHundred) {
    sample({probe(0, 0), probe(1, 0)});
    // cpu0's probe ran 1.2 s in a 1 s interval (the readings are not taken at the same
    // instant as the clock); cpu1's did not run.
    auto s = sample({probe(0, 1200 * kMs), probe(1, 0)});
    EXPECT_DOUBLE_EQ(load_of(s, 0).value_or(-1), 0.0);
    EXPECT_DOUBLE_EQ(load_of(s, 1).value_or(-1), 100.0);
    ASSERT_TRUE(s.machine.has_value());
    EXPECT_GE(*s.machine, 0.0);
    EXPECT_LE(*s.machine, 100.0);
    EXPECT_DOUBLE_EQ(*s.machine, 50.0);
}

TEST_F(ProbeSourceTest, EmptyIntervalGivesNoValue) {
    sample({probe(0, 0)});
    auto s = sample({probe(0, 10 * kMs)}, 0s);
    EXPECT_FALSE(load_of(s, 0).has_value());
    EXPECT_FALSE(s.machine.has_value());
}

TEST_F(ProbeSourceTest, NoProbesNoMachine) {
    sample({});
    auto s = sample({});
    EXPECT_TRUE(s.cpus.empty());
    EXPECT_FALSE(s.machine.has_value());
}

TEST_F(ProbeSourceTest, ClockIsReadAfterTheReadings) {
    // The reader moves the clock, by 1 s and then by 3 s: the interval runs from the time
    // after the first reading to the time after the second, 3 s.
    Clock::duration step = 1s;
    ProbeSource source(
        [&] {
            now_ += step;
            step = 3s;
            return next_;
        },
        [this] { return now_; });
    next_ = {probe(0, 0)};
    ASSERT_TRUE(source.sample().has_value());
    next_ = {probe(0, 600 * kMs)};
    auto s = source.sample();
    ASSERT_TRUE(s.has_value());
    EXPECT_DOUBLE_EQ(load_of(*s, 0).value_or(-1), 80.0);  // 0.6 s of 3 s
}

}  // namespace
}  // namespace monitor
