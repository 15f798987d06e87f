// Real counting through perf_event_open with the kernel's software events, which count on
// any machine: the catalog, task-clock against the thread's CPU time, context switches of a
// workload that sleeps a known number of times, daemon-side multiplexing with a forced counter
// budget against a full-time count, and the errors for refused permissions and missing PMUs.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/derived_metrics.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "perf_events_probe.hpp"
#include "test_support.hpp"

namespace monitor::perf {
namespace {

using namespace std::chrono_literals;

EventCatalog catalog() {
    auto c = EventCatalog::create();
    EXPECT_TRUE(c.has_value()) << c.error().to_string();
    return std::move(*c);
}

std::chrono::nanoseconds thread_cpu_time() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Spins on this thread for `cpu` of CPU time, calling `every_slice` about every `slice`.
void spin_for(std::chrono::nanoseconds cpu, std::chrono::nanoseconds slice = 0ns,
              const std::function<void()>& every_slice = {}) {
    const auto start = thread_cpu_time();
    auto next = start + slice;
    volatile std::uint64_t sink = 0;
    while (thread_cpu_time() - start < cpu) {
        for (int i = 0; i < 1000; ++i) sink = sink + static_cast<std::uint64_t>(i);
        if (every_slice && thread_cpu_time() >= next) {
            every_slice();
            next += slice;
        }
    }
}

// Time the hypervisor took from this machine's CPUs so far (/proc/stat's steal column).
std::chrono::milliseconds steal_time() {
    return std::chrono::milliseconds(static_cast<std::int64_t>(test_support::steal_ns() / 1e6));
}

SessionOptions this_thread(std::string_view events) {
    SessionOptions o;
    o.events = *parse_event_list(events);
    o.target.kind = TargetKind::Thread;
    o.target.pid = static_cast<pid_t>(::syscall(SYS_gettid));
    return o;
}

std::unique_ptr<PerfSession> start(const EventCatalog& c, const SessionOptions& o) {
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
    if (!s && s.error().status == Status::Perm) return nullptr;
    EXPECT_TRUE(s.has_value()) << s.error().to_string();
    return s ? std::move(*s) : nullptr;
}

TEST(EventCatalog, ResolvesSoftwareEventsWithoutCounters) {
    auto c = catalog();
    auto e = c.resolve("perf::TASK-CLOCK");
    ASSERT_TRUE(e) << e.error().to_string();
    EXPECT_EQ(e->pmu, "perf");
    EXPECT_EQ(e->type, 1u);    // PERF_TYPE_SOFTWARE
    EXPECT_EQ(e->config, 1u);  // PERF_COUNT_SW_TASK_CLOCK
    EXPECT_EQ(e->counters, 0u);
    EXPECT_FALSE(e->pinned);
}

TEST(EventCatalog, ModifiersSelectUserOrKernel) {
    auto c = catalog();
    auto u = c.resolve("perf::CONTEXT-SWITCHES:u");
    ASSERT_TRUE(u) << u.error().to_string();
    EXPECT_FALSE(u->exclude_user);
    EXPECT_TRUE(u->exclude_kernel);
    auto k = c.resolve("ppc750::CYCLES:k");
    ASSERT_TRUE(k) << k.error().to_string();
    EXPECT_TRUE(k->exclude_user);
    EXPECT_FALSE(k->exclude_kernel);
    auto bad = c.resolve("ppc750::CYCLES:x");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().status, Status::BadArg);
    EXPECT_NE(bad.error().message.find(":x"), std::string::npos) << bad.error().message;
}

// A caller allowed user mode only (CallerRights::kernel() false): events that count both
// modes count user mode, named with ":u" added as perf names them; kernel-only ones are PERM.
TEST(EventCatalog, APlanForUserModeOnly) {
    auto c = catalog();
    auto o = this_thread("perf::TASK-CLOCK,ppc750::CYCLES:u,{ppc750::INSTRUCTIONS_COMPLETED}");
    o.user_only = "kernel mode is not for you";
    auto plan = make_plan(c, o);
    ASSERT_TRUE(plan) << plan.error().to_string();
    ASSERT_EQ(plan->events.size(), 3u);
    EXPECT_EQ(plan->events[0].name, "perf::TASK-CLOCK:u");
    EXPECT_EQ(plan->events[1].name, "ppc750::CYCLES:u");
    EXPECT_EQ(plan->events[2].name, "ppc750::INSTRUCTIONS_COMPLETED:u");
    for (const auto& e : plan->events) {
        EXPECT_TRUE(e.exclude_kernel) << e.name;
        EXPECT_FALSE(e.exclude_user) << e.name;
    }
    EXPECT_TRUE(plan->events[0].exclude_hv);  // as perf's fallback to :u sets it
    o = this_thread("perf::TASK-CLOCK,ppc750::CYCLES:k");
    o.user_only = "kernel mode is not for you";
    auto kernel = make_plan(c, o);
    ASSERT_FALSE(kernel);
    EXPECT_EQ(kernel.error().status, Status::Perm);
    EXPECT_NE(kernel.error().message.find("ppc750::CYCLES:k counts kernel mode only, and kernel "
                                          "mode is not for you"),
              std::string::npos)
        << kernel.error().message;
    // Without it, the names and modes are as asked.
    o.user_only.clear();
    auto both = make_plan(c, o);
    ASSERT_TRUE(both) << both.error().to_string();
    EXPECT_EQ(both->events[0].name, "perf::TASK-CLOCK");
    EXPECT_FALSE(both->events[0].exclude_kernel);
}

TEST(EventCatalog, HardwareEventsArePinnedAndNeedACounter) {
    auto c = catalog();
    auto cycles = c.resolve("cycles");
    ASSERT_TRUE(cycles) << cycles.error().to_string();
    EXPECT_NE(cycles->counters, 0u);
    EXPECT_TRUE(cycles->pinned);
    EXPECT_FALSE(cycles->counter_pmu.empty());
    auto misses = c.resolve("perf::CACHE-MISSES");
    ASSERT_TRUE(misses) << misses.error().to_string();
    EXPECT_FALSE(misses->pinned);
}

TEST(EventCatalog, UnknownNamesGetTheClosestKnownOnes) {
    auto c = catalog();
    auto e = c.resolve("ppc750::L1_ICACHE_MISES");
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().status, Status::NoEvent);
    EXPECT_NE(e.error().message.find("ppc750::L1_ICACHE_MISSES"), std::string::npos)
        << e.error().message;
    auto sw = c.resolve("perf::PERF_COUNT_SW_TASK_CLOK");
    ASSERT_FALSE(sw);
    EXPECT_NE(sw.error().message.find("PERF_COUNT_SW_TASK_CLOCK"), std::string::npos)
        << sw.error().message;
}

