// The watchdog: the pet policy with a test clock, the device code against a FIFO (where the
// pets and the magic close can be read on the other end) and against a missing device, and the
// idle probes' credits on a real CPU, idle and starved.
#include "monitor/watchdog/watchdog.hpp"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "monitor/loading/idle_probe.hpp"
#include "monitor/watchdog/pet_policy.hpp"
#include "monitor/watchdog/watchdog_device.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using monitor::Status;
using monitor::watchdog::PetPolicy;
using monitor::watchdog::PetPolicyKind;
using monitor::watchdog::Watchdog;
using monitor::watchdog::WatchdogDevice;
using test_support::ScratchDir;
using testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const Clock::time_point t0{std::chrono::seconds(1000)};

// --- The policy ------------------------------------------------------------------------------

TEST(PetPolicy, AnyPetsOnTheFirstCredit) {
    PetPolicy p(PetPolicyKind::Any);
    p.set_cpus({0, 1});
    EXPECT_TRUE(p.credit(1, t0));
    EXPECT_EQ(p.waiting_for(), (std::vector<int>{0, 1}));  // the pet started the credits over
}

TEST(PetPolicy, AllWaitsForEveryCpu) {
    PetPolicy p(PetPolicyKind::All);
    p.set_cpus({0, 1, 2});
    EXPECT_FALSE(p.credit(0, t0));
    EXPECT_FALSE(p.credit(0, t0 + 10ms));  // twice from one CPU is still one CPU
    EXPECT_FALSE(p.credit(2, t0 + 20ms));
    EXPECT_EQ(p.waiting_for(), std::vector<int>{1});
    EXPECT_TRUE(p.credit(1, t0 + 30ms));
    // The credits start over: a starved CPU holds the next pet back for as long as it starves.
    EXPECT_FALSE(p.credit(0, t0 + 500ms));
    EXPECT_FALSE(p.credit(2, t0 + 600ms));
    for (int i = 0; i < 100; ++i) EXPECT_FALSE(p.credit(i % 2 == 0 ? 0 : 2, t0 + 1s + i * 100ms));
    EXPECT_EQ(p.waiting_for(), std::vector<int>{1});
}

TEST(PetPolicy, AtMostTenPetsASecond) {
    PetPolicy p(PetPolicyKind::Any);
    p.set_cpus({0, 1});
    int pets = 0;
    // Two CPUs crediting every 10 ms for a second: 200 credits.
    for (int ms = 0; ms < 1000; ms += 10) {
        pets += p.credit(0, t0 + std::chrono::milliseconds(ms)) ? 1 : 0;
        pets += p.credit(1, t0 + std::chrono::milliseconds(ms)) ? 1 : 0;
    }
    EXPECT_EQ(pets, 10);
}

TEST(PetPolicy, ACreditTooSoonCountsForTheNextPet) {
    PetPolicy p(PetPolicyKind::All);
    p.set_cpus({0, 1});
    EXPECT_FALSE(p.credit(0, t0));
    EXPECT_TRUE(p.credit(1, t0));
    EXPECT_FALSE(p.credit(0, t0 + 50ms));
    EXPECT_FALSE(p.credit(1, t0 + 60ms));  // policy holds, but too soon
    EXPECT_TRUE(p.credit(1, t0 + 100ms));  // cpu0's credit of 50 ms still counts
}

TEST(PetPolicy, CpusThatLeaveNoLongerHoldPetsBack) {
    PetPolicy p(PetPolicyKind::All);
    p.set_cpus({0, 1});
    EXPECT_FALSE(p.credit(0, t0));
    p.set_cpus({0});  // cpu1 went offline
    EXPECT_TRUE(p.credit(0, t0 + 1ms));
    EXPECT_FALSE(p.credit(1, t0 + 1s)) << "a CPU outside the set earns nothing";
}

TEST(PetPolicy, NamesRoundTrip) {
    for (auto k : {PetPolicyKind::Any, PetPolicyKind::All}) {
        EXPECT_EQ(monitor::watchdog::pet_policy_from_name(monitor::watchdog::pet_policy_name(k)),
                  k);
    }
    EXPECT_FALSE(monitor::watchdog::pet_policy_from_name("some"));
}

