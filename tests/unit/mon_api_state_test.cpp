// Tests of the MON_* C API (mon.h) as a program uses it: the state machine and every call made
// in the wrong state, NULL pointers, the loading it reports, the status names and last-error
// text, and calls from several threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <latch>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mon_api_fixture.hpp"

namespace mon_api_test {
namespace {

// --- The state machine ---------------------------------------------------------------------

TEST_F(MonApi, UninitializedAcceptsOnlyInitialize) {
    MON_loading l{};
    EXPECT_BADSTATE(MON_start(nullptr, nullptr), "MON_start");
    EXPECT_BADSTATE(MON_stop(), "MON_stop");
    EXPECT_BADSTATE(MON_shutdown(), "MON_shutdown");
    EXPECT_BADSTATE(MON_get_loading(&l), "MON_get_loading");
    EXPECT_BADSTATE(MON_get_cpu_loading(0, &l), "MON_get_cpu_loading");
    EXPECT_STATE(Uninitialized);

    EXPECT_MON(MON_initialize(), MON_SUCCESS);
    EXPECT_STATE(Initialized);
}

TEST_F(MonApi, InitializedAcceptsStartAndShutdown) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    EXPECT_BADSTATE(MON_initialize(), "MON_initialize");
    EXPECT_BADSTATE(MON_stop(), "MON_stop");
    MON_loading l{};
    EXPECT_MON(MON_get_loading(&l), MON_NOTRDY);  // never started: no sample
    EXPECT_STATE(Initialized);

    EXPECT_MON(MON_shutdown(), MON_SUCCESS);
    EXPECT_STATE(Uninitialized);
    // And round again.
    EXPECT_MON(MON_initialize(), MON_SUCCESS);
    EXPECT_MON(MON_shutdown(), MON_SUCCESS);
    EXPECT_STATE(Uninitialized);
}

TEST_F(MonApi, RunningAcceptsOnlyStopAndQueries) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    MON_loading l{};
    EXPECT_MON(MON_get_loading(&l), MON_NOTRDY);  // the first sample is a second away
    EXPECT_BADSTATE(MON_initialize(), "MON_initialize");
    EXPECT_BADSTATE(MON_start(nullptr, nullptr), "MON_start");
    EXPECT_BADSTATE(MON_shutdown(), "MON_shutdown");
    EXPECT_STATE(Running);

    EXPECT_MON(MON_stop(), MON_SUCCESS);
    EXPECT_STATE(Initialized);
    EXPECT_MON(MON_shutdown(), MON_SUCCESS);
    EXPECT_STATE(Uninitialized);
}

TEST_F(MonApi, RunningReportsTheLoadingOfTheMachineAndOfEachCpu) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    MON_loading l{};
    ASSERT_MON(WaitLoading(&l), MON_SUCCESS);
    EXPECT_TRUE(Plausible(l));

    for (int cpu : OnlineCpus()) {
        SCOPED_TRACE("cpu" + std::to_string(cpu));
        MON_loading c{};
        EXPECT_MON(WaitReady([&] { return MON_get_cpu_loading(cpu, &c); }), MON_SUCCESS);
        EXPECT_TRUE(Plausible(c));
    }
    EXPECT_MON(MON_get_cpu_loading(1000, &l), MON_BADARG);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_get_cpu_loading"));
    EXPECT_MON(MON_get_cpu_loading(-1, &l), MON_BADARG);
    EXPECT_STATE(Running);
}

TEST_F(MonApi, StartRunsOneIdleThreadPerCpuAndAPollThread) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);

    std::set<std::string> idle;
    for (const auto& t : OtherThreads()) {
        if (!IsIdleProbe(t)) continue;
        EXPECT_EQ(t.policy, SCHED_IDLE) << t.name;
        idle.insert(t.name);
    }
    std::set<std::string> expected;
    for (int cpu : OnlineCpus()) expected.insert("idle-probe/" + std::to_string(cpu));
    EXPECT_EQ(idle, expected);

    const auto poll = PollThreads();
    ASSERT_EQ(poll.size(), 1u);
    EXPECT_EQ(poll[0].policy, SCHED_OTHER);
    EXPECT_EQ(poll[0].nice, 0);
}

