// Counting a process by pid counts all its threads: a process whose main thread sleeps while
// three threads spin (the task clock of all of them, against their CPU time from
// /proc/PID/task/*/schedstat), with daemon multiplexing rotating every thread's sets, threads
// that exit before their counters open, a process that is gone, and the limit on open file
// descriptors.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "perf_events_probe.hpp"
#include "spinning_process.hpp"
#include "test_support.hpp"

namespace monitor::perf {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test_support::SpinningProcess;

constexpr int kSpinners = 3;

EventCatalog catalog() {
    auto c = EventCatalog::create();
    EXPECT_TRUE(c.has_value()) << c.error().to_string();
    return std::move(*c);
}

SessionOptions process(pid_t pid, std::string_view events) {
    SessionOptions o;
    o.events = *parse_event_list(events);
    o.target.kind = TargetKind::Process;
    o.target.pid = pid;
    return o;
}

// Whether the spinning process has all its threads (at least `threads`: a sanitizer's runtime
// may add its own), and says why not.
testing::AssertionResult Started(const SpinningProcess& p, std::size_t threads) {
    if (p.pid() <= 0) return testing::AssertionFailure() << "the spinning process did not start";
    if (p.thread_count() < threads) {
        return testing::AssertionFailure() << "process " << p.pid() << " has " << p.threads().size()
                                           << " threads, not " << threads;
    }
    if (!p.cpu_ns()) {
        return testing::AssertionFailure() << "no /proc/PID/task/TID/schedstat here";
    }
    return testing::AssertionSuccess();
}

double steal_ns() {
    return test_support::steal_ns();
}

TEST(ProcessThreads, TheTaskClockOfEveryThreadIsCounted) {
    SKIP_WITHOUT_PERF_EVENTS();
    SpinningProcess p(kSpinners);
    ASSERT_TRUE(Started(p, kSpinners + 1));
    auto c = catalog();
    // What the threads ran: between starting and stopping the session (outer), and between
    // two readings while it counted (inner).
    const double steal_before = steal_ns();
    const double outer_before = static_cast<double>(*p.cpu_ns());
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(),
                                process(p.pid(), "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES"));
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    ASSERT_TRUE(s) << s.error().to_string();
    const double inner_before = static_cast<double>(*p.cpu_ns());
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(1s);
    const double inner = static_cast<double>(*p.cpu_ns()) - inner_before;
    const double wall =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE((*s)->stop());
    const double outer = static_cast<double>(*p.cpu_ns()) - outer_before;
    const double stolen = steal_ns() - steal_before;
    auto r = (*s)->read();
    ASSERT_TRUE(r) << r.error().to_string();

    EXPECT_EQ(r->threads, static_cast<int>(p.thread_count()));
    EXPECT_EQ((*s)->threads(), static_cast<int>(p.thread_count()));
    // One instance: the process, its threads added up.
    ASSERT_EQ(r->instances, std::vector<int>{-1});
    const auto& task = r->events[0];
    ASSERT_EQ(task.per_instance.size(), 1u);
    EXPECT_EQ(task.per_instance[0].count, task.total.count);
    EXPECT_EQ(task.total.enabled_ns, task.total.running_ns);  // software: counted all along
    // The task clock of the threads is the CPU time they ran, and the time the hypervisor
    // stole and interrupts took from them, which it counts too (a few percent at most).
    const double counted = static_cast<double>(task.total.count);
    EXPECT_GE(counted, 0.99 * inner - p.lag_ns())
        << "counted " << counted / 1e6 << " ms, the threads ran " << inner / 1e6 << " ms";
    EXPECT_LE(counted, 1.05 * outer + stolen + p.lag_ns())
        << "counted " << counted / 1e6 << " ms, the threads ran " << outer / 1e6 << " ms; stolen "
        << stolen / 1e6 << " ms";
    // Three spinning threads on this machine's CPUs: more than one CPU's worth, unless the
    // machine is too busy to tell.
    const double cpus =
        static_cast<double>(std::min<long>(kSpinners, ::sysconf(_SC_NPROCESSORS_ONLN)));
    if (cpus > 1 && inner > 1.2 * wall) {
        EXPECT_GT(counted, 1.2 * wall) << "no more than one thread's worth: " << counted / 1e6
                                       << " ms in " << wall / 1e6 << " ms";
    }
    EXPECT_GT(r->events[1].total.count, 0u) << "context switches of the spinning threads";
}