// --- The device ------------------------------------------------------------------------------

// A FIFO in place of /dev/watchdog: no watchdog ioctls (ENOTTY), so every pet is a write, and
// the reader sees the pets and the magic 'V'.
class FifoDevice : public testing::Test {
  protected:
    void SetUp() override {
        path_ = (dir_.path() / "watchdog").string();
        ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
        reader_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        ASSERT_GE(reader_, 0);
    }
    void TearDown() override { ::close(reader_); }

    // What was written so far; "" when nothing.
    std::string Drain() {
        std::string out;
        char buf[256];
        for (ssize_t n; (n = ::read(reader_, buf, sizeof buf)) > 0;)
            out.append(buf, std::size_t(n));
        return out;
    }
    // Whether the writer closed (read returns 0 once drained).
    bool WriterClosed() {
        char c;
        return ::read(reader_, &c, 1) == 0;
    }

    ScratchDir dir_;
    std::string path_;
    int reader_ = -1;
};

TEST_F(FifoDevice, PetsAreWritesAndTheMagicCloseWritesV) {
    auto d = WatchdogDevice::open(path_, 10s);
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_FALSE(d->identity()) << "a FIFO has no watchdog ioctls";
    EXPECT_FALSE(d->timeout());
    EXPECT_FALSE(d->time_left());
    EXPECT_TRUE(d->magic_close());
    EXPECT_EQ(Drain(), "");  // opening writes nothing
    ASSERT_TRUE(d->pet());
    ASSERT_TRUE(d->pet());
    EXPECT_EQ(Drain(), std::string(2, '\0'));
    ASSERT_TRUE(d->disarm());
    EXPECT_FALSE(d->is_open());
    EXPECT_EQ(Drain(), "V");
    EXPECT_TRUE(WriterClosed());
    EXPECT_EQ(d->pet().error().status, Status::BadState) << "no pets after the close";
}

TEST_F(FifoDevice, ClosingArmedWritesNoV) {
    {
        auto d = WatchdogDevice::open(path_, 10s);
        ASSERT_TRUE(d) << d.error().message;
        ASSERT_TRUE(d->pet());
    }  // destroyed: closed without the magic character
    EXPECT_EQ(Drain(), std::string(1, '\0'));
    EXPECT_TRUE(WriterClosed());
}

TEST(WatchdogDevice, AMissingDeviceSaysWhatToDo) {
    ScratchDir dir;
    const std::string path = (dir.path() / "watchdog").string();
    auto d = WatchdogDevice::open(path, 10s);
    ASSERT_FALSE(d);
    EXPECT_EQ(d.error().status, Status::NoDev);
    EXPECT_THAT(d.error().message, HasSubstr(path));
    EXPECT_THAT(d.error().message, HasSubstr("modprobe softdog"));
    EXPECT_THAT(d.error().message, HasSubstr("device = \"\""));
}

// A character device without the watchdog ioctls (ENOTTY) is still petted, by writes.
TEST(WatchdogDevice, ADeviceWithoutTheIoctlsIsPettedByWrites) {
    auto d = WatchdogDevice::open("/dev/null", 10s);
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_FALSE(d->identity());
    EXPECT_TRUE(d->pet());
    EXPECT_TRUE(d->disarm());
}

// --- Watchdog: the policy driving the device ---------------------------------------------------

