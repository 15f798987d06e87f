// PC sampling on this thread through a real sample ring (the task clock samples on any
// machine): two functions that burn CPU 3:1 get 75 % and 25 % of the samples by name, a
// histogram over the first one's addresses sums to its share, samples the ring had no room
// for are reported lost, and bad rates and address ranges are refused. Call chains fold into
// stacks outermost first; a profile of each CPU keeps each CPU's own; the vDSO is named.
#include "monitor/perf/profile.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "monitor/perf/profile_session.hpp"
#include "monitor/perf/sample_ring.hpp"
#include "monitor/text_file.hpp"
#include "perf_events_probe.hpp"

extern "C" {
// Burn this thread's CPU for `ns` of its CPU time.
[[gnu::noinline, gnu::used]] void monitord_profile_burn_three(std::int64_t ns);
[[gnu::noinline, gnu::used]] void monitord_profile_burn_one(std::int64_t ns);
}

namespace {

std::int64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

extern "C" {
void monitord_profile_burn_three(std::int64_t ns) {
    const std::int64_t end = thread_cpu_ns() + ns;
    volatile std::uint64_t sink = 0;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 100'000; ++i) sink = sink + static_cast<std::uint64_t>(i);
    }
}
void monitord_profile_burn_one(std::int64_t ns) {
    const std::int64_t end = thread_cpu_ns() + ns;
    volatile std::uint64_t sink = 0;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 100'000; ++i) sink = sink + static_cast<std::uint64_t>(i);
    }
}
}

namespace monitor::perf {
namespace {

using namespace std::chrono_literals;

EventSpec task_clock() {
    auto c = EventCatalog::create();
    EXPECT_TRUE(c) << c.error().to_string();
    auto s = c->resolve("perf::TASK-CLOCK");
    EXPECT_TRUE(s) << s.error().to_string();
    return *s;
}

OpenTarget this_thread() {
    return {.pid = static_cast<pid_t>(::syscall(SYS_gettid))};
}

// Opens a task-clock sample ring on this thread, or says why the test cannot run.
std::unique_ptr<SampleRing> ring_or_skip(SampleRate rate, std::size_t pages, std::string& why) {
    auto r = SampleRing::open(task_clock(), this_thread(), rate, pages);
    if (!r) {
        why = r.error().to_string();
        return nullptr;
    }
    return std::move(*r);
}

TEST(Profile, TwoFunctionsBurningThreeToOneGetThreeQuartersAndAQuarter) {
    std::string why;
    auto ring = ring_or_skip({.period = 1'000'000}, 512, why);  // every 1 ms of task clock
    if (!ring) GTEST_SKIP() << "cannot sample here: " << why;
    Profile profile;
    AddressNames names;
    auto drain = [&] { profile.add(ring->drain([&](const Sample& s) { profile.add(s, names); })); };
    ASSERT_TRUE(ring->enable());
    // 1.2 s of CPU in chunks of 30 + 10 ms; the ring holds it all, drained at the end so
    // that naming the samples is not sampled.
    for (int i = 0; i < 30; ++i) {
        monitord_profile_burn_three(30'000'000);
        monitord_profile_burn_one(10'000'000);
    }
    ASSERT_TRUE(ring->disable());
    drain();

    const auto report = profile.report();
    ASSERT_GT(report.samples, 1000u) << "about 1200 samples were due";
    EXPECT_EQ(report.lost, 0u);
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    auto share = [&](const std::string& function) {
        for (const auto& l : report.functions) {
            if (l.name == function + " (" + exe + ")") return l.percent;
        }
        return -1.0;
    };
    const double three = share("monitord_profile_burn_three");
    const double one = share("monitord_profile_burn_one");
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(5, report.functions.size()); ++i) {
        top +=
            fmt::format("  {:5.1f} % {}\n", report.functions[i].percent, report.functions[i].name);
    }
    EXPECT_NEAR(three, 75.0, 5.0) << top;
    EXPECT_NEAR(one, 25.0, 5.0) << top;
    EXPECT_EQ(report.modes.user + report.modes.kernel + report.modes.idle + report.modes.other,
              report.samples);
    EXPECT_GT(report.modes.user, report.samples * 9 / 10) << "the burners run in user mode";
    EXPECT_EQ(report.modes.idle, 0u) << "this thread is never the idle task";

