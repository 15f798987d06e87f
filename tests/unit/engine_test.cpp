// Tests of the Engine's loading part over a temporary proc root and sys root whose stat and
// online files the tests write between ticks.
#include "monitor/engine.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::stat_text;
using test_support::Ticks;
using test_support::write_file;

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Values = std::vector<std::optional<double>>;

constexpr std::optional<double> kGap = std::nullopt;

using Cpus = std::map<int, Ticks>;

const SourceLoad* procstat(const std::vector<SourceLoad>& loads) {
    return find_source(loads, "procstat");
}

const CpuLoading* find_cpu(const LoadingReport& r, int cpu) {
    for (const auto& c : r.cpus) {
        if (c.cpu == cpu) return &c;
    }
    return nullptr;
}

std::vector<int> reported_cpus(const LoadingReport& r) {
    std::vector<int> ids;
    for (const auto& c : r.cpus) ids.push_back(c.cpu);
    return ids;
}

class EngineTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_FALSE(root_.path().empty());
        fs::create_directories(proc_);
        fs::create_directories(sys_);
    }
    void TearDown() override { engine_.reset(); }

    void write_stat(const Cpus& cpus) { write_file(proc_ / "stat", stat_text(cpus)); }
    void write_stat_raw(const std::string& text) { write_file(proc_ / "stat", text); }
    void write_online(const std::string& list) {
        write_file(sys_ / "devices/system/cpu/online", list + "\n");
    }

    // Creates the engine at t0 over the current files (and the units of a cgroup tree; the
    // CPUs' context with `context`, the tasks with `tasks`).
    void create(std::size_t history_seconds = 60, const fs::path& cgroup_root = {},
                bool context = false, bool tasks = false) {
        EngineOptions options;
        options.proc_root = proc_;
        options.sys_root = sys_;
        options.history_seconds = history_seconds;
        options.cgroup_root = cgroup_root;
        options.cpu_context = context;
        options.tasks = tasks;
        auto engine = Engine::create(options, t0_);
        ASSERT_TRUE(engine.has_value()) << engine.error().to_string();
        engine_ = std::move(*engine);
    }

    // Writes the stat file and ticks `seconds` after the previous tick.
    void tick_with(const Cpus& cpus, std::chrono::milliseconds step = 1s) {
        write_stat(cpus);
        now_ += step;
        auto r = engine_->tick(now_);
        ASSERT_TRUE(r.has_value()) << r.error().to_string();
    }

    LoadingReport report(bool history = false) const {
        return engine_->loading(LoadingQuery{.per_cpu = true, .history = history});
    }

    // Asserts that every statistic and history value in `r` lies within 0..100.
    static void expect_in_range(const LoadingReport& r) {
        auto check = [](const SourceLoad& l) {
            if (l.stats) {
                if (l.stats->avg_prev_sec) {
                    EXPECT_GE(*l.stats->avg_prev_sec, 0.0);
                    EXPECT_LE(*l.stats->avg_prev_sec, 100.0);
                }
                for (double v :
                     {l.stats->avg_prev_min, l.stats->min_prev_min, l.stats->max_prev_min}) {
                    EXPECT_GE(v, 0.0);
                    EXPECT_LE(v, 100.0);
                }
            }
            for (const auto& v : l.history) {
                if (!v) continue;
                EXPECT_GE(*v, 0.0);
                EXPECT_LE(*v, 100.0);
            }
        };
        for (const auto& l : r.machine) check(l);
        for (const auto& c : r.cpus) {
            for (const auto& l : c.sources) check(l);
        }
    }

    test_support::ScratchDir root_{"engine"};
    const fs::path proc_ = root_ / "proc";
    const fs::path sys_ = root_ / "sys";
    const Engine::Clock::time_point t0_ = Engine::Clock::time_point{} + 1000s;
    Engine::Clock::time_point now_ = t0_;
    std::unique_ptr<Engine> engine_;
};

const Cpus kBase = {{0, {1000, 9000}}, {1, {2000, 8000}}, {2, {3000, 7000}}, {3, {500, 9500}}};

// kBase after one second: cpu0 10%, cpu1 25%, cpu2 50%, cpu3 100%; machine 185 of 400.
const Cpus kStep1 = {{0, {1010, 9090}}, {1, {2025, 8075}}, {2, {3050, 7050}}, {3, {600, 9500}}};

TEST_F(EngineTest, SourceNames) {
    write_stat(kBase);
    write_online("0-3");
    create();
    auto names = engine_->source_names();
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0], "procstat");
}

TEST_F(EngineTest, CreateFailsWithoutProcStat) {
    write_online("0-3");
    EngineOptions options;
    options.proc_root = proc_;
    options.sys_root = sys_;
    auto engine = Engine::create(options, t0_);
    ASSERT_FALSE(engine.has_value());
    EXPECT_EQ(engine.error().status, Status::NoDev) << engine.error().to_string();
}