TEST_F(MonApi, StopKeepsTheLoadingAsItWas) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    MON_loading l{};
    ASSERT_MON(WaitLoading(&l), MON_SUCCESS);  // just after a sample: no other for a while

    const std::vector<int> cpus = OnlineCpus();
    MON_loading before{};
    std::vector<MON_loading> cpu_before(cpus.size());
    ASSERT_MON(MON_get_loading(&before), MON_SUCCESS);
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        ASSERT_MON(MON_get_cpu_loading(cpus[i], &cpu_before[i]), MON_SUCCESS);
    }
    ASSERT_MON(MON_stop(), MON_SUCCESS);
    EXPECT_BADSTATE(MON_stop(), "MON_stop");

    MON_loading after{};
    EXPECT_MON(MON_get_loading(&after), MON_SUCCESS);
    EXPECT_EQ(after, before);
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        MON_loading c{};
        EXPECT_MON(MON_get_cpu_loading(cpus[i], &c), MON_SUCCESS);
        EXPECT_EQ(c, cpu_before[i]) << "cpu" << cpus[i];
    }
    // Nothing samples any more: past the next second the figures are still the same.
    std::this_thread::sleep_for(1200ms);
    EXPECT_MON(MON_get_loading(&after), MON_SUCCESS);
    EXPECT_EQ(after, before);
    EXPECT_TRUE(NoOtherThreadWithin(1000ms)) << "the tasks still run after MON_stop()";
    EXPECT_STATE(Initialized);
}

TEST_F(MonApi, StartsAgainAfterStop) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    ASSERT_MON(MON_stop(), MON_SUCCESS);

    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    EXPECT_STATE(Running);
    MON_loading l{};
    EXPECT_MON(MON_get_loading(&l), MON_NOTRDY);  // a new run: no sample of its own yet
    EXPECT_MON(WaitLoading(&l), MON_SUCCESS);
    EXPECT_TRUE(Plausible(l));
    EXPECT_MON(MON_stop(), MON_SUCCESS);
    EXPECT_MON(MON_shutdown(), MON_SUCCESS);
    EXPECT_STATE(Uninitialized);
}

TEST_F(MonApi, ShutdownOnlyAfterStopAndForgetsTheLoading) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    MON_loading l{};
    ASSERT_MON(WaitLoading(&l), MON_SUCCESS);
    EXPECT_BADSTATE(MON_shutdown(), "MON_shutdown");
    EXPECT_STATE(Running);
    ASSERT_MON(MON_stop(), MON_SUCCESS);
    EXPECT_MON(MON_shutdown(), MON_SUCCESS);
    EXPECT_STATE(Uninitialized);

    // A new initialization starts from nothing: the last run's loading is gone.
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    EXPECT_MON(MON_get_loading(&l), MON_NOTRDY);
}

// --- NULL pointers ---------------------------------------------------------------------------

// NULL is checked before the state: MON_NULLPTR in every state, which stays as it was.
void ExpectNullRejected() {
    EXPECT_MON(MON_get_loading(nullptr), MON_NULLPTR);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_get_loading"));
    EXPECT_MON(MON_get_cpu_loading(0, nullptr), MON_NULLPTR);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_get_cpu_loading"));
    EXPECT_MON(MON_get_cpu_loading(1000, nullptr), MON_NULLPTR);
}

TEST_F(MonApi, NullPointersAreRejectedInEveryState) {
    {
        SCOPED_TRACE("uninitialized");
        ExpectNullRejected();
        EXPECT_STATE(Uninitialized);
    }
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    {
        SCOPED_TRACE("initialized");
        ExpectNullRejected();
        EXPECT_STATE(Initialized);
    }
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    {
        SCOPED_TRACE("running");
        ExpectNullRejected();
        EXPECT_STATE(Running);
    }
    ASSERT_MON(MON_stop(), MON_SUCCESS);
    {
        SCOPED_TRACE("stopped");
        ExpectNullRejected();
        EXPECT_STATE(Initialized);
    }
}

