// Where the time went: the states of /proc/stat between two readings, against shares worked
// out by hand (guest inside user, the idle probes' time given back to idle, counters that go
// back, CPUs that come and go), the machine's figures as its CPUs together (never outside
// their range, for random inputs), and the window's statistics.
#include "monitor/loading/cpu_states.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "monitor/loading/proc_stat_source.hpp"

namespace monitor {
namespace {

// user nice system idle iowait irq softirq steal guest guest_nice
CpuTimes times_of(std::array<std::uint64_t, kCpuStateCount> ticks) {
    CpuTimes t;
    t.ticks = ticks;
    return t;
}

ProcStatSnapshot snapshot(const std::map<int, CpuTimes>& cpus) {
    ProcStatSnapshot snap;
    for (const auto& [cpu, t] : cpus) {
        snap.cpus.push_back({cpu, t});
        for (std::size_t i = 0; i < kCpuStateCount; ++i) snap.machine.ticks[i] += t.ticks[i];
    }
    snap.columns = kCpuStateCount;
    return snap;
}

std::string shares_text(const StateShares& s) {
    std::string out;
    for (std::size_t i = 0; i < kTimeStateCount; ++i) {
        out += std::string{time_state_names()[i]} + "=" + std::to_string(s.percent[i]) + " ";
    }
    return out;
}

void expect_shares(const std::optional<StateShares>& got,
                   const std::map<TimeState, double>& expected) {
    ASSERT_TRUE(got);
    double sum = 0;
    for (std::size_t i = 0; i < kTimeStateCount; ++i) {
        const auto s = static_cast<TimeState>(i);
        const auto it = expected.find(s);
        EXPECT_NEAR((*got)[s], it == expected.end() ? 0.0 : it->second, 1e-9)
            << time_state_name(s) << " in " << shares_text(*got);
        sum += (*got)[s];
    }
    EXPECT_NEAR(sum, 100.0, 1e-9);
}

const CpuTimes kBefore = times_of({1000, 200, 500, 9000, 100, 30, 20, 50, 400, 80});

TEST(CpuStates, TheStatesOfAnIntervalAddUpWithGuestOutOfUserAndNice) {
    // +30 user (10 of them guest), +5 nice (2 guest_nice), +10 system, +40 idle, +5 iowait,
    // +3 irq, +2 softirq, +5 steal: 100 ticks.
    const CpuTimes after = times_of({1030, 205, 510, 9040, 105, 33, 22, 55, 410, 82});
    auto t = state_times_between(kBefore, after);
    ASSERT_TRUE(t);
    EXPECT_DOUBLE_EQ(t->total(), 100.0);
    EXPECT_DOUBLE_EQ(t->busy(), 55.0);
    EXPECT_DOUBLE_EQ(t->load().value_or(-1), 55.0);
    expect_shares(t->shares(), {{TimeState::User, 20},
                                {TimeState::Nice, 3},
                                {TimeState::System, 10},
                                {TimeState::Irq, 3},
                                {TimeState::SoftIrq, 2},
                                {TimeState::IoWait, 5},
                                {TimeState::Steal, 5},
                                {TimeState::Guest, 10},
                                {TimeState::GuestNice, 2},
                                {TimeState::Idle, 40}});
    EXPECT_EQ(time_state_name(TimeState::GuestNice), "guest_nice");
    EXPECT_EQ(time_state_names().size(), kTimeStateCount);
}

// The probes' spinning is user time to the kernel: it goes back to idle, from user first.
TEST(CpuStates, TheProbesTimeGoesBackToIdleFromTheStateTheKernelPutItIn) {
    const CpuTimes after = times_of({1060, 200, 510, 9030, 100, 30, 20, 50, 400, 80});
    auto t = state_times_between(kBefore, after);  // 60 user, 10 system, 30 idle
    ASSERT_TRUE(t);
    t->give_back_to_idle(45);
    expect_shares(t->shares(),
                  {{TimeState::User, 15}, {TimeState::System, 10}, {TimeState::Idle, 75}});
    EXPECT_DOUBLE_EQ(t->load().value_or(-1), 25.0);

    // Probes at a positive nice value: out of nice first.
    const CpuTimes niced = times_of({1010, 250, 500, 9040, 100, 30, 20, 50, 400, 80});
    auto n = state_times_between(kBefore, niced);  // 10 user, 50 nice, 40 idle
    ASSERT_TRUE(n);
    n->give_back_to_idle(30, TimeState::Nice);
    expect_shares(n->shares(),
                  {{TimeState::User, 10}, {TimeState::Nice, 20}, {TimeState::Idle, 70}});

    // Tick accounting is coarse: what user lacks comes out of the other busy states, and
    // never more than the busy time.
    auto coarse = state_times_between(kBefore, after);
    ASSERT_TRUE(coarse);
    coarse->give_back_to_idle(65);
    expect_shares(coarse->shares(), {{TimeState::System, 5}, {TimeState::Idle, 95}});
    auto all = state_times_between(kBefore, after);
    ASSERT_TRUE(all);
    all->give_back_to_idle(500);
    expect_shares(all->shares(), {{TimeState::Idle, 100}});
    auto none = state_times_between(kBefore, after);
    ASSERT_TRUE(none);
    none->give_back_to_idle(-3);  // a probe's time that went back: nothing moves
    EXPECT_DOUBLE_EQ(none->load().value_or(-1), 70.0);
}

TEST(CpuStates, CountersThatGoBackGiveNoIntervalOrNoTimeInTheirState) {
    // The busy or idle time went back (hotplug reset the counters): no interval.
    EXPECT_FALSE(state_times_between(kBefore, times_of({10, 0, 0, 40, 0, 0, 0, 0, 0, 0})));
    EXPECT_FALSE(state_times_between(kBefore, CpuTimes{}));
    // No time passed.
    EXPECT_FALSE(state_times_between(kBefore, kBefore));
    // iowait went back by 2 while idle went on by 52 (NO_HZ iowait accounting): no iowait
    // this interval, the rest as it is.
    const CpuTimes iowait_back = times_of({1048, 200, 500, 9052, 98, 30, 20, 50, 400, 80});
    auto t = state_times_between(kBefore, iowait_back);
    ASSERT_TRUE(t);
    expect_shares(t->shares(), {{TimeState::User, 48}, {TimeState::Idle, 52}});
    // guest read ahead of user: it cannot be more than user's time.
    const CpuTimes guest_ahead = times_of({1010, 200, 500, 9090, 100, 30, 20, 50, 420, 80});
    auto g = state_times_between(kBefore, guest_ahead);
    ASSERT_TRUE(g);
    expect_shares(g->shares(), {{TimeState::Guest, 10}, {TimeState::Idle, 90}});
}

// The source: per CPU and for the machine, the machine being its CPUs together.
TEST(CpuStates, TheSourceGivesEachCpusStatesAndTheMachinesAsItsCpusTogether) {
    auto source = ProcStatSource::open("/proc");
    ASSERT_TRUE(source) << source.error().to_string();
    (*source)->update(snapshot({{0, times_of({100, 0, 100, 800, 0, 0, 0, 0, 0, 0})},
                                {1, times_of({100, 0, 100, 800, 0, 0, 0, 0, 0, 0})}}));
    // cpu0: +50 user +50 idle; cpu1: +10 system +10 irq +80 idle; and cpu2 appears.
    auto s = (*source)->update(snapshot({{0, times_of({150, 0, 100, 850, 0, 0, 0, 0, 0, 0})},
                                         {1, times_of({100, 0, 110, 880, 0, 10, 0, 0, 0, 0})},
                                         {2, times_of({5, 0, 5, 90, 0, 0, 0, 0, 0, 0})}}));
    ASSERT_EQ(s.cpu_states.size(), 3u);
    expect_shares(s.cpu_states[0], {{TimeState::User, 50}, {TimeState::Idle, 50}});
    expect_shares(s.cpu_states[1],
                  {{TimeState::System, 10}, {TimeState::Irq, 10}, {TimeState::Idle, 80}});
    EXPECT_FALSE(s.cpu_states[2]) << "a CPU that just came online only sets its baseline";
    expect_shares(s.machine_states, {{TimeState::User, 25},
                                     {TimeState::System, 5},
                                     {TimeState::Irq, 5},
                                     {TimeState::Idle, 65}});
    EXPECT_DOUBLE_EQ(s.machine.value_or(-1), 35.0);
}

// The machine's load and each state's share are weighted means of its CPUs': for any
// counters, within the range of the CPUs' figures of the same interval.
TEST(CpuStates, TheMachineNeverLiesOutsideItsCpusRange) {
    std::mt19937_64 random(20261124);
    std::uniform_int_distribution<std::uint64_t> ticks(0, 120);
    std::uniform_int_distribution<int> cpus_of(1, 16);
    for (int round = 0; round < 500; ++round) {
        auto source = ProcStatSource::open("/proc");
        ASSERT_TRUE(source);
        const int cpus = cpus_of(random);
        std::map<int, CpuTimes> before, after;
        for (int c = 0; c < cpus; ++c) {
            CpuTimes t;
            for (auto& v : t.ticks) v = 1'000'000 + ticks(random);
            before[c] = t;
            for (std::size_t i = 0; i < kCpuStateCount; ++i) t.ticks[i] += ticks(random);
            after[c] = t;
        }
        // The kernel's "cpu" line is not the sum of the "cpuN" lines to the tick (it converts
        // the sum of nanoseconds, each cpuN line its own): a tick or two off either way.
        std::uniform_int_distribution<int> jitter(-2, 2);
        auto with_machine_line_off = [&](ProcStatSnapshot snap) {
            for (auto& v : snap.machine.ticks) v += static_cast<std::uint64_t>(jitter(random) + 2);
            return snap;
        };
        (*source)->update(with_machine_line_off(snapshot(before)));
        auto s = (*source)->update(with_machine_line_off(snapshot(after)));
        ASSERT_TRUE(s.machine) << "round " << round;
        double low = 100, high = 0;
        for (const auto& [cpu, load] : s.cpus) {
            ASSERT_TRUE(load);
            low = std::min(low, *load);
            high = std::max(high, *load);
        }
        EXPECT_GE(*s.machine, low - 1e-9) << "round " << round;
        EXPECT_LE(*s.machine, high + 1e-9) << "round " << round;
        ASSERT_TRUE(s.machine_states);
        for (std::size_t k = 0; k < kTimeStateCount; ++k) {
            double lo = 100, hi = 0;
            for (const auto& st : s.cpu_states) {
                ASSERT_TRUE(st);
                lo = std::min(lo, st->percent[k]);
                hi = std::max(hi, st->percent[k]);
            }
            EXPECT_GE(s.machine_states->percent[k], lo - 1e-9)
                << time_state_names()[k] << ", round " << round;
            EXPECT_LE(s.machine_states->percent[k], hi + 1e-9)
                << time_state_names()[k] << ", round " << round;
        }
    }
}

StateShares half(TimeState a, TimeState b) {
    StateShares s;
    s[a] = 50;
    s[b] = 50;
    return s;
}

TEST(StateHistoryTest, TheWindowsMeanIsTimeWeightedOverItsValidIntervals) {
    StateHistory h(3);
    EXPECT_FALSE(h.stats());
    EXPECT_TRUE(h.empty_of_data());
    h.push(half(TimeState::User, TimeState::Idle), 1.0);
    h.push(std::nullopt, 1.0);
    auto st = h.stats();
    ASSERT_TRUE(st);
    EXPECT_FALSE(st->last) << "the newest interval was a gap";
    EXPECT_EQ(st->samples, 1u);
    EXPECT_DOUBLE_EQ(st->avg[TimeState::User], 50);
    // 3 s of all system after 1 s of half user: user 12.5, system 75, idle 12.5.
    StateShares system;
    system[TimeState::System] = 100;
    h.push(system, 3.0);
    st = h.stats();
    ASSERT_TRUE(st);
    ASSERT_TRUE(st->last);
    EXPECT_DOUBLE_EQ((*st->last)[TimeState::System], 100);
    EXPECT_DOUBLE_EQ(st->avg[TimeState::User], 12.5);
    EXPECT_DOUBLE_EQ(st->avg[TimeState::System], 75);
    EXPECT_DOUBLE_EQ(st->avg[TimeState::Idle], 12.5);
    // The first interval leaves the window of three.
    h.push(system, 1.0);
    st = h.stats();
    ASSERT_TRUE(st);
    EXPECT_EQ(st->samples, 2u);
    EXPECT_DOUBLE_EQ(st->avg[TimeState::System], 100);
    // A shorter window keeps the newest.
    h.resize(1);
    st = h.stats();
    ASSERT_TRUE(st);
    EXPECT_EQ(st->samples, 1u);
    h.push(std::nullopt, 1.0);
    EXPECT_TRUE(h.empty_of_data());
}

}  // namespace
}  // namespace monitor
