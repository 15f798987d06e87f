// CPU time per unit: described cgroup trees (v2, v1 cpuacct, hybrid) with counters the test
// sets, and this machine's own tree with a spinner the test places in a cgroup of its own.
#include "monitor/loading/unit_usage.hpp"

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
using test_support::ScratchDir;
using test_support::write_file;
using Clock = UnitUsage::Clock;
namespace fs = std::filesystem;

// cpu.stat of cgroup v2 with the cpu controller's lines after the three read.
std::string cpu_stat(std::uint64_t usage_us, std::uint64_t user_us, std::uint64_t system_us) {
    return "usage_usec " + std::to_string(usage_us) + "\nuser_usec " + std::to_string(user_us) +
           "\nsystem_usec " + std::to_string(system_us) +
           "\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n";
}

class V2Tree : public ::testing::Test {
  protected:
    void SetUp() override {
        write_file(root() / "cgroup.controllers", "cpuset cpu io memory pids\n");
        write_file(root() / "cpu.stat", cpu_stat(9'000'000, 6'000'000, 3'000'000));
        set("system.slice/a.service", 1'000'000, 800'000, 200'000);
        set("system.slice/b.service", 0, 0, 0);
        set("user.slice/user-1000.slice/user@1000.service", 50'000, 40'000, 10'000);
        // A user's manager's units are its own: never entries.
        set("user.slice/user-1000.slice/user@1000.service/app.slice/x.service", 0, 0, 0);
        set("user.slice/user-1000.slice/session-2.scope", 0, 0, 0);
        // A cgroup no unit names: its leaf is an entry, the directory above it not.
        set("batch/job1", 0, 0, 0);
        write_file(root() / "batch/cpu.stat", cpu_stat(0, 0, 0));
        fs::create_directories(root() / "empty.slice");
    }
    fs::path root() const { return dir_.path(); }
    void set(const std::string& cgroup, std::uint64_t usage, std::uint64_t user,
             std::uint64_t system) {
        write_file(root() / cgroup / "cpu.stat", cpu_stat(usage, user, system));
    }

    ScratchDir dir_{"monitord-cgroups"};
    Clock::time_point t0_ = Clock::now();
};

TEST_F(V2Tree, UnitsAreTheLeavesBelowSlicesAndTheirTimeIsShared) {
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    EXPECT_EQ(u->accounting(), CgroupAccounting::V2);
    EXPECT_EQ(u->root(), root());
    ASSERT_TRUE(u->sample(t0_));
    EXPECT_EQ(u->unit_count(), 5u);  // a, b, user@1000, session-2, /batch/job1
    // One reading: no interval, nothing to say.
    EXPECT_TRUE(u->top(10).empty());

    set("system.slice/a.service", 1'500'000, 1'200'000, 300'000);                 // 0.5 s of 1 s
    set("user.slice/user-1000.slice/user@1000.service", 70'000, 60'000, 10'000);  // 20 ms
    set("batch/job1", 2'000'000, 2'000'000, 0);                                   // two CPUs' worth
    ASSERT_TRUE(u->sample(t0_ + 1s));
    const auto top = u->top(10);
    ASSERT_EQ(top.size(), 3u);  // b and session-2 had no CPU time: left out
    EXPECT_EQ(top[0].unit, "/batch/job1");
    EXPECT_EQ(top[0].cgroup, "/batch/job1");
    EXPECT_DOUBLE_EQ(top[0].cpu, 200);
    EXPECT_EQ(top[1].unit, "a.service");
    EXPECT_EQ(top[1].cgroup, "/system.slice/a.service");
    EXPECT_DOUBLE_EQ(top[1].cpu, 50);
    EXPECT_DOUBLE_EQ(top[1].user, 40);
    EXPECT_DOUBLE_EQ(top[1].system, 10);
    EXPECT_DOUBLE_EQ(top[1].window_avg, 50);
    EXPECT_DOUBLE_EQ(top[1].window_max, 50);
    EXPECT_EQ(top[2].unit, "user@1000.service");
    EXPECT_NEAR(top[2].cpu, 2, 1e-9);

    const auto one = u->top(1);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].unit, "/batch/job1");
    EXPECT_TRUE(u->top(0).empty());
}

TEST_F(V2Tree, TheWindowCoversItsIntervalsAndTheBusiestOfThem) {
    auto u = UnitUsage::open(root(), 3);
    ASSERT_TRUE(u) << u.error().to_string();
    // a.service's CPU time in each second: 100, 300, 200 and 0 ms.
    std::uint64_t usage = 1'000'000;
    ASSERT_TRUE(u->sample(t0_));
    int second = 0;
    for (std::uint64_t ms : {100, 300, 200, 0}) {
        usage += ms * 1000;
        set("system.slice/a.service", usage, usage, 0);
        ASSERT_TRUE(u->sample(t0_ + std::chrono::seconds(++second)));
    }
    auto top = u->top(5);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_DOUBLE_EQ(top[0].cpu, 0);
    // The last 3 intervals: 300, 200 and 0 ms; the first one has left the window.
    EXPECT_NEAR(top[0].window_avg, 500.0 / 3 / 10, 1e-9);
    EXPECT_NEAR(top[0].window_max, 30, 1e-9);

    // A longer window keeps the readings the shorter one had, and grows from there.
    u->set_window(60);
    top = u->top(5);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_NEAR(top[0].window_avg, 500.0 / 3 / 10, 1e-9);
    usage += 400'000;
    set("system.slice/a.service", usage, usage, 0);
    ASSERT_TRUE(u->sample(t0_ + 5s));
    top = u->top(5);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_NEAR(top[0].cpu, 40, 1e-9);
    EXPECT_NEAR(top[0].window_avg, 900.0 / 4 / 10, 1e-9);
    EXPECT_NEAR(top[0].window_max, 40, 1e-9);
    // A shorter one keeps the newest: the last interval alone.
    u->set_window(1);
    top = u->top(5);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_NEAR(top[0].window_avg, 40, 1e-9);
    EXPECT_NEAR(top[0].window_max, 40, 1e-9);
}

TEST_F(V2Tree, UnitsComeAndGo) {
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    fs::remove_all(root() / "system.slice/a.service");
    set("system.slice/c.service", 5'000'000, 5'000'000, 0);
    ASSERT_TRUE(u->sample(t0_ + 1s));
    EXPECT_EQ(u->unit_count(), 5u);  // a went, c came
    // c's first reading: none of its 5 s is this interval's.
    EXPECT_TRUE(u->top(10).empty());
    set("system.slice/c.service", 5'250'000, 5'250'000, 0);
    ASSERT_TRUE(u->sample(t0_ + 2s));
    const auto top = u->top(10);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top[0].unit, "c.service");
    EXPECT_DOUBLE_EQ(top[0].cpu, 25);
}

