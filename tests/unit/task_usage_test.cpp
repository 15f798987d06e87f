// Each CPU's busiest tasks: described /proc trees whose stat lines the test sets (threads read
// only when their process's time grew, new and reused ids, cgroups of both hierarchies,
// hostile lines), and this process's own spinning thread on this machine's /proc.
#include "monitor/loading/task_usage.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "monitor/loading/loading_report.hpp"  // kMaxTasksListed
#include "monitor/text_file.hpp"
#include "test_support.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;
using test_support::ScratchDir;
using test_support::write_file;
using Clock = TaskUsage::Clock;
namespace fs = std::filesystem;

using Fields = test_support::TaskFields;

std::string stat_line(int id, const std::string& comm, const Fields& f) {
    return test_support::task_stat_line(id, comm, f);
}

class ProcTree : public ::testing::Test {
  protected:
    void SetUp() override { uptime(1000.0); }
    fs::path root() const { return dir_.path(); }
    void uptime(double seconds) {
        write_file(root() / "uptime", std::to_string(seconds) + " 1500.00\n");
    }
    // A single-threaded process.
    void process(int pid, const std::string& comm, const Fields& f) {
        write_file(root() / std::to_string(pid) / "stat", stat_line(pid, comm, f));
    }
    // A thread of `pid`, whose process line the test sets with process().
    void thread(int pid, int tid, const std::string& comm, const Fields& f) {
        write_file(root() / std::to_string(pid) / "task" / std::to_string(tid) / "stat",
                   stat_line(tid, comm, f));
    }
    void gone(int pid) { fs::remove_all(root() / std::to_string(pid)); }

    TaskUsage open(std::optional<CgroupAccounting> hierarchy = std::nullopt) {
        auto t = TaskUsage::open(root(), hierarchy, 100);
        EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().message);
        return std::move(*t);
    }

    Clock::time_point at(int seconds) const { return t0_ + std::chrono::seconds(seconds); }

    ScratchDir dir_{"task-usage"};
    Clock::time_point t0_ = Clock::now();
};

TEST(TaskStatLine, FieldsAfterTheLastParenthesis) {
    // A name may hold spaces and parentheses: the fields start after the last ')'.
    const std::string line =
        stat_line(7, "a) (b c", {.utime = 12, .stime = 3, .threads = 4, .start = 99, .cpu = 5});
    auto st = parse_task_stat(line);
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->comm, "a) (b c");
    EXPECT_EQ(st->utime, 12U);
    EXPECT_EQ(st->stime, 3U);
    EXPECT_EQ(st->threads, 4);
    EXPECT_EQ(st->start, 99U);
    EXPECT_EQ(st->processor, 5);
}

// This process's own line parses. (Under qemu's user mode, the PowerPC tests' runner, the
// line is qemu's, with most fields 0: only the parse and the CPU's bound are checked.)
TEST(TaskStatLine, ThisProcesssOwn) {
    auto text = read_text_file("/proc/self/stat");
    ASSERT_TRUE(text.has_value());
    auto st = parse_task_stat(*text);
    ASSERT_TRUE(st.has_value()) << *text;
    EXPECT_LT(st->processor, static_cast<int>(std::thread::hardware_concurrency()) + 64);
}

TEST(TaskStatLine, NotOneIsNone) {
    const std::string good = stat_line(7, "x", {});
    EXPECT_FALSE(parse_task_stat(""));
    EXPECT_FALSE(parse_task_stat("7 (x"));
    EXPECT_FALSE(parse_task_stat("7 x) S 1"));
    // Cut before the processor field.
    EXPECT_FALSE(parse_task_stat(good.substr(0, good.find(" 0 0 0 0 0 0 0 0 0 0 0 0"))));
    std::string letters = stat_line(7, "x", {.utime = 4242});
    letters.replace(letters.find("4242"), 4, "42x2");
    EXPECT_FALSE(parse_task_stat(letters)) << letters;
    EXPECT_FALSE(parse_task_stat(stat_line(7, "x", {.cpu = -1})));
}

