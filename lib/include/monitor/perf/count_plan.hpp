// Planning a count, without counting: the requested events resolved through the catalog and
// packed into counter sets of each PMU (counter_scheduler.hpp), with what the session that
// opens them is allowed (SessionOptions).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/count_target.hpp"
#include "monitor/perf/counter_scheduler.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/metric_formula.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

// One requested event; events with the same group (not kNoGroup) are counted together,
// always: the braces of "a,{b,c}".
struct EventRequest {
    std::string name;
    int group = kNoGroup;
};

// "a,b,{c,d}" -> a, b, and c+d as group 0. BADARG for unbalanced braces or an empty name.
Result<std::vector<EventRequest>> parse_event_list(std::string_view list);

enum class MuxMode { Daemon, Kernel };

// A derived metric a session computes from its counts (metric_definitions.hpp).
struct SessionMetric {
    std::string name;  // "ipc"
    std::string description;
    MetricFormula formula;
    std::vector<std::size_t> events;  // per formula.events(): the index of its request

    bool operator==(const SessionMetric&) const = default;
};

// The most perf_event files a session or a profile may open at once, for a daemon that opens
// them for callers: one file per event and CPU, or per event and thread of a process; a
// profile, one per CPU and thread. Checked before the first is opened. 0: only this
// process's RLIMIT_NOFILE bounds them.
struct FileBudget {
    std::size_t most = 0;
    // Where the limit comes from, for the refusal: "[limits] perf-files-per-session in
    // monitord.conf(5), for a user other than root".
    std::string source;

    // BADARG when `needed` files (for `what`: "counting 4 events on each of the 300 threads
    // of process 42") are more than `most`, saying how many and what to do.
    Result<void> check(std::size_t needed, std::string_view what) const;
    // Whether `e` is this budget's refusal, check()'s error.
    bool refused(const Error& e) const;
};

struct SessionOptions {
    std::vector<EventRequest> events;
    CountTarget target;
    MuxMode mux = MuxMode::Daemon;
    std::chrono::nanoseconds slice = std::chrono::milliseconds(100);
    // > 0: each PMU gets at most this many counters, and events that take no counter take
    // one too, so that multiplexing can be exercised (and compared) with software events.
    int counter_budget = 0;
    // Not empty: count user mode only, for a caller whom the kernel's rules allow no more
    // (CallerRights::kernel()), and why (CallerRights::kernel_refusal()). An event that
    // counts both modes is counted in user mode and named with ":u" added, as perf does then;
    // one that counts kernel mode only is PERM, saying this.
    std::string user_only;
    // Not empty: an event that watches a kernel address (a breakpoint) is PERM, saying this,
    // for a caller without privilege (CallerRights::kernel_breakpoint_refusal()), as the
    // kernel refuses one (PmuModule::refuse_unprivileged).
    std::string no_kernel_addresses;
    std::vector<int> cpus;  // the online CPUs, for CPU and cgroup targets
    std::string cgroup_root = "/sys/fs/cgroup";
    // Move the calling thread onto each CPU in turn to read, enable and disable that CPU's
    // counters (as perf stat does), the CPU it is on first; its affinity is restored at the
    // end, where it stands. Done from another CPU, each of those calls interrupts the
    // counter's CPU and waits for it (an IPI): an idle CPU has to wake up first, 80-150 us
    // in a VM, more than a move (one group read from afar a period, two CPUs: 115 against
    // 80 us). For a thread of its own (the daemon's loop), not for a caller's thread.
    bool visit_cpus = false;
    FileBudget files;
    // Computed from the counts into every report (derive_metrics), beside the built-in ones.
    std::vector<SessionMetric> metrics;
};

// The set of a kernel group that takes no turn on the counters: its events need none (software
// events), and it counts all the time.
inline constexpr int kFreeRunningSet = -1;

// The events and where each one counts, without counting.
//
// Words: a kernel group is the events opened as one perf_event group (a leader and its
// members), read together. A set is a kernel group of counter events that fits a PMU's
// counters; when a PMU's events need more than one set, its sets take turns. A slot is one
// turn of the rotation (one slice of time, in daemon multiplexing): in slot s, set
// s % pmu_sets of every PMU counts.
struct Plan {
    std::vector<EventSpec> events;
    // Per event, the group it was requested in (EventRequest::group): kNoGroup for none.
    std::vector<int> requested_groups;
    struct Member {
        std::size_t event = 0;     // index into events
        int counter = kNoCounter;  // the counter it is on, 0-based; kNoCounter when it takes none
        std::string counter_name;  // "PMC2", "counter 3"; empty for kNoCounter
    };
    struct Group {
        // Which of its PMU's sets this group is, 0 to pmu_sets - 1; kFreeRunningSet for a
        // group of events that take no counter.
        int set = kFreeRunningSet;
        int pmu_sets = 1;  // how many sets its PMU has (1 for a free-running group)
        std::string pmu;
        std::vector<Member> members;  // the leader first

        bool free_running() const { return set == kFreeRunningSet; }
    };
    std::vector<Group> kernel_groups;
    // The slots of one rotation: the most sets any PMU has. 0 (no counter events) or 1: the
    // sets never take turns.
    int slots = 0;
    // SessionOptions::metrics; their event indices are the plan's (one event per request).
    std::vector<SessionMetric> metrics;
};

Result<Plan> make_plan(const EventCatalog& catalog, const SessionOptions& options);

// Whether two plans take counters of a same PMU: opened together, the kernel multiplexes
// them (their running times then fall below their enabled times). Events that take no
// counter share nothing. CPUs are not compared: a process or cgroup may run on any.
bool shares_counters(const Plan& a, const Plan& b);

}  // namespace monitor::perf