// --- Status names and the last error ---------------------------------------------------------

TEST_F(MonApi, EveryStatusHasItsOwnNameAndMessage) {
    std::set<std::string> names;
    std::set<std::string> messages;
    for (MON_status s = MON_SUCCESS; s <= MON_BADDATA; ++s) {
        ASSERT_NE(MON_status_name(s), nullptr);
        ASSERT_NE(MON_status_message(s), nullptr);
        const std::string name = MON_status_name(s);
        const std::string message = MON_status_message(s);
        EXPECT_FALSE(name.empty()) << s;
        EXPECT_FALSE(message.empty()) << s;
        EXPECT_TRUE(names.insert(name).second) << "two codes are named " << name;
        EXPECT_TRUE(messages.insert(message).second) << "two codes say " << message;
        EXPECT_NE(name, "UNKNOWN");
    }
    EXPECT_EQ(names.size(), MON_BADDATA + 1u);
    for (MON_status s : {MON_BADDATA + 1u, 9999u, ~0u}) {
        EXPECT_STREQ(MON_status_name(s), "UNKNOWN") << s;
        ASSERT_NE(MON_status_message(s), nullptr);
        EXPECT_STRNE(MON_status_message(s), "") << s;
        EXPECT_EQ(messages.count(MON_status_message(s)), 0u) << s;
    }
}

// mon.h: MON_status_name() gives "MON_PRFRUN" for MON_PRFRUN.
TEST_F(MonApi, StatusNamesAreTheConstantNames) {
    const std::vector<std::pair<MON_status, const char*>> constants = {
        {MON_SUCCESS, "MON_SUCCESS"},   {MON_ALLOCMEM, "MON_ALLOCMEM"},
        {MON_ALLOCMTX, "MON_ALLOCMTX"}, {MON_ALLOCWUT, "MON_ALLOCWUT"},
        {MON_BADSTATE, "MON_BADSTATE"}, {MON_FREEMEM, "MON_FREEMEM"},
        {MON_FREEMTX, "MON_FREEMTX"},   {MON_FREEWUT, "MON_FREEWUT"},
        {MON_LOCKMTX, "MON_LOCKMTX"},   {MON_NOTRDY, "MON_NOTRDY"},
        {MON_NULLPTR, "MON_NULLPTR"},   {MON_POLSLEEP, "MON_POLSLEEP"},
        {MON_PRFRUN, "MON_PRFRUN"},     {MON_TSKJOIN, "MON_TSKJOIN"},
        {MON_TSKSPAWN, "MON_TSKSPAWN"}, {MON_NOPMU, "MON_NOPMU"},
        {MON_PERM, "MON_PERM"},         {MON_NOEVENT, "MON_NOEVENT"},
        {MON_NODEV, "MON_NODEV"},       {MON_BUSY, "MON_BUSY"},
        {MON_IOERR, "MON_IOERR"},       {MON_BADARG, "MON_BADARG"},
        {MON_BADDATA, "MON_BADDATA"},
    };
    ASSERT_EQ(constants.size(), MON_BADDATA + 1u);
    for (const auto& [status, name] : constants) EXPECT_STREQ(MON_status_name(status), name);
}

// Whatever the failure, MON_last_error() says which call failed.
TEST_F(MonApi, EveryFailureNamesItsCall) {
    MON_loading l{};
    EXPECT_MON(MON_get_loading(&l), MON_BADSTATE);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_get_loading"));
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    EXPECT_MON(MON_get_loading(&l), MON_NOTRDY);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_get_loading"));

    const MON_task_attr fifo{SCHED_FIFO, 1, nullptr, 0};
    EXPECT_MON(MON_start(&fifo, nullptr), MON_BADARG);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_start"));
    const MON_task_attr no_cpus{SCHED_IDLE, 0, nullptr, 1};
    EXPECT_MON(MON_start(&no_cpus, nullptr), MON_NULLPTR);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_start"));

    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    EXPECT_MON(MON_get_loading(&l), MON_NOTRDY);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_get_loading"));
    EXPECT_MON(MON_get_cpu_loading(0, &l), MON_NOTRDY);
    EXPECT_THAT(MON_last_error(), HasSubstr("MON_get_cpu_loading"));
}