    // A histogram over the first function's own addresses holds its share, bucket by bucket.
    auto sym = find_process_symbol(::getpid(), "monitord_profile_burn_three");
    ASSERT_TRUE(sym) << sym.error().to_string();
    ASSERT_GT(sym->size, 0u);
    auto h = profile.histogram(sym->address, sym->address + sym->size);
    ASSERT_TRUE(h) << h.error().to_string();
    EXPECT_EQ(h->buckets.size(), (sym->size + 3) / 4);
    EXPECT_EQ(std::accumulate(h->buckets.begin(), h->buckets.end(), std::uint64_t{0}), h->samples);
    EXPECT_NEAR(100.0 * static_cast<double>(h->samples) / static_cast<double>(report.samples),
                three, 0.01)
        << "the range holds exactly the function's samples";
    std::printf(
        "%llu samples: burn_three %.1f %%, burn_one %.1f %%; the range of burn_three "
        "(%llu bytes) %llu samples\n",
        static_cast<unsigned long long>(report.samples), three, one,
        static_cast<unsigned long long>(sym->size), static_cast<unsigned long long>(h->samples));
}

// A ring too small for what comes between two drains: the kernel drops the rest and says so,
// and the profile reports it.
TEST(Profile, SamplesTheRingHadNoRoomForAreReportedLost) {
    std::string why;
    auto ring = ring_or_skip({.period = 100'000}, 1, why);  // every 0.1 ms, one page
    if (!ring) GTEST_SKIP() << "cannot sample here: " << why;
    Profile profile;
    AddressNames names;
    ASSERT_TRUE(ring->enable());
    monitord_profile_burn_one(200'000'000);  // about 2000 samples; a page holds 102
    profile.add(ring->drain([&](const Sample& s) { profile.add(s, names); }));
    const std::uint64_t kept_of_the_flood = profile.report().samples;
    // The kernel reports the loss once it has room. Burned in small steps, each drained, so
    // that the ring never fills again: a loss after the last report would go unreported
    // (the address sanitizer's build burns 4 times slower: 5 M at once overflowed it).
    for (int step = 0; step < 10; ++step) {
        monitord_profile_burn_one(500'000);
        profile.add(ring->drain([&](const Sample& s) { profile.add(s, names); }));
    }
    ASSERT_TRUE(ring->disable());
    profile.add(ring->drain([&](const Sample& s) { profile.add(s, names); }));
    const auto report = profile.report();
    auto counted = ring->count();
    ASSERT_TRUE(counted) << counted.error().to_string();
    const std::uint64_t due = *counted / 100'000;
    EXPECT_GT(report.lost, 1000u) << report.samples << " samples kept";
    // A sample record is 40 bytes (header, ip, pid/tid, time, cpu): 102 to a 4 KiB page.
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    EXPECT_LE(kept_of_the_flood, page / 40) << "a page's worth of the flood";
    // Never more than was due (2 %: a few fall due at the very end, as the event is
    // disabled); fewer under load: the task clock samples from an hrtimer, which the kernel
    // forwards past the periods it fired late for, one sample a firing (perf_swevent_hrtimer):
    // 2 % fewer seen at 10,000 a second beside two busy processes.
    const auto accounted = static_cast<double>(report.samples + report.lost);
    EXPECT_LE(accounted, 1.02 * static_cast<double>(due))
        << report.samples << " kept, " << report.lost << " lost, " << due << " due";
    EXPECT_GE(accounted, 0.9 * static_cast<double>(due))
        << "kept and lost make up what was due: " << report.samples << " kept, " << report.lost
        << " lost, " << due << " due";
}

// A child of this test that burns CPU 3:1 in the two functions, 40 ms of CPU a round, says
// so, and exits when told to.
class Burner {
  public:
    explicit Burner(int rounds = 30) {
        int done[2];
        int go[2];
        if (::pipe2(done, O_CLOEXEC) < 0 || ::pipe2(go, O_CLOEXEC) < 0) return;
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(done[0]);
            ::close(go[1]);
            char byte = 0;
            if (::read(go[0], &byte, 1) != 1) ::_exit(1);
            for (int i = 0; i < rounds; ++i) {
                monitord_profile_burn_three(30'000'000);
                monitord_profile_burn_one(10'000'000);
            }
            (void)::write(done[1], "d", 1);
            while (::read(go[0], &byte, 1) > 0) {
            }
            ::_exit(0);
        }
        ::close(done[1]);
        ::close(go[0]);
        done_ = done[0];
        go_ = go[1];
    }
    ~Burner() {
        if (go_ >= 0) ::close(go_);
        if (done_ >= 0) ::close(done_);
        if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    }
    pid_t pid() const { return pid_; }
    void go() { (void)::write(go_, "g", 1); }
    // Whether it has burnt all it had to, waiting up to `ms`.
    bool done(int ms) {
        pollfd p{done_, POLLIN, 0};
        return ::poll(&p, 1, ms) == 1;
    }

  private:
    pid_t pid_ = -1;
    int done_ = -1;
    int go_ = -1;
};

// The share of `function` of this test program in `report`, -1 when absent.
double share(const ProfileReport& report, const std::string& function) {
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    for (const auto& l : report.functions) {
        if (l.name == function + " (" + exe + ")") return l.percent;
    }
    return -1;
}

// Runs `burner` under `session`, draining as it goes (the child's code is named while it
// lives), and stops the session.
void profile_run(ProfileSession& session, Burner& burner) {
    burner.go();
    for (int i = 0; i < 300 && !burner.done(100); ++i) session.drain();
    ASSERT_TRUE(session.stop());
}

// Starts a profile with `o` on every online CPU.
Result<std::unique_ptr<ProfileSession>> start_profile(ProfileOptions o) {
    auto c = EventCatalog::create();
    if (!c) return std::unexpected(c.error());
    auto online = monitor::read_online_cpus("/sys");
    if (!online) return std::unexpected(online.error());
    o.cpus = *online;
    return ProfileSession::start(*c, o);
}

// A software event counted by the kernel one event at a time (page faults) sampled every 100
// events: a sample per 100 faults, each standing for 100, not one per fault (which the kernel
// does when the period is asked for with each sample).
TEST(Profile, ASoftwareEventWithAPeriodIsSampledEveryPeriodEvents) {
    auto c = EventCatalog::create();
    ASSERT_TRUE(c) << c.error().to_string();
    auto faults = c->resolve("perf::PAGE-FAULTS");
    ASSERT_TRUE(faults) << faults.error().to_string();
    faults->exclude_kernel = true;  // sampling the kernel may need privileges
    auto ring = SampleRing::open(*faults, this_thread(), {.period = 100}, 64);
    if (!ring) GTEST_SKIP() << "cannot sample here: " << ring.error().to_string();
    constexpr std::size_t kPages = 3000;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* memory =
        ::mmap(nullptr, kPages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(memory, MAP_FAILED);
    ASSERT_TRUE((*ring)->enable());
    for (std::size_t i = 0; i < kPages; ++i) static_cast<volatile char*>(memory)[i * page] = 1;
    ASSERT_TRUE((*ring)->disable());
    ::munmap(memory, kPages * page);
    auto counted = (*ring)->count();
    ASSERT_TRUE(counted) << counted.error().to_string();
    std::size_t samples = 0;
    std::uint64_t periods = 0;
    const auto stats = (*ring)->drain([&](const Sample& s) {
        ++samples;
        periods += s.period;
    });
    EXPECT_EQ(stats.lost, 0u);
    EXPECT_GE(*counted, kPages) << "a fault per page at least";
    EXPECT_EQ(samples, *counted / 100) << *counted << " faults";
    EXPECT_EQ(periods, samples * 100u);
}

TEST(ProfileSession, AProcessIsSampledOnEveryCpuByName) {
    SKIP_WITHOUT_PERF_EVENTS();
    const auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    Burner burner;
    ASSERT_GT(burner.pid(), 0);
    ProfileOptions o;
    o.target = {.kind = TargetKind::Process, .pid = burner.pid()};
    o.rate = {.frequency = 1000};
    // Its threads: one, and under a sanitizer the runtime's own thread too.
    auto tasks = [&] {
        std::size_t n = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(
                 "/proc/" + std::to_string(burner.pid()) + "/task")) {
            ++n;
        }
        return n;
    };
    const std::size_t before = tasks();
    auto s = start_profile(o);
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().to_string();
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_GE((*s)->threads(), before);
    EXPECT_LE((*s)->threads(), tasks());
    EXPECT_EQ((*s)->fds().size(), online->size()) << "a ring on every CPU";
    profile_run(**s, burner);
    const auto report = (*s)->profile().report(5);
    ASSERT_GT(report.samples, 900u) << "about 1200 were due";
    const double three = share(report, "monitord_profile_burn_three");
    const double one = share(report, "monitord_profile_burn_one");
    EXPECT_NEAR(three, 75.0, 5.0);
    EXPECT_NEAR(one, 25.0, 5.0);
    EXPECT_EQ(report.modes.idle, 0u) << "a process is never the idle task";
    std::printf("process %d: %llu samples, burn_three %.1f %%, burn_one %.1f %%\n", burner.pid(),
                static_cast<unsigned long long>(report.samples), three, one);
}

// A file budget: a profile that would open more perf_event files (one per CPU and thread of
// its target) is refused before it opens any; one that fits holds as many as it says.
TEST(ProfileSession, AFileBudgetRefusesAProfileThatOpensMore) {
    SKIP_WITHOUT_PERF_EVENTS();
    const auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    std::atomic<bool> stop = false;
    std::thread other([&] {  // two threads at least
        while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    });
    const auto threads = static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                      std::filesystem::directory_iterator{}));
    const std::size_t needed = online->size() * threads;
    ProfileOptions o;
    o.target = {.kind = TargetKind::Process, .pid = ::getpid()};
    o.rate = {.frequency = 100};
    o.profile = false;
    o.files = {.most = needed - 1, .source = "the test's budget"};
    auto refused = start_profile(o);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().status, Status::BadArg);
    EXPECT_EQ(refused.error().message,
              fmt::format("sampling the {} threads of process {} on each of {} CPUs opens {} "
                          "perf_event files, more than the {} allowed (the test's budget): "
                          "measure fewer events, CPUs or threads",
                          threads, ::getpid(), online->size(), needed, needed - 1));
    EXPECT_TRUE(o.files.refused(refused.error()));
    EXPECT_FALSE(
        (FileBudget{.most = needed, .source = "the test's budget"}.refused(refused.error())))
        << "another budget's refusal";
    o.files.most = needed;
    auto fits = start_profile(o);
    if (!fits && fits.error().status == Status::Perm) GTEST_SKIP() << fits.error().to_string();
    ASSERT_TRUE(fits) << fits.error().to_string();
    EXPECT_EQ((*fits)->files(), needed);
    stop = true;
    other.join();
}

