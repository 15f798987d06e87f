// A load generator with a known duty cycle: on each CPU, a normal-priority thread pinned to
// it is busy for load% of every period and sleeps for the rest.
//
// usage: bench-duty-cycle LOAD_PERCENT SECONDS [MEAN_PERIOD_MS]
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "monitor/loading/cpu_list.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Each period lasts a random 0.5 to 1.5 times the mean and is busy for load% of itself, so
// the duty cycle is exact on average while the busy spans fall at every phase of the kernel's
// tick: a fixed period that is a multiple of the tick makes tick-sampled accounting (mpstat)
// see the same phase every time and read, e.g., 20 % for 25 %.
void run(int cpu, double load, Clock::time_point end, std::chrono::nanoseconds mean_period) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<std::size_t>(cpu), &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) return;
    std::mt19937_64 rng(static_cast<std::uint64_t>(cpu) * 7919 + 1);
    std::uniform_real_distribution<double> spread(0.5, 1.5);
    volatile unsigned long sink = 0;
    for (auto start = Clock::now(); start < end;) {
        const auto period =
            std::chrono::duration_cast<std::chrono::nanoseconds>(mean_period * spread(rng));
        const auto busy =
            std::chrono::duration_cast<std::chrono::nanoseconds>(period * load / 100.0);
        while (Clock::now() < start + busy) sink = sink + 1;
        start += period;
        if (busy < period) {
            timespec ts{};
            auto ns = start.time_since_epoch().count();
            ts.tv_sec = ns / 1'000'000'000;
            ts.tv_nsec = ns % 1'000'000'000;
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s LOAD_PERCENT SECONDS [PERIOD_MS]\n", argv[0]);
        return 2;
    }
    const double load = std::atof(argv[1]);
    const double seconds = std::atof(argv[2]);
    const double period_ms = argc > 3 ? std::atof(argv[3]) : 10.0;
    if (load < 0 || load > 100 || seconds <= 0 || period_ms <= 0) {
        std::fprintf(stderr, "%s: LOAD_PERCENT 0-100, SECONDS and PERIOD_MS > 0\n", argv[0]);
        return 2;
    }
    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
    const auto period = std::chrono::nanoseconds(static_cast<long long>(period_ms * 1e6));
    auto cpus = monitor::read_online_cpus("/sys");
    if (!cpus) {
        std::fprintf(stderr, "%s: %s\n", argv[0], cpus.error().message.c_str());
        return 1;
    }
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int cpu : *cpus) threads.emplace_back(run, cpu, load, end, period);
    for (auto& t : threads) t.join();
    // What was achieved: the threads' CPU time over the run. Wake-ups that come late (a
    // halted virtual CPU takes a while to resume) shorten the busy spans.
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("achieved %.3f\n", 100.0 * cpu_s / (wall * static_cast<double>(cpus->size())));
    return 0;
}
