// Tests of the MON_* C API's task attributes: the IDLE and POLL tasks' scheduling policies,
// priorities and CPUs, what is refused and what a refusal leaves, and that the defaults need
// no privilege.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mon_api_fixture.hpp"
#include "perf_events_probe.hpp"

namespace mon_api_test {
namespace {

// --- Task attributes -------------------------------------------------------------------------

std::string Slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream text;
    text << f.rdbuf();
    return text.str();
}

// A MON_start() refused for its arguments starts nothing: MON stays initialized, without a
// thread or a sample, and can then be started with the defaults.
void ExpectNothingStarted() {
    EXPECT_TRUE(NoOtherThreadWithin(2000ms)) << "a refused MON_start() left a task running";
    MON_loading l{};
    EXPECT_MON(MON_get_loading(&l), MON_NOTRDY);
    EXPECT_STATE(Initialized);
}

TEST_F(MonApi, IdleTaskRefusesRealTimePolicies) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const MON_task_attr fifo{SCHED_FIFO, 1, nullptr, 0};
    EXPECT_MON(MON_start(&fifo, nullptr), MON_BADARG);
    EXPECT_THAT(MON_last_error(), HasSubstr("IDLE"));
    ExpectNothingStarted();
    const MON_task_attr rr{SCHED_RR, 1, nullptr, 0};
    EXPECT_MON(MON_start(&rr, nullptr), MON_BADARG);
    ExpectNothingStarted();

    EXPECT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    EXPECT_STATE(Running);
}

TEST_F(MonApi, UnknownPolicyIsRefused) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const MON_task_attr unknown{12345, 0, nullptr, 0};
    EXPECT_MON(MON_start(&unknown, nullptr), MON_BADARG);
    EXPECT_MON(MON_start(nullptr, &unknown), MON_BADARG);
    const MON_task_attr negative{-1, 0, nullptr, 0};
    EXPECT_MON(MON_start(nullptr, &negative), MON_BADARG);
    ExpectNothingStarted();
}

TEST_F(MonApi, NiceValueOutOfRangeIsRefused) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const MON_task_attr too_nice{SCHED_OTHER, 20, nullptr, 0};
    const MON_task_attr too_greedy{SCHED_OTHER, -21, nullptr, 0};
    const MON_task_attr batch{SCHED_BATCH, 20, nullptr, 0};
    EXPECT_MON(MON_start(&too_nice, nullptr), MON_BADARG);
    EXPECT_MON(MON_start(&too_greedy, nullptr), MON_BADARG);
    EXPECT_MON(MON_start(nullptr, &too_nice), MON_BADARG);
    EXPECT_MON(MON_start(nullptr, &too_greedy), MON_BADARG);
    EXPECT_MON(MON_start(nullptr, &batch), MON_BADARG);
    EXPECT_THAT(MON_last_error(), HasSubstr("20"));
    ExpectNothingStarted();
}

TEST_F(MonApi, CpuCountWithoutCpusIsANullPointer) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const MON_task_attr idle{SCHED_IDLE, 0, nullptr, 1};
    const MON_task_attr poll{SCHED_OTHER, 0, nullptr, 2};
    EXPECT_MON(MON_start(&idle, nullptr), MON_NULLPTR);
    EXPECT_MON(MON_start(nullptr, &poll), MON_NULLPTR);
    ExpectNothingStarted();
}

TEST_F(MonApi, IdleTaskOnOneCpuMonitorsOnlyThatCpu) {
    if (OnlineCpus().size() < 2 || OnlineCpus()[0] != 0) {
        GTEST_SKIP() << "needs cpu0 and another CPU online";
    }
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const int cpus[] = {0};
    const MON_task_attr idle{SCHED_IDLE, 0, cpus, 1};
    ASSERT_MON(MON_start(&idle, nullptr), MON_SUCCESS);

    std::vector<std::string> probes;
    for (const auto& t : OtherThreads()) {
        if (IsIdleProbe(t)) probes.push_back(t.name);
    }
    EXPECT_THAT(probes, testing::ElementsAre("idle-probe/0"));

    MON_loading machine{};
    ASSERT_MON(WaitLoading(&machine), MON_SUCCESS);
    MON_loading cpu0{};
    EXPECT_MON(MON_get_cpu_loading(0, &cpu0), MON_SUCCESS);
    EXPECT_TRUE(Plausible(cpu0));
    // The monitored CPUs together are cpu0 alone.
    EXPECT_NEAR(machine.avg_prev_min, cpu0.avg_prev_min, 1e-6);
    EXPECT_NEAR(machine.max_prev_min, cpu0.max_prev_min, 1e-6);
    MON_loading l{};
    EXPECT_MON(MON_get_cpu_loading(OnlineCpus()[1], &l), MON_BADARG);
    EXPECT_THAT(MON_last_error(), HasSubstr("not monitored"));
}