// Daemon multiplexing: two sets take turns on every thread's counters; the estimates of the
// process's task clock (each thread's times added up) are its threads' CPU time, each set
// having counted about half of it.
TEST(ProcessThreads, DaemonMultiplexingRotatesTheSetsOfEveryThread) {
    SKIP_WITHOUT_PERF_EVENTS();
    SpinningProcess p(kSpinners);
    ASSERT_TRUE(Started(p, kSpinners + 1));
    auto c = catalog();
    auto o = process(p.pid(), "perf::TASK-CLOCK,perf::PERF_COUNT_SW_TASK_CLOCK");
    o.counter_budget = 1;
    o.slice = 20ms;
    const double steal_before = steal_ns();
    const double outer_before = static_cast<double>(*p.cpu_ns());
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    ASSERT_TRUE(s) << s.error().to_string();
    ASSERT_TRUE((*s)->rotates());
    ASSERT_EQ((*s)->plan().slots, 2);
    const double inner_before = static_cast<double>(*p.cpu_ns());
    for (int i = 0; i < 50; ++i) {
        std::this_thread::sleep_for(20ms);
        ASSERT_TRUE((*s)->rotate());
    }
    const double inner = static_cast<double>(*p.cpu_ns()) - inner_before;
    ASSERT_TRUE((*s)->stop());
    const double outer = static_cast<double>(*p.cpu_ns()) - outer_before;
    const double stolen = steal_ns() - steal_before;
    auto r = (*s)->read();
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->threads, static_cast<int>(p.thread_count()));
    EXPECT_EQ(r->rotations, 50);
    for (const auto& e : r->events) {
        EXPECT_NEAR(e.total.running_ratio(), 0.5, 0.15) << e.name;
        EXPECT_GE(e.total.scaled(), 0.9 * inner - p.lag_ns())
            << e.name << ": scaled " << e.total.scaled() / 1e6 << " ms (count "
            << e.total.count / 1e6 << " ms, running " << e.total.running_ratio()
            << "), the threads ran " << inner / 1e6 << " ms";
        EXPECT_LE(e.total.scaled(), 1.1 * outer + stolen + p.lag_ns())
            << e.name << ": scaled " << e.total.scaled() / 1e6 << " ms, the threads ran "
            << outer / 1e6 << " ms";
        ASSERT_EQ(e.per_instance.size(), 1u);
        EXPECT_EQ(e.per_instance[0].count, e.total.count);
        EXPECT_EQ(e.per_instance[0].enabled_ns, e.total.enabled_ns);
        EXPECT_EQ(e.per_instance[0].running_ns, e.total.running_ns);
    }
}

