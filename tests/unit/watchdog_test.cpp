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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

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
// nowayout from sysfs: the legacy /dev/watchdog (misc 10:130) is watchdog0's; another device
// is found by its numbers; a kernel that does not say gives nothing.
TEST(WatchdogDevice, NowayoutIsReadFromSysfs) {
    ScratchDir dir;
    const auto sys = dir.path();
    EXPECT_EQ(monitor::watchdog::read_nowayout(sys, 10, 130), std::nullopt);
    test_support::write_file(sys / "class/watchdog/watchdog0/nowayout", "1\n");
    EXPECT_EQ(monitor::watchdog::read_nowayout(sys, 10, 130), true);
    test_support::write_file(sys / "dev/char/248:1/nowayout", "0\n");
    EXPECT_EQ(monitor::watchdog::read_nowayout(sys, 248, 1), false);
    test_support::write_file(sys / "dev/char/248:2/nowayout", "maybe\n");
    EXPECT_EQ(monitor::watchdog::read_nowayout(sys, 248, 2), std::nullopt);
}

TEST(WatchdogDevice, ADeviceWithoutTheIoctlsIsPettedByWrites) {
    auto d = WatchdogDevice::open("/dev/null", 10s);
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_FALSE(d->identity());
    EXPECT_TRUE(d->pet());
    EXPECT_TRUE(d->disarm());
}

// --- Watchdog: the policy driving the device ---------------------------------------------------

// The probes' idle time counts for the watchdog's timeout: the one asked for when the driver
// cannot say (a FIFO has no ioctls), 10 s before the first arm.
TEST_F(FifoDevice, IdleTimeCountsForTheTimeoutInForce) {
    Watchdog w(PetPolicyKind::All);
    EXPECT_EQ(w.credit_expiry(), 10s);
    ASSERT_TRUE(w.arm(path_, 7s));
    EXPECT_EQ(w.credit_expiry(), 7s);
    ASSERT_TRUE(w.disarm());
}

// An empty clock function is the steady clock: credit(), noexcept on a probe's thread, would
// otherwise throw std::bad_function_call into std::terminate.
TEST_F(FifoDevice, AnEmptyClockIsTheSteadyClock) {
    Watchdog w(PetPolicyKind::All, {});
    w.set_cpus({0});
    ASSERT_TRUE(w.arm(path_, 10s));
    w.credit(0);
    EXPECT_EQ(Drain(), std::string(1, '\0'));
    ASSERT_TRUE(w.status().since_last_pet);
    EXPECT_LT(*w.status().since_last_pet, 10s);
    ASSERT_TRUE(w.disarm());
}

TEST_F(FifoDevice, CreditsPetThroughThePolicy) {
    Clock::time_point now = t0;
    Watchdog w(PetPolicyKind::All, [&] { return now; });
    w.set_cpus({0, 1});
    w.credit(0);  // not armed yet: nothing to pet
    EXPECT_FALSE(w.since_last_pet());
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
    EXPECT_EQ(w.since_last_pet(), s.since_last_pet) << "status()'s, without the rest";
    ASSERT_TRUE(w.disarm());
    EXPECT_EQ(Drain(), "V");
    EXPECT_FALSE(w.since_last_pet()) << "disarmed";
    w.credit(0);
    w.credit(1);
    EXPECT_EQ(w.status().pets, 1u) << "no pets after the disarm";
    EXPECT_FALSE(w.status().armed);
}

