// Tests of the Engine with idle probes on this machine: the real /proc and a temporary sys
// root whose online list the tests write, including CPUs this machine does not have.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "monitor/engine.hpp"
#include "test_support.hpp"

namespace monitor {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = Engine::Clock;

bool usable_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(cpu, &set);
}

std::vector<int> cpus_of(const std::vector<ProbeReading>& readings) {
    std::vector<int> cpus;
    for (const auto& r : readings) cpus.push_back(r.cpu);
    return cpus;
}

// Every figure of one source's statistics lies within 0-100.
void expect_in_range(const SourceLoad& l, const std::string& where) {
    if (!l.stats) return;
    const auto& st = *l.stats;
    if (st.avg_prev_sec) {
        EXPECT_GE(*st.avg_prev_sec, 0.0) << where;
        EXPECT_LE(*st.avg_prev_sec, 100.0) << where;
    }
    for (double v : {st.avg_prev_min, st.min_prev_min, st.max_prev_min}) {
        EXPECT_GE(v, 0.0) << where;
        EXPECT_LE(v, 100.0) << where;
    }
    for (const auto& v : l.history) {
        if (!v) continue;
        EXPECT_GE(*v, 0.0) << where;
        EXPECT_LE(*v, 100.0) << where;
    }
}

void expect_report_in_range(const LoadingReport& r) {
    EXPECT_FALSE(r.machine.empty());
    for (const auto& l : r.machine) expect_in_range(l, "machine " + l.source);
    for (const auto& c : r.cpus) {
        for (const auto& l : c.sources) {
            expect_in_range(l, "cpu" + std::to_string(c.cpu) + " " + l.source);
        }
    }
}

// The newest load of `source` for `cpu`, nullopt when there is none.
std::optional<double> last_load(const LoadingReport& r, int cpu, std::string_view source) {
    for (const auto& c : r.cpus) {
        if (c.cpu != cpu) continue;
        const SourceLoad* l = find_source(c.sources, source);
        if (l && l->stats) return l->stats->avg_prev_sec;
    }
    return std::nullopt;
}

class EngineProbeTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!usable_cpu(0) || !usable_cpu(1)) GTEST_SKIP() << "needs cpu0 and cpu1";
        if (::sysconf(_SC_NPROCESSORS_CONF) > 2) {
            GTEST_SKIP() << "needs a machine without cpu2 and cpu3";
        }
        ASSERT_FALSE(sys_.empty());
    }
    void TearDown() override { engine_.reset(); }

    void write_online(const std::string& list) {
        const fs::path path = sys_ / "devices/system/cpu/online";
        fs::create_directories(path.parent_path());
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << list << "\n";
    }

    void create(ProbeMode mode) {
        EngineOptions options;
        options.proc_root = "/proc";
        options.sys_root = sys_;
        options.probe = mode;
        // Returns as soon as both probes calibrate; a SCHED_IDLE spinner calibrates only
        // when its CPU has idle time, which a parallel, sanitized test run can keep away
        // for seconds.
        options.calibration_wait = 15s;
        auto engine = Engine::create(options, [] { return Clock::now(); });
        ASSERT_TRUE(engine.has_value()) << engine.error().to_string();
        engine_ = std::move(*engine);
    }

    // Waits a little more than a second, then ticks.
    void tick() {
        std::this_thread::sleep_for(1100ms);
        auto r = engine_->tick(Clock::now());
        ASSERT_TRUE(r.has_value()) << r.error().to_string();
    }

    LoadingReport report() const {
        return engine_->loading(LoadingQuery{.per_cpu = true, .history = true});
    }

    test_support::ScratchDir scratch_{"engine_probe"};
    const fs::path sys_ = scratch_.path();
    std::unique_ptr<Engine> engine_;
};

