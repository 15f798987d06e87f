// Call chains without frame pointers: this test's own thread is sampled through a real sample
// ring (its task clock) with its user registers and stack, while it sorts with libc's qsort,
// which calls back into code of the test. This file is built with -fomit-frame-pointer and
// Debian's libc without frame pointers, so only the unwinding by call frame information finds
// the chain: the callback, under qsort's own frames, under qsort, under the sorter and its
// caller. The unwinding's cost per sample is printed.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/dwarf_unwinder.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "monitor/perf/profile_session.hpp"
#include "perf_events_probe.hpp"

extern "C" {
// qsort's comparison; the sorter, which calls qsort; the loop above it. Not inlined, and each
// does something after its call, so that no call is a tail call that leaves no frame.
[[gnu::noinline, gnu::used]] int monitord_dwarf_compare(const void* a, const void* b);
[[gnu::noinline, gnu::used]] int monitord_dwarf_sorter(int* values, std::size_t n);
[[gnu::noinline, gnu::used]] int monitord_dwarf_caller(std::int64_t ns);
}

namespace {

std::int64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

extern "C" {
int monitord_dwarf_compare(const void* a, const void* b) {
    const int x = *static_cast<const int*>(a);
    const int y = *static_cast<const int*>(b);
    // Some work per comparison, so that most samples land in the callback.
    volatile int sink = 0;
    for (int i = 0; i < 40; ++i) sink = sink + i;
    return (x > y) - (x < y);
}

int monitord_dwarf_sorter(int* values, std::size_t n) {
    // A fresh shuffle each time: msort compares every pair it merges.
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<int>((i * 7919) % n);
    std::qsort(values, n, sizeof(int), monitord_dwarf_compare);
    return values[0] + values[n - 1];
}

int monitord_dwarf_caller(std::int64_t ns) {
    const std::int64_t end = thread_cpu_ns() + ns;
    std::vector<int> values(200);  // 800 bytes: msort's buffer is on the stack
    int sum = 0;
    while (thread_cpu_ns() < end) sum += monitord_dwarf_sorter(values.data(), values.size());
    return sum;
}
}

namespace {

using monitor::Status;
using namespace monitor::perf;

// A sample kept beyond the drain: its registers and stack copied.
struct KeptSample {
    Sample sample;
    std::vector<std::uint64_t> regs;
    std::vector<unsigned char> stack;
};

std::vector<std::string> frames_of(const std::string& stack) {
    std::vector<std::string> frames;
    for (std::size_t at = 0, end = 0; at <= stack.size(); at = end + 1) {
        end = std::min(stack.find(';', at), stack.size());
        frames.push_back(stack.substr(at, end - at));
    }
    return frames;
}

TEST(DwarfUnwinder, FindsCallersThroughLibcCodeWithoutFramePointers) {
    SKIP_WITHOUT_PERF_EVENTS();
    if (auto why = dwarf_unwinding_refusal(); !why.empty()) GTEST_SKIP() << why;
    auto catalog = EventCatalog::create();
    ASSERT_TRUE(catalog) << catalog.error().to_string();
    auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online) << online.error().to_string();
    ProfileOptions o;
    o.event = "perf::TASK-CLOCK";
    o.rate = {.period = 1'000'000};  // every 1 ms of this thread's CPU time
    o.target = {.kind = TargetKind::Thread, .pid = static_cast<pid_t>(::syscall(SYS_gettid))};
    o.cpus = *online;
    o.kernel = false;  // sampling the kernel may need privileges
    o.callchain = true;
    o.call_graph = CallGraph::Dwarf;
    auto session = ProfileSession::start(*catalog, o);
    if (!session && session.error().status == Status::Perm) {
        GTEST_SKIP() << session.error().to_string();
    }
    ASSERT_TRUE(session) << session.error().to_string();

