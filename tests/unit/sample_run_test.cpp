// A sample run's pacing, on real sample rings (the task clock samples on any machine): a watch
// of overflows hands each sample to its observer and ends at its duration; a profile's
// intervals and its whole come back named, in order, each with the time it covers; a process
// sampled until it exits ends when it exits; finish() ends it early, once; bad paces are
// refused naming the value.
#include "monitor/runtime/sample_run.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/caller_rights.hpp"
#include "monitor/perf/event_catalog.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;
using Clock = SampleRun::Clock;

std::int64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A thread of this process burning CPU until destroyed.
class Spinner {
  public:
    Spinner()
        : thread_([this] {
              volatile std::uint64_t sink = 0;
              while (!stop_) sink = sink + 1;
          }) {}
    ~Spinner() {
        stop_ = true;
        thread_.join();
    }

  private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// Samples process `pid` on its task clock every `period_ns`, on every online CPU; nullptr and
// `why` when this machine cannot.
std::unique_ptr<perf::ProfileSession> sample_process(pid_t pid, std::uint64_t period_ns,
                                                     bool profile, std::string& why) {
    auto catalog = perf::EventCatalog::create();
    if (!catalog) {
        why = catalog.error().to_string();
        return nullptr;
    }
    auto online = read_online_cpus("/sys");
    if (!online) {
        why = online.error().to_string();
        return nullptr;
    }
    perf::ProfileOptions o{.event = "perf::TASK-CLOCK",
                           .rate = {.period = period_ns},
                           .target = {.kind = perf::TargetKind::Process, .pid = pid},
                           .cpus = *online,
                           .ring_pages = 64,
                           .user = true,
                           .kernel = false,
                           .profile = profile};
    auto s = perf::ProfileSession::start(*catalog, std::move(o));
    if (!s) {
        why = s.error().to_string();
        return nullptr;
    }
    return std::move(*s);
}

// Drives `run` as an event loop does (its descriptors polled until its next due time) until
// it is done or `limit` passed; every step, in order.
std::vector<SampleRun::Step> drive(SampleRun& run, std::chrono::milliseconds limit) {
    std::vector<SampleRun::Step> steps;
    const auto deadline = Clock::now() + limit;
    while (!run.done() && Clock::now() < deadline) {
        std::vector<pollfd> fds;
        for (int fd : run.fds()) fds.push_back({.fd = fd, .events = POLLIN, .revents = 0});
        const auto until = std::min(run.next_due(), deadline);
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
        ::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(wait.count(), 0)));
        auto step = run.advance(Clock::now());
        EXPECT_TRUE(step) << step.error().to_string();
        if (!step) break;
        steps.push_back(std::move(*step));
    }
    return steps;
}

TEST(SampleRun, AWatchHandsEachSampleToItsObserverAndEndsAtItsDuration) {
    Spinner spinner;
    std::string why;
    auto session = sample_process(::getpid(), 1'000'000, false, why);  // every 1 ms
    if (!session) GTEST_SKIP() << "cannot sample here: " << why;
    std::uint64_t seen = 0;
    const auto started = Clock::now();
    auto run = SampleRun::start(std::move(session), {.duration = 300ms, .drain = 10ms}, started, {},
                                [&](const perf::Sample&) { ++seen; });
    ASSERT_TRUE(run) << run.error().to_string();
    EXPECT_LE((*run)->next_due(), started + 10ms) << "the first drain is due after 10 ms";

    const auto steps = drive(**run, 5s);
    ASSERT_TRUE((*run)->done());
    ASSERT_FALSE(steps.empty());
    int ended = 0;
    for (const auto& s : steps) {
        EXPECT_FALSE(s.interval_ended) << "a run without an interval ends none";
        EXPECT_TRUE(s.named.empty()) << "a watch names nothing";
        if (s.ended) {
            ++ended;
            EXPECT_EQ(*s.ended, SampleRun::End::Duration);
        }
    }
    EXPECT_EQ(ended, 1);
    EXPECT_TRUE(steps.back().ended) << "the end is the last step";
    EXPECT_GE(Clock::now() - started, 300ms);
    // 300 ms of a spinning thread's task clock, every 1 ms: about 300 (fewer on a busy machine).
    EXPECT_GT(seen, 30u);
    EXPECT_EQ((*run)->next_due(), Clock::time_point::max());
    EXPECT_TRUE((*run)->fds().empty()) << "nothing is left to watch";
    // Over: another step does nothing.
    auto again = (*run)->advance(Clock::now());
    ASSERT_TRUE(again);
    EXPECT_FALSE(again->ended);
}

