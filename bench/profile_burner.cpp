// A workload with a known profile: two functions that burn the CPU 3:1 by the thread's own
// CPU time (30 ms, then 10 ms, over and over), for the given seconds of CPU time on each of
// the given threads. `monctl perf profile` and `perf record` should both put three quarters
// of its samples in profile_burner_three and a quarter in profile_burner_one.
//   profile-burner [SECONDS [THREADS [EXIT_CODE]]]
#include <pthread.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

std::int64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The clock is read every 100,000 additions (about 50-100 us): its cost stays under 1 %.
// Inlined, so that each burner's samples are its own.
[[gnu::always_inline]] inline void burn(std::int64_t ns) {
    const std::int64_t end = thread_cpu_ns() + ns;
    volatile std::uint64_t sink = 0;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 100'000; ++i) sink = sink + static_cast<std::uint64_t>(i);
    }
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
}

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
    const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
    const int code = argc > 3 ? std::atoi(argv[3]) : 0;
    auto work = [seconds] {
        const auto rounds = static_cast<int>(seconds / 0.04 + 0.5);
        for (int i = 0; i < rounds; ++i) {
            profile_burner_three(30'000'000);
            profile_burner_one(10'000'000);
        }
    };
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t) others.emplace_back(work);
    work();
    for (auto& t : others) t.join();
    return code;
}
