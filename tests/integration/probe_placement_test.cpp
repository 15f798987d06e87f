// The spinning probes in their process of their own, placed by the real daemon where they
// yield to the busy threads of every other scheduling group: a busy process in another
// session, or in another cgroup under the cpu controller, keeps at least 98.5 % of the CPU it
// gets without them, and the probe source reads its CPU at least 95 % busy. Where no place
// does (a daemon without the right to make one, in a cgroup of its own), the probes sleep
// instead and the daemon says why; a process moved out of its place is placed again.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "cgroups.hpp"
#include "daemon_process.hpp"

namespace itest {
namespace {

// A normal-priority process spinning on `cpu` until the end of the scope: in a session of its
// own, and in `cgroup` when given.
class Busy {
  public:
    Busy(int cpu, const CpuCgroup* cgroup) {
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ == 0) {
            // It dies with the test, should the test crash before the destructor runs.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(0);
            ::setsid();
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(static_cast<std::size_t>(cpu), &set);
            ::sched_setaffinity(0, sizeof set, &set);
            for (;;) asm volatile("" ::: "memory");
        }
        if (pid_ > 0 && cgroup != nullptr) {
            EXPECT_EQ(cgroup->add(pid_), "");
        }
    }
    ~Busy() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

    // Its share of a CPU over `window`, from its run time in schedstat.
    double share(std::chrono::milliseconds window) const {
        const auto t0 = std::chrono::steady_clock::now();
        const double r0 = run_seconds();
        std::this_thread::sleep_for(window);
        const double r1 = run_seconds();
        return (r1 - r0) /
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }

