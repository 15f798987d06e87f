// What the tests of the MON_* C API (mon_api_*_test.cpp) share: checks of what a call returns
// and of the state MON is in, waiting for the first loading, the threads MON started, a child
// process without privilege, and the fixture. MON has one state per process: every test
// starts with it uninitialized and leaves it so.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "mon.h"
#include "test_support.hpp"

// Bit for bit, so that a NaN equals itself: a snapshot is the same bytes.
bool operator==(const MON_loading& a, const MON_loading& b);
std::ostream& operator<<(std::ostream& os, const MON_loading& l);

namespace mon_api_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// The first sample comes one second after MON_start(); the rest is room for a busy machine.
constexpr auto kFirstSampleWithin = 2500ms;

// `call` returns `expected`; on failure, says what it returned and MON_last_error().
#define EXPECT_MON(call, expected)                                                                \
    do {                                                                                          \
        const MON_status mon_status_ = (call);                                                    \
        EXPECT_EQ(mon_status_, static_cast<MON_status>(expected))                                 \
            << #call << " returned " << MON_status_name(mon_status_) << ": " << MON_last_error(); \
    } while (0)
#define ASSERT_MON(call, expected)                                                                \
    do {                                                                                          \
        const MON_status mon_status_ = (call);                                                    \
        ASSERT_EQ(mon_status_, static_cast<MON_status>(expected))                                 \
            << #call << " returned " << MON_status_name(mon_status_) << ": " << MON_last_error(); \
    } while (0)
// A call in the wrong state: MON_BADSTATE, and MON_last_error() names the call.
#define EXPECT_BADSTATE(call, name)                     \
    do {                                                \
        EXPECT_MON(call, MON_BADSTATE);                 \
        EXPECT_THAT(MON_last_error(), HasSubstr(name)); \
    } while (0)

enum class State { Uninitialized, Initialized, Running };

// Checks the state with calls that change nothing when MON is in it (in another state they
// may change it, but then the test has failed and TearDown cleans up). Overwrites
// MON_last_error().
void ExpectState(State state);
#define EXPECT_STATE(state)                            \
    do {                                               \
        SCOPED_TRACE("MON should be " #state " here"); \
        ExpectState(State::state);                     \
    } while (0)

// Calls `get` until it says something else than MON_NOTRDY, or `within` has passed.
MON_status WaitReady(const std::function<MON_status()>& get,
                     std::chrono::milliseconds within = kFirstSampleWithin);

// Waits for the first loading. Polled often, so that it returns just after a sample: the
// next is about a second away.
MON_status WaitLoading(MON_loading* l);

// Every figure a percentage (NaN is not), the extremes bracketing the averages.
testing::AssertionResult Plausible(const MON_loading& l);

// The online CPUs, from sysfs (or as many as sysconf counts where there is none).
std::vector<int> OnlineCpus();

struct ThreadSched {
    std::string name;
    int policy = -1;
    int rt_priority = -1;
    int nice = 0;
};

// The threads the process had before the first test (the main thread, and any a sanitizer
// runs; ThreadSanitizer starts its own at the first thread creation), which MON did not start.
const std::set<fs::path>& PreexistingThreads();

// The threads started since, other than the calling one, with their scheduling (proc(5)).
std::vector<ThreadSched> OtherThreads();

bool IsIdleProbe(const ThreadSched& t);

// The POLL task: the one thread that is not an IDLE task's.
std::vector<ThreadSched> PollThreads();

// Waits until the threads started since the first test are gone; fails naming those left
// after `within`.
testing::AssertionResult NoOtherThreadWithin(std::chrono::milliseconds within);

// Runs `calls` in a child process that drops root for "nobody" (when it is root), then stops
// and shuts MON down. Returns the child's exit code (what `calls` returned) and, as its out,
// what MON_last_error() said; code 100 when the child could not drop root.
test_support::ChildResult RunAsNobody(const std::function<int()>& calls);

class MonApi : public testing::Test {
  protected:
    void SetUp() override {
        (void)PreexistingThreads();  // taken before any test starts a thread
        MON_loading l{};
        ASSERT_MON(MON_get_loading(&l), MON_BADSTATE);  // a test before left MON uninitialized
    }

    void TearDown() override {
        (void)MON_stop();
        (void)MON_set_watchdog(nullptr, 0);  // a test's watchdog is disarmed
        (void)MON_shutdown();
        MON_loading l{};
        EXPECT_MON(MON_get_loading(&l), MON_BADSTATE);
        EXPECT_TRUE(NoOtherThreadWithin(3000ms)) << "MON_stop() left a task running";
    }
};

}  // namespace mon_api_test