TEST_F(EngineTest, NothingMeasuredBeforeTheFirstTick) {
    write_stat(kBase);
    write_online("0-3");
    create(30);
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(engine_->history_seconds(), 30u);

    auto r = report(true);
    EXPECT_FALSE(r.timestamp.has_value());
    EXPECT_EQ(r.window_seconds, 30u);
    ASSERT_EQ(r.machine.size(), 1u);
    ASSERT_NE(procstat(r.machine), nullptr);
    EXPECT_FALSE(procstat(r.machine)->stats.has_value());
    EXPECT_TRUE(procstat(r.machine)->history.empty());
    ASSERT_EQ(reported_cpus(r), (std::vector<int>{0, 1, 2, 3}));
    for (const auto& c : r.cpus) {
        EXPECT_TRUE(c.online) << "cpu" << c.cpu;
        ASSERT_NE(procstat(c.sources), nullptr) << "cpu" << c.cpu;
        EXPECT_FALSE(procstat(c.sources)->stats.has_value()) << "cpu" << c.cpu;
    }
}

TEST_F(EngineTest, FirstTickGivesExactLoads) {
    write_stat(kBase);
    write_online("0-3");
    create();
    tick_with(kStep1);

    auto r = report();
    EXPECT_TRUE(r.timestamp.has_value());
    EXPECT_EQ(r.window_seconds, 60u);

    const SourceLoad* m = procstat(r.machine);
    ASSERT_NE(m, nullptr);
    ASSERT_TRUE(m->stats.has_value());
    EXPECT_DOUBLE_EQ(m->stats->avg_prev_sec.value_or(-1), 46.25);
    EXPECT_DOUBLE_EQ(m->stats->avg_prev_min, 46.25);
    EXPECT_DOUBLE_EQ(m->stats->min_prev_min, 46.25);
    EXPECT_DOUBLE_EQ(m->stats->max_prev_min, 46.25);
    EXPECT_EQ(m->stats->samples, 1u);
    EXPECT_TRUE(m->history.empty());  // not asked for

    ASSERT_EQ(reported_cpus(r), (std::vector<int>{0, 1, 2, 3}));
    const std::map<int, double> expected = {{0, 10.0}, {1, 25.0}, {2, 50.0}, {3, 100.0}};
    for (const auto& c : r.cpus) {
        SCOPED_TRACE("cpu" + std::to_string(c.cpu));
        EXPECT_TRUE(c.online);
        ASSERT_EQ(c.sources.size(), 1u);
        const SourceLoad* l = procstat(c.sources);
        ASSERT_NE(l, nullptr);
        ASSERT_TRUE(l->stats.has_value());
        EXPECT_DOUBLE_EQ(l->stats->avg_prev_sec.value_or(-1), expected.at(c.cpu));
        EXPECT_DOUBLE_EQ(l->stats->avg_prev_min, expected.at(c.cpu));
        EXPECT_EQ(l->stats->samples, 1u);
    }
}

TEST_F(EngineTest, MachineOnlyReportHasNoCpus) {
    write_stat(kBase);
    write_online("0-3");
    create();
    tick_with(kStep1);
    auto r = engine_->loading(LoadingQuery{});
    EXPECT_TRUE(r.cpus.empty());
    ASSERT_NE(procstat(r.machine), nullptr);
    ASSERT_TRUE(procstat(r.machine)->stats.has_value());
    EXPECT_DOUBLE_EQ(procstat(r.machine)->stats->avg_prev_min, 46.25);
}

TEST_F(EngineTest, HistoryGivesThePerSecondValues) {
    write_stat({{0, {0, 0}}, {1, {0, 0}}});
    write_online("0-1");
    create();
    tick_with({{0, {10, 90}}, {1, {50, 50}}});     // cpu0 10, cpu1 50, machine 30
    tick_with({{0, {40, 160}}, {1, {60, 140}}});   // cpu0 30, cpu1 10, machine 20
    tick_with({{0, {90, 210}}, {1, {160, 140}}});  // cpu0 50, cpu1 100, machine 75

    auto r = report(true);
    const SourceLoad* m = procstat(r.machine);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->history, (Values{30.0, 20.0, 75.0}));
    ASSERT_TRUE(m->stats.has_value());
    EXPECT_DOUBLE_EQ(m->stats->avg_prev_min, 125.0 / 3.0);
    EXPECT_DOUBLE_EQ(m->stats->min_prev_min, 20.0);
    EXPECT_DOUBLE_EQ(m->stats->max_prev_min, 75.0);
    EXPECT_DOUBLE_EQ(m->stats->avg_prev_sec.value_or(-1), 75.0);
    EXPECT_EQ(m->stats->samples, 3u);

    const CpuLoading* c0 = find_cpu(r, 0);
    const CpuLoading* c1 = find_cpu(r, 1);
    ASSERT_NE(c0, nullptr);
    ASSERT_NE(c1, nullptr);
    ASSERT_NE(procstat(c0->sources), nullptr);
    ASSERT_NE(procstat(c1->sources), nullptr);
    EXPECT_EQ(procstat(c0->sources)->history, (Values{10.0, 30.0, 50.0}));
    EXPECT_EQ(procstat(c1->sources)->history, (Values{50.0, 10.0, 100.0}));
    ASSERT_TRUE(procstat(c1->sources)->stats.has_value());
    EXPECT_DOUBLE_EQ(procstat(c1->sources)->stats->min_prev_min, 10.0);
    EXPECT_DOUBLE_EQ(procstat(c1->sources)->stats->max_prev_min, 100.0);
}

