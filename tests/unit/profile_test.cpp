// PC sampling on this thread through a real sample ring (the task clock samples on any
// machine): two functions that burn CPU 3:1 get 75 % and 25 % of the samples by name, a
// histogram over the first one's addresses sums to its share, samples the ring had no room
// for are reported lost, and bad rates and address ranges are refused.
#include "monitor/perf/profile.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <string>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "monitor/perf/sample_ring.hpp"

extern "C" {
// Burn this thread's CPU for `ns` of its CPU time.
[[gnu::noinline, gnu::used]] void monitord_profile_burn_three(std::int64_t ns);
[[gnu::noinline, gnu::used]] void monitord_profile_burn_one(std::int64_t ns);
}

namespace {

std::int64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

extern "C" {
void monitord_profile_burn_three(std::int64_t ns) {
    const std::int64_t end = thread_cpu_ns() + ns;
    volatile std::uint64_t sink = 0;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 100'000; ++i) sink = sink + static_cast<std::uint64_t>(i);
    }
}
void monitord_profile_burn_one(std::int64_t ns) {
    const std::int64_t end = thread_cpu_ns() + ns;
    volatile std::uint64_t sink = 0;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 100'000; ++i) sink = sink + static_cast<std::uint64_t>(i);
    }
}
}

namespace monitor::perf {
namespace {

using namespace std::chrono_literals;

EventSpec task_clock() {
    auto c = EventCatalog::create();
    EXPECT_TRUE(c) << c.error().to_string();
    auto s = c->resolve("perf::TASK-CLOCK");
    EXPECT_TRUE(s) << s.error().to_string();
    return *s;
}

OpenTarget this_thread() {
    return {.pid = static_cast<pid_t>(::syscall(SYS_gettid))};
}

// Opens a task-clock sample ring on this thread, or says why the test cannot run.
std::unique_ptr<SampleRing> ring_or_skip(SampleRate rate, std::size_t pages, std::string& why) {
    auto r = SampleRing::open(task_clock(), this_thread(), rate, pages);
    if (!r) {
        why = r.error().to_string();
        return nullptr;
    }
    return std::move(*r);
}

TEST(Profile, TwoFunctionsBurningThreeToOneGetThreeQuartersAndAQuarter) {
    std::string why;
    auto ring = ring_or_skip({.period = 1'000'000}, 512, why);  // every 1 ms of task clock
    if (!ring) GTEST_SKIP() << "cannot sample here: " << why;
    Profile profile;
    AddressNames names;
    auto drain = [&] { profile.add(ring->drain([&](const Sample& s) { profile.add(s, names); })); };
    ASSERT_TRUE(ring->enable());
    // 1.2 s of CPU in chunks of 30 + 10 ms; the ring holds it all, drained at the end so
    // that naming the samples is not sampled.
    for (int i = 0; i < 30; ++i) {
        monitord_profile_burn_three(30'000'000);
        monitord_profile_burn_one(10'000'000);
    }
    ASSERT_TRUE(ring->disable());
    drain();

    const auto report = profile.report();
    ASSERT_GT(report.samples, 1000u) << "about 1200 samples were due";
    EXPECT_EQ(report.lost, 0u);
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    auto share = [&](const std::string& function) {
        for (const auto& l : report.functions) {
            if (l.name == function + " (" + exe + ")") return l.percent;
        }
        return -1.0;
    };
    const double three = share("monitord_profile_burn_three");
    const double one = share("monitord_profile_burn_one");
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(5, report.functions.size()); ++i) {
        top +=
            fmt::format("  {:5.1f} % {}\n", report.functions[i].percent, report.functions[i].name);
    }
    EXPECT_NEAR(three, 75.0, 5.0) << top;
    EXPECT_NEAR(one, 25.0, 5.0) << top;
    EXPECT_EQ(report.modes.user + report.modes.kernel + report.modes.idle + report.modes.other,
              report.samples);
    EXPECT_GT(report.modes.user, report.samples * 9 / 10) << "the burners run in user mode";
    EXPECT_EQ(report.modes.idle, 0u) << "this thread is never the idle task";

