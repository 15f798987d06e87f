// Tests of the idle probe's unit of work and its calibration: calibrate() driven by scripted
// passes and a made-up clock, then a real calibration of idle_outer_loop().
#include "monitor/loading/idle_loop.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace monitor {
namespace {

using namespace std::chrono_literals;
using Pass = std::pair<std::chrono::nanoseconds, int>;

// A steady clock that only moves when told to.
struct FakeClock {
    std::chrono::steady_clock::time_point now{std::chrono::seconds(1000)};
    std::function<std::chrono::steady_clock::time_point()> fn() {
        return [this] { return now; };
    }
};

// Plays back `passes` in order; each pass advances the clock by its duration when
// `advance_clock` is set. Past the end it repeats the last pass.
class Script {
  public:
    Script(std::vector<Pass> passes, FakeClock* clock = nullptr)
        : passes_(std::move(passes)), clock_(clock) {}

    TimedPass pass() {
        return [this] {
            Pass p = passes_[std::min(calls_, passes_.size() - 1)];
            ++calls_;
            if (clock_ != nullptr && p.first.count() > 0) clock_->now += p.first;
            return p;
        };
    }
    std::size_t calls() const { return calls_; }

  private:
    std::vector<Pass> passes_;
    FakeClock* clock_;
    std::size_t calls_ = 0;
};

CalibrationPlan plan_of(int passes, int min_passes, std::chrono::nanoseconds budget = 1h) {
    CalibrationPlan plan;
    plan.passes = passes;
    plan.min_passes = min_passes;
    plan.budget = budget;
    return plan;
}

// --- calibrate() with scripted passes ----------------------------------------------------

TEST(Calibrate, FirstPassIsIgnoredEvenWhenFastest) {
    FakeClock clock;
    // The warm-up pass takes 1 ns per loop; the others 100 and 80 ns per loop.
    Script script({{8ns, 8}, {800ns, 8}, {640ns, 8}}, &clock);
    auto b = calibrate(script.pass(), plan_of(2, 1), clock.fn());
    ASSERT_TRUE(b.has_value());
    EXPECT_DOUBLE_EQ(b->per_loop.count(), 80.0);
    EXPECT_EQ(b->passes, 2);
    EXPECT_EQ(script.calls(), 3u);
}

TEST(Calibrate, KeepsTheFastestPerLoop) {
    FakeClock clock;
    // Per loop: 100, 50, 100, 75 ns. The second has the lowest time per loop, not the
    // lowest duration (the third is shorter in total).
    Script script({{1000ns, 1}, {800ns, 8}, {400ns, 8}, {300ns, 3}, {1200ns, 16}}, &clock);
    auto b = calibrate(script.pass(), plan_of(4, 4), clock.fn());
    ASSERT_TRUE(b.has_value());
    EXPECT_DOUBLE_EQ(b->per_loop.count(), 50.0);
    EXPECT_EQ(b->passes, 4);
    EXPECT_EQ(script.calls(), 5u);
}

TEST(Calibrate, StopsAfterThePlannedPasses) {
    FakeClock clock;
    Script script({{100ns, 1}, {90ns, 1}}, &clock);
    auto b = calibrate(script.pass(), plan_of(7, 1), clock.fn());
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->passes, 7);
    EXPECT_EQ(script.calls(), 8u);  // the warm-up and the seven kept
    EXPECT_DOUBLE_EQ(b->per_loop.count(), 90.0);
}

TEST(Calibrate, SkipsPassesWithoutLoopsOrTime) {
    FakeClock clock;
    // A pass of 0 loops or 0 ns (or less) says nothing; taken as a time per loop it would
    // be 0 or infinite. Only the 200 and 150 ns ones count.
    Script script({{1000ns, 1}, {0ns, 8}, {500ns, 0}, {1600ns, 8}, {-5ns, 8}, {600ns, 4}}, &clock);
    auto b = calibrate(script.pass(), plan_of(2, 2), clock.fn());
    ASSERT_TRUE(b.has_value());
    EXPECT_DOUBLE_EQ(b->per_loop.count(), 150.0);
    EXPECT_EQ(b->passes, 2);
    EXPECT_EQ(script.calls(), 6u);
}

TEST(Calibrate, OnlyEmptyPassesGiveNothing) {
    FakeClock clock;
    // Each empty pass still takes time on the clock, so the budget ends the loop.
    std::size_t calls = 0;
    TimedPass pass = [&] {
        ++calls;
        clock.now += 1ms;
        return Pass{0ns, 8};
    };
    EXPECT_FALSE(calibrate(pass, plan_of(5, 1, 10ms), clock.fn()).has_value());
    EXPECT_EQ(calls, 10u);  // the warm-up ends at 1 ms, the last pass starts at 9 ms
}

