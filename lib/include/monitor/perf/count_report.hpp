// What a counting session reports: 64-bit virtual counts with their enabled and running times,
// per event, instance and kernel group, and the arithmetic on them (scaling, periods).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "monitor/perf/count_plan.hpp"

namespace monitor::perf {

struct CountValue {
    std::uint64_t count = 0;
    std::uint64_t enabled_ns = 0;
    std::uint64_t running_ns = 0;

    // count x enabled / running; the count itself when it always ran, 0 when it never did.
    double scaled() const;
    // running / enabled, 1 when nothing was enabled yet.
    double running_ratio() const;
    CountValue& operator+=(const CountValue& o);
    CountValue operator-(const CountValue& o) const;
};

struct EventCount {
    std::string name;  // as requested
    std::string canonical;
    std::string pmu;
    CountValue total;                      // over every instance
    std::vector<CountValue> per_instance;  // one per instance of the report
};

// The counts of one kernel group (a counter set of one PMU), for ratios of events measured
// over the very same time.
struct GroupCount {
    int set = kFreeRunningSet;  // as in Plan::Group
    std::vector<std::size_t> events;
    std::vector<std::uint64_t> counts;
    std::uint64_t running_ns = 0;
};

struct PerfReport {
    std::chrono::nanoseconds elapsed{0};  // wall time since the session started
    // The part of elapsed the session spent paused (PerfSession::pause): its counts, enabled
    // and running times did not grow then.
    std::chrono::nanoseconds paused{0};
    bool paused_at_read = false;          // the session was paused when this report was read
    std::vector<int> instances;           // CPU numbers (a cgroup's too), or {-1} for a process
    // Process and Thread targets: the threads counted from the start (the threads and
    // children started later are counted too, by inheritance, but not in this number); 0 for
    // the other targets.
    int threads = 0;
    std::vector<EventCount> events;  // in request order
    std::vector<GroupCount> groups;  // per Plan::kernel_groups
    int slots = 0;
    int rotations = 0;

    // The counts of the period between `earlier` and this report (same session).
    PerfReport since(const PerfReport& earlier) const;
    // The same in place: this report becomes the counts since `earlier`.
    void subtract(const PerfReport& earlier);
};

}  // namespace monitor::perf