TEST_F(EngineTest, AverageIsWeightedByTickLength) {
    write_stat({{0, {0, 0}}});
    write_online("0");
    create();
    tick_with({{0, {10, 90}}}, 1s);      // 10% over 1 s
    tick_with({{0, {90, 210}}}, 2s);     // 40% over 2 s
    tick_with({{0, {90, 210}}}, 500ms);  // no tick counted: no time measured, a gap

    auto r = report(true);
    const SourceLoad* m = procstat(r.machine);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->history, (Values{10.0, 40.0, kGap}));
    ASSERT_TRUE(m->stats.has_value());
    EXPECT_DOUBLE_EQ(m->stats->avg_prev_min, 30.0);
    EXPECT_FALSE(m->stats->avg_prev_sec.has_value());
}

TEST_F(EngineTest, LastSecondIsWhatTheHistoryOnDiskKeeps) {
    write_stat({{0, {0, 0}}, {1, {0, 0}}});
    write_online("0-1");
    create();
    EXPECT_FALSE(engine_->last_second().has_value()) << "nothing before the first tick";
    tick_with({{0, {10, 90}}, {1, {50, 50}}});
    write_online("0");
    tick_with({{0, {40, 160}}});  // cpu0 30; cpu1 offline: a gap
    auto second = engine_->last_second();
    ASSERT_TRUE(second.has_value());
    EXPECT_NEAR(second->seconds, 1.0, 1e-9);
    ASSERT_EQ(second->sources.size(), 1u);
    const auto& s = second->sources[0];
    EXPECT_EQ(s.name, "procstat");
    EXPECT_EQ(s.machine, 30.0);
    ASSERT_TRUE(s.has_states);
    ASSERT_TRUE(s.machine_states.has_value());
    ASSERT_EQ(s.cpus.size(), 2u);
    EXPECT_EQ(s.cpus[0].cpu, 0);
    EXPECT_EQ(s.cpus[0].load, 30.0);
    ASSERT_TRUE(s.cpus[0].states.has_value());
    EXPECT_NEAR((*s.cpus[0].states)[TimeState::Idle], 70.0, 1e-4);
    EXPECT_EQ(s.cpus[1].cpu, 1);
    EXPECT_FALSE(s.cpus[1].load.has_value());
    EXPECT_FALSE(s.cpus[1].states.has_value());
}

TEST_F(EngineTest, CpuGoingOfflineIsReportedThenDropped) {
    write_stat(kBase);
    write_online("0-3");
    create(3);
    tick_with(kStep1);

    // cpu1 goes offline: gone from the online list and from /proc/stat.
    write_online("0,2-3");
    tick_with({{0, {1020, 9180}}, {2, {3100, 7100}}, {3, {700, 9500}}});
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 2, 3}));

    auto r = report(true);
    EXPECT_EQ(reported_cpus(r), (std::vector<int>{0, 1, 2, 3}));
    const CpuLoading* c1 = find_cpu(r, 1);
    ASSERT_NE(c1, nullptr);
    EXPECT_FALSE(c1->online);
    const SourceLoad* l1 = procstat(c1->sources);
    ASSERT_NE(l1, nullptr);
    EXPECT_EQ(l1->history, (Values{25.0, kGap}));
    ASSERT_TRUE(l1->stats.has_value());
    EXPECT_FALSE(l1->stats->avg_prev_sec.has_value());
    EXPECT_DOUBLE_EQ(l1->stats->avg_prev_min, 25.0);
    EXPECT_EQ(l1->stats->samples, 1u);

    // The others still measure, and online.
    const CpuLoading* c0 = find_cpu(r, 0);
    ASSERT_NE(c0, nullptr);
    EXPECT_TRUE(c0->online);
    ASSERT_NE(procstat(c0->sources), nullptr);
    EXPECT_EQ(procstat(c0->sources)->history, (Values{10.0, 10.0}));

    tick_with({{0, {1030, 9270}}, {2, {3150, 7150}}, {3, {800, 9500}}});
    r = report(true);
    c1 = find_cpu(r, 1);
    ASSERT_NE(c1, nullptr);
    EXPECT_FALSE(c1->online);
    ASSERT_NE(procstat(c1->sources), nullptr);
    EXPECT_EQ(procstat(c1->sources)->history, (Values{25.0, kGap, kGap}));

    // The window (3 s) now holds only gaps for cpu1: it is dropped.
    tick_with({{0, {1040, 9360}}, {2, {3200, 7200}}, {3, {900, 9500}}});
    r = report(true);
    EXPECT_EQ(reported_cpus(r), (std::vector<int>{0, 2, 3}));
    EXPECT_EQ(find_cpu(r, 1), nullptr);
    ASSERT_NE(find_cpu(r, 0), nullptr);
    ASSERT_NE(procstat(find_cpu(r, 0)->sources), nullptr);
    EXPECT_EQ(procstat(find_cpu(r, 0)->sources)->history, (Values{10.0, 10.0, 10.0}));
}