TEST_F(ProcTree, AProcesssTimeOverTheInterval) {
    process(10, "spin", {.utime = 100, .stime = 50, .cpu = 1});
    process(11, "idle", {.utime = 5, .cpu = 0});
    auto t = open();
    ASSERT_TRUE(t.sample(at(0)));
    EXPECT_EQ(t.seconds(), 0);
    EXPECT_TRUE(t.top(5).empty()) << "a first reading has no figures";

    process(10, "spin", {.utime = 160, .stime = 80, .cpu = 1});  // 90 ticks in 1 s
    ASSERT_TRUE(t.sample(at(1)));
    EXPECT_DOUBLE_EQ(t.seconds(), 1);
    auto top = t.top(5);
    ASSERT_EQ(top.size(), 1U) << "a task with no time is left out";
    EXPECT_EQ(top[0].pid, 10);
    EXPECT_EQ(top[0].tid, 10);
    EXPECT_EQ(top[0].comm, "spin");
    EXPECT_EQ(top[0].cpu, 1);
    EXPECT_DOUBLE_EQ(top[0].user, 60);
    EXPECT_DOUBLE_EQ(top[0].system, 30);
    EXPECT_DOUBLE_EQ(top[0].load, 90);
    EXPECT_EQ(t.task_count(), 2U);
    EXPECT_EQ(t.process_count(), 2U);

    // Over two seconds, half as much a second.
    process(10, "spin", {.utime = 220, .stime = 80, .cpu = 0});
    ASSERT_TRUE(t.sample(at(3)));
    top = t.top(5);
    ASSERT_EQ(top.size(), 1U);
    EXPECT_DOUBLE_EQ(top[0].load, 30);
    EXPECT_EQ(top[0].cpu, 0) << "counted on the CPU it ran on last";
}

// A process's threads are read when its time grew; a thread's time not seen because its
// process's did not grow is seen later, never lost.
TEST_F(ProcTree, ThreadsReadWhenTheirProcessRan) {
    process(20, "server", {.utime = 30, .threads = 3, .cpu = 0});
    thread(20, 20, "server", {.utime = 10, .threads = 3, .cpu = 0});
    thread(20, 21, "worker", {.utime = 10, .threads = 3, .cpu = 1});
    thread(20, 22, "io", {.utime = 10, .threads = 3, .cpu = 0});
    auto t = open();
    ASSERT_TRUE(t.sample(at(0)));
    EXPECT_EQ(t.last_reads(), 4U) << "the process, then its three threads";
    EXPECT_EQ(t.task_count(), 3U);

    thread(20, 21, "worker", {.utime = 50, .threads = 3, .cpu = 1});
    process(20, "server", {.utime = 70, .threads = 3, .cpu = 0});
    ASSERT_TRUE(t.sample(at(1)));
    auto top = t.top(5);
    ASSERT_EQ(top.size(), 1U);
    EXPECT_EQ(top[0].pid, 20);
    EXPECT_EQ(top[0].tid, 21);
    EXPECT_EQ(top[0].comm, "worker");
    EXPECT_EQ(top[0].cpu, 1);
    EXPECT_DOUBLE_EQ(top[0].load, 40);

    // The process's total the same: its threads are not read, and kept.
    thread(20, 22, "io", {.utime = 15, .threads = 3, .cpu = 0});
    ASSERT_TRUE(t.sample(at(2)));
    EXPECT_EQ(t.last_reads(), 1U);
    EXPECT_TRUE(t.top(5).empty());
    EXPECT_EQ(t.task_count(), 3U);
    // When it grows, what the thread had is seen.
    process(20, "server", {.utime = 76, .threads = 3, .cpu = 0});
    ASSERT_TRUE(t.sample(at(3)));
    top = t.top(5);
    ASSERT_EQ(top.size(), 1U);
    EXPECT_EQ(top[0].tid, 22);
    EXPECT_DOUBLE_EQ(top[0].load, 5);
}