  private:
    double run_seconds() const {
        std::ifstream in("/proc/" + std::to_string(pid_) + "/schedstat");
        double ns = 0;
        in >> ns;
        return ns / 1e9;
    }
    pid_t pid_ = -1;
};

// The load of `cpu` over the window so far from `source`, or -1.
double window_load(const nlohmann::json& loading, int cpu, const char* source) {
    for (const auto& c : loading["cpus"]) {
        if (c["cpu"] == cpu && c[source].is_object())
            return c[source]["avg_prev_min"].get<double>();
    }
    return -1;
}

enum class Where { OtherSession, OtherCgroup };

class ProbePlacement : public testing::TestWithParam<Where> {};

TEST_P(ProbePlacement, ABusyProcessElsewhereKeepsItsCpuAndReadsBusy) {
    std::unique_ptr<CpuCgroup> cgroup;
    if (GetParam() == Where::OtherCgroup) {
        std::string why_not;
        cgroup = CpuCgroup::make("monitord-test-busy-" + std::to_string(::getpid()), why_not);
        if (!cgroup) GTEST_SKIP() << why_not;
    }
    const int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    if (cpus < 2) GTEST_SKIP() << "needs two CPUs";
    const int cpu = cpus - 1;
    Busy busy(cpu, cgroup.get());
    std::this_thread::sleep_for(500ms);
    const double alone = busy.share(3s);

    // As the README's command runs it: from a shell, not as a service.
    auto d = Daemon::start({.args = {"--probe", "spin", "--history-seconds", "4"}});
    ASSERT_TRUE(d);
    const auto status = d->call("GetStatus");
    ASSERT_EQ(status["probe_mode"], "spin") << status.dump();
    const auto& group = status["probe_group"];
    ASSERT_TRUE(group.is_object()) << status.dump();
    EXPECT_TRUE(group["yields"].get<bool>()) << group.dump();
    EXPECT_TRUE(status.value("probe_fallback", nlohmann::json()).is_null()) << status.dump();
    std::this_thread::sleep_for(1s);  // the groups' loads settle
    const double beside = busy.share(4s);
    const auto loading = d->call("GetLoading", {{"per_cpu", true}});
    const double probe = window_load(loading, cpu, "probe");
    std::printf(
        "busy process on cpu%d, %s, probes in %s %s: %.2f %% of the CPU alone, %.2f %% "
        "beside the spinning probes (%.2f %% kept); the probe source read %.1f %% "
        "busy\n",
        cpu, GetParam() == Where::OtherCgroup ? "another cgroup" : "another session",
        group["kind"].get<std::string>().c_str(), group["name"].get<std::string>().c_str(),
        100 * alone, 100 * beside, 100 * beside / alone, probe);
    EXPECT_GE(beside / alone, 0.985) << "the probes took CPU from a busy process elsewhere";
    EXPECT_GE(probe, 95.0) << loading.dump();
}

std::string where_name(const testing::TestParamInfo<Where>& info) {
    return info.param == Where::OtherCgroup ? "OtherCgroup" : "OtherSession";
}

INSTANTIATE_TEST_SUITE_P(Busy, ProbePlacement,
                         testing::Values(Where::OtherSession, Where::OtherCgroup), where_name);

// A daemon that may not make a cgroup (nobody), started in a cgroup of its own under the cpu
// controller: no place where spinning probes would yield, so they sleep, and the daemon says
// why in its log, its status, monctl status and the exporter.
TEST(ProbeFallback, WithoutAPlaceThatYieldsTheProbesSleepAndTheDaemonSaysWhy) {
    std::string why_not;
    auto cgroup = CpuCgroup::make("monitord-test-daemon-" + std::to_string(::getpid()), why_not);
    if (!cgroup) GTEST_SKIP() << why_not;
    ScratchDir dir{ScratchDir::Everyone};
    Daemon::Options o;
    o.args = {"--probe", "spin"};
    o.socket = (dir.path() / "monitord.sock").string();
    o.spawn.uid = nobody_uid();
    o.spawn.cgroup = cgroup->path().string();
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    const auto status = d->call("GetStatus");
    EXPECT_EQ(status["probe_mode"], "sleep") << status.dump();
    ASSERT_TRUE(status.value("probe_fallback", nlohmann::json()).is_string()) << status.dump();
    const std::string why = status["probe_fallback"];
    EXPECT_NE(why.find(cgroup->path().filename().string()), std::string::npos) << why;
    EXPECT_EQ(status["sources"], nlohmann::json::array({"procstat"})) << status.dump();
    EXPECT_NE(d->log().find("Spinning probes were asked for, but"), std::string::npos) << d->log();
    auto shown = d->monctl({"status"});
    EXPECT_NE(shown.out.find("warning: spinning probes were asked for, but"), std::string::npos)
        << shown.out;
}

// The place is checked every few ticks: a process moved out of it (as by a cgroup manager) is
// placed again.
TEST(ProbePlacementKept, AHelperMovedOutIsPlacedAgain) {
    std::string why_not;
    auto elsewhere = CpuCgroup::make("monitord-test-move-" + std::to_string(::getpid()), why_not);
    if (!elsewhere) GTEST_SKIP() << why_not;
    auto d = Daemon::start({.args = {"--probe", "spin"}});
    ASSERT_TRUE(d);
    auto group = d->call("GetStatus")["probe_group"];
    if (group["kind"] != "cgroup") {
        GTEST_SKIP() << "the daemon placed its probes in no cgroup of its own: " << group.dump();
    }
    // The helper: the daemon's child named monitord-probes.
    pid_t helper = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        std::ifstream comm(e.path() / "comm");
        std::string name;
        if (!std::getline(comm, name) || name != "monitord-probes") continue;
        std::ifstream stat(e.path() / "stat");
        std::string text;
        std::getline(stat, text);
        const auto close = text.rfind(')');
        std::istringstream fields(close == std::string::npos ? "" : text.substr(close + 2));
        std::string state;
        pid_t parent = 0;
        fields >> state >> parent;
        if (parent == d->pid()) helper = std::stoi(e.path().filename().string());
    }
    ASSERT_GT(helper, 0);
    ASSERT_EQ(elsewhere->add(helper), "");
    const auto placed_again = [&] {
        std::ifstream in("/proc/" + std::to_string(helper) + "/cgroup");
        for (std::string line; std::getline(in, line);) {
            if (line.ends_with(":" + group["name"].get<std::string>())) return true;
        }
        return false;
    };
    EXPECT_TRUE(test_support::wait_until(placed_again, 10s)) << d->log();
    EXPECT_NE(d->log().find("placed again"), std::string::npos) << d->log();
}

}  // namespace
}  // namespace itest