TEST_F(EngineTest, CpuListedOnlineButMissingFromStatGetsGaps) {
    write_stat(kBase);
    write_online("0-3");
    create(3);
    tick_with(kStep1);

    // sysfs still lists cpu3, /proc/stat no longer does.
    tick_with({{0, {1020, 9180}}, {1, {2050, 8150}}, {2, {3100, 7100}}});
    auto r = report(true);
    const CpuLoading* c3 = find_cpu(r, 3);
    ASSERT_NE(c3, nullptr);
    EXPECT_TRUE(c3->online);
    ASSERT_NE(procstat(c3->sources), nullptr);
    EXPECT_EQ(procstat(c3->sources)->history, (Values{100.0, kGap}));
}

TEST_F(EngineTest, CpuComingOnlineAppears) {
    write_stat({{0, {0, 0}}, {1, {0, 0}}});
    write_online("0-1");
    create(5);
    tick_with({{0, {10, 90}}, {1, {20, 80}}});
    EXPECT_EQ(reported_cpus(report()), (std::vector<int>{0, 1}));

    // cpu2 comes online: its first reading only sets the baseline.
    write_online("0-2");
    tick_with({{0, {20, 180}}, {1, {40, 160}}, {2, {5000, 5000}}});
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2}));
    auto r = report(true);
    ASSERT_EQ(reported_cpus(r), (std::vector<int>{0, 1, 2}));
    const CpuLoading* c2 = find_cpu(r, 2);
    ASSERT_NE(c2, nullptr);
    EXPECT_TRUE(c2->online);
    ASSERT_NE(procstat(c2->sources), nullptr);
    EXPECT_FALSE(procstat(c2->sources)->stats.has_value());
    EXPECT_EQ(procstat(c2->sources)->history, (Values{kGap}));

    // The next tick measures it: 70 of 100.
    tick_with({{0, {30, 270}}, {1, {60, 240}}, {2, {5070, 5030}}});
    r = report(true);
    c2 = find_cpu(r, 2);
    ASSERT_NE(c2, nullptr);
    ASSERT_NE(procstat(c2->sources), nullptr);
    EXPECT_EQ(procstat(c2->sources)->history, (Values{kGap, 70.0}));
    ASSERT_TRUE(procstat(c2->sources)->stats.has_value());
    EXPECT_DOUBLE_EQ(procstat(c2->sources)->stats->avg_prev_sec.value_or(-1), 70.0);
}

TEST_F(EngineTest, CounterRegressionRecordsAGap) {
    write_stat({{0, {1000, 1000}}, {1, {1000, 1000}}});
    write_online("0-1");
    create();
    tick_with({{0, {1010, 1090}}, {1, {1050, 1050}}});  // cpu0 10, cpu1 50, machine 30
    // cpu1's idle counter goes backwards (and with it the machine's).
    tick_with({{0, {1020, 1180}}, {1, {1300, 900}}});
    // Then both advance normally again from the regressed reading.
    tick_with({{0, {1030, 1270}}, {1, {1340, 960}}});  // cpu0 10, cpu1 40, machine 25

    auto r = report(true);
    expect_in_range(r);
    const SourceLoad* m = procstat(r.machine);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->history, (Values{30.0, kGap, 25.0}));
    const CpuLoading* c0 = find_cpu(r, 0);
    const CpuLoading* c1 = find_cpu(r, 1);
    ASSERT_NE(c0, nullptr);
    ASSERT_NE(c1, nullptr);
    ASSERT_NE(procstat(c0->sources), nullptr);
    ASSERT_NE(procstat(c1->sources), nullptr);
    EXPECT_EQ(procstat(c0->sources)->history, (Values{10.0, 10.0, 10.0}));
    EXPECT_EQ(procstat(c1->sources)->history, (Values{50.0, kGap, 40.0}));
    ASSERT_TRUE(procstat(c1->sources)->stats.has_value());
    EXPECT_EQ(procstat(c1->sources)->stats->samples, 2u);
    EXPECT_DOUBLE_EQ(procstat(c1->sources)->stats->avg_prev_min, 45.0);
}

TEST_F(EngineTest, CountersResetToZeroRecordAGap) {
    write_stat(kBase);
    write_online("0-3");
    create();
    tick_with(kStep1);
    tick_with({{0, {0, 0}}, {1, {0, 0}}, {2, {0, 0}}, {3, {0, 0}}});

    auto r = report(true);
    expect_in_range(r);
    ASSERT_NE(procstat(r.machine), nullptr);
    EXPECT_EQ(procstat(r.machine)->history, (Values{46.25, kGap}));
    for (const auto& c : r.cpus) {
        ASSERT_NE(procstat(c.sources), nullptr);
        ASSERT_EQ(procstat(c.sources)->history.size(), 2u) << "cpu" << c.cpu;
        EXPECT_FALSE(procstat(c.sources)->history[1].has_value()) << "cpu" << c.cpu;
    }
}