// Past the budget of open files, a unit's are opened at each reading: the figures are the
// same, and no more files stay open than the budget.
TEST_F(V2Tree, UnitsPastTheBudgetOfOpenFilesAreReadAllTheSame) {
    auto u = UnitUsage::open(root(), 60, 2);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    EXPECT_EQ(u->unit_count(), 5u);
    EXPECT_EQ(u->open_files(), 2u);
    set("system.slice/a.service", 1'100'000, 900'000, 200'000);
    set("system.slice/b.service", 300'000, 300'000, 0);
    set("batch/job1", 500'000, 500'000, 0);
    set("user.slice/user-1000.slice/session-2.scope", 700'000, 700'000, 0);
    set("user.slice/user-1000.slice/user@1000.service", 950'000, 940'000, 10'000);
    ASSERT_TRUE(u->sample(t0_ + 1s));
    const auto top = u->top(10);
    ASSERT_EQ(top.size(), 5u);
    EXPECT_EQ(top[0].unit, "user@1000.service");
    EXPECT_DOUBLE_EQ(top[0].cpu, 90);
    EXPECT_EQ(top[1].unit, "session-2.scope");
    EXPECT_DOUBLE_EQ(top[1].cpu, 70);
    EXPECT_EQ(top[2].unit, "/batch/job1");
    EXPECT_DOUBLE_EQ(top[2].cpu, 50);
    EXPECT_EQ(top[3].unit, "b.service");
    EXPECT_DOUBLE_EQ(top[3].cpu, 30);
    EXPECT_EQ(top[4].unit, "a.service");
    EXPECT_DOUBLE_EQ(top[4].cpu, 10);
    EXPECT_EQ(u->open_files(), 2u);
    // The files of units gone are given back, and taken by those that come.
    for (const char* gone : {"system.slice/a.service", "system.slice/b.service", "batch",
                             "user.slice/user-1000.slice/session-2.scope"}) {
        fs::remove_all(root() / gone);
    }
    ASSERT_TRUE(u->sample(t0_ + 2s));
    EXPECT_EQ(u->unit_count(), 1u);
    EXPECT_LE(u->open_files(), 1u);
    set("system.slice/c.service", 0, 0, 0);
    ASSERT_TRUE(u->sample(t0_ + 3s));
    EXPECT_EQ(u->unit_count(), 2u);
    EXPECT_EQ(u->open_files(), 2u);
}

TEST_F(V2Tree, ACounterThatWentBackStartsTheUnitAgain) {
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    set("system.slice/a.service", 10, 10, 0);  // made again under the same name
    ASSERT_TRUE(u->sample(t0_ + 1s));
    EXPECT_TRUE(u->top(10).empty());
    set("system.slice/a.service", 100'010, 100'010, 0);
    ASSERT_TRUE(u->sample(t0_ + 2s));
    const auto top = u->top(10);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_DOUBLE_EQ(top[0].cpu, 10);
    EXPECT_DOUBLE_EQ(top[0].window_avg, 10);
}

TEST_F(V2Tree, UnreadableCountersAreNamedAndTheOtherUnitsStillRead) {
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    write_file(root() / "system.slice/b.service/cpu.stat", "usage_usec lots\n");
    set("system.slice/a.service", 1'100'000, 900'000, 200'000);
    auto r = u->sample(t0_ + 1s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadData);
    EXPECT_NE(r.error().message.find("system.slice/b.service/cpu.stat"), std::string::npos)
        << r.error().message;
    const auto top = u->top(10);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top[0].unit, "a.service");
    EXPECT_DOUBLE_EQ(top[0].cpu, 10);
}

