// Tests of the Runtime, what the daemon and the MON_* C API both drive: the loading tick's
// schedule (a second apart, no drift, no burst after a stall), counter runs paced with it, and
// the watchdog it arms for its idle probes, sample runs in the same schedule. The engine reads a
// temporary /proc; the clock is made up, except where real probes pet a FIFO standing in for
// /dev/watchdog.
#include "monitor/runtime/runtime.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "../support/simulated_ppc750_pmu.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "test_support.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;
using Clock = Runtime::Clock;
using test_support::ScratchDir;
using test_support::stat_text;
using test_support::write_file;

class RuntimeTest : public ::testing::Test {
  protected:
    void SetUp() override {
        write_file(dir_.path() / "proc/stat", stat_text({{0, {100, 900}}, {1, {200, 800}}}));
        write_file(dir_.path() / "sys/devices/system/cpu/online", "0-1\n");
    }

    // A runtime over the temporary /proc without probes, created at t0_.
    std::unique_ptr<Runtime> create(std::shared_ptr<watchdog::Watchdog> watchdog = nullptr) {
        EngineOptions o;
        o.proc_root = dir_.path() / "proc";
        o.sys_root = dir_.path() / "sys";
        auto r = Runtime::create(o, std::move(watchdog), [this] { return t0_; });
        EXPECT_TRUE(r) << r.error().to_string();
        return r ? std::move(*r) : nullptr;
    }

    ScratchDir dir_;
    const Clock::time_point t0_ = Clock::time_point{} + 1000s;
};

TEST_F(RuntimeTest, TicksComeASecondApartWithoutDriftAndRestartAfterAStall) {
    auto rt = create();
    ASSERT_TRUE(rt);
    EXPECT_EQ(rt->next_due(), t0_ + 1s);
    auto due = rt->run_due(t0_ + 500ms);  // woken early (a spurious wake-up): nothing to do
    EXPECT_FALSE(due.ticked);
    due = rt->run_due(t0_ + 1s);
    EXPECT_TRUE(due.ticked);
    EXPECT_TRUE(due.tick) << due.tick.error().to_string();
    EXPECT_EQ(rt->next_due(), t0_ + 2s);
    // 200 ms late: the next tick is still on the beat.
    due = rt->run_due(t0_ + 2200ms);
    EXPECT_TRUE(due.ticked);
    EXPECT_EQ(rt->next_due(), t0_ + 3s);
    // Stopped for 7 s: one tick now, the next a second later, not seven back to back.
    due = rt->run_due(t0_ + 10s);
    EXPECT_TRUE(due.ticked);
    EXPECT_EQ(rt->next_due(), t0_ + 11s);
    EXPECT_FALSE(rt->run_due(t0_ + 10s + 999ms).ticked);
}

// A tick that fails to sample is a gap, reported and not fatal.
TEST_F(RuntimeTest, AFailedSampleIsReportedAndTheScheduleGoesOn) {
    auto rt = create();
    ASSERT_TRUE(rt);
    write_file(dir_.path() / "proc/stat", "not what the kernel writes\n");
    auto due = rt->run_due(t0_ + 1s);
    EXPECT_TRUE(due.ticked);
    EXPECT_FALSE(due.tick);
    EXPECT_EQ(rt->next_due(), t0_ + 2s);
}

// A run's periods of whole seconds end on the ticks: one wake-up does both.
TEST_F(RuntimeTest, ARunsPeriodsEndOnTheTicks) {
    test_support::DescribedMachine machine{test_support::kPpc750CxeCpuinfo, true};
    auto catalog = perf::EventCatalog::create(machine.proc(), machine.sys());
    ASSERT_TRUE(catalog) << catalog.error().to_string();
    auto rt = create();
    ASSERT_TRUE(rt);
    perf::SessionOptions o;
    o.events = *perf::parse_event_list("ppc750::CYCLES");
    o.target.kind = perf::TargetKind::OneCpu;
    o.target.cpu = 0;
    o.cpus = {0};
    o.mux = perf::MuxMode::Kernel;
    auto device = std::make_unique<perf::testing::SimulatedPpc750Pmu>();
    auto* pmu = device.get();
    auto session = perf::PerfSession::start(*catalog, std::move(device), o);
    ASSERT_TRUE(session) << session.error().to_string();
    // Started 300 ms after the runtime: the first period ends on the tick at +1 s.
    const auto id =
        rt->add_run(std::move(*session), {.duration = std::nullopt, .interval = 1s}, t0_ + 300ms);
    ASSERT_NE(rt->run(id), nullptr);
    EXPECT_EQ(rt->next_due(), t0_ + 1s);
    pmu->advance(700ms);
    auto due = rt->run_due(t0_ + 1s);
    EXPECT_TRUE(due.ticked);
    ASSERT_EQ(due.runs.size(), 1u);
    EXPECT_EQ(due.runs[0].id, id);
    ASSERT_TRUE(due.runs[0].step);
    EXPECT_TRUE(due.runs[0].step->period_ended);
    EXPECT_EQ(rt->run(id)->period().events[0].total.count, 140'000'000u);  // 0.7 s at 200 MHz
    // Its 32-bit counters are read a second after it started; the next period on the tick.
    EXPECT_EQ(rt->next_due(), t0_ + 1300ms);
    pmu->advance(300ms);
    due = rt->run_due(t0_ + 1300ms);
    EXPECT_FALSE(due.ticked);
    ASSERT_EQ(due.runs.size(), 1u);
    ASSERT_TRUE(due.runs[0].step);
    EXPECT_FALSE(due.runs[0].step->period_ended);
    EXPECT_EQ(rt->next_due(), t0_ + 2s);
    rt->remove_run(id);
    EXPECT_EQ(rt->run(id), nullptr);
    EXPECT_EQ(rt->next_due(), t0_ + 2s);
}

