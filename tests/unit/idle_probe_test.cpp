// Tests of IdleProbe with real threads on this machine's CPUs: the thread's scheduling and
// placement, the counters of both modes, failures and stopping.
#include "monitor/loading/idle_probe.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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

// Kernel ids of this process's threads named "idle-probe/<cpu>".
std::vector<pid_t> probe_tids(int cpu) {
    const std::string name = "idle-probe/" + std::to_string(cpu);
    std::vector<pid_t> tids;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc/self/task", ec)) {
        std::ifstream in(entry.path() / "comm");
        std::string comm;
        if (!std::getline(in, comm)) continue;  // the thread has just exited
        if (comm == name) tids.push_back(static_cast<pid_t>(std::stol(entry.path().filename())));
    }
    return tids;
}

// The single probe thread of `cpu`, or 0 when there is not exactly one within a few seconds.
pid_t probe_tid(int cpu) {
    pid_t tid = 0;
    wait_until(
        [&] {
            auto tids = probe_tids(cpu);
            tid = tids.size() == 1 ? tids[0] : 0;
            return tid != 0;
        },
        5s);
    return tid;
}

// Whether this process may run on `cpu`.
bool usable_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(cpu, &set);
}

#define REQUIRE_CPU(cpu) \
    if (!usable_cpu(cpu)) GTEST_SKIP() << "cpu" << (cpu) << " is not available here"

// A generous wait for the probe to get going: calibration needs a few dozen passes of about
// 50 us, but a SCHED_IDLE thread runs only when its CPU has nothing else to do.
constexpr auto kStartWait = 10s;

bool reaches(const IdleProbe& p, ProbeState st, std::chrono::milliseconds timeout = kStartWait) {
    return wait_until([&] { return p.state() == st; }, timeout);
}

class SpinProbeOnCpu : public ::testing::TestWithParam<int> {};

TEST_P(SpinProbeOnCpu, RunsCountsAndIsPinnedAtSchedIdle) {
    const int cpu = GetParam();
    REQUIRE_CPU(cpu);
    IdleProbe probe(cpu, ProbeMode::Spin, ProbeThreadAttr{});
    EXPECT_EQ(probe.cpu(), cpu);
    EXPECT_EQ(probe.mode(), ProbeMode::Spin);
    ASSERT_TRUE(reaches(probe, ProbeState::Running))
        << "state " << probe_state_name(probe.state()) << ": " << probe.error();
    EXPECT_TRUE(probe.error().empty());

    auto baseline = probe.baseline();
    ASSERT_TRUE(baseline.has_value());
    EXPECT_GT(baseline->count(), 0.0);

    const std::uint64_t count = probe.count();
    EXPECT_TRUE(wait_until([&] { return probe.count() > count; }, 5s))
        << "the count stayed at " << count;

    const pid_t tid = probe_tid(cpu);
    ASSERT_NE(tid, 0) << "no single thread named idle-probe/" << cpu;
    EXPECT_EQ(::sched_getscheduler(tid), SCHED_IDLE);
    // At nice 19, so that the kernel books its CPU time as nice, not user.
    errno = 0;
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(tid)), 19) << std::strerror(errno);
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(::sched_getaffinity(tid, sizeof(set), &set), 0) << std::strerror(errno);
    EXPECT_EQ(CPU_COUNT(&set), 1);
    EXPECT_TRUE(CPU_ISSET(cpu, &set));
}

std::string cpu_param_name(const ::testing::TestParamInfo<int>& param) {
    return "cpu" + std::to_string(param.param);
}

INSTANTIATE_TEST_SUITE_P(Cpus, SpinProbeOnCpu, ::testing::Values(0, 1), cpu_param_name);

TEST(IdleProbe, CpuTimeGrows) {
    REQUIRE_CPU(0);
    IdleProbe probe(0, ProbeMode::Spin, ProbeThreadAttr{});
    ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
    const std::uint64_t t0 = probe.cpu_time_ns();
    EXPECT_GT(t0, 0u);
    EXPECT_TRUE(wait_until([&] { return probe.cpu_time_ns() > t0 + 1'000'000; }, 5s))
        << "cpu time stayed at " << t0 << " ns";
}