// Every CPU, everything on them: the burner's functions keep their 3:1 (within 8 points:
// 0.4 s of it at 500 Hz, about 200 samples), and every sample is of one mode or another.
// Every process sampled is named, so it is kept short.
TEST(ProfileSession, AllCpusSampleEverything) {
    SKIP_WITHOUT_PERF_EVENTS();
    Burner burner(10);
    ASSERT_GT(burner.pid(), 0);
    ProfileOptions o;
    o.target = {.kind = TargetKind::AllCpus};
    o.rate = {.frequency = 500};
    auto s = start_profile(o);
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().to_string();
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ((*s)->threads(), 0u);
    profile_run(**s, burner);
    const auto report = (*s)->profile().report();
    const double three = share(report, "monitord_profile_burn_three");
    const double one = share(report, "monitord_profile_burn_one");
    ASSERT_GT(three, 0) << "the burner was sampled";
    EXPECT_NEAR(three / (three + one), 0.75, 0.08);
    const auto& m = report.modes;
    EXPECT_EQ(m.idle + m.user + m.kernel + m.other, report.samples);
    std::printf("all CPUs: %llu samples: %llu idle, %llu user, %llu kernel\n",
                static_cast<unsigned long long>(report.samples),
                static_cast<unsigned long long>(m.idle), static_cast<unsigned long long>(m.user),
                static_cast<unsigned long long>(m.kernel));
}

