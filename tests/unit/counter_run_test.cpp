// Tests of CounterRun, the counting session that paces itself: what it asks of its caller and
// when (next_due), and what advance() does then, on the SIMULATED PowerPC 750 PMU of
// tests/support (32-bit counters that wrap, two sets that take turns), with a made-up clock
// for the pacing and the simulated PMU's clock for the counts.
#include "monitor/runtime/counter_run.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "../support/simulated_ppc750_pmu.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "test_support.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;
using perf::testing::SimulatedPpc750Pmu;
using Clock = CounterRun::Clock;

constexpr std::uint64_t k2To32 = std::uint64_t{1} << 32;
// Two events of PMC1 and two of PMC2: two sets that take turns on the counters.
constexpr std::string_view kTwoSets =
    "ppc750::EIEIO_COMPLETED,ppc750::INSTR_EA_DELIVERED,ppc750::L1_ICACHE_MISSES,"
    "ppc750::ITLB_MISSES";

class CounterRunTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto c = perf::EventCatalog::create(machine_.proc(), machine_.sys());
        ASSERT_TRUE(c) << c.error().to_string();
        catalog_.emplace(std::move(*c));
    }

    // A run of `events` on CPU 0 of a fresh simulated PMU, started at t0_.
    std::unique_ptr<CounterRun> start(std::string_view events, CounterRunOptions run = {},
                                      const TickSchedule* ticks = nullptr,
                                      perf::MuxMode mux = perf::MuxMode::Daemon) {
        perf::SessionOptions o;
        o.events = *perf::parse_event_list(events);
        o.target.kind = perf::TargetKind::OneCpu;
        o.target.cpu = 0;
        o.cpus = {0};
        o.mux = mux;
        auto device = std::make_unique<SimulatedPpc750Pmu>();
        pmu_ = device.get();
        auto s = perf::PerfSession::start(*catalog_, std::move(device), o);
        EXPECT_TRUE(s) << s.error().to_string();
        if (!s) return nullptr;
        return std::make_unique<CounterRun>(std::move(*s), run, t0_, ticks);
    }

    // Moves both clocks by dt and advances the run when it is due by then; returns how many
    // times it was advanced.
    int pass(CounterRun& run, Clock::duration dt, Clock::time_point& now) {
        int calls = 0;
        const auto until = now + dt;
        while (run.next_due() <= until) {
            const auto due = run.next_due();
            pmu_->advance(due - now);
            now = due;
            auto step = run.advance(now);
            EXPECT_TRUE(step) << step.error().to_string();
            ++calls;
            if (!step || step->finished) break;
        }
        pmu_->advance(until - now);
        now = until;
        return calls;
    }

    test_support::DescribedMachine machine_{test_support::kPpc750CxeCpuinfo, true};
    std::optional<perf::EventCatalog> catalog_;
    SimulatedPpc750Pmu* pmu_ = nullptr;
    const Clock::time_point t0_ = Clock::time_point{} + 1000s;
};

TEST(CounterRunOptions, DurationAndIntervalOutsideTheirRangesNameWhatWorks) {
    EXPECT_TRUE((CounterRunOptions{.duration = 1ms, .interval = std::nullopt}.check()));
    EXPECT_TRUE((CounterRunOptions{.duration = kMaxCountingDuration, .interval = 10ms}.check()));
    EXPECT_TRUE((CounterRunOptions{.duration = std::nullopt, .interval = 1s}.check()));
    for (auto d : {0ms, -5ms, kMaxCountingDuration + 1ms}) {
        auto r = CounterRunOptions{.duration = d, .interval = std::nullopt}.check();
        ASSERT_FALSE(r) << d.count();
        EXPECT_EQ(r.error().status, Status::BadArg);
        EXPECT_NE(r.error().message.find("choose from 1 ms to 7 days (604800000 ms)"),
                  std::string::npos)
            << r.error().message;
    }
    auto short_interval = CounterRunOptions{.duration = 5s, .interval = 9ms}.check();
    ASSERT_FALSE(short_interval);
    EXPECT_EQ(short_interval.error().message,
              "interval of 9 ms: choose from 10 ms to the duration (5000 ms)");
    auto long_interval = CounterRunOptions{.duration = 5s, .interval = 6s}.check();
    ASSERT_FALSE(long_interval);
    EXPECT_EQ(long_interval.error().message,
              "interval of 6000 ms: choose from 10 ms to the duration (5000 ms)");
}