// Near misses: a pet more than half the timeout after the one before (or the arm) is late;
// the longest gap is kept until the next arm, the late pets for good.
TEST_F(FifoDevice, PetsLaterThanHalfTheTimeoutAreNearMisses) {
    Clock::time_point now = t0;
    Watchdog w(PetPolicyKind::All, [&] { return now; });
    w.set_cpus({0, 1});
    ASSERT_TRUE(w.arm(path_, 10s));
    auto pet_after = [&](Clock::duration d) {
        now += d;
        w.credit(0);
        w.credit(1);
    };
    pet_after(200ms);
    pet_after(5s);  // half the timeout exactly: not late
    EXPECT_EQ(w.status().pets, 2u);
    EXPECT_EQ(w.status().late_pets, 0u);
    EXPECT_EQ(w.status().longest_pet_gap, 5s);
    pet_after(5001ms);
    pet_after(150ms);
    auto s = w.status();
    EXPECT_EQ(s.pets, 4u);
    EXPECT_EQ(s.late_pets, 1u);
    EXPECT_EQ(s.longest_pet_gap, 5001ms);
    // The first pet after the arm counts from the arm.
    ASSERT_TRUE(w.disarm());
    ASSERT_TRUE(w.arm(path_, 10s));
    EXPECT_EQ(w.status().longest_pet_gap, 0ms) << "a new arm, a new longest gap";
    pet_after(9s);
    s = w.status();
    EXPECT_EQ(s.late_pets, 2u);
    EXPECT_EQ(s.longest_pet_gap, 9s);
    ASSERT_TRUE(w.disarm());
    Drain();
}

// A probe's pet stuck in a write to the full FIFO, holding the device: the prober pets every
// 100 ms of the test clock until the FIFO (64 KiB) is full and a write blocks; start() returns
// once the pets have stopped increasing. The test's reader drains the FIFO to free it.
struct StuckPet {
    std::atomic<std::int64_t> now_ns{t0.time_since_epoch().count()};
    Watchdog w{PetPolicyKind::Any,
               [this] { return Clock::time_point(Clock::duration(now_ns.load())); }};
    std::atomic<bool> stop{false};   // stop after the next pet
    std::atomic<bool> ended{false};  // the prober ran out of pets without getting stuck
    std::thread prober;

    void start() {
        prober = std::thread([this] {
            for (int i = 0; i < 70000 && !stop; ++i) {
                now_ns += std::chrono::nanoseconds(100ms).count();
                w.credit(0);
            }
            ended = true;
        });
        std::uint64_t last = 0;
        for (int same = 0; same < 5;) {
            std::this_thread::sleep_for(20ms);
            const auto pets = w.status().pets;
            same = pets == last ? same + 1 : 0;
            last = pets;
        }
    }
};

// status() runs in the daemon's main loop and must never wait for a probe: here a pet is
// stuck in a write to a full FIFO while holding the device, and status() still answers.
TEST_F(FifoDevice, StatusDoesNotWaitForAStuckPet) {
    StuckPet stuck;
    Watchdog& w = stuck.w;
    w.set_cpus({0});
    ASSERT_TRUE(w.arm(path_, 10s));
    stuck.start();
    ASSERT_FALSE(stuck.ended) << "the FIFO never filled";
    const auto start = Clock::now();
    const auto s = w.status();
    EXPECT_LT(Clock::now() - start, 50ms) << "status() waited for the stuck pet";
    EXPECT_TRUE(s.armed);
    EXPECT_GT(s.pets, 60000u);
    stuck.stop = true;
    while (!Drain().empty()) {
    }
    stuck.prober.join();
    ASSERT_TRUE(w.disarm());
}