TEST_F(EngineTest, WithoutSysfsTheCpusOfProcStatAreOnline) {
    write_stat(kBase);  // no <sys>/devices/system/cpu/online
    create(3);
    tick_with(kStep1);
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2, 3}));

    auto r = report();
    ASSERT_EQ(reported_cpus(r), (std::vector<int>{0, 1, 2, 3}));
    for (const auto& c : r.cpus) {
        EXPECT_TRUE(c.online) << "cpu" << c.cpu;
        ASSERT_NE(procstat(c.sources), nullptr);
        EXPECT_TRUE(procstat(c.sources)->stats.has_value()) << "cpu" << c.cpu;
    }
    ASSERT_TRUE(procstat(find_cpu(r, 2)->sources)->stats.has_value());
    EXPECT_DOUBLE_EQ(procstat(find_cpu(r, 2)->sources)->stats->avg_prev_min, 50.0);

    // cpu1 leaves /proc/stat: it is offline.
    tick_with({{0, {1020, 9180}}, {2, {3100, 7100}}, {3, {700, 9500}}});
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 2, 3}));
    r = report(true);
    const CpuLoading* c1 = find_cpu(r, 1);
    ASSERT_NE(c1, nullptr);
    EXPECT_FALSE(c1->online);
    ASSERT_NE(procstat(c1->sources), nullptr);
    EXPECT_EQ(procstat(c1->sources)->history, (Values{25.0, kGap}));
}

TEST_F(EngineTest, WithoutSysfsTheCpusOfProcStatAreOnlineFromCreate) {
    write_stat(kBase);  // no <sys>/devices/system/cpu/online
    create();
    // As with sysfs, the CPUs are known from the baseline reading on.
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(reported_cpus(report()), (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(EngineTest, WithoutSysfsACpuBackInProcStatIsOnline) {
    write_stat(kBase);  // no <sys>/devices/system/cpu/online
    create(5);
    tick_with(kStep1);
    tick_with({{0, {1020, 9180}}, {2, {3100, 7100}}, {3, {700, 9500}}});
    ASSERT_EQ(engine_->online_cpus(), (std::vector<int>{0, 2, 3}));

    // cpu1 is listed in /proc/stat again: it is online, although not measured yet.
    tick_with({{0, {1030, 9270}}, {1, {2100, 8200}}, {2, {3150, 7150}}, {3, {800, 9500}}});
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2, 3}));
    const LoadingReport r = report();
    const CpuLoading* c1 = find_cpu(r, 1);
    ASSERT_NE(c1, nullptr);
    EXPECT_TRUE(c1->online);
}

TEST_F(EngineTest, WithoutSysfsAReadErrorDoesNotTakeCpusOffline) {
    write_stat(kBase);  // no <sys>/devices/system/cpu/online
    create();
    tick_with(kStep1);
    ASSERT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2, 3}));

    write_stat_raw("cpu  1 2 3\n");
    now_ += 1s;
    EXPECT_FALSE(engine_->tick(now_).has_value());
    // Nothing says a CPU went away: the failed read is a gap, not a hotplug event.
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2, 3}));
    auto r = report();
    ASSERT_EQ(reported_cpus(r), (std::vector<int>{0, 1, 2, 3}));
    for (const auto& c : r.cpus) EXPECT_TRUE(c.online) << "cpu" << c.cpu;
}

TEST_F(EngineTest, SetHistorySecondsShrinksTheWindow) {
    write_stat({{0, {0, 0}}});
    write_online("0");
    create(5);
    tick_with({{0, {10, 90}}});    // 10
    tick_with({{0, {30, 170}}});   // 20
    tick_with({{0, {60, 240}}});   // 30
    tick_with({{0, {100, 300}}});  // 40

    engine_->set_history_seconds(2);
    EXPECT_EQ(engine_->history_seconds(), 2u);
    auto r = report(true);
    EXPECT_EQ(r.window_seconds, 2u);
    ASSERT_NE(procstat(r.machine), nullptr);
    EXPECT_EQ(procstat(r.machine)->history, (Values{30.0, 40.0}));
    ASSERT_TRUE(procstat(r.machine)->stats.has_value());
    EXPECT_DOUBLE_EQ(procstat(r.machine)->stats->avg_prev_min, 35.0);
    EXPECT_DOUBLE_EQ(procstat(r.machine)->stats->min_prev_min, 30.0);
    ASSERT_NE(find_cpu(r, 0), nullptr);
    ASSERT_NE(procstat(find_cpu(r, 0)->sources), nullptr);
    EXPECT_EQ(procstat(find_cpu(r, 0)->sources)->history, (Values{30.0, 40.0}));

    tick_with({{0, {150, 350}}});  // 50
    r = report(true);
    EXPECT_EQ(procstat(r.machine)->history, (Values{40.0, 50.0}));

    // Growing again keeps what is there and fills up.
    engine_->set_history_seconds(4);
    tick_with({{0, {210, 390}}});  // 60
    r = report(true);
    EXPECT_EQ(r.window_seconds, 4u);
    EXPECT_EQ(procstat(r.machine)->history, (Values{40.0, 50.0, 60.0}));
    EXPECT_EQ(procstat(find_cpu(r, 0)->sources)->history, (Values{40.0, 50.0, 60.0}));
}

TEST_F(EngineTest, SetHistorySecondsAppliesToCpusThatComeLater) {
    write_stat({{0, {0, 0}}});
    write_online("0");
    create(5);
    engine_->set_history_seconds(2);
    write_online("0-1");
    tick_with({{0, {10, 90}}, {1, {0, 0}}});
    tick_with({{0, {20, 180}}, {1, {10, 90}}});
    tick_with({{0, {30, 270}}, {1, {30, 170}}});
    auto r = report(true);
    const CpuLoading* c1 = find_cpu(r, 1);
    ASSERT_NE(c1, nullptr);
    ASSERT_NE(procstat(c1->sources), nullptr);
    EXPECT_EQ(procstat(c1->sources)->history, (Values{10.0, 20.0}));
}

