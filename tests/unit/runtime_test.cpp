// Tests of the Runtime, what the daemon and the MON_* C API both drive: the loading tick's
// schedule (a second apart, no drift, no burst after a stall), counter runs paced with it, and
// the watchdog it arms for its idle probes. The engine reads a temporary /proc; the clock is
// made up, except where real probes pet a FIFO standing in for /dev/watchdog.
#include "monitor/runtime/runtime.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "../support/simulated_ppc750_pmu.hpp"
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

// Real sleeping probes (a SCHED_IDLE thread per CPU that wakes ten times a second) pet a
// FIFO standing in for /dev/watchdog once the runtime arms it with their CPUs.
TEST(RuntimeProbes, ArmedWithTheProbesCpusThePetsCome) {
    ScratchDir dir;
    const auto fifo = dir.path() / "watchdog";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(reader, 0);
    EngineOptions o;
    o.probe = ProbeMode::Sleep;
    auto dog = std::make_shared<watchdog::Watchdog>(watchdog::PetPolicyKind::All);
    auto rt = Runtime::create(o, dog, [] { return Clock::now(); });
    ASSERT_TRUE(rt) << rt.error().to_string();
    const auto cpus = (*rt)->probing_cpus();
    EXPECT_EQ(cpus, (*rt)->engine().online_cpus());
    ASSERT_TRUE((*rt)->arm_watchdog(fifo.string(), 10s));
    EXPECT_TRUE(test_support::wait_until([&] { return dog->status().pets >= 3; }, 5s))
        << dog->status().pets << " pets";
    char buf[64];
    EXPECT_GT(::read(reader, buf, sizeof buf), 0) << "the pets are writes to the device";
    ASSERT_TRUE(dog->disarm());
    rt->reset();
    ::close(reader);
}

}  // namespace
}  // namespace monitor