// The main thread exited and is a zombie until the others end: it is listed
// in /proc/PID/task, and perf_event_open refuses it (ESRCH). The others are counted.
TEST(ProcessThreads, AZombieMainThreadIsSkippedAndTheOthersCounted) {
    SKIP_WITHOUT_PERF_EVENTS();
    SpinningProcess p(2, /*leader_exits=*/true);
    ASSERT_TRUE(Started(p, 3));
    ASSERT_TRUE(test_support::wait_until(
        [&] {
            std::ifstream status(fs::path("/proc") / std::to_string(p.pid()) / "status");
            for (std::string line; std::getline(status, line);) {
                if (line.starts_with("State:")) return line.find('Z') != std::string::npos;
            }
            return false;
        },
        5s))
        << "the main thread of process " << p.pid() << " did not exit";
    auto c = catalog();
    const double steal_before = steal_ns();
    const double before = static_cast<double>(*p.cpu_ns());
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(),
                                process(p.pid(), "perf::TASK-CLOCK"));
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    ASSERT_TRUE(s) << s.error().to_string();
    const double inner_before = static_cast<double>(*p.cpu_ns());
    std::this_thread::sleep_for(300ms);
    const double inner = static_cast<double>(*p.cpu_ns()) - inner_before;
    ASSERT_TRUE((*s)->stop());
    const double outer = static_cast<double>(*p.cpu_ns()) - before;
    auto r = (*s)->read();
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->threads, static_cast<int>(p.thread_count()) - 1) << "all but the zombie";
    const double counted = static_cast<double>(r->events[0].total.count);
    // The threads' schedstat times lag by up to a tick each (seen: 295.1 ms counted against
    // 298.8 ms read).
    EXPECT_GE(counted, 0.99 * inner - p.lag_ns())
        << "counted " << counted / 1e6 << " ms, the threads ran " << inner / 1e6 << " ms";
    EXPECT_LE(counted, 1.05 * outer + (steal_ns() - steal_before) + p.lag_ns())
        << "counted " << counted / 1e6 << " ms, the threads ran " << outer / 1e6 << " ms";
}

// A device that makes one thread exit just before its first counter is opened, as a thread
// that ends while the session walks the process's threads: the kernel then says ESRCH.
class ThreadExitsOnOpen final : public CounterDevice {
  public:
    ThreadExitsOnOpen(pid_t victim, std::function<void()> end_victim)
        : victim_(victim), end_victim_(std::move(end_victim)) {}

    Result<int> open(const EventSpec& event, const OpenTarget& target, int leader) override {
        if (target.pid == victim_ && !ended_) {
            ended_ = true;
            end_victim_();
            // Gone from the kernel's tables, not only joined.
            gone_ = test_support::wait_until(
                [&] { return !fs::exists(fs::path("/proc/self/task") / std::to_string(victim_)); },
                5s);
        }
        auto h = real_.open(event, target, leader);
        if (target.pid == victim_) victim_result_ = h ? Status::Success : h.error().status;
        return h;
    }
    Result<void> enable(int leader) override { return real_.enable(leader); }
    Result<void> disable(int leader) override { return real_.disable(leader); }
    Result<void> reset(int leader) override { return real_.reset(leader); }
    Result<CounterReading> read(int handle) override { return real_.read(handle); }
    Result<void> read_group(std::span<const int> handles, std::span<CounterReading> out) override {
        return real_.read_group(handles, out);
    }
    void close(int handle) override { real_.close(handle); }
    int width(int handle) const override { return real_.width(handle); }

    bool ended() const { return ended_; }
    bool gone() const { return gone_; }
    std::optional<Status> victim_result() const { return victim_result_; }

  private:
    PerfEventDevice real_;
    pid_t victim_;
    std::function<void()> end_victim_;
    bool ended_ = false;
    bool gone_ = false;
    std::optional<Status> victim_result_;
};