TEST_F(EngineTest, MalformedStatFailsTheTickButNotTheEngine) {
    write_stat({{0, {0, 0}}, {1, {0, 0}}});
    write_online("0-1");
    create();
    tick_with({{0, {10, 90}}, {1, {50, 50}}});  // cpu0 10, cpu1 50, machine 30

    write_stat_raw("cpu  10 0 0 90 0 0 0 0 0 0\ncpu0 10 zero 0 90\ncpu1 50 0 0 50\n");
    now_ += 1s;
    auto bad = engine_->tick(now_);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.error().status, Status::BadData);
    EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;

    auto r = report(true);
    ASSERT_NE(procstat(r.machine), nullptr);
    EXPECT_EQ(procstat(r.machine)->history, (Values{30.0, kGap}));
    for (const auto& c : r.cpus) {
        ASSERT_NE(procstat(c.sources), nullptr);
        ASSERT_EQ(procstat(c.sources)->history.size(), 2u) << "cpu" << c.cpu;
        EXPECT_FALSE(procstat(c.sources)->history[1].has_value()) << "cpu" << c.cpu;
    }

    // The next good file is measured against the last good reading.
    // cpu0: +30 busy +170 idle = 15%; cpu1: +150 busy +50 idle = 75%; machine 180 of 400.
    tick_with({{0, {40, 260}}, {1, {200, 100}}});
    r = report(true);
    expect_in_range(r);
    EXPECT_EQ(procstat(r.machine)->history, (Values{30.0, kGap, 45.0}));
    ASSERT_NE(find_cpu(r, 0), nullptr);
    ASSERT_NE(find_cpu(r, 1), nullptr);
    EXPECT_EQ(procstat(find_cpu(r, 0)->sources)->history, (Values{10.0, kGap, 15.0}));
    EXPECT_EQ(procstat(find_cpu(r, 1)->sources)->history, (Values{50.0, kGap, 75.0}));
}

TEST_F(EngineTest, ShortHistoryOfOne) {
    write_stat({{0, {0, 0}}});
    write_online("0");
    create(0);  // at least one second
    EXPECT_EQ(engine_->history_seconds(), 1u);
    tick_with({{0, {10, 90}}});
    tick_with({{0, {40, 160}}});
    auto r = report(true);
    ASSERT_NE(procstat(r.machine), nullptr);
    EXPECT_EQ(procstat(r.machine)->history, (Values{30.0}));
}

}  // namespace
}  // namespace monitor

