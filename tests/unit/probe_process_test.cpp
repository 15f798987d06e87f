// Tests of the spinning probes' helper process with the real helper: this test program started
// again with the helper's flag (tests/gtest_main.cpp), as the daemon starts itself. Its probes
// run on this machine's CPUs; their CPU time is read fresh from the kernel, not from the
// helper's last report; the helper leads a session of its own, stops when asked, dies with
// its parent, and one that ended reads as failed probes.
#include "monitor/loading/probe_process.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "test_support.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;
using test_support::wait_until;

bool usable_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(cpu, &set);
}

// The probe process is the daemon's, which a board's build leaves out (-Ddaemon=false); under
// qemu-user the helper would be started by the host's kernel, which cannot run it.
#if defined(__powerpc__)
#define SKIP_WITHOUT_DAEMON() \
    GTEST_SKIP() << "the probe process belongs to the daemon, not built here"
#else
#define SKIP_WITHOUT_DAEMON() (void)0
#endif

// The thread of process `pid` that may run on `cpu` alone (a probe), or 0.
pid_t probe_tid(pid_t pid, int cpu) {
    const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(tasks, ec)) {
        std::ifstream status(e.path() / "status");
        for (std::string line; std::getline(status, line);) {
            if (line == "Cpus_allowed_list:\t" + std::to_string(cpu)) {
                return static_cast<pid_t>(std::stoi(e.path().filename().string()));
            }
        }
    }
    return 0;
}

// The CPU time of a thread as the kernel counts it now (the first figure of its schedstat).
std::uint64_t schedstat_run_ns(pid_t pid, pid_t tid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/schedstat");
    std::uint64_t ns = 0;
    f >> ns;
    return ns;
}

std::unique_ptr<ProbeProcess> start_helper() {
    auto p = ProbeProcess::start("/proc/self/exe");
    EXPECT_TRUE(p) << p.error().to_string();
    return p ? std::move(*p) : nullptr;
}

const ProbeReading* reading(const std::vector<ProbeReading>& rs, int cpu) {
    for (const auto& r : rs) {
        if (r.cpu == cpu) return &r;
    }
    return nullptr;
}

// The CPU time of `cpu`'s probe; a failure when there is none.
std::uint64_t cpu_ns(const ProbeProcess& p, int cpu) {
    for (const auto& r : p.read()) {
        if (r.cpu == cpu) return r.cpu_ns;
    }
    ADD_FAILURE() << "no probe on cpu" << cpu;
    return 0;
}

TEST(ProbeProcess, ProbesRunInTheHelperAndTheirCpuTimeIsReadFresh) {
    SKIP_WITHOUT_DAEMON();
    if (!usable_cpu(0) || !usable_cpu(1)) GTEST_SKIP() << "needs cpu0 and cpu1";
    auto p = start_helper();
    ASSERT_TRUE(p);
    EXPECT_TRUE(p->read().empty()) << "no probe before the first list of CPUs";
    p->set_online({0, 1});
    ASSERT_TRUE(p->wait_calibrated(10s));
    auto rs = p->read();
    ASSERT_EQ(rs.size(), 2u);
    for (const auto& r : rs) {
        EXPECT_EQ(r.state, ProbeState::Running) << r.cpu << ": " << r.error;
        EXPECT_TRUE(r.baseline.has_value()) << r.cpu;
        EXPECT_NE(r.generation, 0u);
    }
    // Its own session: the kernel gives it an autogroup of its own.
    EXPECT_EQ(::getsid(p->pid()), p->pid());
    std::ifstream comm("/proc/" + std::to_string(p->pid()) + "/comm");
    std::string name;
    std::getline(comm, name);
    EXPECT_EQ(name, "monitord-probes");

    // The CPU time read is the kernel's figure of now, not the helper's last report (every
    // 100 ms): never less than the thread's schedstat read just before, while that grows
    // between reads 10 ms apart. A SCHED_IDLE probe on a busy CPU may wait for its turn: the
    // reads go on until the CPU time grew between them five times, for at most 10 s.
    const pid_t tid = probe_tid(p->pid(), 1);
    ASSERT_GT(tid, 0) << "no thread of the helper is bound to cpu1 alone";
    std::uint64_t after = 0;
    int grew = 0;
    for (auto end = std::chrono::steady_clock::now() + 10s;
         grew < 5 && std::chrono::steady_clock::now() < end;) {
        const auto kernel = schedstat_run_ns(p->pid(), tid);
        const auto read = cpu_ns(*p, 1);
        ASSERT_GE(read, kernel) << "after " << grew << " times it grew";
        if (kernel > after) ++grew;
        after = read;
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(grew, 5) << "the probe on cpu1 ran too little to tell in 10 s";
    EXPECT_GE(p->excluded_cpu_ns(1), after);
    EXPECT_EQ(p->excluded_cpu_ns(7), p->excluded_cpu_ns(7)) << "a CPU without a probe: 0";

    // A CPU that goes: its probe stops, and its CPU time stays counted.
    const auto excluded = p->excluded_cpu_ns(1);
    p->set_online({0});
    ASSERT_TRUE(p->wait_calibrated(10s));
    EXPECT_TRUE(wait_until([&] { return reading(p->read(), 1) == nullptr; }, 5s));
    EXPECT_GE(p->excluded_cpu_ns(1), excluded);

    p->stop();
    EXPECT_EQ(p->ended(), "exited with status 0");
    rs = p->read();
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].state, ProbeState::Failed);
    EXPECT_EQ(rs[0].error, "the probe process exited with status 0");
}