TEST(EventCatalog, RawCodes) {
    auto c = catalog();
    auto e = c.resolve("ppc750::r205");
    ASSERT_TRUE(e) << e.error().to_string();
    EXPECT_EQ(e->config, 0x205u);
    EXPECT_EQ(e->counters, 0x2u);  // PMC2 only
    auto reserved = c.resolve("ppc750::r30e");
    ASSERT_FALSE(reserved);
    EXPECT_EQ(reserved.error().status, Status::BadArg);
    EXPECT_NE(reserved.error().message.find("PMC3"), std::string::npos) << reserved.error().message;
}

TEST(EventCatalog, ListsEveryPmuAndPpc750) {
    auto c = catalog();
    ASSERT_NE(c.find_pmu("ppc750"), nullptr);
    EXPECT_EQ(c.find_pmu("ppc750")->counters, 4);
    EXPECT_EQ(c.find_pmu("ppc750")->counter_width, 32);
    ASSERT_NE(c.find_pmu("perf"), nullptr);
    auto ppc = c.list("ppc750");
    ASSERT_TRUE(ppc);
    EXPECT_GT(ppc->size(), 40u);
    auto perf = c.list("perf");
    ASSERT_TRUE(perf);
    EXPECT_TRUE(std::ranges::any_of(*perf, [](const EventInfo& e) {
        return e.name == "perf::PERF_COUNT_SW_TASK_CLOCK" && e.counters == 0;
    }));
    auto none = c.list("no_such_pmu");
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().message.find("ppc750"), std::string::npos);
}