// The task clock's samples of the burner child with their call chains: every stack starts with
// the process's name, ends with the function its sample is counted under (so a function's
// stacks hold exactly its samples), and has its callers before it, the same caller each time
// (a return address is named by the call before it); a chain's kernel part comes last.
TEST(ProfileSession, CallChainsFoldIntoStacksOutermostFirst) {
    SKIP_WITHOUT_PERF_EVENTS();
    Burner burner(10);
    ASSERT_GT(burner.pid(), 0);
    ProfileOptions o;
    o.target = {.kind = TargetKind::Process, .pid = burner.pid()};
    o.rate = {.frequency = 1000};
    o.callchain = true;
    auto s = start_profile(o);
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().to_string();
    ASSERT_TRUE(s) << s.error().to_string();
    profile_run(**s, burner);
    const auto report = (*s)->profile().report();
    ASSERT_GT(report.samples, 200u) << "about 400 were due";
    auto comm = read_text_file("/proc/self/comm");
    ASSERT_TRUE(comm);
    const std::string command = comm->substr(0, comm->find('\n'));

    std::uint64_t in_stacks = 0, three = 0, three_with_caller = 0;
    std::map<std::string, std::uint64_t> callers;
    for (const auto& l : report.stacks) {
        in_stacks += l.samples;
        ASSERT_TRUE(l.name.starts_with(command + ";")) << l.name;
        std::vector<std::string> frames;
        for (std::size_t at = 0, end = 0; at <= l.name.size(); at = end + 1) {
            end = std::min(l.name.find(';', at), l.name.size());
            frames.push_back(l.name.substr(at, end - at));
        }
        // Kernel frames (_[k]) are innermost: none after them is user code.
        const auto kernel =
            std::ranges::find_if(frames, [](const std::string& f) { return f.ends_with("_[k]"); });
        for (auto f = kernel; f != frames.end(); ++f) EXPECT_TRUE(f->ends_with("_[k]")) << l.name;
        if (frames.back() == "monitord_profile_burn_three") {
            three += l.samples;
            if (frames.size() > 2) {
                three_with_caller += l.samples;
                callers[frames[frames.size() - 2]] += l.samples;
            }
        }
    }
    EXPECT_EQ(in_stacks, report.samples) << "every sample has its stack";
    const auto by_function = std::ranges::find_if(report.functions, [](const ProfileLine& l) {
        return l.name.starts_with("monitord_profile_burn_three (");
    });
    ASSERT_NE(by_function, report.functions.end());
    EXPECT_EQ(three, by_function->samples) << "a stack ends where its sample was";
    EXPECT_GT(three_with_caller, three * 9 / 10) << "the caller is found by its frame pointer";
    ASSERT_FALSE(callers.empty());
    const auto top = std::ranges::max_element(callers, {}, [](const auto& e) { return e.second; });
    EXPECT_GT(top->second, three_with_caller * 9 / 10) << "one caller: " << top->first;
    std::printf("%llu samples in %zu stacks; burn_three's caller: %s\n",
                static_cast<unsigned long long>(report.samples), report.stacks.size(),
                top->first.c_str());
}