TEST(ProbeProcess, AKilledHelperReadsAsFailedProbes) {
    SKIP_WITHOUT_DAEMON();
    if (!usable_cpu(0)) GTEST_SKIP() << "needs cpu0";
    auto p = start_helper();
    ASSERT_TRUE(p);
    p->set_online({0});
    ASSERT_TRUE(p->wait_calibrated(10s));
    const auto spun = cpu_ns(*p, 0);
    ASSERT_EQ(::kill(p->pid(), SIGKILL), 0);
    ASSERT_TRUE(wait_until([&] { return p->ended().has_value(); }, 5s));
    EXPECT_EQ(p->ended(), "was killed by SIGKILL");
    const auto rs = p->read();
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].state, ProbeState::Failed);
    EXPECT_EQ(rs[0].error, "the probe process was killed by SIGKILL");
    EXPECT_GE(rs[0].cpu_ns, spun) << "the CPU time it had stays";
}

// The helper dies with its parent: a daemon killed with SIGKILL leaves no probes spinning.
TEST(ProbeProcess, TheHelperDiesWithItsParent) {
    SKIP_WITHOUT_DAEMON();
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t parent = ::fork();
    ASSERT_GE(parent, 0);
    if (parent == 0) {
        ::close(pipe_fds[0]);
        auto p = ProbeProcess::start("/proc/self/exe");
        pid_t helper = p ? (*p)->pid() : 0;
        (void)::write(pipe_fds[1], &helper, sizeof helper);
        ::_exit(0);  // without stopping it
    }
    ::close(pipe_fds[1]);
    pid_t helper = 0;
    ASSERT_EQ(::read(pipe_fds[0], &helper, sizeof helper), static_cast<ssize_t>(sizeof helper));
    ::close(pipe_fds[0]);
    ::waitpid(parent, nullptr, 0);
    ASSERT_GT(helper, 0);
    // Gone, or a zombie waiting for its new parent to reap it.
    EXPECT_TRUE(wait_until(
        [&] {
            std::ifstream stat("/proc/" + std::to_string(helper) + "/stat");
            std::string text;
            std::getline(stat, text);
            const auto close = text.rfind(')');
            return !stat || close == std::string::npos || text.substr(close + 2, 1) == "Z";
        },
        5s))
        << "helper " << helper << " still runs";
}

TEST(ProbeProcess, AProgramThatIsNoneFailsToStart) {
#if defined(__powerpc__)
    // qemu-user runs posix_spawn's vfork as a fork, so a failed exec is not reported back.
    GTEST_SKIP() << "under qemu-user, posix_spawn does not report a failed exec";
#endif
    auto p = ProbeProcess::start("/nonexistent/monitord");
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message.find("/nonexistent/monitord"), std::string::npos)
        << p.error().message;
}

}  // namespace
}  // namespace monitor