TEST(SampleRun, AProfileComesBackNamedIntervalByIntervalThenWhole) {
    Spinner spinner;
    std::string why;
    auto session = sample_process(::getpid(), 1'000'000, true, why);
    if (!session) GTEST_SKIP() << "cannot sample here: " << why;
    const auto started = Clock::now();
    auto run =
        SampleRun::start(std::move(session), {.duration = 450ms, .interval = 100ms}, started);
    ASSERT_TRUE(run) << run.error().to_string();
    EXPECT_EQ((*run)->fds().size(), (*run)->session().fds().size() + 1)
        << "the rings and the namer's descriptor";

    const auto steps = drive(**run, 10s);
    ASSERT_TRUE((*run)->done());
    std::vector<SampleRun::Named> named;
    int intervals = 0;
    for (const auto& s : steps) {
        intervals += s.interval_ended ? 1 : 0;
        for (const auto& n : s.named) named.push_back(n);
    }
    // At 100, 200, 300 and 400 ms of 450; a step more than an interval late (a busy machine)
    // misses one rather than ending two at once.
    EXPECT_GE(intervals, 3);
    EXPECT_LE(intervals, 4);
    ASSERT_EQ(named.size(), static_cast<std::size_t>(intervals) + 1) << "the intervals, the whole";
    std::uint64_t in_intervals = 0;
    for (std::size_t i = 0; i + 1 < named.size(); ++i) {
        EXPECT_FALSE(named[i].whole) << i;
        const auto from = i == 0 ? started : named[i - 1].to;
        EXPECT_EQ(named[i].from, from) << "interval " << i << " starts where the last ended";
        // Intervals keep their schedule: none ends before its point (100 ms, 200 ms, ...
        // after the start). A step that came late makes its interval long and the next one
        // short, as a second missed makes it later still.
        EXPECT_GE(named[i].to - started, 100ms * static_cast<int>(i + 1)) << i;
        in_intervals += named[i].profile.report(1).samples;
    }
    const auto& whole = named.back();
    EXPECT_TRUE(whole.whole);
    EXPECT_EQ(whole.from, started);
    EXPECT_GE(whole.to - whole.from, 450ms);
    const auto total = whole.profile.report(1).samples;
    EXPECT_GT(total, 40u);
    EXPECT_LE(in_intervals, total) << "the intervals are parts of the whole";
    EXPECT_TRUE((*run)->fds().empty());
}

TEST(SampleRun, AProcessSampledUntilItExitsEndsWhenItExits) {
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // Burns 200 ms of CPU once told to, and exits.
        char c = 0;
        (void)!::read(go[0], &c, 1);
        // In user mode (the one sampled): the clock is read between long loops.
        const std::int64_t end = thread_cpu_ns() + 200'000'000;
        volatile std::uint64_t sink = 0;
        while (thread_cpu_ns() < end) {
            for (int i = 0; i < 100'000; ++i) sink = sink + 1;
        }
        ::_exit(0);
    }
    ::close(go[0]);
    std::string why;
    auto session = sample_process(child, 1'000'000, false, why);
    auto pin = perf::PinnedProcess::pin(child);
    if (!session) {
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
        GTEST_SKIP() << "cannot sample here: " << why;
    }
    ASSERT_TRUE(pin) << pin.error().to_string();
    std::uint64_t seen = 0;
    auto run = SampleRun::start(std::move(session), {}, Clock::now(), pin->release(),
                                [&](const perf::Sample&) { ++seen; });
    ASSERT_TRUE(run) << run.error().to_string();
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    ::close(go[1]);
    const auto steps = drive(**run, 20s);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE((*run)->done()) << "still sampling after 20 s";
    ASSERT_TRUE(steps.back().ended);
    EXPECT_EQ(*steps.back().ended, SampleRun::End::Exited);
    EXPECT_GT(seen, 100u) << "200 ms of the child's CPU, every 1 ms";
}

TEST(SampleRun, FinishEndsItEarlyOnce) {
    Spinner spinner;
    std::string why;
    auto session = sample_process(::getpid(), 1'000'000, true, why);
    if (!session) GTEST_SKIP() << "cannot sample here: " << why;
    const auto started = Clock::now();
    auto run = SampleRun::start(std::move(session), {.duration = 60s}, started);
    ASSERT_TRUE(run) << run.error().to_string();
    std::this_thread::sleep_for(100ms);
    auto step = (*run)->finish(Clock::now());
    ASSERT_TRUE(step) << step.error().to_string();
    ASSERT_TRUE(step->ended);
    EXPECT_EQ(*step->ended, SampleRun::End::Finished);
    EXPECT_TRUE((*run)->ended());
    auto again = (*run)->finish(Clock::now());
    ASSERT_TRUE(again);
    EXPECT_FALSE(again->ended) << "it ended once";
    // The whole comes back named, covering the 100 ms, not the minute asked for.
    std::vector<SampleRun::Named> named = std::move(again->named);
    // Naming reads this test's own symbols: seconds under a loaded parallel test run (5 s
    // fell short once); drive() returns as soon as the run is done.
    for (const auto& s : drive(**run, 30s)) {
        for (const auto& n : s.named) named.push_back(n);
    }
    ASSERT_EQ(named.size(), 1u);
    EXPECT_TRUE(named[0].whole);
    EXPECT_LT(named[0].to - named[0].from, 10s);
}

TEST(SampleRunOptions, BadPacesAreRefusedNamingTheValue) {
    EXPECT_TRUE((SampleRunOptions{.duration = 1s, .interval = 100ms}.check()));
    EXPECT_TRUE((SampleRunOptions{}.check())) << "until the process exits";
    auto drain = SampleRunOptions{.drain = 0ms}.check();
    ASSERT_FALSE(drain);
    EXPECT_EQ(drain.error().status, Status::BadArg);
    EXPECT_NE(drain.error().message.find("drain of 0 ms"), std::string::npos)
        << drain.error().message;
    auto interval = SampleRunOptions{.duration = 100ms, .interval = 200ms}.check();
    ASSERT_FALSE(interval);
    EXPECT_NE(interval.error().message.find("interval of 200 ms"), std::string::npos)
        << interval.error().message;
}

}  // namespace
}  // namespace monitor