// A process down to one thread is read as one again: its stat's time counts the threads that
// ended, which is not its main thread's, and shows as nobody's time rather than a spike.
TEST_F(ProcTree, AProcessDownToOneThreadStartsOver) {
    process(30, "pool", {.utime = 510, .threads = 2, .cpu = 0});
    thread(30, 30, "pool", {.utime = 10, .threads = 2, .cpu = 0});
    thread(30, 31, "worker", {.utime = 500, .threads = 2, .cpu = 1});
    auto t = open();
    ASSERT_TRUE(t.sample(at(0)));
    // The worker ends; the process's time keeps its 500 ticks, and the main thread ran 20.
    fs::remove_all(root() / "30/task");
    process(30, "pool", {.utime = 530, .threads = 1, .cpu = 0});
    ASSERT_TRUE(t.sample(at(1)));
    EXPECT_TRUE(t.top(5).empty()) << "not 520 % of a CPU for the main thread";
    process(30, "pool", {.utime = 560, .threads = 1, .cpu = 0});
    ASSERT_TRUE(t.sample(at(2)));
    auto top = t.top(5);
    ASSERT_EQ(top.size(), 1U);
    EXPECT_DOUBLE_EQ(top[0].load, 30);
}

TEST_F(ProcTree, EachCpusBusiestFirst) {
    process(1, "a", {.cpu = 0});
    process(2, "b", {.cpu = 0});
    process(3, "c", {.cpu = 0});
    process(4, "d", {.cpu = 3});
    auto t = open();
    ASSERT_TRUE(t.sample(at(0)));
    process(1, "a", {.utime = 10, .cpu = 0});
    process(2, "b", {.utime = 30, .cpu = 0});
    process(3, "c", {.utime = 20, .cpu = 0});
    process(4, "d", {.utime = 5, .cpu = 3});
    ASSERT_TRUE(t.sample(at(1)));
    auto top = t.top(2);
    ASSERT_EQ(top.size(), 3U);
    EXPECT_EQ(top[0].pid, 2);
    EXPECT_EQ(top[1].pid, 3);
    EXPECT_EQ(top[2].pid, 4);
    EXPECT_EQ(top[2].cpu, 3);
    EXPECT_EQ(t.top(100).size(), 4U);
    EXPECT_EQ(t.top(1).size(), 2U);
}

