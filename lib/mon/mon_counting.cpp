#include "mon_counting.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "monitor/text_file.hpp"

namespace monitor::mon {

namespace {

// The one kernel group of events whose PMU has selects per counter (see perf_options).
constexpr int kCounterSelectsGroup = 0;

// The process of thread `tid` (Tgid in /proc/TID/status); nullopt when that cannot be read
// (no such thread, or no /proc).
std::optional<pid_t> thread_group_of(pid_t tid) {
    auto text = read_text_file("/proc/" + std::to_string(tid) + "/status");
    if (!text) return std::nullopt;
    const auto at = text->find("\nTgid:");
    if (at == std::string::npos) return std::nullopt;
    char* end = nullptr;
    const long tgid = std::strtol(text->c_str() + at + 6, &end, 10);
    if (end == text->c_str() + at + 6 || tgid <= 0) return std::nullopt;
    return static_cast<pid_t>(tgid);
}

}  // namespace

Result<perf::SessionOptions> perf_options(const perf::EventCatalog& catalog,
                                          const MON_perf_config& config,
                                          const std::vector<int>& online,
                                          EventOfSet& event_of_set) {
    perf::SessionOptions options;
    options.mux = perf::MuxMode::Kernel;
    options.cpus = online;
    event_of_set.fill(-1);
    for (std::size_t set = 0; set < MON_PERF_SETS; ++set) {
        const char* name = config.events[set];
        if (name == nullptr || *name == '\0') continue;
        auto spec = catalog.resolve(name);
        if (!spec) {
            return fail(spec.error().status,
                        "set " + std::to_string(set + 1) + ": " + spec.error().message);
        }
        event_of_set[set] = static_cast<int>(options.events.size());
        options.events.push_back(
            {name, spec->per_counter_selects ? kCounterSelectsGroup : perf::kNoGroup});
    }
    if (options.events.empty()) {
        return fail(Status::BadArg,
                    "no event to count: name one in config.events (see `monctl perf "
                    "list`)");
    }
    switch (config.target) {
        case MON_PERF_MACHINE:
            options.target.kind = perf::TargetKind::AllCpus;
            break;
        case MON_PERF_CPU:
            options.target.kind = perf::TargetKind::OneCpu;
            options.target.cpu = config.cpu;
            break;
        case MON_PERF_THREAD: {
            if (config.tid < 0) {
                return fail(Status::BadArg,
                            "tid " + std::to_string(config.tid) + ": use 0 for the calling thread");
            }
            // 0 and any thread of this process (its main thread, whose id is the process's,
            // too): that thread, as MON counted a task. Another process's pid (the id of its
            // main thread): every thread of that process, as perf stat -p counts it. Another
            // process's other threads: that thread.
            const pid_t tid =
                config.tid == 0 ? static_cast<pid_t>(syscall(SYS_gettid)) : config.tid;
            options.target.kind =
                config.tid != 0 && tid != ::getpid() && thread_group_of(tid) == tid
                    ? perf::TargetKind::Process
                    : perf::TargetKind::Thread;
            options.target.pid = tid;
            break;
        }
        default:
            return fail(Status::BadArg,
                        "target " + std::to_string(config.target) +
                            ": use MON_PERF_MACHINE, MON_PERF_CPU or MON_PERF_THREAD");
    }
    return options;
}

MON_perf_stats to_stats(const perf::PerfReport& report, const EventOfSet& event_of_set) {
    MON_perf_stats stats{};
    for (std::size_t set = 0; set < event_of_set.size(); ++set) {
        if (event_of_set[set] < 0) continue;
        const auto& v = report.events.at(static_cast<std::size_t>(event_of_set[set])).total;
        stats.counts[set] = {v.count, v.enabled_ns, v.running_ns, v.scaled(), v.running_ratio()};
    }
    stats.duration_ns = static_cast<unsigned long long>(report.elapsed.count());
    return stats;
}

}  // namespace monitor::mon