// A sample run (a watch of this process's task clock, on real rings) is paced in the same
// schedule: due at its drains, its steps reported by run_due(), the tick's schedule kept.
TEST_F(RuntimeTest, ASampleRunIsDueAtItsDrainsAndEndsAtItsDuration) {
    auto catalog = perf::EventCatalog::create();
    ASSERT_TRUE(catalog) << catalog.error().to_string();
    auto online = read_online_cpus("/sys");
    ASSERT_TRUE(online) << online.error().to_string();
    perf::ProfileOptions po{.event = "perf::TASK-CLOCK",
                            .rate = {.period = 1'000'000},
                            .target = {.kind = perf::TargetKind::Process, .pid = ::getpid()},
                            .cpus = *online,
                            .ring_pages = 16,
                            .kernel = false,
                            .profile = false};
    auto session = perf::ProfileSession::start(*catalog, std::move(po));
    if (!session) GTEST_SKIP() << "cannot sample here: " << session.error().to_string();
    auto rt = create();
    ASSERT_TRUE(rt);
    std::uint64_t seen = 0;
    auto run = SampleRun::start(std::move(*session), {.duration = 100ms, .drain = 30ms}, t0_, {},
                                [&](const perf::Sample&) { ++seen; });
    ASSERT_TRUE(run) << run.error().to_string();
    const auto id = rt->add_sampling(std::move(*run));
    ASSERT_NE(rt->sampling(id), nullptr);
    EXPECT_EQ(rt->next_due(), t0_ + 30ms);
    auto due = rt->run_due(t0_ + 10ms);  // early: nothing is due
    EXPECT_TRUE(due.samplings.empty());
    due = rt->run_due(t0_ + 30ms);
    ASSERT_EQ(due.samplings.size(), 1u);
    EXPECT_EQ(due.samplings[0].id, id);
    ASSERT_TRUE(due.samplings[0].step);
    EXPECT_FALSE(due.samplings[0].step->ended);
    EXPECT_EQ(rt->next_due(), t0_ + 60ms) << "the next drain";
    due = rt->run_due(t0_ + 100ms);
    ASSERT_EQ(due.samplings.size(), 1u);
    ASSERT_TRUE(due.samplings[0].step);
    ASSERT_TRUE(due.samplings[0].step->ended);
    EXPECT_EQ(*due.samplings[0].step->ended, SampleRun::End::Duration);
    EXPECT_EQ(rt->next_due(), t0_ + 1s) << "an ended run is due no more; the tick is";
    rt->remove_sampling(id);
    EXPECT_EQ(rt->sampling(id), nullptr);
    EXPECT_TRUE(rt->run_due(t0_ + 1s).samplings.empty());
}

TEST_F(RuntimeTest, TheWatchdogNeedsProbesToPetIt) {
    auto without = create();
    ASSERT_TRUE(without);
    auto r = without->arm_watchdog("/dev/watchdog", 10s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadArg);

    auto rt = create(std::make_shared<watchdog::Watchdog>(watchdog::PetPolicyKind::All));
    ASSERT_TRUE(rt);
    r = rt->arm_watchdog("/dev/watchdog", 10s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadArg);
    EXPECT_NE(r.error().message.find("--probe off runs none"), std::string::npos)
        << r.error().message;
    EXPECT_FALSE(rt->watchdog()->status().armed);
}