// Nor does closing: the pet stuck in a full FIFO keeps the device open until it ends, and
// then closes it; pets after the close do nothing.
TEST_F(FifoDevice, ClosingDoesNotWaitForAStuckPet) {
    StuckPet stuck;
    Watchdog& w = stuck.w;
    w.set_cpus({0});
    ASSERT_TRUE(w.arm(path_, 10s));
    stuck.start();
    // In a thread of its own, so that a close that waits fails the test instead of hanging it.
    std::atomic<bool> closed{false};
    const auto start = Clock::now();
    std::thread owner([&] {
        w.set_cpus({0, 1});
        w.close_armed();
        closed = true;
    });
    const bool in_time = test_support::wait_until([&] { return closed.load(); }, 1s);
    const auto waited = Clock::now() - start;
    stuck.stop = true;
    EXPECT_TRUE(in_time) << "close_armed() waited for the stuck pet";
    EXPECT_LT(waited, 100ms);
    EXPECT_FALSE(w.status().armed);
    EXPECT_FALSE(WriterClosed()) << "the stuck pet still holds the device";
    // The pet ends once the FIFO has room, and lets go of the device last: it closes.
    std::string rest;
    EXPECT_TRUE(test_support::wait_until(
        [&] {
            rest += Drain();
            return WriterClosed();
        },
        5s));
    owner.join();
    stuck.prober.join();
    EXPECT_EQ(rest.find('V'), std::string::npos) << "closed without the magic 'V'";
    const auto pets = w.status().pets;
    w.credit(0);
    EXPECT_EQ(w.status().pets, pets) << "no pets once closed";
    // Armed again, on the lease the stuck pet let go of.
    ASSERT_TRUE(w.arm(path_, 10s));
    EXPECT_TRUE(w.status().armed);
    ASSERT_TRUE(w.disarm());
    EXPECT_EQ(Drain(), "V");
}

// The daemon's main loop calls set_cpus(), status() and disarm() while the probes credit and
// pet from SCHED_IDLE threads. A probe preempted in the middle of a credit, by real-time work
// that keeps its CPU busy, must not hold the loop up. Here a SCHED_FIFO thread takes the
// probe's CPU for 150 ms at a time, eight times, while a probe credits in a loop; 10 ms into
// each burst the owner calls in. With a lock between them, a probe preempted while holding it
// (most of its loop) makes the owner wait for the rest of the burst. The thread sanitizer
// puts such a lock in: it makes an atomic operation under a lock of its own for that address,
// which the preempted probe holds (the owner's disarm waited 136 ms for it, 2 runs in 3 on a
// busy machine), so the address sanitizer's build runs this test.
TEST(Watchdog, TheOwnerNeverWaitsForAProbePreemptedByRealTimeWork) {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the thread sanitizer locks around atomic operations: a probe preempted "
                    "inside one holds the owner up; the address sanitizer's build runs it";
#endif
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
    if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs: one for the probe, one for the owner";
    const int probe_cpu = cpus.back();
    const int owner_cpu = cpus.front();
    auto pin = [](int cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        return ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set) == 0;
    };

    Watchdog w(PetPolicyKind::All);
    w.set_cpus({probe_cpu});
    // /dev/null has no watchdog ioctls: every pet is a write that always succeeds.
    ASSERT_TRUE(w.arm("/dev/null", 10s));

    std::atomic<bool> stop{false};
    std::atomic<int> prober_ready{0};
    std::thread prober([&] {
        sched_param none{};
        if (!pin(probe_cpu) || ::sched_setscheduler(0, SCHED_IDLE, &none) != 0) {
            prober_ready = -1;
            return;
        }
        prober_ready = 1;
        while (!stop) w.credit(probe_cpu);
    });
    ASSERT_TRUE(test_support::wait_until([&] { return prober_ready != 0; }, 5s));
    ASSERT_EQ(prober_ready, 1) << "cannot make the probe SCHED_IDLE on cpu" << probe_cpu;

    constexpr int kBursts = 8;
    std::atomic<int> burst{0};  // the burst under way; 0 between them
    std::atomic<int> hog_state{0};
    std::thread hog([&] {
        sched_param fifo{};
        fifo.sched_priority = 1;
        if (!pin(probe_cpu) || ::sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) {
            hog_state = -1;
            return;
        }
        hog_state = 1;
        for (int b = 1; b <= kBursts && !stop; ++b) {
            burst = b;
            const auto until = Clock::now() + 150ms;
            while (Clock::now() < until) {
            }
            burst = 0;
            std::this_thread::sleep_for(50ms);  // the probe runs again
        }
        hog_state = 2;
    });
    ASSERT_TRUE(test_support::wait_until([&] { return hog_state != 0; }, 5s));
    if (hog_state < 0) {
        stop = true;
        hog.join();
        prober.join();
        GTEST_SKIP() << "cannot run a SCHED_FIFO thread here (needs root or CAP_SYS_NICE)";
    }
    // The owner at real-time priority on its own CPU too, so that what it waits for is the
    // probe, not its turn on a CPU that other tests keep busy.
    ASSERT_TRUE(pin(owner_cpu));
    sched_param owner_fifo{};
    owner_fifo.sched_priority = 1;
    const bool owner_rt = ::sched_setscheduler(0, SCHED_FIFO, &owner_fifo) == 0;

    std::vector<double> waits_ms;
    for (int b = 1; b <= kBursts; ++b) {
        ASSERT_TRUE(test_support::wait_until([&] { return burst.load() == b; }, 5s));
        std::this_thread::sleep_for(10ms);
        const auto start = Clock::now();
        w.set_cpus({probe_cpu});
        const auto s = w.status();
        const bool disarmed = b < kBursts || static_cast<bool>(w.disarm());
        waits_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        EXPECT_TRUE(s.armed);
        EXPECT_TRUE(disarmed);
    }
    if (owner_rt) {
        sched_param normal{};
        ::sched_setscheduler(0, SCHED_OTHER, &normal);
    }
    ::pthread_setaffinity_np(::pthread_self(), sizeof allowed, &allowed);
    stop = true;
    hog.join();
    prober.join();
    EXPECT_FALSE(w.status().armed);
    EXPECT_LT(*std::max_element(waits_ms.begin(), waits_ms.end()), 100.0)
        << "the owner's calls took (ms): " << testing::PrintToString(waits_ms);
}