TEST(EventList, ParsesGroups) {
    auto l = parse_event_list("a, {b,c},d");
    ASSERT_TRUE(l) << l.error().to_string();
    ASSERT_EQ(l->size(), 4u);
    EXPECT_EQ((*l)[0].name, "a");
    EXPECT_EQ((*l)[0].group, kNoGroup);
    EXPECT_EQ((*l)[1].name, "b");
    EXPECT_EQ((*l)[1].group, 0);
    EXPECT_EQ((*l)[2].group, 0);
    EXPECT_EQ((*l)[3].group, kNoGroup);
    for (auto bad : {"", "a,,b", "{a,b", "a}", "{a,{b}}", "{a}x"}) {
        EXPECT_FALSE(parse_event_list(bad)) << bad;
    }
}

TEST(CgroupTarget, PathsStayBelowTheCgroupRoot) {
    const std::string root = "/sys/fs/cgroup";
    for (auto [cgroup, dir] : std::initializer_list<std::pair<const char*, const char*>>{
             {"system.slice", "/sys/fs/cgroup/system.slice"},
             {"/system.slice/a.service", "/sys/fs/cgroup/system.slice/a.service"},
             {"/sys/fs/cgroup/system.slice", "/sys/fs/cgroup/system.slice"},
             {"/sys/fs/cgroup/", "/sys/fs/cgroup"},
             {"/", "/sys/fs/cgroup"},
             {"a/./b//c", "/sys/fs/cgroup/a/b/c"},
             // Not below the root by whole components: taken from the root.
             {"/sys/fs/cgroupX", "/sys/fs/cgroup/sys/fs/cgroupX"},
             {"/etc", "/sys/fs/cgroup/etc"},
         }) {
        auto d = cgroup_directory(root, cgroup);
        ASSERT_TRUE(d) << cgroup << ": " << d.error().to_string();
        EXPECT_EQ(*d, dir) << cgroup;
    }
    for (const char* out :
         {"..", "../etc", "system.slice/../../etc", "/sys/fs/cgroup/../x", "a/b/../c"}) {
        auto d = cgroup_directory(root, out);
        ASSERT_FALSE(d) << out << " -> " << *d;
        EXPECT_EQ(d.error().status, Status::BadArg);
        EXPECT_NE(d.error().message.find("'..' could lead out of the cgroup tree /sys/fs/cgroup"),
                  std::string::npos)
            << d.error().message;
    }
}

TEST(PerfCounting, TaskClockMatchesTheThreadsCpuTime) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto s = start(c, this_thread("perf::TASK-CLOCK"));
    if (!s) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    const auto steal_before = steal_time();
    auto before = thread_cpu_time();
    spin_for(300ms);
    auto cpu = thread_cpu_time() - before;
    const auto stolen = steal_time() - steal_before;
    ASSERT_TRUE(s->stop());
    auto r = s->read();
    ASSERT_TRUE(r) << r.error().to_string();
    const double counted = static_cast<double>(r->events[0].total.count);
    // task-clock runs while the thread is on a CPU, including time the hypervisor steals;
    // the thread's CPU time leaves steal out. On a busy host the two part.
    if (std::abs(counted - static_cast<double>(cpu.count())) >
            0.02 * static_cast<double>(cpu.count()) &&
        stolen > 6ms) {
        GTEST_SKIP() << "the hypervisor stole " << stolen.count()
                     << " ms meanwhile; task-clock counted " << counted << " ns against "
                     << cpu.count() << " ns of CPU time";
    }
    EXPECT_NEAR(counted, static_cast<double>(cpu.count()), 0.02 * static_cast<double>(cpu.count()))
        << "task-clock " << counted << " ns against " << cpu.count() << " ns of CPU time";
    EXPECT_DOUBLE_EQ(r->events[0].total.running_ratio(), 1.0);
}

TEST(PerfCounting, ContextSwitchesOfAWorkloadThatSleeps) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto s = start(c, this_thread("perf::CONTEXT-SWITCHES"));
    if (!s) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    constexpr int kSleeps = 200;
    const long before = test_support::thread_context_switches();
    for (int i = 0; i < kSleeps; ++i) std::this_thread::sleep_for(200us);
    const long switches = test_support::thread_context_switches() - before;
    ASSERT_TRUE(s->stop());
    auto r = s->read();
    ASSERT_TRUE(r) << r.error().to_string();
    // Each sleep blocks about once (a timer that expires before the thread is off the CPU
    // saves a switch; preemption adds one): the count is what the scheduler counted, give or
    // take the switches around reading it.
    const auto count = static_cast<double>(r->events[0].total.count);
    EXPECT_NEAR(count, static_cast<double>(switches), 3.0);
    EXPECT_GE(count, 0.9 * kSleeps);
}

