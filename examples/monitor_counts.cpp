// libmonitor's C++ interface: count this thread's task clock and page faults in user mode
// while it works, then sample the machine's loading from /proc/stat over one second.
// Counting its own thread in user mode (:u) needs no privilege at the kernel's default
// perf_event_paranoid (2).
//
//   g++ -std=c++23 monitor_counts.cpp $(pkg-config --cflags --libs libmonitord++) -o monitor_counts
//   ./monitor_counts [MILLISECONDS]
//
// Exits 1 when a call fails or nothing was counted, 77 (a test harness's "skipped") when
// nothing can count on this system (NOPMU: a kernel without perf events, or an emulator).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <monitor/engine.hpp>
#include <monitor/perf/counter_device.hpp>
#include <monitor/perf/event_catalog.hpp>
#include <monitor/perf/perf_session.hpp>
#include <monitor/status.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

int fail(const char* what, const monitor::Error& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.to_string().c_str());
    return e.status == monitor::Status::NoPmu ? 77 : 1;
}

// Touches fresh pages (page faults) and spins (task clock) until `d` has passed.
void work(std::chrono::milliseconds d) {
    std::vector<std::unique_ptr<char[]>> pages;
    const auto until = std::chrono::steady_clock::now() + d;
    volatile unsigned long sink = 0;
    while (std::chrono::steady_clock::now() < until) {
        if (pages.size() < 256) {
            pages.emplace_back(new char[1 << 16]);
            for (int i = 0; i < (1 << 16); i += 4096) pages.back()[i] = 1;
        }
        for (int i = 0; i < 10000; ++i) sink = sink + static_cast<unsigned long>(i);
    }
}

}  // namespace

int main(int argc, char** argv) {
    namespace perf = monitor::perf;
    const std::chrono::milliseconds duration{argc > 1 ? std::atoi(argv[1]) : 300};

    auto catalog = perf::EventCatalog::create();
    if (!catalog) return fail("event catalog", catalog.error());

    perf::SessionOptions options;
    auto events = perf::parse_event_list("perf::TASK-CLOCK:u,perf::PAGE-FAULTS:u");
    if (!events) return fail("events", events.error());
    options.events = *events;
    options.target.kind = perf::TargetKind::Thread;
    options.target.pid = ::gettid();  // this thread (and what it starts while counting)

    // The plan says where each event goes, without counting.
    auto plan = perf::make_plan(*catalog, options);
    if (!plan) return fail("plan", plan.error());
    for (const auto& group : plan->kernel_groups) {
        std::printf("group on %s:", group.pmu.c_str());
        for (const auto& m : group.members) std::printf(" %s", plan->events[m.event].name.c_str());
        std::printf("\n");
    }

    auto session =
        perf::PerfSession::start(*catalog, std::make_unique<perf::PerfEventDevice>(), options);
    if (!session) return fail("start counting", session.error());
    work(duration);
    if (auto stopped = (*session)->stop(); !stopped) return fail("stop counting", stopped.error());
    auto report = (*session)->read();
    if (!report) return fail("read the counters", report.error());

    std::printf("counted for %.3f s:\n", std::chrono::duration<double>(report->elapsed).count());
    bool counted = false;
    for (const auto& e : report->events) {
        std::printf("  %-22s %15llu  (%.0f%% of the time on a counter)\n", e.name.c_str(),
                    static_cast<unsigned long long>(e.total.count),
                    100.0 * e.total.running_ratio());
        if (e.name.starts_with("perf::TASK-CLOCK") && e.total.count > 0) counted = true;
    }

    // Loading from /proc/stat: the engine takes its baseline now, one sample per tick.
    monitor::EngineOptions engine_options;  // no idle probes, the last 60 s kept
    auto engine =
        monitor::Engine::create(engine_options, [] { return monitor::Engine::Clock::now(); });
    if (!engine) return fail("loading", engine.error());
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (auto ticked = (*engine)->tick(monitor::Engine::Clock::now()); !ticked) {
        return fail("loading sample", ticked.error());
    }
    const auto loading = (*engine)->loading({.per_cpu = false, .history = false});
    const auto* procstat = monitor::find_source(loading.machine, "procstat");
    if (procstat == nullptr || !procstat->stats || !procstat->stats->avg_prev_sec) {
        std::fprintf(stderr, "loading: no sample after one second\n");
        return 1;
    }
    std::printf("loading of the last second: %.1f%%\n", *procstat->stats->avg_prev_sec);
    return counted ? 0 : 1;
}