TEST(UnitUsage, V1CpuacctWhereThereIsNoCgroup2Tree) {
    ScratchDir dir{"monitord-cgroups"};
    const auto acct = dir.path() / "cpu,cpuacct";
    write_file(acct / "cpuacct.usage_user", "7\n");
    write_file(acct / "cpuacct.usage_sys", "3\n");
    write_file(acct / "system.slice/a.service/cpuacct.usage", "1000000000\n");
    write_file(acct / "system.slice/a.service/cpuacct.usage_user", "1000000000\n");
    write_file(acct / "system.slice/a.service/cpuacct.usage_sys", "0\n");
    auto u = UnitUsage::open(dir.path(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    EXPECT_EQ(u->accounting(), CgroupAccounting::V1Cpuacct);
    EXPECT_EQ(u->root(), acct);
    const auto t0 = Clock::now();
    ASSERT_TRUE(u->sample(t0));
    // The ticks' split need not add up to the run time.
    write_file(acct / "system.slice/a.service/cpuacct.usage", "1760000000\n");
    write_file(acct / "system.slice/a.service/cpuacct.usage_user", "1600000000\n");
    write_file(acct / "system.slice/a.service/cpuacct.usage_sys", "150000000\n");
    ASSERT_TRUE(u->sample(t0 + 1s));
    const auto top = u->top(10);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top[0].unit, "a.service");
    EXPECT_NEAR(top[0].cpu, 76, 1e-9);
    EXPECT_NEAR(top[0].user, 60, 1e-9);
    EXPECT_NEAR(top[0].system, 15, 1e-9);

    write_file(acct / "system.slice/a.service/cpuacct.usage_sys", "-\n");
    auto r = u->sample(t0 + 2s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadData);
    EXPECT_NE(r.error().message.find("a.service/cpuacct.usage_sys"), std::string::npos)
        << r.error().message;
}

TEST(UnitUsage, AHybridMachineIsReadFromItsUnifiedTree) {
    ScratchDir dir{"monitord-cgroups"};
    write_file(dir.path() / "cpuacct/cpuacct.usage_user", "7\n");
    write_file(dir.path() / "unified/cgroup.controllers", "\n");
    auto u = UnitUsage::open(dir.path(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    EXPECT_EQ(u->accounting(), CgroupAccounting::V2);
    EXPECT_EQ(u->root(), dir.path() / "unified");
}

TEST(UnitUsage, NoAccountingIsNamed) {
    ScratchDir dir{"monitord-cgroups"};
    auto u = UnitUsage::open(dir.path(), 60);
    ASSERT_FALSE(u);
    EXPECT_EQ(u.error().status, Status::NoDev);
    EXPECT_NE(u.error().message.find(dir.path().string()), std::string::npos);
    EXPECT_NE(u.error().message.find("cpuacct"), std::string::npos) << u.error().message;
}

// A cgroup of the test's own on this machine's tree, and a child that spins on cpu0 in it.
class Spinner {
  public:
    explicit Spinner(const fs::path& cgroup) : cgroup_(cgroup) {
        pid_ = ::fork();
        if (pid_ == 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(0, &set);
            ::sched_setaffinity(0, sizeof set, &set);
            volatile unsigned long n = 0;
            for (;;) {
                n = n + 1;
            }
        }
        std::ofstream(cgroup_ / "cgroup.procs") << pid_ << "\n";
    }
    ~Spinner() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        std::error_code ec;
        // Empty now: rmdir, as a cgroup is removed.
        for (int i = 0; i < 50 && !fs::remove(cgroup_, ec); ++i) std::this_thread::sleep_for(10ms);
    }
    Spinner(const Spinner&) = delete;
    Spinner& operator=(const Spinner&) = delete;

    // The time it ran, from the kernel's own account of the task (schedstat: nanoseconds).
    double ran_ns() const {
        double ns = 0;
        std::ifstream("/proc/" + std::to_string(pid_) + "/schedstat") >> ns;
        return ns;
    }

  private:
    fs::path cgroup_;
    pid_t pid_ = -1;
};

void spinner_is_the_top_unit(const fs::path& cgroup_root) {
    auto u = UnitUsage::open(cgroup_root, 60);
    if (!u) GTEST_SKIP() << u.error().to_string();
    const auto name = "monitord-unit-usage-" + std::to_string(::getpid());
    const auto cgroup = u->root() / name;
    std::error_code ec;
    if (::geteuid() != 0 || !fs::create_directory(cgroup, ec)) {
        GTEST_SKIP() << "cannot make a cgroup in " << u->root() << " (needs root)";
    }
    Spinner spin(cgroup);
    std::this_thread::sleep_for(100ms);
    // Each reading of the tree between two of the spinner's own run time (schedstat), so that
    // the unit's CPU time can be held to the spinner's however the test's thread is
    // scheduled: all of a CPU on a quiet machine, less where another test shares cpu0.
    const double before0 = spin.ran_ns();
    const auto t0 = Clock::now();
    ASSERT_TRUE(u->sample(t0));
    const double after0 = spin.ran_ns();
    std::this_thread::sleep_for(1s);
    const double before1 = spin.ran_ns();
    const auto t1 = Clock::now();
    ASSERT_TRUE(u->sample(t1));
    const double after1 = spin.ran_ns();
    const auto top = u->top(5);
    ASSERT_FALSE(top.empty());
    EXPECT_EQ(top[0].cgroup, "/" + name) << top[0].cgroup << " " << top[0].cpu;
    const double used =
        top[0].cpu / 100 * std::chrono::duration<double, std::nano>(t1 - t0).count();
    // Both are the kernel's run time of the task, each brought up to date at a tick or a
    // switch: 20 ms of slack.
    constexpr double kSlack = 20e6;
    EXPECT_GE(used, before1 - after0 - kSlack) << top[0].cpu;
    EXPECT_LE(used, after1 - before0 + kSlack) << top[0].cpu;
    EXPECT_GE(top[0].cpu, 30) << top[0].cgroup;
    EXPECT_GE(top[0].user, top[0].cpu * 0.9) << top[0].cgroup;
}

TEST(UnitUsageLive, ASpinnerInACgroupIsTheTopUnit) {
    spinner_is_the_top_unit("/sys/fs/cgroup");
}

// The v1 cpuacct hierarchy of a hybrid machine, read as a v1-only machine's.
TEST(UnitUsageLive, ASpinnerInAV1CpuacctGroupIsTheTopUnit) {
    bool found = false;
    for (const char* name : {"cpuacct", "cpu,cpuacct"}) {
        const fs::path acct = fs::path("/sys/fs/cgroup") / name;
        if (!fs::exists(acct / "cpuacct.usage_user")) continue;
        found = true;
        ScratchDir dir{"monitord-cgroups"};
        fs::create_directory_symlink(acct, dir.path() / name);
        spinner_is_the_top_unit(dir.path());
        break;
    }
    if (!found) GTEST_SKIP() << "no cgroup v1 cpuacct hierarchy under /sys/fs/cgroup";
}

}  // namespace
}  // namespace monitor