TEST(PerfCounting, SoftwareEventsShareOneGroupReadInOneCall) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto o = this_thread("perf::TASK-CLOCK,perf::CONTEXT-SWITCHES,perf::PAGE-FAULTS");
    auto plan = make_plan(c, o);
    ASSERT_TRUE(plan) << plan.error().to_string();
    ASSERT_EQ(plan->kernel_groups.size(), 1u);
    EXPECT_EQ(plan->kernel_groups[0].members.size(), 3u);

    // The device: one read of the group gives each member's value at its place, the same a
    // read of that member alone gives, and the group's times.
    PerfEventDevice dev;
    const OpenTarget self{.pid = static_cast<pid_t>(::syscall(SYS_gettid))};
    std::vector<int> handles;
    for (const auto& m : plan->kernel_groups[0].members) {
        auto h = dev.open(plan->events[m.event], self, handles.empty() ? -1 : handles.front());
        if (!h && h.error().status == Status::Perm) GTEST_SKIP() << h.error().to_string();
        ASSERT_TRUE(h) << h.error().to_string();
        handles.push_back(*h);
    }
    ASSERT_TRUE(dev.enable(handles.front()));
    spin_for(50ms);
    for (int i = 0; i < 10; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(dev.disable(handles.front()));
    std::vector<CounterReading> group(3);
    auto r = dev.read_group(handles, group);
    ASSERT_TRUE(r) << r.error().to_string();
    // The thread's CPU clock and the task clock account a preemption a little differently:
    // on a busy machine the task clock of 50 ms of thread CPU time read 48.6 ms.
    EXPECT_GE(group[0].value, 47'500'000u) << "task-clock ns, for 50 ms of thread CPU time";
    EXPECT_GE(group[1].value, 10u) << "context switches";
    for (std::size_t i = 0; i < handles.size(); ++i) {
        auto one = dev.read(handles[i]);
        ASSERT_TRUE(one) << one.error().to_string();
        EXPECT_EQ(one->value, group[i].value) << "member " << i;
        EXPECT_EQ(group[i].enabled_ns, group[0].enabled_ns);
        EXPECT_EQ(group[i].running_ns, group[0].running_ns);
    }
    std::vector<CounterReading> too_few(2);
    EXPECT_FALSE(dev.read_group(std::span<const int>(handles).first(2), too_few))
        << "a group of 3 read as one of 2";
    // Without its leader a member is a group of its own and still reads its own count.
    dev.close(handles.front());
    auto orphan = dev.read(handles[1]);
    ASSERT_TRUE(orphan) << orphan.error().to_string();
    EXPECT_EQ(orphan->value, group[1].value);
}

TEST(PerfCounting, MultiplexedEstimatesMatchAFullTimeCount) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    // Four task clocks on a budget of two counters: two sets taking turns.
    auto muxed_options = this_thread(
        "perf::TASK-CLOCK,perf::PERF_COUNT_SW_TASK_CLOCK,perf::TASK-CLOCK,perf::TASK-CLOCK");
    muxed_options.counter_budget = 2;
    auto muxed = start(c, muxed_options);
    if (!muxed) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    ASSERT_EQ(muxed->plan().slots, 2);
    ASSERT_TRUE(muxed->rotates());
    auto full = start(c, this_thread("perf::TASK-CLOCK"));
    ASSERT_TRUE(full);

    spin_for(1s, 50ms, [&] { ASSERT_TRUE(muxed->rotate()); });
    ASSERT_TRUE(muxed->stop());
    ASSERT_TRUE(full->stop());
    auto m = muxed->read();
    auto f = full->read();
    ASSERT_TRUE(m && f);
    const double reference = static_cast<double>(f->events[0].total.count);
    EXPECT_GT(m->rotations, 10);
    for (const auto& e : m->events) {
        EXPECT_GT(e.total.running_ratio(), 0.3) << e.name;
        EXPECT_LT(e.total.running_ratio(), 0.7) << e.name;
        EXPECT_NEAR(e.total.scaled(), reference, 0.05 * reference)
            << e.name << ": scaled " << e.total.scaled() << " (count " << e.total.count
            << ", running " << e.total.running_ratio() << ") against " << reference;
    }
}