TEST(Calibrate, BudgetEndsItAndTooFewPassesGiveNullopt) {
    FakeClock clock;
    // 300 us a pass against a 1 ms budget: the warm-up ends at 300 us, then passes start at
    // 300, 600 and 900 us; at 1200 us the budget is spent. Three kept, five needed.
    Script script({{300us, 8}}, &clock);
    EXPECT_FALSE(calibrate(script.pass(), plan_of(50, 5, 1ms), clock.fn()).has_value());
    EXPECT_EQ(script.calls(), 4u);
}

TEST(Calibrate, BudgetEndsItWithEnoughPasses) {
    FakeClock clock;
    Script script({{300us, 8}, {240us, 8}, {160us, 8}, {320us, 8}}, &clock);
    // Passes start at 300, 540 and 700 us, then 1020 us is past the 1 ms budget.
    auto b = calibrate(script.pass(), plan_of(50, 3, 1ms), clock.fn());
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->passes, 3);
    EXPECT_DOUBLE_EQ(b->per_loop.count(), 20'000.0);  // 160 us / 8
    EXPECT_EQ(script.calls(), 4u);
}

TEST(Calibrate, ZeroBudgetRunsOnlyTheWarmUp) {
    FakeClock clock;
    Script script({{100ns, 1}}, &clock);
    EXPECT_FALSE(calibrate(script.pass(), plan_of(5, 1, 0ns), clock.fn()).has_value());
    EXPECT_EQ(script.calls(), 1u);
}

TEST(Calibrate, CancelledStopsIt) {
    FakeClock clock;
    Script script({{100ns, 1}}, &clock);
    CalibrationPlan plan = plan_of(50, 1);
    int checks = 0;
    plan.cancelled = [&] { return ++checks > 3; };
    // Three passes were kept, more than min_passes, yet a cancelled calibration has no result.
    EXPECT_FALSE(calibrate(script.pass(), plan, clock.fn()).has_value());
    EXPECT_EQ(script.calls(), 4u);  // the warm-up and three before the cancellation
    EXPECT_EQ(checks, 4);
}

TEST(Calibrate, CancelledFromTheStart) {
    FakeClock clock;
    Script script({{100ns, 1}}, &clock);
    CalibrationPlan plan = plan_of(50, 0);
    plan.cancelled = [] { return true; };
    EXPECT_FALSE(calibrate(script.pass(), plan, clock.fn()).has_value());
    EXPECT_LE(script.calls(), 1u);
}

TEST(Calibrate, NotCancelledRunsToTheEnd) {
    FakeClock clock;
    Script script({{100ns, 1}}, &clock);
    CalibrationPlan plan = plan_of(6, 6);
    plan.cancelled = [] { return false; };
    auto b = calibrate(script.pass(), plan, clock.fn());
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->passes, 6);
}

// --- the real loop -------------------------------------------------------------------------

TEST(IdleLoop, OuterLoopKeepsTheRegisterValue) {
    // The copies change nothing: the value comes back as it went in.
    EXPECT_EQ(idle_outer_loop(0), 0u);
    EXPECT_EQ(idle_outer_loop(42), 42u);
    EXPECT_EQ(idle_outer_loop(~0ull), ~0ull);
}

TEST(IdleLoop, TimedOuterLoopsReportsItsLoops) {
    for (int n : {0, 1, 8, 100}) {
        auto [elapsed, loops] = timed_outer_loops(n);
        EXPECT_EQ(loops, n);
        EXPECT_GE(elapsed.count(), 0);
        if (n > 0) {
            EXPECT_GT(elapsed.count(), 0) << n << " loops";
            EXPECT_LT(elapsed, 10s) << n << " loops";
        }
    }
}

TEST(IdleLoop, MoreLoopsTakeLonger) {
    // The fastest of a few tries each, so that a preemption does not decide the comparison.
    auto fastest = [](int loops) {
        auto best = std::chrono::nanoseconds::max();
        for (int i = 0; i < 5; ++i) best = std::min(best, timed_outer_loops(loops).first);
        return best;
    };
    EXPECT_GT(fastest(400), fastest(4));
}

TEST(IdleLoop, RealCalibrationGivesASaneBaseline) {
    CalibrationPlan plan = plan_of(20, 5, 2s);
    auto b = calibrate([] { return timed_outer_loops(8); }, plan);
    ASSERT_TRUE(b.has_value()) << "fewer than 5 passes in 2 s";
    EXPECT_GE(b->passes, 5);
    EXPECT_LE(b->passes, 20);
    // 10,000 register copies: microseconds on any CPU this runs on.
    EXPECT_GT(b->per_loop.count(), 100.0);  // ns
    EXPECT_LT(b->per_loop.count(), 10'000'000.0);
}

}  // namespace
}  // namespace monitor