TEST_F(FifoDevice, CreditsPetThroughThePolicy) {
    Clock::time_point now = t0;
    Watchdog w(PetPolicyKind::All, [&] { return now; });
    w.set_cpus({0, 1});
    w.credit(0);  // not armed yet: nothing to pet
    ASSERT_TRUE(w.arm(path_, 10s));
    EXPECT_EQ(w.arm(path_, 10s).error().status, Status::BadState);
    now += 200ms;
    w.credit(0);
    EXPECT_EQ(Drain(), "") << "cpu1 has not earned a credit";
    auto s = w.status();
    EXPECT_TRUE(s.armed);
    EXPECT_EQ(s.device, path_);
    EXPECT_EQ(s.waiting_for, std::vector<int>{1});
    ASSERT_TRUE(s.since_last_pet);
    EXPECT_EQ(*s.since_last_pet, 200ms) << "opening counts as the first pet";
    w.credit(1);
    EXPECT_EQ(Drain(), std::string(1, '\0'));
    now += 50ms;
    s = w.status();
    EXPECT_EQ(s.pets, 1u);
    EXPECT_EQ(*s.since_last_pet, 50ms);
    ASSERT_TRUE(w.disarm());
    EXPECT_EQ(Drain(), "V");
    w.credit(0);
    w.credit(1);
    EXPECT_EQ(w.status().pets, 1u) << "no pets after the disarm";
    EXPECT_FALSE(w.status().armed);
}

// status() runs in the daemon's main loop and must never wait for a probe: here a pet is
// stuck in a write to a full FIFO while holding the device, and status() still answers.
TEST_F(FifoDevice, StatusDoesNotWaitForAStuckPet) {
    std::atomic<std::int64_t> now_ns{t0.time_since_epoch().count()};
    Watchdog w(PetPolicyKind::Any,
               [&] { return Clock::time_point(Clock::duration(now_ns.load())); });
    w.set_cpus({0});
    ASSERT_TRUE(w.arm(path_, 10s));
    std::atomic<bool> stuck_done{false};
    std::thread prober([&] {
        // A pet every 100 ms of the test clock until the FIFO (64 KiB) is full and a write
        // blocks; the reader below drains it at the end.
        for (int i = 0; i < 70000 && !stuck_done; ++i) {
            now_ns += std::chrono::nanoseconds(100ms).count();
            w.credit(0);
        }
        stuck_done = true;
    });
    // Wait until the prober is stuck: the pets stop increasing.
    std::uint64_t last = 0;
    for (int same = 0; same < 5;) {
        std::this_thread::sleep_for(20ms);
        const auto pets = w.status().pets;
        same = pets == last ? same + 1 : 0;
        last = pets;
    }
    ASSERT_FALSE(stuck_done) << "the FIFO never filled";
    const auto start = Clock::now();
    const auto s = w.status();
    EXPECT_LT(Clock::now() - start, 50ms) << "status() waited for the stuck pet";
    EXPECT_TRUE(s.armed);
    EXPECT_GT(s.pets, 60000u);
    stuck_done = true;  // stop after the next pet
    while (!Drain().empty()) {
    }
    prober.join();
    ASSERT_TRUE(w.disarm());
}

// --- The probes' credits on a real CPU ---------------------------------------------------------

struct CountingSink : monitor::IdleCreditSink {
    std::atomic<int> credits{0};
    std::atomic<int> wrong_cpu{0};
    int cpu = 0;
    void credit(int c) noexcept override {
        if (c != cpu) ++wrong_cpu;
        ++credits;
    }
};

int SomeCpu() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    for (int c = CPU_SETSIZE - 1; c >= 0; --c) {
        if (CPU_ISSET(c, &set)) return c;
    }
    return 0;
}

// A sleeping probe credits at each wake-up: ten a second (fewer when other tests keep its CPU
// busy: a SCHED_IDLE thread wakes late then).
TEST(IdleCredits, ASleepingProbeCreditsTenTimesASecond) {
    auto sink = std::make_shared<CountingSink>();
    sink->cpu = SomeCpu();
    monitor::IdleProbe probe(sink->cpu, monitor::ProbeMode::Sleep, {}, {}, sink);
    std::this_thread::sleep_for(2s);
    probe.stop();
    EXPECT_GE(sink->credits.load(), 5);
    EXPECT_LE(sink->credits.load(), 22);
    EXPECT_EQ(sink->wrong_cpu.load(), 0);
}