TEST(PerfCounting, KernelMultiplexingCountsSoftwareEventsAllTheTime) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto o = this_thread("perf::TASK-CLOCK,perf::TASK-CLOCK,perf::TASK-CLOCK");
    o.counter_budget = 1;
    o.mux = MuxMode::Kernel;
    auto s = start(c, o);
    if (!s) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    EXPECT_EQ(s->plan().slots, 3);
    EXPECT_FALSE(s->rotates());
    spin_for(100ms);
    ASSERT_TRUE(s->stop());
    auto r = s->read();
    ASSERT_TRUE(r);
    for (const auto& e : r->events) EXPECT_DOUBLE_EQ(e.total.running_ratio(), 1.0);
}

TEST(PerfCounting, IntervalReportsAddUpToTheTotal) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto s = start(c, this_thread("perf::TASK-CLOCK,perf::CONTEXT-SWITCHES"));
    if (!s) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    spin_for(50ms);
    auto first = s->read();
    spin_for(50ms);
    ASSERT_TRUE(s->stop());
    auto total = s->read();
    ASSERT_TRUE(first && total);
    auto second = total->since(*first);
    EXPECT_EQ(first->events[0].total.count + second.events[0].total.count,
              total->events[0].total.count);
    EXPECT_GT(second.events[0].total.count, 40'000'000u);  // ~50 ms of CPU time
}

// A paused session counts nothing and its times stand still, and its reports say how long it
// was paused; resumed, it counts on from there (alone, and when its sets take turns: no
// rotation while paused, and the estimates still match a full-time count paused alike).
TEST(PerfCounting, PausedCountsAndTimesStandStillAndResumeCountsOn) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto muxed_options = this_thread("perf::TASK-CLOCK,perf::TASK-CLOCK,perf::TASK-CLOCK");
    muxed_options.counter_budget = 1;
    auto muxed = start(c, muxed_options);
    if (!muxed) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    ASSERT_TRUE(muxed->rotates());
    auto kernel_options = muxed_options;
    kernel_options.mux = MuxMode::Kernel;
    auto kernel = start(c, kernel_options);
    auto full = start(c, this_thread("perf::TASK-CLOCK"));
    ASSERT_TRUE(kernel && full);
    auto rotate = [&] { ASSERT_TRUE(muxed->rotate()); };

    spin_for(300ms, 20ms, rotate);
    for (auto* s : {muxed.get(), kernel.get(), full.get()}) {
        ASSERT_TRUE(s->pause());
        ASSERT_TRUE(s->pause()) << "twice is once";
        EXPECT_TRUE(s->paused());
    }
    auto before = full->read();
    auto muxed_before = muxed->read();
    ASSERT_TRUE(before && muxed_before);
    spin_for(200ms, 20ms, rotate);
    auto during = full->read();
    auto muxed_during = muxed->read();
    ASSERT_TRUE(during && muxed_during);
    EXPECT_EQ(during->events[0].total.count, before->events[0].total.count);
    EXPECT_EQ(during->events[0].total.enabled_ns, before->events[0].total.enabled_ns);
    EXPECT_EQ(muxed_during->rotations, muxed_before->rotations) << "no turns while paused";
    for (std::size_t e = 0; e < 3; ++e) {
        EXPECT_EQ(muxed_during->events[e].total.count, muxed_before->events[e].total.count);
    }
    EXPECT_GE(during->paused, 200ms);
    EXPECT_LE(during->paused, during->elapsed);

    for (auto* s : {muxed.get(), kernel.get(), full.get()}) {
        ASSERT_TRUE(s->resume());
        EXPECT_FALSE(s->paused());
    }
    spin_for(300ms, 20ms, rotate);
    for (auto* s : {muxed.get(), kernel.get(), full.get()}) ASSERT_TRUE(s->stop());
    auto f = full->read();
    auto m = muxed->read();
    auto k = kernel->read();
    ASSERT_TRUE(f && m && k);
    // About 600 ms of CPU time counted, the 200 ms paused not.
    const double reference = static_cast<double>(f->events[0].total.count);
    EXPECT_GT(reference, 0.5e9);
    EXPECT_LT(reference, 0.75e9);
    EXPECT_GE(f->paused, 200ms);
    // A thread's counter is enabled while the thread runs (the kernel's task time): here the
    // 600 ms it spun unpaused, within the time not paused (without the pause, the 200 ms spun
    // paused would be in it too).
    const double counted_ns =
        std::chrono::duration<double, std::nano>(f->elapsed - f->paused).count();
    EXPECT_LE(static_cast<double>(f->events[0].total.enabled_ns), counted_ns + 1e6);
    EXPECT_GE(static_cast<double>(f->events[0].total.enabled_ns), 0.55e9);
    EXPECT_GT(m->rotations, muxed_during->rotations);
    for (const auto* r : {&*m, &*k}) {
        for (const auto& e : r->events) {
            EXPECT_NEAR(e.total.scaled(), reference, 0.1 * reference)
                << e.name << ": scaled " << e.total.scaled() << " (running "
                << e.total.running_ratio() << ") against " << reference;
        }
    }
    // The period that held the pause says how long it was paused.
    EXPECT_GE(f->since(*before).paused, 200ms);
    EXPECT_EQ(before->since(*before).paused, 0ns);
    // The CPUs the thread kept busy, over the time counted: its enabled time against the time
    // not paused (over the elapsed time, the 200 ms paused would lower it by a quarter).
    auto metrics = derive_metrics(full->plan(), *f);
    ASSERT_EQ(metrics.size(), 1u);
    EXPECT_NEAR(metrics[0].value, static_cast<double>(f->events[0].total.count) / counted_ns, 1e-9);
}

