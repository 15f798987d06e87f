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

// --- The credit meter, with a test clock ------------------------------------------------------

constexpr std::uint64_t kMs = 1'000'000;  // ns

// Idle time counts toward a credit until it is older than the expiry (the watchdog's
// timeout), less at most 1/128 of it: it never counts longer.
TEST(IdleCredits, IdleTimeCountsUntilItIsOlderThanTheTimeout) {
    const Clock::time_point start{};
    const auto expiry = std::chrono::nanoseconds(10s);
    const auto quantum = expiry / 128;
    monitor::IdleCreditMeter meter;
    EXPECT_FALSE(meter.update(60 * kMs, start, expiry));
    // 40 ms more just before the 60 ms expire: 100 ms within the timeout.
    EXPECT_TRUE(meter.update(100 * kMs, start + expiry - quantum - 1ms, expiry));

    monitor::IdleCreditMeter late;
    EXPECT_FALSE(late.update(60 * kMs, start, expiry));
    EXPECT_FALSE(late.update(100 * kMs, start + expiry, expiry)) << "the 60 ms had expired";
    EXPECT_EQ(late.pending(), 40ms);
    // Idle time is kept at its own time: 60 ms more, 9 s on, still finds the 40 ms.
    EXPECT_TRUE(late.update(160 * kMs, start + expiry + 9s, expiry));
}

// Updates come when the probe gets around to them: the idle time beyond a credit counts
// toward the next one, so credits keep pace with the idle time however coarse the updates.
TEST(IdleCredits, IdleTimeBeyondACreditCountsTowardTheNext) {
    const Clock::time_point start{};
    monitor::IdleCreditMeter meter;
    EXPECT_TRUE(meter.update(150 * kMs, start + 150ms, 10s));
    EXPECT_TRUE(meter.update(200 * kMs, start + 200ms, 10s));  // 50 ms left over + 50 ms
    int credits = 2;
    for (int i = 1; i <= 20; ++i) {  // 40 ms a step: 800 ms in all
        credits += meter.update(200 * kMs + i * 40 * kMs, start + 200ms + i * 40ms, 10s) ? 1 : 0;
    }
    EXPECT_EQ(credits, 10);
}

// A probe that calibrated for a long time on a busy CPU starts with much CPU time: it earns
// a credit at once, and one more at most, not one at every update while it is starved.
TEST(IdleCredits, ABacklogPaysForOneMoreCreditAtMost) {
    const Clock::time_point start{};
    monitor::IdleCreditMeter meter;
    EXPECT_TRUE(meter.update(1000 * kMs, start + 10ms, 10s));  // 1 s of calibration
    int credits = 0;
    for (int i = 1; i <= 75; ++i) {  // starved: 1 ms of CPU every 400 ms, for 30 s
        credits += meter.update(1000 * kMs + i * kMs, start + 10ms + i * 400ms, 10s) ? 1 : 0;
    }
    EXPECT_LE(credits, 1);
}

