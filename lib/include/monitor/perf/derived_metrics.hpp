// Ratios of counted events: IPC and CPI, cache and branch miss ratios, misses per thousand
// instructions, the PowerPC 750 manual's instruction-cache miss ratio, CPUs utilized. A ratio
// is computed from the raw counts of one counter set when both events were in one (the same
// time window, exact), or from events that counted all the time; otherwise from the scaled
// estimates, and marked so.
#pragma once

#include <string>
#include <vector>

#include "monitor/perf/perf_session.hpp"

namespace monitor::perf {

struct Metric {
    std::string name;         // "ipc", "cache_miss_ratio", "l1_icache_misses_pti"
    std::string description;  // "instructions per cycle"
    double value = 0;
    bool same_set = false;  // from one set (or full-time counts), not from estimates
    // The name of the event it is shown beside, as perf stat does: its numerator ("ipc" by
    // the instructions), the task clock for cpus_utilized.
    std::string event;
};

// Whether `spec` counts nanoseconds (the kernel's CPU and task clocks) rather than occurrences.
bool counts_nanoseconds(const EventSpec& spec);

// The metrics the report's events allow; none when a needed event was not counted or a
// denominator is zero.
std::vector<Metric> derive_metrics(const Plan& plan, const PerfReport& report);
// The same into `out`, whose elements are reused: deriving a stream's metrics into the same
// vector every period allocates nothing once it holds them.
void derive_metrics(const Plan& plan, const PerfReport& report, std::vector<Metric>& out);

}  // namespace monitor::perf