// MON_BADSTATE's parameters as the MON package gives them: the states the call is valid in,
// and the state MON was in.
TEST_F(MonApi, BadStateSaysTheValidStatesAndTheCurrentOne) {
    MON_error_info info{};
    const auto expect = [&](const char* name, unsigned valid, unsigned state) {
        ASSERT_MON(MON_last_error_info(&info), MON_SUCCESS);
        EXPECT_EQ(info.status, static_cast<MON_status>(MON_BADSTATE)) << name;
        EXPECT_STREQ(info.call, name);
        EXPECT_EQ(info.valid_states, valid) << name;
        EXPECT_EQ(info.state, state) << name;
        EXPECT_STREQ(info.message, MON_last_error());
        EXPECT_STREQ(info.task, "") << name;
    };
    EXPECT_MON(MON_start(nullptr, nullptr), MON_BADSTATE);
    expect("MON_start", MON_STATE_INITIALIZED, MON_STATE_UNINITIALIZED);
    EXPECT_MON(MON_stop(), MON_BADSTATE);
    expect("MON_stop", MON_STATE_RUNNING, MON_STATE_UNINITIALIZED);
    MON_loading l{};
    EXPECT_MON(MON_get_loading(&l), MON_BADSTATE);
    expect("MON_get_loading", MON_STATE_INITIALIZED | MON_STATE_RUNNING | MON_STATE_STOPPING,
           MON_STATE_UNINITIALIZED);

    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    EXPECT_MON(MON_initialize(), MON_BADSTATE);
    expect("MON_initialize", MON_STATE_UNINITIALIZED, MON_STATE_INITIALIZED);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    EXPECT_MON(MON_shutdown(), MON_BADSTATE);
    expect("MON_shutdown", MON_STATE_INITIALIZED, MON_STATE_RUNNING);
    EXPECT_MON(MON_set_watchdog("/dev/watchdog", 10), MON_BADSTATE);
    expect("MON_set_watchdog", MON_STATE_INITIALIZED, MON_STATE_RUNNING);
    EXPECT_MON(MON_pet_watchdog(), MON_BADSTATE);
    expect("MON_pet_watchdog", MON_STATE_UNINITIALIZED | MON_STATE_INITIALIZED, MON_STATE_RUNNING);

    // Another failure replaces them all; a success leaves them.
    EXPECT_MON(MON_get_cpu_loading(-1, &l), MON_BADARG);
    ASSERT_MON(MON_last_error_info(&info), MON_SUCCESS);
    EXPECT_EQ(info.status, static_cast<MON_status>(MON_BADARG));
    EXPECT_STREQ(info.call, "MON_get_cpu_loading");
    EXPECT_EQ(info.valid_states, 0u);
    EXPECT_EQ(info.state, 0u);
    EXPECT_EQ(info.cpu, -1);
    ASSERT_MON(MON_stop(), MON_SUCCESS);
    ASSERT_MON(MON_last_error_info(&info), MON_SUCCESS);
    EXPECT_STREQ(info.call, "MON_get_cpu_loading");
    EXPECT_MON(MON_last_error_info(nullptr), MON_NULLPTR);
}

TEST_F(MonApi, LastErrorBelongsToTheThread) {
    std::string fresh = "not called";
    MON_error_info fresh_info{};
    fresh_info.status = MON_IOERR;
    std::thread([&] {
        fresh = MON_last_error();
        (void)MON_last_error_info(&fresh_info);
    }).join();
    EXPECT_EQ(fresh, "");
    EXPECT_EQ(fresh_info.status, static_cast<MON_status>(MON_SUCCESS));
    EXPECT_STREQ(fresh_info.call, "");
    EXPECT_STREQ(fresh_info.message, "");

    EXPECT_MON(MON_stop(), MON_BADSTATE);
    const std::string mine = MON_last_error();
    EXPECT_THAT(mine, HasSubstr("MON_stop"));
    std::string theirs;
    std::thread([&] {
        (void)MON_get_loading(nullptr);
        theirs = MON_last_error();
    }).join();
    EXPECT_THAT(theirs, HasSubstr("MON_get_loading"));
    EXPECT_EQ(MON_last_error(), mine);  // another thread's failure is not this thread's
}