// When the timeout grows, the chunks made with the shorter one may fill the ring: the oldest
// are merged toward the earlier time, and nothing is lost.
TEST(IdleCredits, AGrowingTimeoutLosesNoIdleTime) {
    const Clock::time_point start{};
    monitor::IdleCreditMeter meter;
    for (int i = 1; i <= 300; ++i) {  // 0.3 ms every 10 ms: a chunk each with a 1 s expiry
        EXPECT_FALSE(meter.update(i * 300'000ULL, start + i * 10ms, i <= 100 ? 1s : 100s));
    }
    EXPECT_EQ(meter.pending(), 90ms) << "2 s of 0.3 ms per 10 ms since the timeout grew";
    EXPECT_TRUE(meter.update(300 * 300'000ULL + 10 * kMs, start + 3010ms, 100s));
}

// A probe under a duty cycle, on a test clock: in each period (a random 0.5 to 1.5 times the
// mean, as bench-duty-cycle makes them) the CPU is busy for `load` percent and the probe runs
// for the rest, updating its meter after every 3 ms of its CPU time (1,024 outer loops on a
// current x86 core), from 1 s of calibration at the start. Returns the credits' times.
std::vector<Clock::time_point> credits_under_load(double load, std::chrono::milliseconds mean,
                                                  std::chrono::seconds timeout,
                                                  std::chrono::seconds length) {
    const Clock::time_point start{};
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> spread(0.5, 1.5);
    monitor::IdleCreditMeter meter;
    std::vector<Clock::time_point> credits;
    std::uint64_t cpu = 1000 * kMs;
    if (meter.update(cpu, start, timeout)) credits.push_back(start);
    std::uint64_t next_update = cpu + 3 * kMs;
    for (Clock::time_point t = start; t < start + length;) {
        const auto period =
            std::chrono::duration_cast<std::chrono::nanoseconds>(mean * spread(rng));
        const auto idle =
            std::chrono::duration_cast<std::chrono::nanoseconds>(period * (100.0 - load) / 100.0);
        t += period - idle;  // busy: the probe does not run
        for (auto ran = 0ns; ran < idle;) {
            const auto step = std::min<std::chrono::nanoseconds>(
                idle - ran, std::chrono::nanoseconds(next_update - cpu));
            ran += step;
            cpu += static_cast<std::uint64_t>(step.count());
            if (cpu < next_update) break;
            if (meter.update(cpu, t + ran, timeout)) credits.push_back(t + ran);
            next_update = cpu + 3 * kMs;
        }
        t += idle;
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
    double load;
    int mean_period_ms;
    int timeout_s;
    double credits_per_s;  // expected: the idle share x 10 s
    bool petted;           // credits keep coming, never further apart than the timeout
};

void PrintTo(const DutyCase& c, std::ostream* os) {
    *os << c.load << " % busy, periods of " << c.mean_period_ms << " ms, timeout " << c.timeout_s
        << " s";
}

class IdleCreditsUnderLoad : public testing::TestWithParam<DutyCase> {};

// MON's rule: the board resets when the IDLE task cannot run for 100 ms within the timeout.
// So a probe keeps earning credits, one per 100 ms of idle time, at every load that leaves it
// 100 ms per timeout (99 % at 10 s), and earns none below that.
TEST_P(IdleCreditsUnderLoad, CreditsComeAsLongAsTheTimeoutHolds100msOfIdleTime) {
    const auto& c = GetParam();
    const auto timeout = std::chrono::seconds(c.timeout_s);
    const auto length = 12 * timeout;
    const auto credits =
        credits_under_load(c.load, std::chrono::milliseconds(c.mean_period_ms), timeout, length);
    const Clock::time_point start{};
    ASSERT_FALSE(credits.empty());
    EXPECT_EQ(credits.front(), start) << "the calibration's idle time earns the first credit";
    // After the first timeout, the backlog is spent and only the load decides.
    const auto from = start + timeout;
    const auto counted = std::ranges::count_if(credits, [&](auto t) { return t >= from; });
    const double seconds = std::chrono::duration<double>(length - timeout).count();
    const auto gap = longest_gap(credits, from, start + length);
    if (c.petted) {
        EXPECT_NEAR(static_cast<double>(counted) / seconds, c.credits_per_s,
                    0.1 * c.credits_per_s + 1.0 / seconds)
            << counted << " credits in " << seconds << " s";
        EXPECT_LT(gap, timeout) << "a watchdog with this timeout would have fired";
    } else {
        EXPECT_EQ(counted, 0) << "the idle time within any timeout is less than 100 ms";
    }
}

// At 99 % with a 10 s timeout the probe gets exactly 100 ms per timeout: the limit. Credits
// then come every 10 s at best, as late as the watchdog allows.
TEST(IdleCredits, NinetyNinePercentIsTheLimitOfATenSecondTimeout) {
    const Clock::time_point start{};
    const auto credits = credits_under_load(99.0, 1000ms, 10s, 120s);
    const auto from = start + 10s;
    const auto counted = std::ranges::count_if(credits, [&](auto t) { return t >= from; });
    EXPECT_LE(counted, 11) << "at most one credit per 10 s in 110 s";
    EXPECT_GE(longest_gap(credits, from, start + 120s), 9900ms);
}

std::string duty_case_name(const testing::TestParamInfo<DutyCase>& info) {
    auto tenths = static_cast<int>(info.param.load * 10 + 0.5);
    return "load" + std::to_string(tenths / 10) + "_" + std::to_string(tenths % 10) + "_period" +
           std::to_string(info.param.mean_period_ms) + "ms_timeout" +
           std::to_string(info.param.timeout_s) + "s";
}

INSTANTIATE_TEST_SUITE_P(
    Duty, IdleCreditsUnderLoad,
    testing::Values(DutyCase{90, 100, 10, 1.0, true}, DutyCase{90, 1000, 10, 1.0, true},
                    DutyCase{95, 100, 10, 0.5, true}, DutyCase{95, 1000, 10, 0.5, true},
                    DutyCase{98, 100, 10, 0.2, true}, DutyCase{98, 1000, 10, 0.2, true},
                    // busy for about 2 s at a time, then 40 ms idle
                    DutyCase{98, 2000, 10, 0.2, true},
                    // SCHED_IDLE's sliver under a nice-0 hog: 40 ms per 10 s, 100 ms in 25 s
                    DutyCase{99.6, 100, 10, 0, false}, DutyCase{99.6, 1000, 10, 0, false},
                    DutyCase{100, 1000, 10, 0, false},
                    // the same sliver keeps a 30 s timeout petted: 120 ms per 30 s
                    DutyCase{99.6, 1000, 30, 0.04, true},
                    // and 95 % is already too much for a 2 s timeout: 100 ms per 2 s
                    DutyCase{96, 100, 2, 0, false}),
    duty_case_name);

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