TEST_F(MonApi, IdleTaskOnAMissingCpuIsRefused) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    for (int cpu : {1000, -1, CPU_SETSIZE}) {
        SCOPED_TRACE("cpu" + std::to_string(cpu));
        const int cpus[] = {0, cpu};
        const MON_task_attr idle{SCHED_IDLE, 0, cpus, 2};
        EXPECT_MON(MON_start(&idle, nullptr), MON_BADARG);
        EXPECT_THAT(MON_last_error(), HasSubstr(std::to_string(cpu)));
        ExpectNothingStarted();
    }
    EXPECT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
}

TEST_F(MonApi, PollTaskOnAMissingCpuIsABadArgument) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const int cpus[] = {1000};
    const MON_task_attr poll{SCHED_OTHER, 0, cpus, 1};
    // As for the IDLE task: a CPU that is not online is a bad argument, not a failed task.
    EXPECT_MON(MON_start(nullptr, &poll), MON_BADARG);
    ExpectNothingStarted();
}

TEST_F(MonApi, IdleTaskTakesANicePolicy) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const MON_task_attr idle{SCHED_BATCH, 19, nullptr, 0};
    ASSERT_MON(MON_start(&idle, nullptr), MON_SUCCESS);
    int probes = 0;
    for (const auto& t : OtherThreads()) {
        if (!IsIdleProbe(t)) continue;
        ++probes;
        EXPECT_EQ(t.policy, SCHED_BATCH) << t.name;
        EXPECT_EQ(t.nice, 19) << t.name;
    }
    EXPECT_EQ(probes, static_cast<int>(OnlineCpus().size()));
    MON_loading l{};
    EXPECT_MON(WaitLoading(&l), MON_SUCCESS);
    EXPECT_TRUE(Plausible(l));
}

TEST_F(MonApi, PollTaskRunsNiced) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const MON_task_attr poll{SCHED_OTHER, 5, nullptr, 0};
    ASSERT_MON(MON_start(nullptr, &poll), MON_SUCCESS);
    const auto threads = PollThreads();
    ASSERT_EQ(threads.size(), 1u);
    EXPECT_EQ(threads[0].policy, SCHED_OTHER);
    EXPECT_EQ(threads[0].nice, 5);
    MON_loading l{};
    EXPECT_MON(WaitLoading(&l), MON_SUCCESS);  // it samples
    EXPECT_TRUE(Plausible(l));
}

TEST_F(MonApi, PollTaskRealTimePriorityMustBeInRange) {
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    for (int policy : {SCHED_FIFO, SCHED_RR}) {
        for (int priority : {0, -1, 100}) {
            SCOPED_TRACE("policy " + std::to_string(policy) + " priority " +
                         std::to_string(priority));
            const MON_task_attr poll{policy, priority, nullptr, 0};
            EXPECT_MON(MON_start(nullptr, &poll), MON_BADARG);
        }
    }
    ExpectNothingStarted();
}

TEST_F(MonApi, PollTaskRunsRealTime) {
    if (::geteuid() != 0) GTEST_SKIP() << "a real-time POLL task needs root (CAP_SYS_NICE)";
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    const MON_task_attr poll{SCHED_FIFO, 1, nullptr, 0};
    const MON_status s = MON_start(nullptr, &poll);
    if (s == MON_TSKSPAWN &&
        std::string{MON_last_error()}.find("CAP_SYS_NICE") != std::string::npos) {
        GTEST_SKIP() << "the kernel refuses real-time scheduling here: " << MON_last_error();
    }
    ASSERT_MON(s, MON_SUCCESS);
    const auto threads = PollThreads();
    ASSERT_EQ(threads.size(), 1u);
    EXPECT_EQ(threads[0].policy, SCHED_FIFO);
    EXPECT_EQ(threads[0].rt_priority, 1);
    MON_loading l{};
    EXPECT_MON(WaitLoading(&l), MON_SUCCESS);
    EXPECT_TRUE(Plausible(l));
}

