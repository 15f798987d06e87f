// CPU time per unit: described cgroup trees (v2, v1 cpuacct, hybrid) with counters the test
// sets, and this machine's own tree with a spinner the test places in a cgroup of its own.
#include "monitor/loading/unit_usage.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "monitor/unique_fd.hpp"
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

// A cgroup2 tree as the kernel keeps it: every directory has a cpu.stat, and a directory's
// counters are what its children used (set() adds a cgroup's growth to every directory above
// it; a counter set lower, a cgroup made again, grows them by its new value).
class V2Tree : public ::testing::Test {
  protected:
    void SetUp() override {
        write_file(root() / "cgroup.controllers", "cpuset cpu io memory pids\n");
        for (const char* dir : {"", "system.slice", "user.slice", "user.slice/user-1000.slice",
                                "batch", "empty.slice"}) {
            set(dir, 0, 0, 0);
        }
        set("system.slice/a.service", 1'000'000, 800'000, 200'000);
        set("system.slice/b.service", 0, 0, 0);
        set("user.slice/user-1000.slice/user@1000.service", 50'000, 40'000, 10'000);
        // A user's manager's units are its own: never entries.
        set("user.slice/user-1000.slice/user@1000.service/app.slice/x.service", 0, 0, 0);
        set("user.slice/user-1000.slice/session-2.scope", 0, 0, 0);
        // A cgroup no unit names: its leaf is an entry, the directory above it not.
        set("batch/job1", 0, 0, 0);
    }
    fs::path root() const { return dir_.path(); }
    void set(const std::string& cgroup, std::uint64_t usage, std::uint64_t user,
             std::uint64_t system) {
        const auto old = counters_[cgroup];
        const Counters now{usage, user, system};
        const Counters grew =
            usage >= old.usage ? Counters{usage - old.usage, user - old.user, system - old.system}
                               : now;
        put(cgroup, now);
        for (auto up = fs::path(cgroup).parent_path(); !up.empty(); up = up.parent_path()) {
            auto& c = counters_[up.string()];
            put(up.string(), {c.usage + grew.usage, c.user + grew.user, c.system + grew.system});
        }
    }
    // A unit's own cpu.stat, its directory's left as they are: a tree the kernel never shows.
    void set_alone(const std::string& cgroup, std::uint64_t usage) {
        write_file(root() / cgroup / "cpu.stat", cpu_stat(usage, usage, 0));
    }

    // a.service removed and c.service made between two samples.
    void units_come_and_go(UnitUsage& u) {
        ASSERT_TRUE(u.sample(t0_));
        EXPECT_EQ(u.unit_count(), 5u);
        fs::remove_all(root() / "system.slice/a.service");
        set("system.slice/c.service", 5'000'000, 5'000'000, 0);
        ASSERT_TRUE(u.sample(t0_ + 1s));
        EXPECT_EQ(u.unit_count(), 5u);  // a went, c came
        // c's first reading: none of its 5 s is this interval's.
        EXPECT_TRUE(u.top(10).empty());
        set("system.slice/c.service", 5'250'000, 5'250'000, 0);
        ASSERT_TRUE(u.sample(t0_ + 2s));
        const auto top = u.top(10);
        ASSERT_EQ(top.size(), 1u);
        EXPECT_EQ(top[0].unit, "c.service");
        EXPECT_DOUBLE_EQ(top[0].cpu, 25);
    }

    ScratchDir dir_{"monitord-cgroups"};
    Clock::time_point t0_ = Clock::now();

  private:
    struct Counters {
        std::uint64_t usage = 0, user = 0, system = 0;
    };
    void put(const std::string& cgroup, Counters c) {
        counters_[cgroup] = c;
        write_file(root() / cgroup / "cpu.stat", cpu_stat(c.usage, c.user, c.system));
    }
    std::map<std::string, Counters> counters_;
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

// The listed units' CPU pressure, from their cpu.pressure (PSI's avg10), where the kernel
// keeps one; a unit without the file, or with text that is not the kernel's, has none.
TEST_F(V2Tree, TheListedUnitsPressure) {
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    write_file(root() / "system.slice/a.service/cpu.pressure",
               "some avg10=37.50 avg60=10.00 avg300=2.00 total=4000000\n"
               "full avg10=1.00 avg60=0.00 avg300=0.00 total=10\n");
    write_file(root() / "batch/job1/cpu.pressure", "some avg10=lots\n");
    ASSERT_TRUE(u->sample(t0_));
    set("system.slice/a.service", 1'500'000, 1'200'000, 300'000);
    set("batch/job1", 2'000'000, 2'000'000, 0);
    set("user.slice/user-1000.slice/user@1000.service", 70'000, 60'000, 10'000);
    ASSERT_TRUE(u->sample(t0_ + 1s));
    const auto top = u->top(10);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[1].unit, "a.service");
    ASSERT_TRUE(top[1].pressure);
    EXPECT_DOUBLE_EQ(*top[1].pressure, 37.5);
    EXPECT_EQ(top[0].unit, "/batch/job1");
    EXPECT_FALSE(top[0].pressure) << "not the kernel's text";
    EXPECT_EQ(top[2].unit, "user@1000.service");
    EXPECT_FALSE(top[2].pressure) << "no file";
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
    units_come_and_go(*u);
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
    // The files of cgroups gone are given back, and taken by those that come.
    for (const char* gone : {"system.slice/a.service", "system.slice/b.service", "batch",
                             "user.slice", "empty.slice"}) {
        fs::remove_all(root() / gone);
    }
    ASSERT_TRUE(u->sample(t0_ + 2s));
    EXPECT_EQ(u->unit_count(), 0u);
    EXPECT_EQ(u->open_files(), 1u);  // system.slice's
    set("system.slice/c.service", 0, 0, 0);
    ASSERT_TRUE(u->sample(t0_ + 3s));
    EXPECT_EQ(u->unit_count(), 1u);
    EXPECT_EQ(u->open_files(), 2u);
}

// A slice whose time did not grow is read alone: its units' counters are not (a unit's made
// unreadable is not noticed until its slice grows).
TEST_F(V2Tree, TheUnitsOfASliceThatDidNotGrowAreNotRead) {
    for (int k = 0; k < 50; ++k) set("idle.slice/u" + std::to_string(k) + ".service", 0, 0, 0);
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    const auto all = u->last_reads();
    EXPECT_EQ(u->unit_count(), 55u);
    // Every cgroup: the 6 directories walked into (the slices, batch), and the 55 units.
    EXPECT_EQ(all, 6u + 55u) << all;
    write_file(root() / "idle.slice/u7.service/cpu.stat", "usage_usec lots\n");
    for (int second = 1; second <= 12; ++second) {
        ASSERT_TRUE(u->sample(t0_ + std::chrono::seconds(second)));
        // The top-level directories alone (system, user, idle and empty slices, batch).
        EXPECT_EQ(u->last_reads(), 5u) << second;
    }
    EXPECT_TRUE(u->top(10).empty());
    set("idle.slice/u3.service", 100'000, 100'000, 0);
    auto r = u->sample(t0_ + 13s);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("idle.slice/u7.service/cpu.stat"), std::string::npos)
        << r.error().message;
}

// When a slice grew, its units are read busiest first until their growth accounts for the
// slice's: the others are read at their refresh, their time spread over the seconds that did
// not read them, the window's figures exact.
TEST_F(V2Tree, AGrowingSliceIsReadUntilItsTimeIsAccountedFor) {
    for (int k = 0; k < 50; ++k) set("busy.slice/u" + std::to_string(k) + ".service", 0, 0, 0);
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    // u0 spins: 500 ms a second; u1 uses 0.5 ms a second, under the tolerance (1 ms).
    std::uint64_t spin = 0, small = 0;
    std::size_t most = 0;
    bool small_seen = false;
    for (int second = 1; second <= 40; ++second) {
        spin += 500'000;
        small += 500;
        set("busy.slice/u0.service", spin, spin, 0);
        set("busy.slice/u1.service", small, small, 0);
        ASSERT_TRUE(u->sample(t0_ + std::chrono::seconds(second)));
        // The first second finds which units grow, in no order.
        if (second > 1) most = std::max(most, u->last_reads());
        const auto top = u->top(5);
        ASSERT_FALSE(top.empty());
        EXPECT_EQ(top[0].unit, "u0.service") << second;
        if (second > 2) {
            EXPECT_DOUBLE_EQ(top[0].cpu, 50) << second;
        }
        for (const auto& t : top) {
            if (t.unit != "u1.service" || t.cpu == 0) continue;
            // Read at its refresh: the mean of the seconds since its last reading.
            small_seen = true;
            EXPECT_NEAR(t.cpu, 0.05, 1e-9) << second;
            EXPECT_NEAR(t.window_avg, 0.05, 1e-9) << second;
            EXPECT_NEAR(t.window_max, 0.05, 1e-9) << second;
        }
    }
    EXPECT_TRUE(small_seen);
    // Then the 5 top-level directories, u0, u1 when read before u0 or at its refresh, and a
    // thirtieth of the slice's 50 units refreshed: never all 55 units.
    EXPECT_LE(most, 5u + 2u + 2u);
    const auto top = u->top(5);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_NEAR(top[1].window_avg, 0.05, 1e-9);
}

// What a skipped unit used is never lost: its slice's time accounted for to within the
// tolerance by a busier unit, it is read at its refresh, and all of its time is in the window.
TEST_F(V2Tree, TimeNotReadIsNeverLost) {
    auto u = UnitUsage::open(root(), 120);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    std::uint64_t a = 1'000'000, b = 0;
    for (int second = 1; second <= 61; ++second) {
        a += 300'000;
        // b runs 0.9 ms in one second of three for 30 s, then not.
        if (second <= 30 && second % 3 == 0) b += 900;
        set("system.slice/a.service", a, a, 0);
        set("system.slice/b.service", b, b, 0);
        ASSERT_TRUE(u->sample(t0_ + std::chrono::seconds(second)));
    }
    const auto top = u->top(5);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[1].unit, "b.service");
    // All of b's 9 ms, over the window up to its last reading: at its refresh, at most 30 s
    // ago (a unit that may have run since is not figured past its last reading).
    EXPECT_GE(top[1].window_avg, 0.9 / 61 - 1e-9);
    EXPECT_LE(top[1].window_avg, 0.9 / 31 + 1e-9);
    EXPECT_DOUBLE_EQ(top[1].cpu, 0);
}

TEST_F(V2Tree, ACounterThatWentBackStartsTheUnitAgain) {
    auto u = UnitUsage::open(root(), 60);
    ASSERT_TRUE(u) << u.error().to_string();
    ASSERT_TRUE(u->sample(t0_));
    set("system.slice/a.service", 5'000, 5'000, 0);  // made again under the same name
    ASSERT_TRUE(u->sample(t0_ + 1s));
    EXPECT_TRUE(u->top(10).empty());
    set("system.slice/a.service", 105'000, 105'000, 0);
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
    set("system.slice/a.service", 1'100'000, 900'000, 200'000);
    // b ran too (its slice grew by more than a's time), and its counters say nonsense.
    set("system.slice/b.service", 100'000, 100'000, 0);
    write_file(root() / "system.slice/b.service/cpu.stat", "usage_usec lots\n");
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

// Without an inotify instance (fs.inotify.max_user_instances reached), the tree is walked at
// every sample: units that come and go are found all the same.
TEST_F(V2Tree, WithoutInotifyTheTreeIsWalkedAtEverySample) {
    std::vector<UniqueFd> taken;
    for (int i = 0; i < 100'000; ++i) {
        UniqueFd fd(::inotify_init1(IN_CLOEXEC));
        if (!fd) break;
        taken.push_back(std::move(fd));
    }
    if (taken.size() >= 100'000) GTEST_SKIP() << "no limit on inotify instances to reach";
    auto u = UnitUsage::open(root(), 60);
    taken.clear();
    ASSERT_TRUE(u) << u.error().to_string();
    units_come_and_go(*u);
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

// A slice of the test's own with idle units in it; removed (rmdir, deepest first) at the end.
class Slice {
  public:
    Slice(const fs::path& path, int idle_units) : path_(path) {
        std::error_code ec;
        made_ = fs::create_directory(path_, ec);
        for (int k = 0; made_ && k < idle_units; ++k) {
            fs::create_directory(path_ / ("idle-" + std::to_string(k) + ".service"), ec);
        }
    }
    ~Slice() {
        if (!made_) return;
        std::error_code ec;
        for (const auto& d : fs::directory_iterator(path_, ec)) {
            if (d.is_directory()) fs::remove(d.path(), ec);
        }
        fs::remove(path_, ec);
    }
    Slice(const Slice&) = delete;
    Slice& operator=(const Slice&) = delete;
    bool made() const { return made_; }

  private:
    fs::path path_;
    bool made_ = false;
};

void spinner_is_the_top_unit(const fs::path& cgroup_root) {
    auto u = UnitUsage::open(cgroup_root, 60);
    if (!u) GTEST_SKIP() << u.error().to_string();
    // The spinner's unit among 20 idle ones in a slice: the slice's time is the spinner's, so
    // the idle units are not read.
    const auto slice = "monitord-unit-usage-" + std::to_string(::getpid()) + ".slice";
    constexpr int kIdle = 20;
    Slice idle(u->root() / slice, kIdle);
    const auto cgroup = u->root() / slice / "spin.service";
    std::error_code ec;
    if (::geteuid() != 0 || !idle.made() || !fs::create_directory(cgroup, ec)) {
        GTEST_SKIP() << "cannot make a cgroup in " << u->root() << " (needs root)";
    }
    Spinner spin(cgroup);
    std::this_thread::sleep_for(100ms);
    // Each reading of the tree between two of the spinner's own run time (schedstat), so that
    // the unit's CPU time can be held to the spinner's however the test's thread is
    // scheduled: all of a CPU on a quiet machine, less where another test shares cpu0.
    ASSERT_TRUE(u->sample(Clock::now()));
    const auto every_cgroup = u->last_reads();  // the first sample reads them all
    // The readings of the slice and of the spinner's unit are some microseconds apart, in
    // which a tick may bring the spinner's counter up to date: the slice's time is then not
    // accounted for at the next sample, which reads every unit of it. So the fewest reads
    // of 4 samples, 250 ms apart.
    std::size_t fewest = every_cgroup;
    double before0 = 0, after0 = 0, before1 = 0, after1 = 0;
    Clock::time_point t0, t1;
    for (int i = 0; i < 4; ++i) {
        std::this_thread::sleep_for(250ms);
        before0 = before1;
        after0 = after1;
        t0 = t1;
        before1 = spin.ran_ns();
        t1 = Clock::now();
        ASSERT_TRUE(u->sample(t1));
        after1 = spin.ran_ns();
        fewest = std::min(fewest, u->last_reads());
    }
    const auto top = u->top(5);
    ASSERT_FALSE(top.empty());
    EXPECT_EQ(top[0].cgroup, "/" + slice + "/spin.service") << top[0].cgroup << " " << top[0].cpu;
    EXPECT_EQ(top[0].unit, "spin.service");
    // The machine's own cgroups are read as their time says; of the slice's 21 units, the
    // spinner's and the one at its refresh at most.
    EXPECT_LE(fewest, every_cgroup - kIdle + 1) << every_cgroup;
    const double used =
        top[0].cpu / 100 * std::chrono::duration<double, std::nano>(t1 - t0).count();
    // Both are the kernel's run time of the task, each brought up to date at a tick or a
    // switch: 20 ms of slack over the last interval.
    constexpr double kSlack = 20e6;
    EXPECT_GE(used, before1 - after0 - kSlack) << top[0].cpu;
    EXPECT_LE(used, after1 - before0 + kSlack) << top[0].cpu;
    EXPECT_GE(top[0].cpu, 30) << top[0].cgroup;
    // The split into user and system time is the ticks': two of them (20 ms at HZ 100) over
    // the 250 ms are 8 % of one CPU.
    EXPECT_GE(top[0].user, top[0].cpu * 0.9 - 8) << top[0].cgroup;
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