// A profile of each CPU: every CPU's ring has a report, however few its samples, and each
// CPU's samples, modes, lost and throttled are its own and add up to the whole.
TEST(ProfileSession, EachCpuHasItsOwnProfile) {
    SKIP_WITHOUT_PERF_EVENTS();
    const auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    Burner burner(5);
    ASSERT_GT(burner.pid(), 0);
    ProfileOptions o;
    o.target = {.kind = TargetKind::EachCpu};
    o.rate = {.frequency = 250};
    auto s = start_profile(o);
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().to_string();
    ASSERT_TRUE(s) << s.error().to_string();
    profile_run(**s, burner);
    const auto report = (*s)->profile().report(3);
    ASSERT_EQ(report.cpus.size(), online->size());
    std::uint64_t samples = 0, user = 0, lost = 0, throttled = 0;
    for (std::size_t i = 0; i < report.cpus.size(); ++i) {
        const auto& cpu = report.cpus[i];
        EXPECT_EQ(cpu.cpu, (*online)[i]);
        const auto& m = cpu.report.modes;
        EXPECT_EQ(m.idle + m.user + m.kernel + m.other, cpu.report.samples);
        EXPECT_LE(cpu.report.functions.size(), 3u);
        EXPECT_TRUE(cpu.report.cpus.empty() && cpu.report.stacks.empty());
        samples += cpu.report.samples;
        user += m.user;
        lost += cpu.report.lost;
        throttled += cpu.report.throttled;
    }
    EXPECT_EQ(samples, report.samples);
    EXPECT_EQ(user, report.modes.user);
    EXPECT_EQ(lost, report.lost);
    EXPECT_EQ(throttled, report.throttled);
    EXPECT_GT(samples, 0u);
    auto interval = (*s)->take_interval();
    EXPECT_TRUE(interval.by_cpu()) << "intervals are of each CPU too";
}

// Each CPU's percentages are of its own samples; what a CPU's ring lost is that CPU's.
TEST(Profile, EachCpusSharesAreOfItsOwnSamples) {
    Profile p(true);
    const SampleLabel work{"work (/bin/app)", "/bin/app", "work"};
    const SampleLabel idle{"[idle]", "[idle]", "[idle]"};
    for (int i = 0; i < 30; ++i) {
        p.add(Sample{.ip = 0x1000, .pid = 7, .cpu = 0, .mode = SampleMode::User}, work);
    }
    for (int i = 0; i < 10; ++i) p.add(Sample{.ip = 0x9000, .pid = 0, .cpu = 1}, idle);
    for (int i = 0; i < 10; ++i) {
        p.add(Sample{.ip = 0x1000, .pid = 7, .cpu = 1, .mode = SampleMode::User}, work);
    }
    p.add(DrainStats{.lost = 4, .throttled = 1}, 1);
    p.add(DrainStats{}, 2);  // a CPU with nothing
    const auto r = p.report();
    EXPECT_EQ(r.samples, 50u);
    EXPECT_EQ(r.lost, 4u);
    ASSERT_EQ(r.cpus.size(), 3u);
    EXPECT_EQ(r.cpus[0].report.samples, 30u);
    ASSERT_EQ(r.cpus[0].report.functions.size(), 1u);
    EXPECT_DOUBLE_EQ(r.cpus[0].report.functions[0].percent, 100.0);
    EXPECT_EQ(r.cpus[1].report.modes.idle, 10u);
    EXPECT_EQ(r.cpus[1].report.lost, 4u);
    EXPECT_EQ(r.cpus[1].report.throttled, 1u);
    ASSERT_EQ(r.cpus[1].report.functions.size(), 2u);
    EXPECT_DOUBLE_EQ(r.cpus[1].report.functions[0].percent, 50.0);
    EXPECT_EQ(r.cpus[2].cpu, 2);
    EXPECT_EQ(r.cpus[2].report.samples, 0u);
    EXPECT_DOUBLE_EQ(r.functions[0].percent, 80.0) << "the whole's shares are of all samples";
    EXPECT_TRUE(Profile().report().cpus.empty()) << "a profile not by CPU has none";
}