// The default attributes ask for nothing a program lacks: an unprivileged program started
// with `nice -n 5` can start MON with them. Run in a child process, which can drop root.
TEST_F(MonApi, DefaultAttributesNeedNoPrivilege) {
    const auto r = RunAsNobody([] {
        errno = 0;
        if (::nice(5) == -1 && errno != 0) return 101;
        MON_status s = MON_initialize();
        if (s == MON_SUCCESS) s = MON_start(nullptr, nullptr);
        return static_cast<int>(s);
    });
    if (r.code == 100) GTEST_SKIP() << "cannot switch to an unprivileged user here";
    ASSERT_NE(r.code, 101) << "nice(5) failed in the child";
    EXPECT_EQ(r.code, static_cast<int>(MON_SUCCESS))
        << "MON_start(NULL, NULL) at nice 5 without privilege returned "
        << MON_status_name(static_cast<MON_status>(r.code)) << ": " << r.out;
}

// MON_TSKSPAWN names the task that could not start, as MON's message parameter does: a POLL
// task asking for a real-time policy, an IDLE task for a negative nice value, neither of which
// an unprivileged program may have.
TEST_F(MonApi, TaskThatCannotStartIsNamed) {
    const auto r = RunAsNobody([] {
        MON_status s = MON_initialize();
        if (s != MON_SUCCESS) return 101;
        const MON_task_attr fifo{SCHED_FIFO, 1, nullptr, 0};
        s = MON_start(nullptr, &fifo);
        MON_error_info info{};
        (void)MON_last_error_info(&info);
        if (s != MON_TSKSPAWN) return 102;
        if (std::string{info.task} != "POLL" || info.cpu != -1) return 103;
        static int cpu0 = 0;
        const MON_task_attr greedy{SCHED_OTHER, -5, &cpu0, 1};
        s = MON_start(&greedy, nullptr);
        (void)MON_last_error_info(&info);
        if (s != MON_TSKSPAWN) return 104;
        if (std::string{info.task} != "IDLE" || info.cpu != 0) return 105;
        if (std::string{info.call} != "MON_start" || info.status != MON_TSKSPAWN) return 106;
        return 0;
    });
    if (r.code == 100) GTEST_SKIP() << "cannot switch to an unprivileged user here";
    EXPECT_EQ(r.code, 0) << "101: MON_initialize failed; 102/104: MON_start did not return "
                            "MON_TSKSPAWN for the POLL/IDLE task; 103/105: the task or CPU was "
                            "not named; 106: the call or status fields. Last error: "
                         << r.out;
}