// A 750's PMCs are 32 bits: at 200 MHz CYCLES wraps every 21.5 s. A run that is advanced when
// it asks reads them every second, so a minute counts every cycle.
TEST_F(CounterRunTest, NarrowCountersAreReadEverySecondAndNeverLoseAWrap) {
    auto run = start("ppc750::CYCLES");
    ASSERT_TRUE(run);
    ASSERT_TRUE(run->session().narrow());
    ASSERT_FALSE(run->session().rotates());
    EXPECT_EQ(run->next_due(), t0_ + 1s);
    auto now = t0_;
    EXPECT_EQ(pass(*run, 60s, now), 60);
    ASSERT_TRUE(run->finish());
    const auto& cycles = run->totals().events.at(0).total;
    EXPECT_EQ(cycles.count,
              60 * static_cast<std::uint64_t>(SimulatedPpc750Pmu::kDefaultCyclesPerSecond));
    EXPECT_GT(cycles.count, 2 * k2To32);
    EXPECT_EQ(run->next_due(), Clock::time_point::max());
}

// What the test above guards: read only at the end, the same minute loses its wraps.
TEST_F(CounterRunTest, ANarrowCounterReadOnlyAtTheEndLosesItsWraps) {
    auto run = start("ppc750::CYCLES");
    ASSERT_TRUE(run);
    pmu_->advance(60s);
    ASSERT_TRUE(run->finish());
    EXPECT_LT(run->totals().events.at(0).total.count, k2To32);
}

// Kernel counts are 64 bits and software events take no counter: nothing to do until the end.
TEST_F(CounterRunTest, ARunWhoseCountersNeedNoCareAsksForNothing) {
    auto wide = [&] {
        perf::SessionOptions o;
        o.events = *perf::parse_event_list("perf::TASK-CLOCK");
        o.target.kind = perf::TargetKind::Thread;
        o.target.pid = ::gettid();
        auto s = perf::PerfSession::start(*catalog_, std::make_unique<perf::PerfEventDevice>(), o);
        return s ? std::move(*s) : nullptr;
    }();
    if (!wide) GTEST_SKIP() << "perf_event_open refuses a thread's task clock here";
    CounterRun software(std::move(wide), {}, t0_);
    EXPECT_EQ(software.next_due(), Clock::time_point::max());
    auto step = software.advance(t0_ + 10s);
    ASSERT_TRUE(step);
    EXPECT_FALSE(step->period_ended);
    EXPECT_FALSE(step->finished);
}

// Two sets take turns every slice (100 ms): the run asks for each rotation.
TEST_F(CounterRunTest, SetsThatTakeTurnsRotateEverySlice) {
    auto run = start(kTwoSets);
    ASSERT_TRUE(run);
    ASSERT_TRUE(run->session().rotates());
    EXPECT_EQ(run->next_due(), t0_ + 100ms);
    auto now = t0_;
    EXPECT_EQ(pass(*run, 1s, now), 10);
    ASSERT_TRUE(run->finish());
    EXPECT_EQ(run->totals().rotations, 10);
    for (const auto& e : run->totals().events) {
        EXPECT_NEAR(e.total.running_ratio(), 0.5, 1e-9) << e.name;
    }
}

// A caller that was stopped (SIGSTOP, a suspend) for 5 s catches up with one rotation, not
// fifty: the slices restart from the time it runs again.
TEST_F(CounterRunTest, AfterAStallTheSlicesRestartFromNowWithoutABurst) {
    auto run = start(kTwoSets);
    ASSERT_TRUE(run);
    const auto late = t0_ + 5s;
    pmu_->advance(5s);
    ASSERT_TRUE(run->advance(late));
    EXPECT_EQ(run->next_due(), late + 100ms);
    ASSERT_TRUE(run->finish());
    EXPECT_EQ(run->totals().rotations, 1);
}

// Drives `run` and `ticks` together until the run finishes, as a caller's loop would: to the
// earlier of the two due times each time. Returns when each period ended and its count of
// the first event.
std::vector<std::pair<Clock::time_point, std::uint64_t>> drive(CounterRun& run, TickSchedule& ticks,
                                                               SimulatedPpc750Pmu& pmu,
                                                               Clock::time_point now) {
    std::vector<std::pair<Clock::time_point, std::uint64_t>> periods;
    while (!run.finished()) {
        const auto due = std::min(run.next_due(), ticks.next());
        pmu.advance(due - now);
        now = due;
        if (ticks.due(now)) ticks.advance(now);
        if (run.next_due() > now) continue;
        auto step = run.advance(now);
        EXPECT_TRUE(step) << step.error().to_string();
        if (!step) break;
        if (step->period_ended) periods.emplace_back(now, run.period().events[0].total.count);
    }
    return periods;
}