// A profile's stacks are bounded: beyond kMaxStacks distinct ones, the others count as one.
TEST(Profile, StacksBeyondTheLimitCountAsOne) {
    Profile p;
    const SampleLabel work{"work (/bin/app)", "/bin/app", "work"};
    const Sample s{.ip = 0x1000, .pid = 7, .mode = SampleMode::User};
    for (std::size_t i = 0; i < kMaxStacks + 10; ++i) p.add(s, work, fmt::format("app;f{}", i));
    p.add(s, work, "app;f0");
    const auto r = p.report();
    ASSERT_EQ(r.stacks.size(), kMaxStacks + 1);
    EXPECT_EQ(r.stacks[0].name, kMoreStacks);
    EXPECT_EQ(r.stacks[0].samples, 10u);
    EXPECT_EQ(r.stacks[1].name, "app;f0") << "a stack kept goes on counting";
    EXPECT_EQ(r.stacks[1].samples, 2u);
    EXPECT_TRUE(Profile().report().stacks.empty()) << "no chains, no stacks";
}

// Code of the vDSO is the vDSO's: libdwfl took it for the end of the module mapped before it.
TEST(AddressNames, TheVdsoIsNamedByItsMapping) {
    const auto vdso = ::getauxval(AT_SYSINFO_EHDR);
    if (vdso == 0) GTEST_SKIP() << "this kernel maps no vDSO";
    AddressNames names;
    const auto n = names.name(::getpid(), vdso + 0x100);
    EXPECT_EQ(n.object, "[vdso]");
    const auto label = Profile::label(::getpid(), SampleMode::User, vdso + 0x100, names);
    EXPECT_EQ(label.function, "[no symbol] ([vdso])");
    EXPECT_EQ(label.frame, "[vdso]");
}

// A process's executable mappings as the kernel tells of them (PERF_RECORD_MMAP2).
std::vector<std::pair<TaskRecord, std::string>> own_code(pid_t pid = ::getpid()) {
    std::vector<std::pair<TaskRecord, std::string>> out;
    auto maps = read_text_file(fmt::format("/proc/{}/maps", pid));
    EXPECT_TRUE(maps);
    std::istringstream in(*maps);
    for (std::string line; std::getline(in, line);) {
        std::istringstream f(line);
        std::string range, perms, offset, dev, inode, path;
        f >> range >> perms >> offset >> dev >> inode >> path;
        if (perms.size() < 3 || perms[2] != 'x') continue;
        TaskRecord r{.kind = TaskRecord::Kind::Mapped};
        const auto dash = range.find('-');
        r.start = std::stoull(range.substr(0, dash), nullptr, 16);
        r.length = std::stoull(range.substr(dash + 1), nullptr, 16) - r.start;
        r.offset = std::stoull(offset, nullptr, 16);
        r.major = static_cast<std::uint32_t>(std::stoul(dev.substr(0, dev.find(':')), nullptr, 16));
        r.minor =
            static_cast<std::uint32_t>(std::stoul(dev.substr(dev.find(':') + 1), nullptr, 16));
        r.inode = std::stoull(inode);
        out.emplace_back(r, path);
    }
    return out;
}