// A POLL task held by a callback that does not return: MON_stop waits MON_TASK_STOP_MS and
// says so (MON_TSKJOIN, the POLL task); MON stays stopping, and the next MON_stop, once the
// callback has returned, stops it.
TEST_F(MonApi, StopSaysWhenThePollTaskDoesNotEnd) {
    SKIP_WITHOUT_PERF_EVENTS();
    static std::atomic<int> in_callback{0};
    static std::atomic<bool> release{false};
    in_callback = 0;
    release = false;
    struct Release {  // however the test ends, the callback returns
        ~Release() { release = true; }
    } guard;
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    const MON_perf_config config{
        {"perf::TASK-CLOCK:u", nullptr, nullptr, nullptr}, MON_PERF_THREAD, 0, 0};
    ASSERT_MON(MON_collect_perf_stats(
                   &config, 20, nullptr,
                   [](MON_status, const MON_perf_stats*, void*) {
                       in_callback = 1;
                       while (!release) std::this_thread::sleep_for(1ms);
                   },
                   nullptr),
               MON_SUCCESS);
    const auto until = Clock::now() + 10s;
    while (in_callback == 0 && Clock::now() < until) std::this_thread::sleep_for(1ms);
    ASSERT_EQ(in_callback, 1) << "the collection's callback never came";

    const auto t0 = Clock::now();
    EXPECT_MON(MON_stop(), MON_TSKJOIN);
    const auto waited = Clock::now() - t0;
    EXPECT_GE(waited, std::chrono::milliseconds(MON_TASK_STOP_MS));
    MON_error_info info{};
    ASSERT_MON(MON_last_error_info(&info), MON_SUCCESS);
    EXPECT_EQ(info.status, static_cast<MON_status>(MON_TSKJOIN));
    EXPECT_STREQ(info.call, "MON_stop");
    EXPECT_STREQ(info.task, "POLL");
    EXPECT_EQ(info.cpu, -1);
    EXPECT_THAT(MON_last_error(), HasSubstr("call MON_stop again"));

    // Stopping: nothing starts or shuts down; the loading can still be read.
    EXPECT_MON(MON_start(nullptr, nullptr), MON_BADSTATE);
    ASSERT_MON(MON_last_error_info(&info), MON_SUCCESS);
    EXPECT_EQ(info.state, static_cast<unsigned>(MON_STATE_STOPPING));
    EXPECT_MON(MON_shutdown(), MON_BADSTATE);

    release = true;
    EXPECT_MON(MON_stop(), MON_SUCCESS);
    EXPECT_STATE(Initialized);
}

// An IDLE thread that gets no CPU time (here frozen by the cgroup v1 freezer, as a real-time
// task that takes its CPU would starve it): MON_stop stops MON all the same and says which
// thread did not end (MON_TSKJOIN, the IDLE task, its CPU); the thread ends once it runs.
TEST_F(MonApi, StopSaysWhenAnIdleThreadDoesNotEnd) {
#if defined(__powerpc__)
    GTEST_SKIP() << "under qemu-user, a frozen thread would stall the emulator's other threads "
                    "(it stops them all for some system calls)";
#endif
    const fs::path freezer = "/sys/fs/cgroup/freezer";
    if (::geteuid() != 0 || !fs::exists(freezer / "tasks")) {
        GTEST_SKIP() << "needs root and the cgroup v1 freezer (" << freezer << ")";
    }
    const auto cpus = OnlineCpus();
    const int cpu = cpus.back();
    const MON_task_attr idle{SCHED_IDLE, 0, &cpu, 1};
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_start(&idle, nullptr), MON_SUCCESS);
    MON_loading l{};
    ASSERT_MON(WaitLoading(&l), MON_SUCCESS);

    const std::string name = "idle-probe/" + std::to_string(cpu);
    std::string tid;
    for (const auto& t : fs::directory_iterator("/proc/self/task")) {
        if (Slurp(t.path() / "comm") == name + "\n") {
            tid = t.path().filename().string();
        }
    }
    ASSERT_FALSE(tid.empty()) << "no thread named " << name;
    const fs::path group = freezer / ("mon-api-test-" + std::to_string(::getpid()));
    ASSERT_TRUE(fs::create_directory(group)) << group;
    const auto write = [](const fs::path& f, const std::string& v) {
        std::ofstream(f) << v << std::flush;
    };
    write(group / "tasks", tid);
    write(group / "freezer.state", "FROZEN");
    for (int i = 0; i < 500 && Slurp(group / "freezer.state") != "FROZEN\n"; ++i) {
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(Slurp(group / "freezer.state"), "FROZEN\n");

    EXPECT_MON(MON_stop(), MON_TSKJOIN);
    MON_error_info info{};
    ASSERT_MON(MON_last_error_info(&info), MON_SUCCESS);
    EXPECT_STREQ(info.task, "IDLE");
    EXPECT_EQ(info.cpu, cpu);
    EXPECT_THAT(MON_last_error(), HasSubstr("cpu" + std::to_string(cpu)));
    EXPECT_STATE(Initialized);  // stopped all the same

    write(group / "freezer.state", "THAWED");
    const auto gone = fs::path("/proc/self/task") / tid;
    for (int i = 0; i < 500 && fs::exists(gone); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(fs::exists(gone)) << "the IDLE thread did not end once thawed";
    EXPECT_TRUE(fs::remove(group)) << group;
}

}  // namespace
}  // namespace mon_api_test