namespace monitor {
namespace {

// Busy seconds: every state but idle and iowait (the fixture splits busy ticks into user and
// system).
double busy_seconds(const StateSeconds& s) {
    double busy = 0;
    for (std::size_t i = 0; i < kTimeStateCount; ++i) busy += s.seconds[i];
    return busy - s[TimeState::Idle] - s[TimeState::IoWait];
}

// The time by state so far, as the kernel counted it, per CPU; the machine's is the sum of
// its CPUs'. A gap adds nothing, and nothing goes back.
TEST_F(EngineTest, TotalsAddUpEachCpusTimeByStateAndTheMachinesIsTheirSum) {
    write_stat({{0, {1000, 1000}}, {1, {1000, 1000}}});
    write_online("0-1");
    create();
    tick_with({{0, {1010, 1090}}, {1, {1050, 1050}}});  // cpu0 10 % busy, cpu1 50 %
    // 2 s of the clock but 1 s of ticks: the ticks count. cpu1's idle goes back: a gap.
    tick_with({{0, {1020, 1180}}, {1, {1300, 900}}}, 2s);
    tick_with({{0, {1030, 1270}}, {1, {1340, 960}}});  // cpu0 10 %, cpu1 40 %

    EXPECT_FALSE(procstat(report().machine)->state_seconds.has_value()) << "only when asked";
    auto r = engine_->loading(LoadingQuery{.per_cpu = true, .totals = true});
    const auto* c0 = procstat(find_cpu(r, 0)->sources);
    const auto* c1 = procstat(find_cpu(r, 1)->sources);
    const auto* m = procstat(r.machine);
    ASSERT_TRUE(c0->state_seconds && c1->state_seconds && m->state_seconds);
    // cpu0: three intervals of 100 ticks at 10 % busy.
    EXPECT_NEAR(busy_seconds(*c0->state_seconds), 0.3, 1e-9);
    EXPECT_NEAR((*c0->state_seconds)[TimeState::Idle], 2.7, 1e-9);
    // cpu1: the gap's 2 s count nowhere.
    EXPECT_NEAR(busy_seconds(*c1->state_seconds), 0.5 + 0.4, 1e-9);
    EXPECT_NEAR((*c1->state_seconds)[TimeState::Idle], 0.5 + 0.6, 1e-9);
    for (std::size_t i = 0; i < kTimeStateCount; ++i) {
        EXPECT_NEAR(m->state_seconds->seconds[i],
                    c0->state_seconds->seconds[i] + c1->state_seconds->seconds[i], 1e-9);
    }

    // cpu1 goes offline and comes back: its first interval back is a gap, then its counters
    // carry on from where they were.
    write_online("0");
    tick_with({{0, {1040, 1360}}});
    write_online("0-1");
    tick_with({{0, {1050, 1450}}, {1, {1350, 1050}}});
    tick_with({{0, {1060, 1540}}, {1, {1370, 1130}}});  // cpu1 20 %
    auto later = engine_->loading(LoadingQuery{.per_cpu = true, .totals = true});
    const auto* back = procstat(find_cpu(later, 1)->sources);
    ASSERT_TRUE(back->state_seconds);
    EXPECT_NEAR(busy_seconds(*back->state_seconds), 0.9 + 0.2, 1e-9);
    EXPECT_NEAR((*back->state_seconds)[TimeState::Idle], 1.1 + 0.8, 1e-9);
}

// An interval in which the counters did not move (a reader faster than the kernel's update)
// loses no time: the next one brings it.
TEST_F(EngineTest, TotalsKeepTheTimeOfAnIntervalWhoseCountersStood) {
    write_stat({{0, {1000, 1000}}});
    write_online("0");
    create();
    tick_with({{0, {1000, 1000}}});  // nothing moved
    tick_with({{0, {1050, 1150}}});  // two seconds' ticks at once
    auto r = engine_->loading(LoadingQuery{.per_cpu = true, .totals = true});
    const auto* c0 = procstat(find_cpu(r, 0)->sources);
    ASSERT_TRUE(c0->state_seconds);
    EXPECT_NEAR(busy_seconds(*c0->state_seconds), 0.5, 1e-9);
    EXPECT_NEAR((*c0->state_seconds)[TimeState::Idle], 1.5, 1e-9);
}

// CPU time per unit beside the loading, from a cgroup tree under the given root: the busiest
// units when asked, the window as long as the loading's, and why there are none without one.
TEST_F(EngineTest, UnitsAreReportedWhenAskedFor) {
    const fs::path cgroup = root_ / "cgroup";
    write_file(cgroup / "cgroup.controllers", "cpu\n");
    auto stat = [&](std::uint64_t usec) {
        write_file(cgroup / "system.slice/busy.service/cpu.stat",
                   "usage_usec " + std::to_string(usec) + "\nuser_usec " + std::to_string(usec) +
                       "\nsystem_usec 0\n");
    };
    stat(1'000'000);
    write_stat(kBase);
    create(60, cgroup);
    ASSERT_NE(engine_->units(), nullptr);
    stat(1'900'000);
    tick_with(kStep1);

    EXPECT_FALSE(report().units);
    const auto r = engine_->loading(LoadingQuery{.units = 3});
    ASSERT_TRUE(r.units);
    EXPECT_EQ(r.units->accounting, "cgroup2 cpu.stat");
    EXPECT_EQ(r.units->count, 1u);
    ASSERT_EQ(r.units->top.size(), 1u);
    EXPECT_EQ(r.units->top[0].unit, "busy.service");
    EXPECT_NEAR(r.units->top[0].cpu, 90, 1e-9);
    EXPECT_TRUE(r.units->unavailable.empty());

    // A unit whose counters cannot be read fails the tick with its name, not the loading.
    write_file(cgroup / "system.slice/busy.service/cpu.stat", "usage_usec\n");
    write_stat({{0, {1020, 9180}}, {1, {2050, 8150}}, {2, {3100, 7100}}, {3, {700, 9500}}});
    now_ += 1s;
    auto ticked = engine_->tick(now_);
    ASSERT_FALSE(ticked);
    EXPECT_NE(ticked.error().message.find("busy.service/cpu.stat"), std::string::npos)
        << ticked.error().message;
    EXPECT_TRUE(engine_->loading(LoadingQuery{}).machine[0].stats);
}

TEST_F(EngineTest, WithoutACgroupTreeTheUnitsSayWhy) {
    write_stat(kBase);
    create();
    EXPECT_EQ(engine_->units(), nullptr);
    auto r = engine_->loading(LoadingQuery{.units = 3});
    ASSERT_TRUE(r.units);
    EXPECT_TRUE(r.units->top.empty());
    EXPECT_EQ(r.units->unavailable, "no cgroup tree was given to read units from");

    create(60, root_ / "no-cgroups");
    r = engine_->loading(LoadingQuery{.units = 3});
    ASSERT_TRUE(r.units);
    EXPECT_NE(r.units->unavailable.find("no-cgroups"), std::string::npos) << r.units->unavailable;
}

// The CPUs' context is sampled while reports ask for it: from the tick after the first ask,
// its rates from the one after; kContextKeptFor after the last ask it stops, and its readings
// are forgotten, so that the first rates after the pause are of one interval.
TEST_F(EngineTest, TheContextIsSampledWhileReportsAskForIt) {
    auto interrupts = [&](int loc) {
        write_file(proc_ / "interrupts", "       CPU0\nLOC: " + std::to_string(loc) + "  Local\n");
    };
    interrupts(0);
    write_stat(kBase);
    create(60, {}, true);
    const LoadingQuery ask{.context = true};
    tick_with(kStep1);
    EXPECT_FALSE(engine_->loading({}).context) << "not asked for";
    auto r = engine_->loading(ask);
    ASSERT_TRUE(r.context);
    EXPECT_FALSE(r.context->sample) << "asking starts it";
    EXPECT_TRUE(r.context->unavailable.empty()) << r.context->unavailable;
    interrupts(100);
    tick_with(kBase);
    r = engine_->loading(ask);
    ASSERT_TRUE(r.context->sample);
    EXPECT_EQ(r.context->sample->seconds, 0.0) << "the first reading";
    interrupts(300);
    tick_with(kStep1, 2s);
    r = engine_->loading(ask);
    ASSERT_TRUE(r.context->sample);
    EXPECT_EQ(r.context->sample->seconds, 2.0);
    EXPECT_DOUBLE_EQ(r.context->sample->interrupts.value_or(-1), 100.0);

    // Not asked for since: it goes on for kContextKeptFor, then stops.
    interrupts(400);
    tick_with(kBase, kContextKeptFor - 1s);
    EXPECT_FALSE(engine_->loading({}).context);
    interrupts(1000);
    tick_with(kStep1, 2s);
    r = engine_->loading(ask);  // asks again
    ASSERT_TRUE(r.context);
    EXPECT_FALSE(r.context->sample) << "stopped, and forgotten";
    interrupts(5000);
    tick_with(kBase);
    r = engine_->loading(ask);
    ASSERT_TRUE(r.context->sample);
    EXPECT_EQ(r.context->sample->seconds, 0.0) << "a first reading again, no rates over the pause";
    interrupts(5010);
    tick_with(kStep1);
    r = engine_->loading(ask);
    ASSERT_TRUE(r.context->sample);
    EXPECT_DOUBLE_EQ(r.context->sample->interrupts.value_or(-1), 10.0)
        << "one interval's rate, not the pause's";
}

// The tasks, as the context: sampled from the tick after the first ask, figures from the one
// after; stopped and forgotten kContextKeptFor after the last ask.
TEST_F(EngineTest, TheTasksAreSampledWhileReportsAskForThem) {
    auto spin = [&](std::uint64_t ticks) {
        write_file(proc_ / "42/stat",
                   test_support::task_stat_line(42, "spin", {.utime = ticks, .cpu = 1}));
    };
    spin(0);
    write_stat(kBase);
    create(60, {}, false, true);
    const LoadingQuery ask{.tasks = 3};
    tick_with(kStep1);
    EXPECT_FALSE(engine_->loading({}).tasks) << "not asked for";
    auto r = engine_->loading(ask);
    ASSERT_TRUE(r.tasks);
    EXPECT_EQ(r.tasks->seconds, 0) << "asking starts it";
    EXPECT_TRUE(r.tasks->unavailable.empty()) << r.tasks->unavailable;
    spin(100);
    tick_with(kBase);
    r = engine_->loading(ask);
    EXPECT_EQ(r.tasks->seconds, 0) << "the first reading";
    EXPECT_EQ(r.tasks->count, 1U);
    spin(250);
    tick_with(kStep1, 2s);
    r = engine_->loading(ask);
    EXPECT_EQ(r.tasks->seconds, 2.0);
    ASSERT_EQ(r.tasks->top.size(), 1U);
    EXPECT_EQ(r.tasks->top[0].pid, 42);
    EXPECT_EQ(r.tasks->top[0].cpu, 1);
    EXPECT_DOUBLE_EQ(r.tasks->top[0].load,
                     75.0 * 100 / static_cast<double>(::sysconf(_SC_CLK_TCK)));

    // Not asked for since: it goes on for kContextKeptFor, then stops and forgets.
    spin(300);
    tick_with(kBase, kContextKeptFor - 1s);
    spin(5000);
    tick_with(kStep1, 2s);
    r = engine_->loading(ask);  // asks again
    EXPECT_EQ(r.tasks->seconds, 0) << "stopped, and forgotten";
    EXPECT_TRUE(r.tasks->top.empty());
    spin(5050);
    tick_with(kBase);
    r = engine_->loading(ask);
    EXPECT_EQ(r.tasks->seconds, 0) << "a first reading again: nothing over the pause";
    spin(5060);
    tick_with(kStep1);
    r = engine_->loading(ask);
    ASSERT_EQ(r.tasks->top.size(), 1U);
    EXPECT_DOUBLE_EQ(r.tasks->top[0].load,
                     10.0 * 100 / static_cast<double>(::sysconf(_SC_CLK_TCK)));

    EXPECT_FALSE(check(LoadingQuery{.tasks = 101}));
}

TEST_F(EngineTest, TheTasksSayWhyWhenThereAreNone) {
    write_stat(kBase);
    create();
    auto r = engine_->loading(LoadingQuery{.tasks = 1});
    ASSERT_TRUE(r.tasks);
    EXPECT_NE(r.tasks->unavailable.find("not sampled"), std::string::npos);
}

TEST_F(EngineTest, TheContextSaysWhyWhenThereIsNone) {
    write_stat(kBase);
    create();
    auto r = engine_->loading(LoadingQuery{.context = true});
    ASSERT_TRUE(r.context);
    EXPECT_NE(r.context->unavailable.find("not sampled"), std::string::npos);
}

}  // namespace
}  // namespace monitor
