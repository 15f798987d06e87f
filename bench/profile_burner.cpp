// A workload with a known profile: two functions that burn the CPU 3:1 by the thread's own
// CPU time (30 ms, then 10 ms, over and over), for the given seconds of CPU time on each of
// the given threads. `monctl perf profile` and `perf record` should both put three quarters
// of its samples in profile_burner_three and a quarter in profile_burner_one.
//   profile-burner [SECONDS [THREADS [EXIT_CODE]]]
// With --work, a fixed amount of work instead (ROUNDS of 3 + 1 million additions per thread),
// so that what sampling costs the workload shows as time: it prints its wall time and its
// CPU time (user + system, all threads) in seconds.
//   profile-burner --work ROUNDS [THREADS]
// With --deep, SECONDS of CPU time at the bottom of a recursion of every depth from 1 to 120
// in turn (profile_burner_deep): call chains of as many sizes, so that a profile with call
// chains has many distinct stacks, and large replies.
//   profile-burner --deep SECONDS
// With --phases, SECONDS of CPU time in profile_burner_three, then as many in
// profile_burner_one: where the last sample falls tells an old sample from a new one.
//   profile-burner --phases SECONDS
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

std::int64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The clock is read every 300,000 additions (0.1 to 0.3 ms): its cost (a system call) stays
// near 1 % of the time, also in an optimised build.
// Inlined, so that each burner's samples are its own.
[[gnu::always_inline]] inline void burn(std::int64_t ns) {
    const std::int64_t end = thread_cpu_ns() + ns;
    volatile std::uint64_t sink = 0;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 300'000; ++i) sink = sink + static_cast<std::uint64_t>(i);
    }
}

[[gnu::always_inline]] inline void add(std::int64_t n) {
    volatile std::uint64_t sink = 0;
    for (std::int64_t i = 0; i < n; ++i) sink = sink + static_cast<std::uint64_t>(i);
}

}  // namespace

extern "C" {
[[gnu::noinline, gnu::used]] void profile_burner_three(std::int64_t ns) {
    burn(ns);
    asm volatile("" ::: "memory");  // not merged with the other, nor made a tail call
}
[[gnu::noinline, gnu::used]] void profile_burner_one(std::int64_t ns) {
    burn(ns);
    asm volatile("" ::: "memory");
}
[[gnu::noinline, gnu::used]] void profile_burner_work_three(std::int64_t n) {
    add(3 * n);
    asm volatile("" ::: "memory");
}
[[gnu::noinline, gnu::used]] void profile_burner_work_one(std::int64_t n) {
    add(n);
    asm volatile("" ::: "memory");
}
[[gnu::noinline, gnu::used]] void profile_burner_deep(int depth, std::int64_t ns) {
    if (depth > 1) {
        profile_burner_deep(depth - 1, ns);
    } else {
        burn(ns);
    }
    asm volatile("" ::: "memory");  // no tail call: every level keeps its frame
}
}

namespace {

// Runs `work` on `threads` threads, this one among them, and waits for them.
template <typename Work>
void on_threads(int threads, const Work& work) {
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t) others.emplace_back(work);
    work();
    for (auto& t : others) t.join();
}

int fixed_work(long rounds, int threads) {
    const auto start = std::chrono::steady_clock::now();
    on_threads(threads, [rounds] {
        for (long i = 0; i < rounds; ++i) {
            profile_burner_work_three(1'000'000);
            profile_burner_work_one(1'000'000);
        }
    });
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    const double cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                       static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    std::printf("%.6f %.6f\n", wall, cpu);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 2 && std::strcmp(argv[1], "--work") == 0) {
        return fixed_work(std::atol(argv[2]), argc > 3 ? std::atoi(argv[3]) : 1);
    }
    if (argc > 2 && std::strcmp(argv[1], "--deep") == 0) {
        constexpr int kDeepest = 120;
        constexpr std::int64_t kBurnNs = 200'000;  // at the bottom, each time
        const auto rounds = static_cast<long>(std::atof(argv[2]) * 1e9 / kBurnNs);
        for (long i = 0; i < rounds; ++i)
            profile_burner_deep(1 + static_cast<int>(i % kDeepest), kBurnNs);
        return 0;
    }
    if (argc > 2 && std::strcmp(argv[1], "--phases") == 0) {
        const auto ns = static_cast<std::int64_t>(std::atof(argv[2]) * 1e9);
        profile_burner_three(ns);
        profile_burner_one(ns);
        return 0;
    }
    const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
    const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
    const int code = argc > 3 ? std::atoi(argv[3]) : 0;
    on_threads(threads, [seconds] {
        const auto rounds = static_cast<int>(seconds / 0.04 + 0.5);
        for (int i = 0; i < rounds; ++i) {
            profile_burner_three(30'000'000);
            profile_burner_one(10'000'000);
        }
    });
    return code;
}
