// The naming thread of a profile: what it is handed is named in order, its intervals and its
// whole profile come back through its descriptor in the order asked, and a batch past its
// backlog is counted as unnamed, never silently dropped. The samples are the idle task's, named
// without reading any file; the daemon's profiles (tests/integration/perf_profile_test.cpp)
// name real programs through it, one of them on a file system that stalls.
#include "monitor/perf/profile_namer.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace monitor::perf {
namespace {

// `n` samples of the idle task on `cpu`, at times from `t0` on.
SampleBatch idle_samples(std::size_t n, int cpu, std::uint64_t t0 = 0) {
    SampleBatch b;
    for (std::size_t i = 0; i < n; ++i) {
        const Sample s{.ip = 0xffffffff81000000,
                       .pid = 0,
                       .tid = 0,
                       .cpu = cpu,
                       .time_ns = t0 + i,
                       .period = 1,
                       .mode = SampleMode::Kernel};
        b.entries.push_back({s.time_ns, true, b.samples.size()});
        b.samples.push_back({s, 0});
    }
    b.drains.push_back({cpu, {.samples = n}});
    return b;
}

std::unique_ptr<ProfileBuilder> idle_builder() {
    return std::make_unique<ProfileBuilder>(ProfileBuilderOptions{.by_cpu = true, .kernel = false});
}

// What `namer` sends until `count` came (at most 10 s).
std::vector<ProfileNamer::Named> collect(ProfileNamer& namer, std::size_t count) {
    std::vector<ProfileNamer::Named> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
        pollfd p{.fd = namer.fd(), .events = POLLIN, .revents = 0};
        if (::poll(&p, 1, 100) != 1) continue;
        for (auto& n : namer.take()) out.push_back(std::move(n));
    }
    return out;
}

TEST(ProfileNamer, IntervalsAndTheWholeComeInTheOrderAsked) {
    auto namer = ProfileNamer::start(idle_builder());
    ASSERT_TRUE(namer) << namer.error().to_string();
    (*namer)->add(idle_samples(3, 0));
    (*namer)->end_interval();
    (*namer)->add(idle_samples(2, 1, 10));
    (*namer)->end_interval();
    (*namer)->add(idle_samples(1, 1, 20));
    (*namer)->finish();
    const auto named = collect(**namer, 3);
    ASSERT_EQ(named.size(), 3u);
    EXPECT_FALSE(named[0].whole);
    EXPECT_EQ(named[0].profile.report().samples, 3u);
    EXPECT_FALSE(named[1].whole);
    EXPECT_EQ(named[1].profile.report().samples, 2u);
    ASSERT_TRUE(named[2].whole);
    const auto whole = named[2].profile.report();
    EXPECT_EQ(whole.samples, 6u);
    EXPECT_EQ(whole.modes.idle, 6u);
    ASSERT_FALSE(whole.functions.empty());
    EXPECT_EQ(whole.functions[0].name, "[idle]");
    ASSERT_EQ(whole.cpus.size(), 2u);
    EXPECT_EQ(whole.cpus[1].report.samples, 3u);
    EXPECT_EQ((*namer)->backlog(), 0u);
}

// A backlog of 2 samples: a batch of 3 can never wait, and is counted as unnamed on its
// CPUs; the next batch of 2 is named.
TEST(ProfileNamer, ABatchPastTheBacklogIsCountedAsUnnamed) {
    auto namer = ProfileNamer::start(idle_builder(), 2);
    ASSERT_TRUE(namer) << namer.error().to_string();
    auto batch = idle_samples(2, 0);
    auto more = idle_samples(1, 1, 5);
    batch.entries.push_back({5, true, batch.samples.size()});
    batch.samples.push_back(more.samples[0]);
    (*namer)->add(std::move(batch));
    (*namer)->add(idle_samples(2, 1, 10));
    (*namer)->finish();
    const auto named = collect(**namer, 1);
    ASSERT_EQ(named.size(), 1u);
    const auto whole = named[0].profile.report();
    EXPECT_EQ(whole.samples, 2u);
    EXPECT_EQ(whole.unnamed, 3u);
    EXPECT_EQ(whole.lost, 0u);
    ASSERT_EQ(whole.cpus.size(), 2u);
    EXPECT_EQ(whole.cpus[0].report.unnamed, 2u);
    EXPECT_EQ(whole.cpus[1].report.unnamed, 1u);
    EXPECT_EQ(whole.cpus[1].report.samples, 2u);
}

// The naming threads of this process (named "profile-names"), once their number has settled
// at `expected` or after 10 s.
std::size_t naming_threads(std::size_t expected) {
    auto count = [] {
        std::size_t n = 0;
        for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
            std::ifstream comm(task.path() / "comm");
            std::string name;
            if (std::getline(comm, name) && name == "profile-names") ++n;
        }
        return n;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto n = count();
    while (n != expected && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        n = count();
    }
    return n;
}

// The namer ended while its thread names a large batch, with another queued: its owner does
// not wait, and the thread ends on its own once the batch is named, dropping the other.
TEST(ProfileNamer, AThreadLeftNamingEndsOnItsOwn) {
    ASSERT_EQ(naming_threads(0), 0u) << "the other tests' threads did not end";
    {
        auto namer = ProfileNamer::start(idle_builder());
        ASSERT_TRUE(namer) << namer.error().to_string();
        (*namer)->add(idle_samples(200'000, 0));
        (*namer)->add(idle_samples(10, 1));
        EXPECT_EQ(naming_threads(1), 1u);
    }
    EXPECT_EQ(naming_threads(0), 0u);
}

// Dropped samples are counted as their CPUs' unnamed; the task records stay, in order, so that
// later samples of the same processes are still named.
TEST(SampleBatch, DroppedSamplesAreCountedAndTheTaskRecordsStay) {
    auto b = idle_samples(3, 2);
    b.entries.insert(b.entries.begin() + 1, {1, false, 0});
    b.tasks.push_back({TaskRecord{.kind = TaskRecord::Kind::Exec, .pid = 42}, "app"});
    b.drop_samples();
    ASSERT_EQ(b.entries.size(), 1u);
    EXPECT_FALSE(b.entries[0].is_sample);
    EXPECT_TRUE(b.samples.empty());
    ASSERT_EQ(b.tasks.size(), 1u);
    ASSERT_EQ(b.drains.size(), 2u);
    EXPECT_EQ(b.drains[1].first, 2);
    EXPECT_EQ(b.drains[1].second.unnamed, 3u);
}

}  // namespace
}  // namespace monitor::perf