    // Some samples are kept to unwind again, timed, at the end.
    std::vector<KeptSample> kept;
    std::uint64_t stack_bytes = 0;
    std::size_t samples = 0;
    auto keep = [&](const Sample& s) {
        ++samples;
        stack_bytes += s.user_stack.size();
        if (kept.size() >= 200) return;
        KeptSample k{.sample = s,
                     .regs = {s.user_regs.begin(), s.user_regs.end()},
                     .stack = {s.user_stack.begin(), s.user_stack.end()}};
        k.sample.callchain = {};
        kept.push_back(std::move(k));
    };
    // 0.6 s of CPU time, the rings read every 50 ms of it.
    int sum = 0;
    for (int i = 0; i < 12; ++i) {
        sum += monitord_dwarf_caller(50'000'000);
        (*session)->drain(keep);
    }
    ASSERT_TRUE((*session)->stop(keep));
    EXPECT_NE(sum, 0);
    const auto report = (*session)->profile().report(0);
    ASSERT_GT(report.samples, 300u) << "about 600 were due";
    EXPECT_EQ(report.lost, 0u);

    // The stacks that end in the callback: libc's frames of qsort, the sorter and its caller
    // above it, outermost first.
    std::uint64_t in_compare = 0, whole = 0;
    std::string example;
    for (const auto& l : report.stacks) {
        const auto frames = frames_of(l.name);
        if (frames.back() != "monitord_dwarf_compare") continue;
        in_compare += l.samples;
        const auto at = [&](const std::string& name) {
            return std::ranges::find(frames, name) - frames.begin();
        };
        const auto caller = at("monitord_dwarf_caller");
        const auto sorter = at("monitord_dwarf_sorter");
        // libc's qsort jumps to qsort_r (a tail call): its frame is qsort_r's.
        const auto qsort =
            std::ranges::find_if(
                frames, [](const std::string& f) { return f.find("qsort") != std::string::npos; }) -
            frames.begin();
        const auto n = static_cast<std::ptrdiff_t>(frames.size());
        if (caller < sorter && sorter < qsort && qsort < n - 2) {
            whole += l.samples;
            if (example.empty()) example = l.name;
        }
    }
    // A third of the samples in an optimized build; under the sanitizers their own run-time
    // and the instrumented sorter take most of the rest.
    ASSERT_GT(in_compare, report.samples / 10) << "the callback does much of the work";
    // All of them in an optimized build (450 of 450); under the address sanitizer, whose
    // qsort interceptor stands between the sorter and libc, 84 % (452 of 536).
    EXPECT_GT(whole, in_compare * 3 / 4)
        << "the callback's callers through libc's qsort are found; e.g. " << report.stacks[0].name;
    std::printf(
        "%llu samples, %llu in the callback, %llu of them with qsort, the sorter and "
        "its caller above; %.0f bytes of stack per sample\ne.g. %s\n",
        static_cast<unsigned long long>(report.samples),
        static_cast<unsigned long long>(in_compare), static_cast<unsigned long long>(whole),
        samples > 0 ? static_cast<double>(stack_bytes) / static_cast<double>(samples) : 0.0,
        example.c_str());

    // The cost of unwinding, once the files are read: the kept samples unwound again.
    ASSERT_FALSE(kept.empty());
    AddressNames names;
    DwarfUnwinder unwinder;
    std::vector<std::uint64_t> chain;
    auto unwind_all = [&] {
        std::size_t frames = 0;
        for (auto& k : kept) {
            k.sample.user_regs = k.regs;
            k.sample.user_stack = k.stack;
            chain.clear();
            frames += unwinder.unwind(names, k.sample, chain);
        }
        return frames;
    };
    const auto first = std::chrono::steady_clock::now();
    (void)unwind_all();  // reads the process's files
    const std::chrono::duration<double, std::milli> reading =
        std::chrono::steady_clock::now() - first;
    const auto started = std::chrono::steady_clock::now();
    const std::size_t frames = unwind_all();
    const std::chrono::duration<double, std::micro> took =
        std::chrono::steady_clock::now() - started;
    EXPECT_GT(frames, kept.size() * 4) << "qsort's callback is 4 or more calls deep";
    std::printf(
        "unwinding: %.1f us per sample, %.1f frames per sample (%zu samples); the "
        "first pass, reading the files, %.1f ms\n",
        took.count() / static_cast<double>(kept.size()),
        static_cast<double>(frames) / static_cast<double>(kept.size()), kept.size(),
        reading.count());
}

}  // namespace