// 100 ms of idle time earn a credit only within one window: idle time from before a
// starvation cannot complete a credit later.
TEST(IdleCredits, ACreditNeedsItsIdleTimeWithinTheWindow) {
    using namespace std::chrono;
    const steady_clock::time_point start{};
    monitor::IdleCreditMeter meter(start);
    EXPECT_FALSE(meter.update(99'000'000, start + 99ms));
    EXPECT_TRUE(meter.update(100'000'000, start + 100ms));  // idle: 100 ms in 100 ms
    EXPECT_FALSE(meter.update(199'000'000, start + 200ms));
    // Starved from here: the last 1 ms comes 1.5 s later, outside the window.
    EXPECT_FALSE(meter.update(200'000'000, start + 1700ms));
    EXPECT_FALSE(meter.update(299'000'000, start + 2600ms));
    EXPECT_TRUE(meter.update(300'000'000, start + 2650ms));  // 100 ms within 950 ms
}

// Updates come when the probe gets around to them: the idle time beyond a credit counts
// toward the next one, so credits keep pace with the idle time however coarse the updates.
TEST(IdleCredits, IdleTimeBeyondACreditCountsTowardTheNext) {
    using namespace std::chrono;
    const steady_clock::time_point start{};
    monitor::IdleCreditMeter meter(start);
    EXPECT_TRUE(meter.update(150'000'000, start + 150ms));
    EXPECT_TRUE(meter.update(200'000'000, start + 200ms));  // 50 ms left over + 50 ms
    int credits = 2;
    for (int i = 1; i <= 20; ++i) {  // 40 ms a step: 800 ms in all
        credits += meter.update(200'000'000 + i * 40'000'000ULL, start + 200ms + i * 40ms) ? 1 : 0;
    }
    EXPECT_EQ(credits, 10);
}

// A probe that calibrated for a long time on a busy CPU starts with much CPU time: it earns
// a credit at once, and one more at most, not one at every update while it is starved.
TEST(IdleCredits, ABacklogPaysForOneMoreCreditAtMost) {
    using namespace std::chrono;
    const steady_clock::time_point start{};
    monitor::IdleCreditMeter meter(start);
    EXPECT_TRUE(meter.update(1'000'000'000, start + 10ms));  // 1 s of calibration
    int credits = 0;
    for (int i = 1; i <= 20; ++i) {  // starved: 1 ms of CPU every 400 ms, for 8 s
        credits += meter.update(1'000'000'000 + i * 1'000'000ULL, start + 10ms + i * 400ms) ? 1 : 0;
    }
    EXPECT_LE(credits, 1);
}

// A spinning probe credits every 100 ms of CPU time it gets; a busy thread of normal priority
// on its CPU leaves it (SCHED_IDLE) almost none, so the credits stop.
TEST(IdleCredits, ASpinningProbeCreditsItsIdleTimeAndStopsWhenStarved) {
    auto sink = std::make_shared<CountingSink>();
    sink->cpu = SomeCpu();
    monitor::IdleProbe probe(sink->cpu, monitor::ProbeMode::Spin, {}, {}, sink);
    ASSERT_TRUE(test_support::wait_until(
        [&] { return probe.state() == monitor::ProbeState::Running; }, 5000ms));
    const auto cpu_before = probe.cpu_time_ns();
    const int before = sink->credits.load();
    std::this_thread::sleep_for(1s);
    const int idle_credits = sink->credits.load() - before;
    const double idle_cpu_ms = static_cast<double>(probe.cpu_time_ns() - cpu_before) / 1e6;
    // One credit per 100 ms of the probe's CPU time, whatever else ran on the CPU.
    EXPECT_NEAR(idle_credits, idle_cpu_ms / 100.0, 1.5) << idle_cpu_ms << " ms of idle time";

    std::atomic<bool> stop{false};
    std::thread busy([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<std::size_t>(sink->cpu), &set);
        ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
        volatile unsigned long x = 0;
        while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
    std::this_thread::sleep_for(200ms);  // the credit in progress may still complete
    const int starved_before = sink->credits.load();
    std::this_thread::sleep_for(1s);
    const int starved_credits = sink->credits.load() - starved_before;
    stop = true;
    busy.join();
    probe.stop();
    EXPECT_LE(starved_credits, 1) << "a SCHED_IDLE probe under a busy thread gets ~0.3% of "
                                     "the CPU: a credit every ~30 s";
    EXPECT_EQ(sink->wrong_cpu.load(), 0);
}

}  // namespace