// --- Several threads -------------------------------------------------------------------------

TEST_F(MonApi, QueriesFromSeveralThreadsWhileRunning) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    const std::vector<int> cpus = OnlineCpus();
    std::atomic<int> ready{0};
    std::atomic<int> not_ready{0};
    std::atomic<int> wrong{0};
    std::latch go(5);
    std::vector<std::thread> threads;
    for (int i = 0; i < 5; ++i) {
        threads.emplace_back([&, i] {
            go.arrive_and_wait();
            for (int n = 0; n < 200; ++n) {
                MON_loading l{};
                // Four threads ask for the machine, the fifth for each CPU in turn.
                const MON_status s =
                    i < 4 ? MON_get_loading(&l) : MON_get_cpu_loading(cpus[n % cpus.size()], &l);
                if (s == MON_SUCCESS && Plausible(l)) {
                    ++ready;
                } else if (s == MON_NOTRDY) {
                    ++not_ready;
                } else {
                    ++wrong;
                }
                std::this_thread::sleep_for(10ms);
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(ready + not_ready + wrong, 1000);
    EXPECT_GT(ready.load(), 0) << "no sample in the two seconds the threads asked";
    EXPECT_STATE(Running);
}

// Calls that change the state, made by several threads at once: exactly one of each wins.
TEST_F(MonApi, ConcurrentControlCallsAreSerialised) {
    constexpr int kThreads = 4;
    auto race = [](const std::function<MON_status()>& call) {
        std::latch go(kThreads);
        std::atomic<int> success{0};
        std::atomic<int> bad_state{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < kThreads; ++i) {
            threads.emplace_back([&] {
                go.arrive_and_wait();
                const MON_status s = call();
                if (s == MON_SUCCESS) ++success;
                if (s == MON_BADSTATE) ++bad_state;
            });
        }
        for (auto& t : threads) t.join();
        return std::pair{success.load(), bad_state.load()};
    };
    EXPECT_EQ(race(MON_initialize), std::pair(1, kThreads - 1));
    EXPECT_STATE(Initialized);
    EXPECT_EQ(race([] { return MON_start(nullptr, nullptr); }), std::pair(1, kThreads - 1));
    EXPECT_STATE(Running);
    EXPECT_EQ(race(MON_stop), std::pair(1, kThreads - 1));
    EXPECT_STATE(Initialized);
    EXPECT_EQ(race(MON_shutdown), std::pair(1, kThreads - 1));
    EXPECT_STATE(Uninitialized);
}

// Readers go on while another thread stops and restarts MON: each read is a loading, or not
// ready yet, never a wrong state or garbage.
TEST_F(MonApi, QueriesWhileAnotherThreadStopsAndStarts) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    std::atomic<bool> done{false};
    std::atomic<int> reads{0};
    std::atomic<int> wrong{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < 2; ++i) {
        readers.emplace_back([&] {
            while (!done) {
                MON_loading l{};
                const MON_status s = MON_get_loading(&l);
                if (!(s == MON_NOTRDY || (s == MON_SUCCESS && Plausible(l)))) ++wrong;
                ++reads;
                std::this_thread::sleep_for(1ms);
            }
        });
    }
    for (int round = 0; round < 3; ++round) {
        std::this_thread::sleep_for(200ms);
        EXPECT_MON(MON_stop(), MON_SUCCESS);
        std::this_thread::sleep_for(50ms);
        EXPECT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    }
    done = true;
    for (auto& t : readers) t.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GT(reads.load(), 0);
    EXPECT_STATE(Running);
}

}  // namespace
}  // namespace mon_api_test