TEST(IdleProbe, SleepProbeWakesAtEachReadingOfTheIdleTime) {
    REQUIRE_CPU(0);
    IdleProbe probe(0, ProbeMode::Sleep, ProbeThreadAttr{});
    ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
    EXPECT_FALSE(probe.baseline().has_value());  // nothing to calibrate

    const std::uint64_t t0 = probe.cpu_time_ns();
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(probe.count(), 0u) << "woke without a reading";
    for (std::uint64_t i = 1; i <= 3; ++i) {
        probe.publish_idle(i * 1'000'000'000, Clock::now());
        EXPECT_TRUE(wait_until([&] { return probe.count() == i; }, 5s)) << probe.count();
    }
    EXPECT_EQ(probe.state(), ProbeState::Running);
    // Three wake-ups cost microseconds; 50 ms would be a thread that does not sleep.
    EXPECT_LT(probe.cpu_time_ns() - t0, 50'000'000u);

    const pid_t tid = probe_tid(0);
    ASSERT_NE(tid, 0);
    EXPECT_EQ(::sched_getscheduler(tid), SCHED_IDLE);
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(tid)), 19);
}

// A spinning probe's readings are its own CPU time: readings of the kernel's are ignored.
TEST(IdleProbe, ASpinProbeIgnoresPublishedIdleTime) {
    REQUIRE_CPU(0);
    IdleProbe probe(0, ProbeMode::Spin, ProbeThreadAttr{});
    ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
    probe.publish_idle(1'000'000'000, Clock::now());
    EXPECT_EQ(probe.state(), ProbeState::Running);
}

TEST(IdleProbe, NonexistentCpuFails) {
    if (usable_cpu(1000)) GTEST_SKIP() << "this machine has a cpu1000";
    for (auto mode : {ProbeMode::Spin, ProbeMode::Sleep}) {
        IdleProbe probe(1000, mode, ProbeThreadAttr{});
        ASSERT_TRUE(reaches(probe, ProbeState::Failed, 5s))
            << probe_mode_name(mode) << ": state " << probe_state_name(probe.state());
        EXPECT_NE(probe.error().find("cpu1000"), std::string::npos) << probe.error();
        EXPECT_EQ(probe.count(), 0u);
        EXPECT_FALSE(probe.baseline().has_value());
        probe.stop();
        EXPECT_EQ(probe.state(), ProbeState::Failed);  // stopping keeps the failure
        EXPECT_NE(probe.error().find("cpu1000"), std::string::npos) << probe.error();
    }
}

TEST(IdleProbe, CpuOutOfRangeFails) {
    for (int cpu : {-1, 1 << 20}) {
        IdleProbe probe(cpu, ProbeMode::Spin, ProbeThreadAttr{});
        ASSERT_TRUE(reaches(probe, ProbeState::Failed, 5s)) << cpu;
        EXPECT_NE(probe.error().find("cpu" + std::to_string(cpu)), std::string::npos)
            << probe.error();
    }
}

TEST(IdleProbe, StopEndsTheThread) {
    REQUIRE_CPU(0);
    IdleProbe probe(0, ProbeMode::Spin, ProbeThreadAttr{});
    ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
    ASSERT_NE(probe_tid(0), 0);
    // Let it use some CPU time worth keeping.
    ASSERT_TRUE(wait_until([&] { return probe.cpu_time_ns() > 2'000'000; }, 5s));
    const std::uint64_t before = probe.cpu_time_ns();

    const auto start = Clock::now();
    probe.stop();
    EXPECT_LT(Clock::now() - start, 3s);
    EXPECT_EQ(probe.state(), ProbeState::Stopped);
    EXPECT_TRUE(wait_until([] { return probe_tids(0).empty(); }, 2s)) << "the thread lives on";

    // The thread is gone, its CPU time stays: at least what it had, and no longer moving.
    const std::uint64_t after = probe.cpu_time_ns();
    EXPECT_GE(after, before);
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(probe.cpu_time_ns(), after);

    const std::uint64_t count = probe.count();
    EXPECT_GT(count, 0u);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(probe.count(), count);

    probe.stop();  // again: nothing to do
    EXPECT_EQ(probe.state(), ProbeState::Stopped);
}

TEST(IdleProbe, StopWhileCalibrating) {
    REQUIRE_CPU(0);
    // A calibration that never finishes on its own.
    CalibrationPlan plan;
    plan.passes = 1 << 30;
    plan.min_passes = 1 << 30;
    plan.budget = 1h;
    IdleProbe probe(0, ProbeMode::Spin, ProbeThreadAttr{}, plan);
    ASSERT_TRUE(reaches(probe, ProbeState::Calibrating)) << probe.error();
    const auto start = Clock::now();
    probe.stop();
    EXPECT_LT(Clock::now() - start, 3s);
    EXPECT_EQ(probe.state(), ProbeState::Stopped);
    EXPECT_FALSE(probe.baseline().has_value());
    EXPECT_EQ(probe.count(), 0u);
}

TEST(IdleProbe, StopASleepProbe) {
    REQUIRE_CPU(1);
    IdleProbe probe(1, ProbeMode::Sleep, ProbeThreadAttr{});
    ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
    const auto start = Clock::now();
    probe.stop();
    // The sleeper is woken, not left waiting for a reading (allow for a slow machine).
    EXPECT_LT(Clock::now() - start, 1s);
    EXPECT_EQ(probe.state(), ProbeState::Stopped);
    EXPECT_EQ(probe.count(), 0u) << "stopping is no reading";
}

TEST(IdleProbe, DestructorStopsTheThread) {
    REQUIRE_CPU(1);
    {
        IdleProbe probe(1, ProbeMode::Spin, ProbeThreadAttr{});
        ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
        ASSERT_EQ(probe_tids(1).size(), 1u);
    }
    EXPECT_TRUE(wait_until([] { return probe_tids(1).empty(); }, 3s));
}

TEST(IdleProbe, SchedOtherWithANiceValue) {
    REQUIRE_CPU(0);
    IdleProbe probe(0, ProbeMode::Spin, ProbeThreadAttr{.policy = SCHED_OTHER, .nice = 15});
    ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
    const pid_t tid = probe_tid(0);
    ASSERT_NE(tid, 0);
    EXPECT_EQ(::sched_getscheduler(tid), SCHED_OTHER);
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
    ASSERT_EQ(errno, 0) << std::strerror(errno);
    EXPECT_EQ(nice, 15);
    // The process itself keeps its own nice value.
    errno = 0;
    EXPECT_NE(::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid())), 15);
}