// This process, with a thread that exits as the session walks its threads: the session
// starts without it, and counts the others.
TEST(ProcessThreads, AThreadThatExitsDuringTheWalkIsNotAnError) {
    SKIP_WITHOUT_PERF_EVENTS();
    std::atomic<bool> stop_spinning{false};
    std::atomic<bool> end_victim{false};
    std::atomic<pid_t> victim_tid{0};
    std::atomic<pid_t> spinner_tid{0};
    std::thread victim([&] {
        victim_tid = static_cast<pid_t>(::syscall(SYS_gettid));
        while (!end_victim) std::this_thread::sleep_for(1ms);
    });
    std::thread spinner([&] {
        spinner_tid = static_cast<pid_t>(::syscall(SYS_gettid));
        volatile std::uint64_t sink = 0;
        while (!stop_spinning) sink = sink + 1;
    });
    struct Join {
        std::function<void()> fn;
        ~Join() { fn(); }
    } join{[&] {
        end_victim = true;
        stop_spinning = true;
        if (victim.joinable()) victim.join();
        if (spinner.joinable()) spinner.join();
    }};
    ASSERT_TRUE(test_support::wait_until([&] { return victim_tid && spinner_tid; }, 5s));
    std::size_t listed = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/task")) {
        (void)e;
        ++listed;
    }

    auto device = std::make_unique<ThreadExitsOnOpen>(victim_tid, [&] {
        end_victim = true;
        victim.join();
    });
    ThreadExitsOnOpen* dev = device.get();
    auto c = catalog();
    auto s = PerfSession::start(c, std::move(device), process(::getpid(), "perf::TASK-CLOCK"));
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    ASSERT_TRUE(s) << s.error().to_string();
    ASSERT_TRUE(dev->ended()) << "the session never opened the thread " << victim_tid;
    ASSERT_TRUE(dev->gone()) << "thread " << victim_tid << " did not go away";
    EXPECT_EQ(dev->victim_result(), Status::NoDev) << "the kernel opened a counter on a thread "
                                                      "that had exited";
    EXPECT_EQ((*s)->threads(), static_cast<int>(listed) - 1);

    std::this_thread::sleep_for(200ms);
    ASSERT_TRUE((*s)->stop());
    auto r = (*s)->read();
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->threads, static_cast<int>(listed) - 1);
    // The spinner ran about 200 ms (less on a busy machine): it was counted.
    EXPECT_GT(r->events[0].total.count, 20'000'000u);
}

// A process that has ended: NODEV, naming it and what would work.
TEST(ProcessThreads, AProcessThatIsGoneIsNoDevNamingIt) {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
    auto c = catalog();
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(),
                                process(pid, "perf::TASK-CLOCK"));
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().status, Status::NoDev) << s.error().to_string();
    EXPECT_NE(s.error().message.find("process " + std::to_string(pid)), std::string::npos)
        << s.error().message;
    EXPECT_NE(s.error().message.find("no such process"), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("name a running process"), std::string::npos)
        << s.error().message;
}

// perf stat -p A,B: the threads of both processes counted into one instance, each thread once
// when a thread's id names its process a second time; one of them gone is NODEV naming it.
TEST(ProcessThreads, SeveralProcessesAreCountedAsOne) {
    SKIP_WITHOUT_PERF_EVENTS();
    SpinningProcess a(1);
    SpinningProcess b(2);
    ASSERT_TRUE(Started(a, 2));
    ASSERT_TRUE(Started(b, 3));
    auto c = catalog();
    auto o = process(a.pid(), "perf::TASK-CLOCK");
    // b's spinner's id names b again: its threads are counted once.
    pid_t b_thread = -1;
    for (pid_t tid : b.threads()) {
        if (tid != b.pid()) b_thread = tid;
    }
    ASSERT_GT(b_thread, 0);
    o.target.pids = {a.pid(), b.pid(), b_thread};
    std::ranges::sort(o.target.pids);
    o.target.pid = o.target.pids.front();
    const double before = static_cast<double>(*a.cpu_ns() + *b.cpu_ns());
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    ASSERT_TRUE(s) << s.error().to_string();
    const double inner_before = static_cast<double>(*a.cpu_ns() + *b.cpu_ns());
    std::this_thread::sleep_for(300ms);
    const double inner = static_cast<double>(*a.cpu_ns() + *b.cpu_ns()) - inner_before;
    ASSERT_TRUE((*s)->stop());
    const double outer = static_cast<double>(*a.cpu_ns() + *b.cpu_ns()) - before;
    auto r = (*s)->read();
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->threads, static_cast<int>(a.thread_count() + b.thread_count()));
    ASSERT_EQ(r->instances, std::vector<int>{-1});
    // Both processes' CPU time: more than either ran alone would be, on two CPUs or one.
    const double counted = static_cast<double>(r->events[0].total.count);
    const double lag = a.lag_ns() + b.lag_ns();
    EXPECT_GE(counted, 0.99 * inner - lag)
        << "counted " << counted / 1e6 << " ms, the processes ran " << inner / 1e6 << " ms";
    EXPECT_LE(counted, 1.05 * outer + lag + 50e6)
        << "counted " << counted / 1e6 << " ms, the processes ran " << outer / 1e6 << " ms";

    // One of them gone: named, nothing opened.
    pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    ASSERT_GT(gone, 0);
    ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
    o.target.pids = {a.pid(), gone};
    auto g = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().status, Status::NoDev) << g.error().to_string();
    EXPECT_NE(g.error().message.find("process " + std::to_string(gone) + ":"), std::string::npos)
        << g.error().message;
}