TEST_F(EngineProbeTest, SpinOverMoreCpusThanTheMachineHas) {
    write_online("0-3");
    ASSERT_NO_FATAL_FAILURE(create(ProbeMode::Spin));
    EXPECT_EQ(engine_->probe_mode(), ProbeMode::Spin);
    EXPECT_EQ(engine_->source_names(), (std::vector<std::string_view>{"probe", "procstat"}));
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0, 1, 2, 3}));
    ASSERT_NE(engine_->probes(), nullptr);

    auto readings = engine_->probes()->read();
    ASSERT_EQ(cpus_of(readings), (std::vector<int>{0, 1, 2, 3}));
    for (int cpu : {2, 3}) {
        EXPECT_EQ(readings[cpu].state, ProbeState::Failed) << "cpu" << cpu;
        EXPECT_NE(readings[cpu].error.find("cpu" + std::to_string(cpu)), std::string::npos)
            << readings[cpu].error;
    }
    for (int cpu : {0, 1}) {
        EXPECT_EQ(readings[cpu].state, ProbeState::Running)
            << "cpu" << cpu << ": " << probe_state_name(readings[cpu].state);
    }

    ASSERT_NO_FATAL_FAILURE(tick());
    auto r = report();
    expect_report_in_range(r);
    ASSERT_EQ(r.machine.size(), 2u);
    EXPECT_EQ(r.machine[0].source, "probe");
    EXPECT_EQ(r.machine[1].source, "procstat");
    // /proc/stat measures both real CPUs; the probes measure them too.
    for (int cpu : {0, 1}) {
        EXPECT_TRUE(last_load(r, cpu, "procstat").has_value()) << "cpu" << cpu;
        EXPECT_TRUE(last_load(r, cpu, "probe").has_value()) << "cpu" << cpu;
    }
    // cpu2 and cpu3 are listed as online, without a value from either source.
    for (int cpu : {2, 3}) {
        EXPECT_FALSE(last_load(r, cpu, "procstat").has_value()) << "cpu" << cpu;
        EXPECT_FALSE(last_load(r, cpu, "probe").has_value()) << "cpu" << cpu;
    }
    // The failed probes stay failed; nothing else happened to them.
    readings = engine_->probes()->read();
    ASSERT_EQ(cpus_of(readings), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(readings[2].state, ProbeState::Failed);
    EXPECT_EQ(readings[3].state, ProbeState::Failed);
}

TEST_F(EngineProbeTest, FollowsTheOnlineList) {
    write_online("0-1");
    ASSERT_NO_FATAL_FAILURE(create(ProbeMode::Spin));
    auto readings = engine_->probes()->read();
    ASSERT_EQ(cpus_of(readings), (std::vector<int>{0, 1}));
    const std::uint64_t gen0 = readings[0].generation;
    const std::uint64_t gen1 = readings[1].generation;

    // cpu1 goes offline: its probe stops at the next tick.
    write_online("0");
    ASSERT_NO_FATAL_FAILURE(tick());
    readings = engine_->probes()->read();
    EXPECT_EQ(cpus_of(readings), (std::vector<int>{0}));
    EXPECT_EQ(engine_->online_cpus(), (std::vector<int>{0}));
    auto r = report();
    expect_report_in_range(r);
    EXPECT_TRUE(last_load(r, 0, "probe").has_value());

    // And comes back: a new probe.
    write_online("0-1");
    ASSERT_NO_FATAL_FAILURE(tick());
    readings = engine_->probes()->read();
    ASSERT_EQ(cpus_of(readings), (std::vector<int>{0, 1}));
    EXPECT_EQ(readings[0].generation, gen0);
    EXPECT_NE(readings[1].generation, gen1);
    EXPECT_NE(readings[1].state, ProbeState::Failed) << readings[1].error;
    r = report();
    expect_report_in_range(r);
    // The interval of cpu1's return had no probe running at its start.
    EXPECT_FALSE(last_load(r, 1, "probe").has_value());
    EXPECT_TRUE(last_load(r, 1, "procstat").has_value());
}

TEST_F(EngineProbeTest, SleepProbesMeasureNothing) {
    write_online("0-1");
    ASSERT_NO_FATAL_FAILURE(create(ProbeMode::Sleep));
    EXPECT_EQ(engine_->source_names(), (std::vector<std::string_view>{"procstat"}));
    ASSERT_NE(engine_->probes(), nullptr);
    EXPECT_EQ(engine_->probes()->mode(), ProbeMode::Sleep);
    auto readings = engine_->probes()->read();
    ASSERT_EQ(cpus_of(readings), (std::vector<int>{0, 1}));
    for (const auto& p : readings) {
        EXPECT_EQ(p.state, ProbeState::Running) << "cpu" << p.cpu;
        EXPECT_FALSE(p.baseline.has_value());
    }
    ASSERT_NO_FATAL_FAILURE(tick());
    ASSERT_NO_FATAL_FAILURE(tick());
    auto r = report();
    expect_report_in_range(r);
    ASSERT_EQ(r.machine.size(), 1u);
    EXPECT_EQ(r.machine[0].source, "procstat");
    // Without a watchdog to pet, the ticks leave them asleep: they cost nothing.
    for (const auto& p : engine_->probes()->read()) {
        EXPECT_EQ(p.count, 0u) << "cpu" << p.cpu << " woke up " << p.count << " times";
    }
}

TEST_F(EngineProbeTest, OffStartsNoProbes) {
    write_online("0-1");
    ASSERT_NO_FATAL_FAILURE(create(ProbeMode::Off));
    EXPECT_EQ(engine_->probes(), nullptr);
    EXPECT_EQ(engine_->source_names(), (std::vector<std::string_view>{"procstat"}));
}

}  // namespace
}  // namespace monitor