// Periods of whole seconds end on the loading tick nearest to where they would end, so that
// a caller ticking every second wakes once a second; each period's counts are the difference
// of two readings; the last period ends with the duration, and the run then stops by itself.
TEST_F(CounterRunTest, PeriodsOfWholeSecondsEndOnTheTicksAndTheLastOneEndsTheRun) {
    TickSchedule ticks(t0_ - 800ms);  // ticks at +0.2 s, +1.2 s, ...
    auto run = start("ppc750::CYCLES", {.duration = 3s, .interval = 1s}, &ticks);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->ends(), t0_ + 3s);
    // The narrow counters' read is due first, at +1 s; the first period on the tick at +1.2 s.
    EXPECT_EQ(run->next_due(), t0_ + 1s);
    const auto periods = drive(*run, ticks, *pmu_, t0_);
    // The last period is cut short by the duration, which ends the run. 200 MHz cycles.
    using P = std::pair<Clock::time_point, std::uint64_t>;
    EXPECT_EQ(periods, (std::vector<P>{{t0_ + 1200ms, 240'000'000u},
                                       {t0_ + 2200ms, 200'000'000u},
                                       {t0_ + 3s, 160'000'000u}}));
    EXPECT_EQ(run->periods(), 3);
    EXPECT_EQ(run->totals().events[0].total.count, 600'000'000u);
    EXPECT_TRUE(run->session().stopped());
    EXPECT_EQ(run->next_due(), Clock::time_point::max());
}

// A period that ends on a tick within a millisecond of the run's end is its last: the run does
// not wake again for a period of half a millisecond.
TEST_F(CounterRunTest, APeriodEndingWithinAMillisecondOfTheEndEndsTheRun) {
    TickSchedule ticks(t0_ - 500500us);  // ticks at +0.4995 s, +1.4995 s, ...
    auto run = start("ppc750::CYCLES", {.duration = 1500ms, .interval = 1s}, &ticks,
                     perf::MuxMode::Kernel);
    ASSERT_TRUE(run);
    const auto periods = drive(*run, ticks, *pmu_, t0_);
    ASSERT_EQ(periods.size(), 1u);
    EXPECT_EQ(periods[0].first, t0_ + 1499500us);
    EXPECT_TRUE(run->finished());
}

// An interval that is not whole seconds keeps its own beat, whatever the ticks.
TEST_F(CounterRunTest, PeriodsOfOtherLengthsKeepTheirOwnBeat) {
    TickSchedule ticks(t0_ - 400ms);
    auto run =
        start("ppc750::CYCLES", {.duration = 1s, .interval = 250ms}, &ticks, perf::MuxMode::Kernel);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->next_due(), t0_ + 250ms);
    auto now = t0_;
    std::vector<Clock::time_point> ends;
    while (!run->finished()) {
        const auto due = run->next_due();
        pmu_->advance(due - now);
        now = due;
        auto step = run->advance(now);
        ASSERT_TRUE(step);
        if (step->period_ended) ends.push_back(now);
    }
    EXPECT_EQ(ends,
              (std::vector<Clock::time_point>{t0_ + 250ms, t0_ + 500ms, t0_ + 750ms, t0_ + 1s}));
}

// Without an interval the run ends at its duration, without periods.
TEST_F(CounterRunTest, ARunWithoutAnIntervalEndsAtItsDurationWithoutPeriods) {
    auto run = start("ppc750::CYCLES", {.duration = 500ms, .interval = std::nullopt}, nullptr,
                     perf::MuxMode::Kernel);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->next_due(), t0_ + 500ms);
    pmu_->advance(500ms);
    auto step = run->advance(t0_ + 500ms);
    ASSERT_TRUE(step);
    EXPECT_TRUE(step->finished);
    EXPECT_FALSE(step->period_ended);
    EXPECT_EQ(run->periods(), 0);
    EXPECT_EQ(run->totals().events[0].total.count, 100'000'000u);
}