// A process gone before its samples are named is named by what the kernel told of it: the code
// it mapped, or its parent's at a fork; an exec forgets what the pid had.
TEST(AddressNames, AProcessGoneIsNamedByItsRecords) {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    ASSERT_GT(child, 0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // gone: its map cannot be read
    const auto ip = reinterpret_cast<std::uint64_t>(&monitord_profile_burn_one) + 4;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    {
        AddressNames names;
        EXPECT_EQ(names.name(child, ip).object, fmt::format("[process {} exited]", child))
            << "nothing told of it";
    }
    {
        AddressNames names;
        for (auto [record, path] : own_code()) {
            record.pid = child;
            record.name = path;
            names.mapped(record);
        }
        const auto n = names.name(child, ip);
        EXPECT_EQ(n.object, exe);
        if (reads_symbols()) {
            EXPECT_EQ(n.function, "monitord_profile_burn_one");
            EXPECT_EQ(n.function_address,
                      reinterpret_cast<std::uint64_t>(&monitord_profile_burn_one))
                << "placed where it was mapped";
        } else {
            EXPECT_EQ(n.function, "") << "no symbols without libdw: the object alone";
        }
    }
    {
        AddressNames names;
        names.forked(child, ::getpid());
        EXPECT_EQ(names.name(child, ip).object, exe) << "a fork has its parent's code";
        if (reads_symbols()) {
            EXPECT_EQ(names.name(child, ip).function, "monitord_profile_burn_one");
        }
        names.exec(child);
        EXPECT_EQ(names.name(child, ip).object, "[unknown]")
            << "an exec: another program, whose code nothing told of";
        // The kernel tells of the exec, then of the new program's code: a sample between the
        // two (the system call's own) does not leave the program unnamed once it is told.
        for (auto [record, path] : own_code()) {
            record.pid = child;
            record.name = path;
            names.mapped(record);
        }
        EXPECT_EQ(names.name(child, ip).object, exe) << "named by the records that came after";
        if (reads_symbols()) {
            EXPECT_EQ(names.name(child, ip).function, "monitord_profile_burn_one");
        }
    }
}

// A program linked by lld, gone before its samples are named, is placed by its program
// headers: lld puts its code a page above its file offset (`readelf -lW`: R E at offset 0x5e0,
// address 0x15e0), so the kernel tells of code at offset 0 a page into the program, where bfd
// and gold have code at offset 0x1000 at 0x1000 and the offset alone placed it.
TEST(AddressNames, AProgramLinkedByLldIsPlacedByItsProgramHeaders) {
#ifndef PROFILE_BURNER_LLD
    GTEST_SKIP() << "no program linked by lld in this build: ld.lld was not found";
#else
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: code is named by object alone";
    const std::string program = PROFILE_BURNER_LLD;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::execl(program.c_str(), program.c_str(), "30", nullptr);
        ::_exit(127);
    }
    // Its code mapped once it runs: the exec done, the burner's symbol found.
    Result<SymbolAddress> burn = fail(Status::NoDev, program + " did not start");
    bool ran = true;
    for (int i = 0; i < 500 && !burn && ran; ++i) {
        std::error_code ec;
        if (std::filesystem::read_symlink(fmt::format("/proc/{}/exe", child), ec) == program) {
            burn = find_process_symbol(child, "profile_burner_one");
        }
        if (!burn) ::usleep(10'000);
        ran = ::waitpid(child, nullptr, WNOHANG) == 0;
    }
    const auto code = own_code(child);
    ::kill(child, SIGKILL);
    if (ran) {
        ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // gone: named by its records alone
    }
    ASSERT_TRUE(burn) << burn.error().message;
    AddressNames names;
    for (auto [record, path] : code) {
        record.pid = child;
        record.name = path;
        names.mapped(record);
    }
    const auto n = names.name(child, burn->address + 4);
    EXPECT_EQ(n.object, program);
    EXPECT_EQ(n.function, "profile_burner_one");
    EXPECT_EQ(n.function_address, burn->address) << "placed where it was mapped";
#endif
}

// Many processes named at once (more than AddressNames keeps read, each in several objects):
// every name right, at most kMaxObjectFiles files open at any time.
TEST(AddressNames, ManyProcessesAreNamedWithinTheirBounds) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no object files opened";
    constexpr std::size_t kChildren = AddressNames::kMaxProcessesRead + 22;
    std::vector<pid_t> children;
    for (std::size_t i = 0; i < kChildren; ++i) {
        const pid_t child = ::fork();
        if (child == 0) {
            ::pause();
            ::_exit(0);
        }
        ASSERT_GT(child, 0);
        children.push_back(child);
    }
    // Code in this program, in libc, in libstdc++ and in libmonitor: four objects each.
    const std::uint64_t ips[] = {
        reinterpret_cast<std::uint64_t>(&monitord_profile_burn_one),
        reinterpret_cast<std::uint64_t>(&::getpid),
        reinterpret_cast<std::uint64_t>(&std::terminate),
        reinterpret_cast<std::uint64_t>(&monitor::errno_message),
    };
    std::vector<std::string> expected;
    {
        AddressNames self;
        for (auto ip : ips) expected.push_back(self.name(::getpid(), ip).function);
    }
    ASSERT_EQ(expected[0], "monitord_profile_burn_one");
    AddressNames names;
    int most = 0;
    for (int round = 0; round < 2; ++round) {  // the second: read again once forgotten
        for (pid_t child : children) {
            for (std::size_t i = 0; i < std::size(ips); ++i) {
                EXPECT_EQ(names.name(child, ips[i]).function, expected[i])
                    << "process " << child << ", object " << i;
                most = std::max(most, names.object_files());
            }
        }
    }
    EXPECT_LE(most, AddressNames::kMaxObjectFiles);
    EXPECT_GT(most, 0);
    std::printf("%zu processes named in 4 objects each, twice: at most %d object files open\n",
                kChildren, most);
    for (pid_t child : children) ::kill(child, SIGKILL);
    for (pid_t child : children) ::waitpid(child, nullptr, 0);
    // Gone: forgotten at the second look (the first leaves the samples still in a ring).
    names.forget_gone();
    EXPECT_GT(names.processes(), 0u);
    names.forget_gone();
    EXPECT_EQ(names.processes(), 0u);
    EXPECT_EQ(names.object_files(), 0);
}