// A session that the kernel starts at an exec is not paused: the exec would start it again.
TEST(PerfCounting, ASessionStartedAtAnExecIsNotPaused) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::pause();
        ::_exit(0);
    }
    // Gone whatever the test finds.
    struct Reap {
        pid_t pid;
        ~Reap() {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    } reap{child};
    SessionOptions o;
    o.events = *parse_event_list("perf::TASK-CLOCK");
    o.target.kind = TargetKind::Process;
    o.target.pid = child;
    o.target.enable_on_exec = true;
    auto s = start(c, o);
    if (s) {
        auto r = s->pause();
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().status, Status::BadState);
        EXPECT_NE(r.error().message.find("started at an exec"), std::string::npos)
            << r.error().message;
        EXPECT_FALSE(s->paused());
    }
    if (!s) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
}

// Reading into a kept report (what the daemon does every period) gives what read() gives,
// whatever the report held before; subtract() in place is since().
TEST(PerfCounting, ReadingIntoAKeptReportEqualsAFreshRead) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto s = start(c, this_thread("perf::TASK-CLOCK,perf::CONTEXT-SWITCHES"));
    if (!s) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    spin_for(20ms);
    PerfReport kept;
    kept.events.resize(5);  // another shape, with stale content
    kept.events[3].name = "stale";
    kept.events[0].per_instance.resize(7);
    kept.groups.resize(4);
    kept.instances = {1, 2, 3};
    ASSERT_TRUE(s->read(kept));
    spin_for(20ms);
    ASSERT_TRUE(s->stop());
    auto fresh = s->read();
    ASSERT_TRUE(fresh);
    PerfReport again = kept;
    ASSERT_TRUE(s->read(again));  // stopped: the same counts as `fresh`
    ASSERT_EQ(again.events.size(), 2u);
    EXPECT_EQ(again.instances, fresh->instances);
    EXPECT_EQ(again.elapsed, fresh->elapsed);
    for (std::size_t e = 0; e < 2; ++e) {
        EXPECT_EQ(again.events[e].name, fresh->events[e].name);
        EXPECT_EQ(again.events[e].canonical, fresh->events[e].canonical);
        EXPECT_EQ(again.events[e].total.count, fresh->events[e].total.count);
        EXPECT_EQ(again.events[e].total.enabled_ns, fresh->events[e].total.enabled_ns);
        ASSERT_EQ(again.events[e].per_instance.size(), fresh->events[e].per_instance.size());
    }
    ASSERT_EQ(again.groups.size(), fresh->groups.size());
    for (std::size_t g = 0; g < again.groups.size(); ++g) {
        EXPECT_EQ(again.groups[g].counts, fresh->groups[g].counts);
        EXPECT_EQ(again.groups[g].events, fresh->groups[g].events);
        EXPECT_EQ(again.groups[g].running_ns, fresh->groups[g].running_ns);
    }
    PerfReport delta = again;
    delta.subtract(kept);
    const PerfReport since = again.since(kept);
    EXPECT_EQ(delta.elapsed, since.elapsed);
    EXPECT_EQ(delta.events[0].total.count, since.events[0].total.count);
    EXPECT_EQ(delta.events[0].total.count + kept.events[0].total.count,
              again.events[0].total.count);
    EXPECT_GT(delta.events[0].total.count, 15'000'000u);  // ~20 ms of CPU time
}