// finish() before the duration: the counts so far, final.
TEST_F(CounterRunTest, FinishingEarlyStopsTheCountersAndKeepsTheTotals) {
    auto run = start("ppc750::CYCLES", {.duration = 10s, .interval = std::nullopt});
    ASSERT_TRUE(run);
    auto now = t0_;
    pass(*run, 2s, now);
    ASSERT_TRUE(run->finish());
    EXPECT_TRUE(run->finished());
    EXPECT_TRUE(run->session().stopped());
    EXPECT_EQ(run->totals().events[0].total.count, 400'000'000u);
    EXPECT_EQ(run->next_due(), Clock::time_point::max());
    ASSERT_TRUE(run->finish());  // again: nothing more
    auto step = run->advance(t0_ + 20s);
    ASSERT_TRUE(step);
    EXPECT_FALSE(step->finished);
}

// A reset (pfm's PCNTCLEARCNT) returns the counts so far. The counts then start from zero
// and grow again, and the period under way counts from the reset, on its schedule.
TEST_F(CounterRunTest, AResetReturnsTheCountsSoFarAndCountsFromZeroAgain) {
    TickSchedule ticks(t0_);  // ticks at +1 s, +2 s, ...
    auto run =
        start("ppc750::CYCLES", {.duration = 4s, .interval = 1s}, &ticks, perf::MuxMode::Kernel);
    ASSERT_TRUE(run);
    auto now = t0_;
    pass(*run, 1500ms, now);
    ASSERT_EQ(run->periods(), 1);
    auto before = run->reset();
    ASSERT_TRUE(before) << before.error().to_string();
    EXPECT_EQ(before->events[0].total.count, 300'000'000u);  // 1.5 s at 200 MHz
    auto zero = run->session().read();
    ASSERT_TRUE(zero);
    EXPECT_EQ(zero->events[0].total.count, 0u);

    pass(*run, 500ms, now);  // the period ending at +2 s: the half second since the reset
    ASSERT_EQ(run->periods(), 2);
    EXPECT_EQ(run->period().events[0].total.count, 100'000'000u);
    EXPECT_EQ(run->totals().events[0].total.count, 100'000'000u);
    pass(*run, 1s, now);
    EXPECT_EQ(run->period().events[0].total.count, 200'000'000u);
    EXPECT_EQ(run->totals().events[0].total.count, 300'000'000u);

    // Again, between two periods: the counts since the first reset.
    pass(*run, 250ms, now);
    before = run->reset();
    ASSERT_TRUE(before);
    EXPECT_EQ(before->events[0].total.count, 350'000'000u);
    pass(*run, 750ms, now);  // the end, at +4 s
    ASSERT_TRUE(run->finished());
    EXPECT_EQ(run->period().events[0].total.count, 150'000'000u);
    EXPECT_EQ(run->totals().events[0].total.count, 150'000'000u);

    auto after_end = run->reset();
    ASSERT_FALSE(after_end);
    EXPECT_EQ(after_end.error().status, Status::NotRdy);
}

// A session's reads after a reset count from it, on every instance and in every group, with
// the times since the reset.
TEST_F(CounterRunTest, AResetSessionCountsTimesAndGroupsFromTheReset) {
    auto run = start(kTwoSets, {}, nullptr, perf::MuxMode::Kernel);
    ASSERT_TRUE(run);
    auto now = t0_;
    pass(*run, 2s, now);
    auto& session = run->session();
    auto before = session.reset();
    ASSERT_TRUE(before);
    ASSERT_EQ(before->events.size(), 4u);
    pass(*run, 1s, now);
    auto after = session.read();
    ASSERT_TRUE(after);
    for (std::size_t e = 0; e < after->events.size(); ++e) {
        const auto& v = after->events[e].total;
        const auto& b = before->events[e].total;
        SCOPED_TRACE(after->events[e].name);
        // Half the time counted before: fewer counts, shorter times.
        EXPECT_LT(v.enabled_ns, b.enabled_ns);
        EXPECT_LE(v.running_ns, v.enabled_ns);
        EXPECT_LT(v.count, b.count);
        ASSERT_EQ(after->events[e].per_instance.size(), 1u);
        EXPECT_EQ(after->events[e].per_instance[0].count, v.count);
    }
    std::uint64_t group_counts = 0;
    for (const auto& g : after->groups) {
        for (auto c : g.counts) group_counts += c;
    }
    std::uint64_t event_counts = 0;
    for (const auto& e : after->events) event_counts += e.total.count;
    EXPECT_EQ(group_counts, event_counts);
}

}  // namespace
}  // namespace monitor