// The soft limit on open file descriptors, lowered for a test and put back.
class DescriptorLimit {
  public:
    explicit DescriptorLimit(rlim_t soft) {
        ok_ = ::getrlimit(RLIMIT_NOFILE, &saved_) == 0;
        rlimit lowered = saved_;
        lowered.rlim_cur = soft;
        ok_ = ok_ && ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
    }
    ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
    DescriptorLimit(const DescriptorLimit&) = delete;
    DescriptorLimit& operator=(const DescriptorLimit&) = delete;
    bool ok() const { return ok_; }

  private:
    rlimit saved_{};
    bool ok_ = false;
};

std::size_t open_descriptors() {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
        (void)e;
        ++n;
    }
    return n;
}

// A process with more threads than the descriptors allow: an error naming the limit, before
// anything is opened when the threads alone need more than it, and when the descriptors run
// out midway; nothing is left open either way.
TEST(ProcessThreads, TooFewFileDescriptorsIsAnErrorNamingTheLimit) {
    SKIP_WITHOUT_PERF_EVENTS();
    constexpr int kThreads = 12;
    SpinningProcess p(kThreads - 1);
    ASSERT_TRUE(Started(p, kThreads));
    auto c = catalog();
    const auto o = process(p.pid(), "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES");
    const std::size_t threads = p.thread_count();  // kThreads, and a sanitizer's
    const std::size_t needed = 2 * threads;
    const std::size_t open_before = open_descriptors();
    {
        // Fewer than the threads need.
        DescriptorLimit limit(needed - 1);
        ASSERT_TRUE(limit.ok());
        auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
        ASSERT_FALSE(s) << "counted " << threads << " threads with " << needed - 1
                        << " descriptors";
        EXPECT_EQ(s.error().status, Status::IoErr) << s.error().to_string();
        for (const std::string& part :
             {"process " + std::to_string(p.pid()), std::to_string(threads) + " threads",
              "RLIMIT_NOFILE is " + std::to_string(needed - 1), std::string{"ulimit -n"}}) {
            EXPECT_NE(s.error().message.find(part), std::string::npos)
                << part << " in: " << s.error().message;
        }
    }
    EXPECT_EQ(open_descriptors(), open_before);
    {
        // Enough for the threads alone, not with what is open already.
        DescriptorLimit limit(std::max(needed, open_before + needed / 2));
        ASSERT_TRUE(limit.ok());
        auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
        ASSERT_FALSE(s) << "counted " << threads << " threads with " << open_before
                        << " descriptors open already";
        EXPECT_EQ(s.error().status, Status::IoErr) << s.error().to_string();
        EXPECT_NE(s.error().message.find("out of file descriptors"), std::string::npos)
            << s.error().message;
        EXPECT_NE(s.error().message.find("RLIMIT_NOFILE is"), std::string::npos)
            << s.error().message;
        EXPECT_NE(s.error().message.find("process " + std::to_string(p.pid())), std::string::npos)
            << s.error().message;
    }
    EXPECT_EQ(open_descriptors(), open_before) << "descriptors left open by a failed start";
}

}  // namespace
}  // namespace monitor::perf