TEST(PerfCounting, CpusUtilizedFromTaskClock) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    const auto wall_before = std::chrono::steady_clock::now();
    const auto cpu_before = thread_cpu_time();
    auto s = start(c, this_thread("perf::TASK-CLOCK"));
    if (!s) GTEST_SKIP() << "perf_event_open refused: kernel.perf_event_paranoid too high";
    spin_for(100ms);
    ASSERT_TRUE(s->stop());
    const auto cpu = thread_cpu_time() - cpu_before;
    const auto wall = std::chrono::steady_clock::now() - wall_before;
    auto r = s->read();
    ASSERT_TRUE(r);
    auto metrics = derive_metrics(s->plan(), *r);
    ASSERT_EQ(metrics.size(), 1u);
    EXPECT_EQ(metrics[0].name, "cpus_utilized");
    // One spinning thread: the share of the time it ran, which a loaded machine lowers. The
    // kernel's own account of the thread's CPU time over the same interval (a little wider:
    // the session's start and stop) says what that share was.
    const double ran = static_cast<double>(cpu.count()) / static_cast<double>(wall.count());
    EXPECT_NEAR(metrics[0].value, ran, 0.1) << "the thread ran " << cpu << " of " << wall;
    EXPECT_GT(metrics[0].value, 0.05);
    EXPECT_LE(metrics[0].value, 1.05);
}

// A file budget: a session that would open more perf_event files (one per event and CPU, or
// per event and thread) is refused before it opens any, naming the budget; one that fits
// holds as many as it says.
TEST(PerfCounting, AFileBudgetRefusesASessionThatOpensMore) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    SessionOptions o;
    o.events = *parse_event_list("perf::CPU-CLOCK,perf::CONTEXT-SWITCHES,perf::PAGE-FAULTS");
    o.target.kind = TargetKind::EachCpu;
    auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    o.cpus = *online;
    const std::size_t needed = 3 * o.cpus.size();
    o.files = {.most = needed - 1, .source = "the test's budget"};
    auto refused = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().status, Status::BadArg);
    EXPECT_EQ(refused.error().message,
              fmt::format("counting 3 events on each of {} CPUs opens {} perf_event files, more "
                          "than the {} allowed (the test's budget): measure fewer events, CPUs "
                          "or threads",
                          o.cpus.size(), needed, needed - 1));
    EXPECT_TRUE(o.files.refused(refused.error()));
    o.files.most = needed;
    if (auto s = start(c, o)) {
        EXPECT_EQ(s->files(), needed);
    }

    // This process, a file per event and thread.
    std::atomic<bool> stop = false;
    std::thread other([&] {
        while (!stop) std::this_thread::sleep_for(10ms);
    });
    const auto threads = static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                      std::filesystem::directory_iterator{}));
    o.target = {.kind = TargetKind::Process, .pid = ::getpid()};
    o.files.most = 3 * threads - 1;
    auto process = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
    ASSERT_FALSE(process);
    EXPECT_NE(process.error().message.find(fmt::format(
                  "counting 3 events on each of the {} threads of process {} opens {} perf_event "
                  "files, more than the {} allowed",
                  threads, ::getpid(), 3 * threads, 3 * threads - 1)),
              std::string::npos)
        << process.error().message;
    o.files.most = 0;  // no budget: RLIMIT_NOFILE alone
    if (auto s = start(c, o)) {
        EXPECT_EQ(s->files(), 3 * threads);
    }
    stop = true;
    other.join();
}