// A profile keeps the addresses of its histogram's range one by one, and no others.
TEST(Profile, OnlyTheHistogramsAddressesAreKept) {
    Profile p(false, {.start = 0x1000, .end = 0x2000});
    AddressNames names;
    for (std::uint64_t ip : {0x1004u, 0x1004u, 0x1ffcu, 0x5000u}) {
        p.add(Sample{.ip = ip, .pid = 0}, names);
    }
    auto in = p.histogram(0x1000, 0x2000);
    ASSERT_TRUE(in);
    EXPECT_EQ(in->samples, 3u);
    auto out = p.histogram(0x4000, 0x6000);
    ASSERT_TRUE(out);
    EXPECT_EQ(out->samples, 0u) << "outside the range: not kept";
    EXPECT_EQ(p.report().samples, 4u) << "yet counted";
}

// Frames as flame graphs take them: the function; kernel code marked _[k]; code without a
// symbol as its file's name.
TEST(Profile, FramesAreNamedAsFlameGraphsTakeThem) {
    AddressNames names;
    const auto self =
        Profile::label(::getpid(), SampleMode::User,
                       reinterpret_cast<std::uint64_t>(&monitord_profile_burn_one), names);
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe").filename().string();
    // Without libdw, code has no symbol: its file's name.
    EXPECT_EQ(self.frame, reads_symbols() ? "monitord_profile_burn_one" : "[" + exe + "]");
    EXPECT_EQ(Profile::label(Sample{.ip = 0x1, .pid = 0}, names).frame, "[idle]");
    EXPECT_EQ(Profile::label(7, SampleMode::Hypervisor, 0x1, names).frame, "[other mode]");
    const auto kernel = Profile::label(::getpid(), SampleMode::Kernel, 0xffffffff81000000, names);
    EXPECT_TRUE(kernel.frame.ends_with("_[k]")) << kernel.frame;
}

TEST(Profile, BadRatesAndRangesAreRefused) {
    auto none = SampleRing::open(task_clock(), this_thread(), {});
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().status, Status::BadArg);
    EXPECT_NE(none.error().message.find("one of the two"), std::string::npos);
    auto both = SampleRing::open(task_clock(), this_thread(), {.period = 10, .frequency = 10});
    ASSERT_FALSE(both);
    auto pages = SampleRing::open(task_clock(), this_thread(), {.period = 1'000'000}, 3);
    ASSERT_FALSE(pages);
    EXPECT_NE(pages.error().message.find("a power of two"), std::string::npos);

    Profile p;
    auto empty = p.histogram(0x1000, 0x1000);
    ASSERT_FALSE(empty);
    EXPECT_NE(empty.error().message.find("0x1000-0x1000 is empty"), std::string::npos);
    auto zero = p.histogram(0x1000, 0x2000, 0);
    ASSERT_FALSE(zero);
    auto terabyte = p.histogram(0, std::uint64_t{1} << 40);
    ASSERT_FALSE(terabyte);
    EXPECT_NE(terabyte.error().message.find("give a narrower range or buckets of 1048576 bytes"),
              std::string::npos)
        << terabyte.error().message;
    auto wide = p.histogram(0, std::uint64_t{1} << 40, 1 << 20);
    ASSERT_TRUE(wide) << wide.error().to_string();
    EXPECT_EQ(wide->buckets.size(), 1u << 20);
}

}  // namespace
}  // namespace monitor::perf
