// A load generator with a known duty cycle: on each CPU, a normal-priority thread pinned to
// it is busy for load% of every period and sleeps for the rest.
//
// usage: bench-duty-cycle LOAD_PERCENT SECONDS [PERIOD_MS]
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "monitor/loading/cpu_list.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void run(int cpu, double load, Clock::time_point end, std::chrono::nanoseconds period) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<std::size_t>(cpu), &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) return;
    const auto busy = std::chrono::duration_cast<std::chrono::nanoseconds>(period * load / 100.0);
    volatile unsigned long sink = 0;
    for (auto start = Clock::now(); start < end; start += period) {
        while (Clock::now() < start + busy) sink = sink + 1;
        const auto wake = start + period;
        if (busy < period) {
            timespec ts{};
            auto ns = wake.time_since_epoch().count();
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
    std::vector<std::thread> threads;
    for (int cpu : *cpus) threads.emplace_back(run, cpu, load, end, period);
    for (auto& t : threads) t.join();
    return 0;
}