// With visit_cpus the reading thread moves to each CPU to read and switch its counters, and
// is back where it was afterwards; the counts are those of every CPU, as without.
TEST(PerfCounting, VisitingCpusCountsEveryCpuAndRestoresTheAffinity) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    SessionOptions o;
    o.events = *parse_event_list("perf::CPU-CLOCK,perf::CPU-CLOCK");
    o.target.kind = TargetKind::EachCpu;
    o.counter_budget = 1;  // two sets that rotate: enable and disable on each CPU too
    o.visit_cpus = true;
    auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    o.cpus = *online;
    cpu_set_t before;
    ASSERT_EQ(::sched_getaffinity(0, sizeof before, &before), 0);
    auto s = start(c, o);
    if (!s) GTEST_SKIP() << "counting every CPU needs CAP_PERFMON or root";
    ASSERT_TRUE(s->rotates());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 6; ++i) {
        std::this_thread::sleep_for(50ms);
        ASSERT_TRUE(s->rotate());
    }
    ASSERT_TRUE(s->stop());
    const double wall_ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    auto r = s->read();
    ASSERT_TRUE(r);
    cpu_set_t after;
    ASSERT_EQ(::sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the thread was left pinned";
    ASSERT_EQ(r->instances.size(), o.cpus.size());
    for (const auto& e : r->events) {
        for (std::size_t i = 0; i < e.per_instance.size(); ++i) {
            // Each CPU's clock runs with wall time; each set counted half of it.
            EXPECT_NEAR(e.per_instance[i].scaled(), wall_ns, 0.1 * wall_ns)
                << e.name << " on cpu" << r->instances[i];
            EXPECT_NEAR(e.per_instance[i].running_ratio(), 0.5, 0.1);
        }
    }
}

TEST(PerfCounting, HardwareEventsWithoutAPmuSayWhy) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto c = catalog();
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), this_thread("cycles"));
    if (s) GTEST_SKIP() << "this machine has hardware counters";
    if (s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    EXPECT_EQ(s.error().status, Status::NoPmu) << s.error().to_string();
    EXPECT_NE(s.error().message.find("cycles"), std::string::npos);
    EXPECT_NE(s.error().message.find("no PMU driver"), std::string::npos);
    EXPECT_NE(s.error().message.find("perf::TASK-CLOCK"), std::string::npos);
}

TEST(PerfCounting, Ppc750EventsOnAnotherProcessorSayWhy) {
    auto c = catalog();
    auto s =
        PerfSession::start(c, std::make_unique<PerfEventDevice>(), this_thread("ppc750::CYCLES"));
    ASSERT_FALSE(s);
    if (s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    EXPECT_TRUE(s.error().status == Status::NoPmu || s.error().status == Status::BadArg)
        << s.error().to_string();
    EXPECT_NE(s.error().message.find("ppc750::CYCLES"), std::string::npos);
}

// Runs `body` as the user nobody in a child process and returns what it wrote.
std::string as_nobody(const std::function<std::string()>& body) {
    int fds[2];
    if (::pipe(fds) < 0) return "pipe failed";
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        std::string out = ::setgid(65534) == 0 && ::setuid(65534) == 0 ? body() : "setuid failed";
        (void)::write(fds[1], out.data(), out.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    return out;
}

TEST(PerfPermissions, UnprivilegedSystemWideCountingNamesTheFix) {
    SKIP_WITHOUT_PERF_EVENTS();
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a case as the user nobody";
    auto level = perf_event_paranoid();
    if (!level || *level < 1) GTEST_SKIP() << "kernel.perf_event_paranoid allows it";
    auto c = catalog();
    std::string msg = as_nobody([&] {
        SessionOptions o;
        o.events = *parse_event_list("perf::TASK-CLOCK");
        o.target.kind = TargetKind::AllCpus;
        o.cpus = {0};
        auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
        return s ? std::string("counted") : s.error().to_string();
    });
    EXPECT_NE(msg.find("PERM"), std::string::npos) << msg;
    EXPECT_NE(msg.find("perf_event_paranoid is " + std::to_string(*level)), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("CAP_PERFMON"), std::string::npos) << msg;
    EXPECT_NE(msg.find("perf::TASK-CLOCK on cpu0"), std::string::npos) << msg;
}

TEST(PerfPermissions, AnotherUsersProcessIsRefused) {
    SKIP_WITHOUT_PERF_EVENTS();
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a case as the user nobody";
    auto c = catalog();
    const pid_t root_process = ::getpid();
    std::string msg = as_nobody([&] {
        SessionOptions o;
        o.events = *parse_event_list("perf::TASK-CLOCK:u");
        o.target.kind = TargetKind::Process;
        o.target.pid = root_process;
        auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
        return s ? std::string("counted") : s.error().to_string();
    });
    EXPECT_NE(msg.find("PERM"), std::string::npos) << msg;
    EXPECT_NE(msg.find("process " + std::to_string(root_process)), std::string::npos) << msg;
}

}  // namespace
}  // namespace monitor::perf