// --- The probes' credits on a real CPU ---------------------------------------------------------

constexpr std::uint64_t kMs = 1'000'000;  // ns

struct CountingSink : monitor::IdleCreditSink {
    std::atomic<int> credits{0};
    std::atomic<int> wrong_cpu{0};
    int cpu = 0;
    std::chrono::nanoseconds expiry = 10s;
    void credit(int c) noexcept override {
        if (c != cpu) ++wrong_cpu;
        ++credits;
    }
    std::chrono::nanoseconds credit_expiry() const noexcept override { return expiry; }
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

// A sleeping probe wakes at each reading of its CPU's idle time and credits it from the
// kernel's idle time: the first reading is the baseline, a reading with 100 ms of idle time in
// the timeout and some since the one before earns a credit, one without any since earns none.
TEST(IdleCredits, ASleepingProbeCreditsTheKernelsIdleTime) {
    auto sink = std::make_shared<CountingSink>();
    sink->cpu = SomeCpu();
    monitor::IdleProbe probe(sink->cpu, monitor::ProbeMode::Sleep, {}, {}, sink);
    ASSERT_TRUE(test_support::wait_until(
        [&] { return probe.state() == monitor::ProbeState::Running; }, 5000ms));
    // Each reading waits until the probe has taken the one before (it wakes at each).
    auto publish = [&](std::uint64_t idle_ms, std::chrono::seconds at) {
        const auto wakes = probe.count();
        probe.publish_idle(idle_ms * kMs, t0 + at);
        return test_support::wait_until([&] { return probe.count() > wakes; }, 5000ms);
    };
    ASSERT_TRUE(publish(5'000'000, 0s));  // idle since boot: the baseline only
    EXPECT_EQ(sink->credits.load(), 0);
    ASSERT_TRUE(publish(5'000'900, 1s));
    EXPECT_EQ(sink->credits.load(), 1);
    ASSERT_TRUE(publish(5'000'900, 2s)) << "saturated for a second";
    EXPECT_EQ(sink->credits.load(), 1);
    ASSERT_TRUE(publish(5'000'901, 3s));
    EXPECT_EQ(sink->credits.load(), 2);
    probe.stop();
    EXPECT_EQ(probe.state(), monitor::ProbeState::Stopped);
    EXPECT_EQ(probe.count(), 4u);
    EXPECT_EQ(sink->wrong_cpu.load(), 0);
}

// A sleeping probe sleeps until a reading comes: no reading, no wake-up and no CPU time.
TEST(IdleCredits, ASleepingProbeSleepsBetweenReadings) {
    auto sink = std::make_shared<CountingSink>();
    sink->cpu = SomeCpu();
    monitor::IdleProbe probe(sink->cpu, monitor::ProbeMode::Sleep, {}, {}, sink);
    ASSERT_TRUE(test_support::wait_until(
        [&] { return probe.state() == monitor::ProbeState::Running; }, 5000ms));
    const auto cpu = probe.cpu_time_ns();
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(probe.count(), 0u);
    EXPECT_LT(probe.cpu_time_ns() - cpu, 1'000'000u) << "it did not sleep";
    EXPECT_EQ(sink->credits.load(), 0);
}

// --- The credit meter, with a test clock ------------------------------------------------------

// MON's rule, reading by reading: 100 ms of idle time within the timeout, and some since the
// reading before. The idle time between two readings is taken as spread evenly over the time
// between them: the window holds the share that falls within it.
TEST(IdleCredits, HundredMillisecondsWithinTheTimeoutAndSomeSinceTheLastReading) {
    const Clock::time_point start{};
    const auto window = std::chrono::nanoseconds(10s);
    monitor::IdleCreditMeter meter;
    EXPECT_FALSE(meter.update(7'000 * kMs, start, window)) << "the first reading is the baseline";
    EXPECT_EQ(meter.within(), 0ns);
    EXPECT_FALSE(meter.update(7'060 * kMs, start + 1s, window));  // 60 ms
    EXPECT_TRUE(meter.update(7'100 * kMs, start + 2s, window));   // 40 ms more: 100 ms
    EXPECT_FALSE(meter.update(7'100 * kMs, start + 3s, window)) << "no idle time since";
    EXPECT_EQ(meter.within(), 100ms);
    EXPECT_TRUE(meter.update(7'101 * kMs, start + 9500ms, window));
    // 10.5 s after `start`, half of the 60 ms of its first second lies before the window.
    EXPECT_FALSE(meter.update(7'102 * kMs, start + 10500ms, window));
    EXPECT_EQ(meter.within(), 72ms);
    // And at 11 s none of it: 40 + 1 + 1 + 2 ms.
    EXPECT_FALSE(meter.update(7'104 * kMs, start + 11s, window));
    EXPECT_EQ(meter.within(), 44ms);
}

// A counter that goes back (it should not) gives no idle time, and the next reading counts
// from the highest value seen.
TEST(IdleCredits, ACounterThatGoesBackGivesNothing) {
    const Clock::time_point start{};
    monitor::IdleCreditMeter meter;
    EXPECT_FALSE(meter.update(500 * kMs, start, 10s));
    EXPECT_FALSE(meter.update(400 * kMs, start + 1s, 10s));
    EXPECT_FALSE(meter.update(550 * kMs, start + 2s, 10s));
    EXPECT_EQ(meter.within(), 50ms);
}

// Readings further apart than the timeout: the window holds its share of the idle time between
// them, as if it were spread evenly.
TEST(IdleCredits, ReadingsFurtherApartThanTheTimeoutCountTheirShare) {
    const Clock::time_point start{};
    monitor::IdleCreditMeter meter;
    EXPECT_FALSE(meter.update(0, start, 10s));
    EXPECT_FALSE(meter.update(150 * kMs, start + 20s, 10s));
    EXPECT_EQ(meter.within(), 75ms);
    EXPECT_TRUE(meter.update(450 * kMs, start + 40s, 10s));
    EXPECT_EQ(meter.within(), 150ms);
}

// When the timeout grows, the chunks made with the shorter one may fill the ring: the oldest
// are merged toward the earlier time, and nothing is lost.
TEST(IdleCredits, AGrowingTimeoutLosesNoIdleTime) {
    const Clock::time_point start{};
    monitor::IdleCreditMeter meter;
    EXPECT_FALSE(meter.update(0, start, 1s));
    for (int i = 1; i <= 300; ++i) {  // 0.3 ms every 10 ms: a chunk each with a 1 s window
        EXPECT_FALSE(meter.update(i * 300'000ULL, start + i * 10ms, i <= 100 ? 1s : 100s));
    }
    EXPECT_EQ(meter.within(), 90ms) << "2 s of 0.3 ms per 10 ms since the timeout grew";
    EXPECT_TRUE(meter.update(300 * 300'000ULL + 10 * kMs, start + 3010ms, 100s));
}

// The idle time of a CPU under a duty cycle, on a test clock: in each period (a random 0.5 to
// 1.5 times the mean, as bench-duty-cycle makes them) the CPU is busy for `load` percent and
// idle for the rest. Two ways of reading it, as the two probe modes do:
//   spin   the probe gets the idle time and reads its own CPU time after every 3 ms of it
//          (1,024 outer loops on a current x86 core);
//   sleep  the kernel's idle time, read once a second and counted in USER_HZ ticks of 10 ms,
//          as /proc/stat shows it.
// `from` starts the load after that much of an idle CPU. Returns the credits' times.
enum class Reading { Spin, Sleep };

std::vector<Clock::time_point> credits_under_load(Reading reading, double load,
                                                  std::chrono::milliseconds mean,
                                                  std::chrono::seconds timeout,
                                                  std::chrono::seconds length,
                                                  std::chrono::seconds idle_first = 0s) {
    const Clock::time_point start{};
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> spread(0.5, 1.5);
    monitor::IdleCreditMeter meter;
    std::vector<Clock::time_point> credits;
    std::uint64_t idle = 0;  // ns
    auto read = [&](Clock::time_point at, std::uint64_t value) {
        if (meter.update(value, at, timeout)) credits.push_back(at);
    };
    read(start, 0);
    Clock::time_point next_reading = start + 1s;
    std::uint64_t next_update = 3 * kMs;
    // Idle time from `t` for `d`, read as the mode reads it.
    auto idle_for = [&](Clock::time_point t, std::chrono::nanoseconds d) {
        if (reading == Reading::Spin) {
            for (auto ran = 0ns; ran < d;) {
                const auto step = std::min<std::chrono::nanoseconds>(
                    d - ran, std::chrono::nanoseconds(next_update - idle));
                ran += step;
                idle += static_cast<std::uint64_t>(step.count());
                if (idle < next_update) break;
                read(t + ran, idle);
                next_update = idle + 3 * kMs;
            }
        } else {
            idle += static_cast<std::uint64_t>(d.count());
        }
    };
    auto busy_until = [&](Clock::time_point t) {
        while (reading == Reading::Sleep && next_reading <= t) {
            read(next_reading, idle / (10 * kMs) * (10 * kMs));
            next_reading += 1s;
        }
    };
    Clock::time_point t = start;
    if (idle_first > 0s) {
        // An idle CPU: the kernel's idle time grows as the clock does.
        for (; t < start + idle_first; t += 1ms) {
            idle_for(t, 1ms);
            busy_until(t + 1ms);
        }
    }
    while (t < start + length) {
        const auto period =
            std::chrono::duration_cast<std::chrono::nanoseconds>(mean * spread(rng));
        const auto idle_part =
            std::chrono::duration_cast<std::chrono::nanoseconds>(period * (100.0 - load) / 100.0);
        t += period - idle_part;
        busy_until(t);
        idle_for(t, idle_part);
        t += idle_part;
        busy_until(t);
    }
    return credits;
}

// The longest time between credits after `from`, from `from` itself and up to `end`.
std::chrono::nanoseconds longest_gap(const std::vector<Clock::time_point>& credits,
                                     Clock::time_point from, Clock::time_point end) {
    std::chrono::nanoseconds gap{0};
    Clock::time_point last = from;
    for (auto c : credits) {
        if (c < from) continue;
        gap = std::max(gap, c - last);
        last = c;
    }
    return std::max(gap, end - last);
}

struct DutyCase {
    Reading reading;
    double load;
    int mean_period_ms;
    int timeout_s;
    bool petted;  // credits keep coming, never further apart than the timeout less a second
};

void PrintTo(const DutyCase& c, std::ostream* os) {
    *os << (c.reading == Reading::Spin ? "spin" : "sleep") << ", " << c.load
        << " % busy, periods of " << c.mean_period_ms << " ms, timeout " << c.timeout_s << " s";
}

class IdleCreditsUnderLoad : public testing::TestWithParam<DutyCase> {};

// MON's rule: the board resets when the IDLE task cannot run for 100 ms within the timeout.
// So a CPU keeps earning credits at every load that leaves it 100 ms per timeout (99 % at
// 10 s), and earns none below that, in both modes.
TEST_P(IdleCreditsUnderLoad, CreditsComeAsLongAsTheTimeoutHolds100msOfIdleTime) {
    const auto& c = GetParam();
    const auto timeout = std::chrono::seconds(c.timeout_s);
    const auto length = 12 * timeout;
    const auto credits = credits_under_load(
        c.reading, c.load, std::chrono::milliseconds(c.mean_period_ms), timeout, length);
    const Clock::time_point start{};
    const auto from = start + timeout;
    const auto counted = std::ranges::count_if(credits, [&](auto t) { return t >= from; });
    const auto gap = longest_gap(credits, from, start + length);
    if (c.petted) {
        // A second of room for the pet that a credit brings: the daemon's tick may be late.
        EXPECT_LT(gap, timeout - 1s)
            << "a watchdog with this timeout would have fired (" << counted << " credits)";
    } else {
        EXPECT_EQ(counted, 0) << "the idle time within any timeout is less than 100 ms";
    }
}

std::string duty_case_name(const testing::TestParamInfo<DutyCase>& info) {
    auto tenths = static_cast<int>(info.param.load * 10 + 0.5);
    return std::string{info.param.reading == Reading::Spin ? "spin" : "sleep"} + "_load" +
           std::to_string(tenths / 10) + "_" + std::to_string(tenths % 10) + "_period" +
           std::to_string(info.param.mean_period_ms) + "ms_timeout" +
           std::to_string(info.param.timeout_s) + "s";
}

DutyCase spin(double load, int period_ms, int timeout_s, bool petted) {
    return {Reading::Spin, load, period_ms, timeout_s, petted};
}
DutyCase sleep(double load, int period_ms, int timeout_s, bool petted) {
    return {Reading::Sleep, load, period_ms, timeout_s, petted};
}

INSTANTIATE_TEST_SUITE_P(
    Duty, IdleCreditsUnderLoad,
    testing::Values(spin(90, 100, 10, true), spin(90, 1000, 10, true), spin(95, 100, 10, true),
                    spin(95, 1000, 10, true), spin(98, 100, 10, true), spin(98, 1000, 10, true),
                    spin(98, 2000, 10, true), spin(99, 100, 10, true), spin(99, 1000, 10, true),
                    sleep(90, 100, 10, true), sleep(90, 1000, 10, true), sleep(95, 100, 10, true),
                    sleep(95, 1000, 10, true), sleep(98, 100, 10, true), sleep(98, 1000, 10, true),
                    sleep(98, 2000, 10, true), sleep(99, 100, 10, true), sleep(99, 1000, 10, true),
                    // SCHED_IDLE's sliver under a nice-0 hog (spin), or a duty cycle that leaves as
                    // little (sleep): 40 ms per 10 s
                    spin(99.6, 100, 10, false), spin(99.6, 1000, 10, false),
                    spin(100, 1000, 10, false), sleep(99.6, 100, 10, false),
                    sleep(99.6, 1000, 10, false), sleep(100, 1000, 10, false),
                    // the same sliver keeps a 30 s timeout petted: 120 ms per 30 s
                    spin(99.6, 1000, 30, true), sleep(99.6, 1000, 30, true),
                    // and 96 % is already too much for a 2 s timeout: 80 ms per 2 s
                    spin(96, 100, 2, false)),
    duty_case_name);

// A CPU saturated after a minute of idle time: the first reading without idle time since the
// one before earns no credit, and none come after it. A load that leaves 0.4 % (99.6 % busy)
// ends the credits once the idle minute has left the window, within one timeout.
TEST(IdleCredits, CreditsStopWhenTheCpuIsStarved) {
    const Clock::time_point start{};
    const auto starved = start + 60s;
    for (auto reading : {Reading::Spin, Reading::Sleep}) {
        const auto hog = credits_under_load(reading, 100, 1000ms, 10s, 120s, 60s);
        ASSERT_FALSE(hog.empty());
        EXPECT_LE(hog.back(), starved + 1s) << "the last credit of a saturated CPU";
        const auto most = credits_under_load(reading, 99.6, 100ms, 10s, 120s, 60s);
        ASSERT_FALSE(most.empty());
        EXPECT_GT(most.back(), starved + 1s);
        EXPECT_LE(most.back(), starved + 10s) << "the last credit at 99.6 % busy";
    }
}

// A spinning probe credits its CPU time once it has 100 ms of it within the timeout; a busy
// thread of normal priority on its CPU leaves it (SCHED_IDLE) almost none, so the credits stop
// once the idle time it had before is older than the timeout (1 s here).
TEST(IdleCredits, ASpinningProbeCreditsItsIdleTimeAndStopsWhenStarved) {
    auto sink = std::make_shared<CountingSink>();
    sink->cpu = SomeCpu();
    sink->expiry = 1s;
    monitor::IdleProbe probe(sink->cpu, monitor::ProbeMode::Spin, {}, {}, sink);
    ASSERT_TRUE(test_support::wait_until(
        [&] { return probe.state() == monitor::ProbeState::Running; }, 5000ms));
    const auto cpu_before = probe.cpu_time_ns();
    std::this_thread::sleep_for(1s);
    const double idle_cpu_ms = static_cast<double>(probe.cpu_time_ns() - cpu_before) / 1e6;
    if (idle_cpu_ms < 300)
        GTEST_SKIP() << "the CPU was busy: the probe got " << idle_cpu_ms << " ms";
    EXPECT_GT(sink->credits.load(), 0) << idle_cpu_ms << " ms of idle time";

    std::atomic<bool> stop{false};
    std::thread busy([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<std::size_t>(sink->cpu), &set);
        ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
        volatile unsigned long x = 0;
        while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
    std::this_thread::sleep_for(1500ms);  // the idle time from before leaves the window
    const int starved_before = sink->credits.load();
    const auto starved_cpu = probe.cpu_time_ns();
    std::this_thread::sleep_for(1s);
    const int starved_credits = sink->credits.load() - starved_before;
    const double starved_ms = static_cast<double>(probe.cpu_time_ns() - starved_cpu) / 1e6;
    stop = true;
    busy.join();
    probe.stop();
    EXPECT_EQ(starved_credits, 0) << "a SCHED_IDLE probe under a busy thread gets ~0.3% of "
                                     "the CPU: 3 ms per second, not 100; it got "
                                  << starved_ms << " ms";
    EXPECT_EQ(sink->wrong_cpu.load(), 0);
}

}  // namespace