// A task that started after the last sample has all its time in this interval; an id taken
// again by a task that started before it (the kernel never does that) has no figures yet.
TEST_F(ProcTree, NewTasksAndIdsTakenAgain) {
    process(5, "old", {.utime = 10, .start = 100, .cpu = 0});
    uptime(1000.0);  // 100,000 ticks
    auto t = open();
    ASSERT_TRUE(t.sample(at(0)));
    process(6, "born", {.utime = 40, .start = 100'050, .cpu = 1});
    process(5, "other", {.utime = 500, .start = 99'000, .cpu = 0});
    uptime(1001.0);
    ASSERT_TRUE(t.sample(at(1)));
    auto top = t.top(5);
    ASSERT_EQ(top.size(), 1U);
    EXPECT_EQ(top[0].pid, 6);
    EXPECT_DOUBLE_EQ(top[0].load, 40);

    // Gone: no longer counted.
    gone(6);
    ASSERT_TRUE(t.sample(at(2)));
    EXPECT_EQ(t.task_count(), 1U);
    EXPECT_EQ(t.process_count(), 1U);
}

TEST_F(ProcTree, ForgetStartsAgain) {
    process(1, "a", {.utime = 10});
    auto t = open();
    ASSERT_TRUE(t.sample(at(0)));
    t.forget();
    process(1, "a", {.utime = 90});
    ASSERT_TRUE(t.sample(at(1)));
    EXPECT_EQ(t.seconds(), 0);
    EXPECT_TRUE(t.top(5).empty()) << "the first reading after forget() has no figures";
}

// Each busy process's cgroup, read when it ran: in the hierarchy of the units' accounting, and
// not at all without one; a process gone by then has none.
TEST_F(ProcTree, UnitsFromEitherHierarchy) {
    process(1, "nginx", {});
    process(2, "job", {});
    process(3, "kworker/0:1", {});
    process(4, "brief", {});
    write_file(root() / "1/cgroup",
               "12:cpu,cpuacct:/system.slice/nginx.service\n"
               "1:name=systemd:/system.slice/nginx.service\n"
               "0::/system.slice/nginx.service/worker\n");
    write_file(root() / "2/cgroup", "4:cpu,cpuacct:/batch/job1\n0::/batch/job1\n");
    write_file(root() / "3/cgroup", "0::/\n");
    auto v2 = open(CgroupAccounting::V2);
    auto v1 = open(CgroupAccounting::V1Cpuacct);
    auto none = open();
    for (auto* t : {&v2, &v1, &none}) ASSERT_TRUE(t->sample(at(0)));
    process(1, "nginx", {.utime = 10});
    process(2, "job", {.utime = 20});
    process(3, "kworker/0:1", {.stime = 30});
    process(4, "brief", {.utime = 40});  // its cgroup file gone: it ended
    for (auto* t : {&v2, &v1, &none}) ASSERT_TRUE(t->sample(at(1)));
    // Moved since: the cgroup read when it ran stays.
    write_file(root() / "1/cgroup", "0::/system.slice/other.service\n");

    auto top = v2.top(5);
    ASSERT_EQ(top.size(), 4U);
    EXPECT_EQ(top[0].pid, 4);
    EXPECT_EQ(top[0].cgroup, "") << "gone before its cgroup was read";
    EXPECT_EQ(top[1].pid, 3);
    EXPECT_EQ(top[1].cgroup, "/");
    EXPECT_EQ(top[1].unit, "") << "the root cgroup is no unit's";
    EXPECT_EQ(top[2].cgroup, "/batch/job1");
    EXPECT_EQ(top[2].unit, "/batch/job1");
    EXPECT_EQ(top[3].cgroup, "/system.slice/nginx.service/worker");
    EXPECT_EQ(top[3].unit, "nginx.service");

    top = v1.top(5);
    ASSERT_EQ(top.size(), 4U);
    EXPECT_EQ(top[1].cgroup, "") << "no cpuacct line";
    EXPECT_EQ(top[3].cgroup, "/system.slice/nginx.service");
    EXPECT_EQ(top[3].unit, "nginx.service");
    EXPECT_EQ(none.top(5)[3].unit, "") << "without a hierarchy, not read";
}

TEST(UnitOfCgroup, TheWalksRule) {
    EXPECT_EQ(unit_of_cgroup("/system.slice/nginx.service"), "nginx.service");
    EXPECT_EQ(unit_of_cgroup("/user.slice/user-1000.slice/user@1000.service/app.slice/x.service"),
              "user@1000.service");
    EXPECT_EQ(unit_of_cgroup("/machine.slice/libpod-1.scope/container"), "libpod-1.scope");
    EXPECT_EQ(unit_of_cgroup("/batch/job1"), "/batch/job1");
    EXPECT_EQ(unit_of_cgroup("/"), "");
    EXPECT_EQ(unit_of_cgroup(""), "");
    EXPECT_EQ(unit_of_cgroup("/system.slice"), "");
    EXPECT_EQ(unit_of_cgroup("/x/.service"), "/x/.service") << "a bare suffix names no unit";
}

TEST(CgroupOfProcess, TheAccountingsLine) {
    const std::string hybrid =
        "12:cpu,cpuacct:/a.service\n3:memory:/b\n1:name=systemd:/c.service\n0::/d.service\n";
    EXPECT_EQ(cgroup_of_process(hybrid, CgroupAccounting::V2), "/d.service");
    EXPECT_EQ(cgroup_of_process(hybrid, CgroupAccounting::V1Cpuacct), "/a.service");
    EXPECT_EQ(cgroup_of_process("0::/x\n", CgroupAccounting::V1Cpuacct), std::nullopt);
    EXPECT_EQ(cgroup_of_process("2:cpuacct:/x\n", CgroupAccounting::V2), std::nullopt);
    EXPECT_EQ(cgroup_of_process("garbage\n::\n", CgroupAccounting::V2), std::nullopt);
    EXPECT_EQ(cgroup_of_process("", CgroupAccounting::V2), std::nullopt);
}

// A stat line that is not the kernel's is named, and the others are still counted.
TEST_F(ProcTree, AHostileLineIsNamedAndSkipped) {
    process(1, "a", {});
    write_file(root() / "7/stat", "7 (evil) S 1 2 3\n");
    auto t = open();
    auto r = t.sample(at(0));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadData);
    EXPECT_NE(r.error().message.find((root() / "7/stat").string()), std::string::npos)
        << r.error().message;
    process(1, "a", {.utime = 50});
    (void)t.sample(at(1));
    auto top = t.top(5);
    ASSERT_EQ(top.size(), 1U);
    EXPECT_EQ(top[0].pid, 1);
    EXPECT_EQ(t.task_count(), 1U);
}

TEST(TaskUsageOpen, NotAProcfs) {
    auto t = TaskUsage::open("/nonexistent/proc");
    ASSERT_FALSE(t);
    EXPECT_EQ(t.error().status, Status::BadArg);
    EXPECT_NE(t.error().message.find("/nonexistent/proc"), std::string::npos);
    ScratchDir empty{"task-usage-empty"};
    auto e = TaskUsage::open(empty.path());
    ASSERT_TRUE(e);
    auto r = e->sample(Clock::now());
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("lists no process"), std::string::npos);
}

double thread_cpu_seconds(clockid_t clock) {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// This machine's /proc: a thread of this process spinning on the last CPU is counted there,
// with the CPU time the kernel gave it over the interval (its own clock, read at both ends),
// within two ticks; however loaded the machine is.
TEST(TaskUsageLive, ASpinningThreadIsItsCpusTop) {
    const int cpu = static_cast<int>(std::thread::hardware_concurrency()) - 1;
    std::atomic<bool> stop{false};
    std::atomic<pid_t> tid{0};
    std::atomic<clockid_t> clock{CLOCK_THREAD_CPUTIME_ID};
    std::thread spinner([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ::sched_setaffinity(0, sizeof set, &set);
        clockid_t c{};
        ::pthread_getcpuclockid(::pthread_self(), &c);
        clock = c;
        tid = static_cast<pid_t>(::syscall(SYS_gettid));
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    while (tid == 0) std::this_thread::sleep_for(1ms);
    auto t = TaskUsage::open("/proc");
    ASSERT_TRUE(t);
    const auto t0 = Clock::now();
    const double cpu0 = thread_cpu_seconds(clock);
    ASSERT_TRUE(t->sample(t0));
    std::this_thread::sleep_for(1s);
    const auto t1 = Clock::now();
    const double cpu1 = thread_cpu_seconds(clock);
    auto r = t->sample(t1);
    stop = true;
    spinner.join();
    ASSERT_TRUE(r) << r.error().message;
    const double share = (cpu1 - cpu0) / std::chrono::duration<double>(t1 - t0).count() * 100;
    const auto top = t->top(static_cast<std::size_t>(kMaxTasksListed));
    auto it = std::find_if(top.begin(), top.end(), [&](const TaskLoad& l) { return l.tid == tid; });
    ASSERT_NE(it, top.end()) << "the spinner is not listed";
    EXPECT_EQ(it->cpu, cpu);
    EXPECT_EQ(it->pid, ::getpid());
    EXPECT_NEAR(it->load, share, 2.5) << "the thread's own clock: " << share << " %";
    EXPECT_GT(t->task_count(), t->process_count());
}

}  // namespace
}  // namespace monitor