    // A histogram over the first function's own addresses holds its share, bucket by bucket.
    auto sym = find_process_symbol(::getpid(), "monitord_profile_burn_three");
    ASSERT_TRUE(sym) << sym.error().to_string();
    ASSERT_GT(sym->size, 0u);
    auto h = profile.histogram(sym->address, sym->address + sym->size);
    ASSERT_TRUE(h) << h.error().to_string();
    EXPECT_EQ(h->buckets.size(), (sym->size + 3) / 4);
    EXPECT_EQ(std::accumulate(h->buckets.begin(), h->buckets.end(), std::uint64_t{0}), h->samples);
    EXPECT_NEAR(100.0 * static_cast<double>(h->samples) / static_cast<double>(report.samples),
                three, 0.01)
        << "the range holds exactly the function's samples";
    std::printf(
        "%llu samples: burn_three %.1f %%, burn_one %.1f %%; the range of burn_three "
        "(%llu bytes) %llu samples\n",
        static_cast<unsigned long long>(report.samples), three, one,
        static_cast<unsigned long long>(sym->size), static_cast<unsigned long long>(h->samples));
}

// A ring too small for what comes between two drains: the kernel drops the rest and says so,
// and the profile reports it.
TEST(Profile, SamplesTheRingHadNoRoomForAreReportedLost) {
    std::string why;
    auto ring = ring_or_skip({.period = 100'000}, 1, why);  // every 0.1 ms, one page
    if (!ring) GTEST_SKIP() << "cannot sample here: " << why;
    Profile profile;
    AddressNames names;
    ASSERT_TRUE(ring->enable());
    monitord_profile_burn_one(200'000'000);  // about 2000 samples; a page holds under 100
    profile.add(ring->drain([&](const Sample& s) { profile.add(s, names); }));
    monitord_profile_burn_one(5'000'000);  // the kernel reports the loss once it has room
    ASSERT_TRUE(ring->disable());
    profile.add(ring->drain([&](const Sample& s) { profile.add(s, names); }));
    const auto report = profile.report();
    auto counted = ring->count();
    ASSERT_TRUE(counted) << counted.error().to_string();
    const std::uint64_t due = *counted / 100'000;
    EXPECT_GT(report.lost, 1000u) << report.samples << " samples kept";
    EXPECT_LT(report.samples, 500u);
    // Within 2 %: under load a few samples fall due at the very end, as the event is disabled.
    EXPECT_NEAR(static_cast<double>(report.samples + report.lost), static_cast<double>(due),
                0.02 * static_cast<double>(due))
        << "kept and lost make up what was due: " << report.samples << " kept, " << report.lost
        << " lost, " << due << " due";
}

TEST(Profile, BadRatesAndRangesAreRefused) {
    auto none = SampleRing::open(task_clock(), this_thread(), {});
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().status, Status::BadArg);
    EXPECT_NE(none.error().message.find("one of the two"), std::string::npos);
    auto both = SampleRing::open(task_clock(), this_thread(), {.period = 10, .frequency = 10});
    ASSERT_FALSE(both);
    auto pages = SampleRing::open(task_clock(), this_thread(), {.period = 1'000'000}, 3);
    ASSERT_FALSE(pages);
    EXPECT_NE(pages.error().message.find("a power of two"), std::string::npos);

    Profile p;
    auto empty = p.histogram(0x1000, 0x1000);
    ASSERT_FALSE(empty);
    EXPECT_NE(empty.error().message.find("0x1000-0x1000 is empty"), std::string::npos);
    auto zero = p.histogram(0x1000, 0x2000, 0);
    ASSERT_FALSE(zero);
    auto terabyte = p.histogram(0, std::uint64_t{1} << 40);
    ASSERT_FALSE(terabyte);
    EXPECT_NE(terabyte.error().message.find("give a narrower range or buckets of 1048576 bytes"),
              std::string::npos)
        << terabyte.error().message;
    auto wide = p.histogram(0, std::uint64_t{1} << 40, 1 << 20);
    ASSERT_TRUE(wide) << wide.error().to_string();
    EXPECT_EQ(wide->buckets.size(), 1u << 20);
}

}  // namespace
}  // namespace monitor::perf