TEST_F(RuntimeTest, AWatchdogTimeoutOutsideItsRangeIsRefused) {
    auto rt = create(std::make_shared<watchdog::Watchdog>(watchdog::PetPolicyKind::All));
    ASSERT_TRUE(rt);
    for (auto t : {0s, kMaxWatchdogTimeout + 1s}) {
        auto r = rt->arm_watchdog("/dev/watchdog", t);
        ASSERT_FALSE(r) << t.count();
        EXPECT_NE(r.error().message.find("choose from 1 to 3600"), std::string::npos)
            << r.error().message;
    }
}

// Real sleeping probes (a SCHED_IDLE thread per CPU that wakes at each tick) pet a FIFO
// standing in for /dev/watchdog once the runtime arms it with their CPUs, from the kernel's
// idle time as the ticks read it: here a temporary /proc whose CPUs are idle for half of each
// second, then cpu1 no more. The clock is made up; the probes are real threads.
TEST_F(RuntimeTest, SleepingProbesPetFromTheKernelsIdleTime) {
    const int ncpu = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    if (ncpu < 2) GTEST_SKIP() << "needs cpu0 and cpu1";
    const auto fifo = dir_.path() / "watchdog";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(reader, 0);
    EngineOptions o;
    o.proc_root = dir_.path() / "proc";
    o.sys_root = dir_.path() / "sys";
    o.probe = ProbeMode::Sleep;
    // The test's clock, which the probes' threads read too (the watchdog times their pets).
    std::atomic<Clock::rep> now_ticks{t0_.time_since_epoch().count()};
    auto clock = [&] { return Clock::time_point(Clock::duration(now_ticks.load())); };
    auto advance = [&](Clock::duration d) {
        now_ticks += d.count();
        return clock();
    };
    auto dog = std::make_shared<watchdog::Watchdog>(watchdog::PetPolicyKind::All, clock);
    auto rt = Runtime::create(o, dog, clock);
    ASSERT_TRUE(rt) << rt.error().to_string();
    EXPECT_EQ((*rt)->probing_cpus(), (std::vector<int>{0, 1}));
    std::uint64_t idle0 = 900, idle1 = 800, busy0 = 100, busy1 = 200;
    // Not armed yet: the ticks leave the probes asleep.
    ASSERT_TRUE((*rt)->run_due(advance(1s)).ticked);
    std::this_thread::sleep_for(200ms);
    for (const auto& r : (*rt)->engine().probes()->read()) EXPECT_EQ(r.count, 0u) << r.cpu;
    ASSERT_TRUE((*rt)->arm_watchdog(fifo.string(), 10s));
    // A tick a second; waits until both probes have taken its reading.
    auto tick = [&](std::uint64_t idle_ticks0, std::uint64_t idle_ticks1) {
        idle0 += idle_ticks0;
        idle1 += idle_ticks1;
        busy0 += 100 - idle_ticks0;
        busy1 += 100 - idle_ticks1;
        write_file(dir_.path() / "proc/stat",
                   test_support::stat_text({{0, {busy0, idle0}}, {1, {busy1, idle1}}}));
        const auto before = (*rt)->engine().probes()->read();
        ASSERT_TRUE((*rt)->run_due(advance(1s)).ticked);
        ASSERT_TRUE(test_support::wait_until(
            [&] {
                const auto after = (*rt)->engine().probes()->read();
                return after[0].count > before[0].count && after[1].count > before[1].count;
            },
            5s));
    };
    for (int i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(tick(50, 50));
    EXPECT_GE(dog->status().pets, 2u) << "half of each second idle";
    char buf[64];
    EXPECT_GT(::read(reader, buf, sizeof buf), 0) << "the pets are writes to the device";
    const auto pets = dog->status().pets;
    for (int i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(tick(50, 0));
    EXPECT_EQ(dog->status().pets, pets) << "cpu1 saturated: policy all pets no more";
    EXPECT_EQ(dog->status().waiting_for, std::vector<int>{1});
    ASSERT_TRUE(dog->disarm());
    rt->reset();
    ::close(reader);
}

// In sleep mode the credits follow the ticks: a pet about once a second at best, so a
// timeout under 3 s is refused.
TEST_F(RuntimeTest, SleepingProbesNeedATimeoutOfThreeSecondsAtLeast) {
    EngineOptions o;
    o.proc_root = dir_.path() / "proc";
    o.sys_root = dir_.path() / "sys";
    o.probe = ProbeMode::Sleep;
    auto dog = std::make_shared<watchdog::Watchdog>(watchdog::PetPolicyKind::All);
    auto rt = Runtime::create(o, dog, [this] { return t0_; });
    ASSERT_TRUE(rt) << rt.error().to_string();
    auto r = (*rt)->arm_watchdog((dir_.path() / "none").string(), 2s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadArg);
    EXPECT_NE(r.error().message.find("3 s or more"), std::string::npos) << r.error().message;
    EXPECT_FALSE(dog->status().armed);
}

}  // namespace
}  // namespace monitor