TEST(IdleProbe, SchedBatchWithANiceValue) {
    REQUIRE_CPU(1);
    IdleProbe probe(1, ProbeMode::Sleep, ProbeThreadAttr{.policy = SCHED_BATCH, .nice = 10});
    ASSERT_TRUE(reaches(probe, ProbeState::Running)) << probe.error();
    const pid_t tid = probe_tid(1);
    ASSERT_NE(tid, 0);
    EXPECT_EQ(::sched_getscheduler(tid), SCHED_BATCH);
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(tid)), 10);
}

TEST(IdleProbe, InvalidPolicyFails) {
    REQUIRE_CPU(0);
    IdleProbe probe(0, ProbeMode::Spin, ProbeThreadAttr{.policy = 12345, .nice = 0});
    ASSERT_TRUE(reaches(probe, ProbeState::Failed, 5s));
    EXPECT_NE(probe.error().find("12345"), std::string::npos) << probe.error();
}

TEST(ProbeNames, ModeRoundTrip) {
    EXPECT_EQ(probe_mode_name(ProbeMode::Spin), "spin");
    EXPECT_EQ(probe_mode_name(ProbeMode::Sleep), "sleep");
    EXPECT_EQ(probe_mode_name(ProbeMode::Off), "off");
    for (auto m : {ProbeMode::Spin, ProbeMode::Sleep, ProbeMode::Off}) {
        auto back = probe_mode_from_name(probe_mode_name(m));
        ASSERT_TRUE(back.has_value()) << probe_mode_name(m);
        EXPECT_EQ(*back, m);
    }
    for (const char* bad : {"", "Spin", "SLEEP", "spin ", "busy", "of"}) {
        EXPECT_FALSE(probe_mode_from_name(bad).has_value()) << '"' << bad << '"';
    }
}

TEST(ProbeNames, StateNames) {
    const std::vector<std::pair<ProbeState, std::string_view>> expected = {
        {ProbeState::Starting, "starting"}, {ProbeState::Calibrating, "calibrating"},
        {ProbeState::Running, "running"},   {ProbeState::Displaced, "displaced"},
        {ProbeState::Failed, "failed"},     {ProbeState::Stopped, "stopped"},
    };
    for (const auto& [state, name] : expected) EXPECT_EQ(probe_state_name(state), name);
}

}  // namespace
}  // namespace monitor
