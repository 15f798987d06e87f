// What the Engine reports about loading: statistics per source, for the machine and per CPU.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/loading/cpu_context.hpp"
#include "monitor/loading/cpu_states.hpp"
#include "monitor/loading/load_history.hpp"
#include "monitor/loading/task_usage.hpp"
#include "monitor/loading/unit_usage.hpp"
#include "monitor/status.hpp"

namespace monitor {

// The loading sources there are, in report order; also the keys on the wire.
inline constexpr std::string_view kLoadSources[] = {"probe", "procstat"};

struct SourceLoad {
    std::string source;                          // "procstat", "probe"
    std::optional<LoadStats> stats;              // nullopt until the first valid sample
    std::vector<std::optional<double>> history;  // per-second loads, oldest first, if asked
    // Where the time went (procstat), if asked; nullopt until the first valid interval.
    std::optional<StateStats> states;
    // CPU time by state since the engine started (procstat), if asked: counters that only grow.
    std::optional<StateSeconds> state_seconds;
};

struct CpuLoading {
    int cpu = 0;
    bool online = true;
    std::vector<SourceLoad> sources;
};

// CPU time per systemd unit (UnitUsage), as a report gives it.
struct UnitLoading {
    std::string accounting;  // cgroup_accounting_name(); empty when unavailable
    std::size_t count = 0;   // the units the last walk of the tree found
    std::vector<UnitLoad> top;
    std::string unavailable;  // why there are no figures per unit, when there are none
};

// Each CPU's busiest tasks (TaskUsage), as a report gives it: sampled while reports ask for
// them.
struct TaskLoading {
    // The interval the figures are over; 0 for the first reading after a pause, which has
    // none.
    double seconds = 0;
    std::size_t count = 0;      // the threads the last reading found
    std::size_t processes = 0;  // and the processes
    std::vector<TaskLoad> top;  // TaskUsage::top
    std::string unavailable;    // why there are none at all, when there are none
};

// The CPUs' context (CpuContext), as a report gives it: sampled while reports ask for it.
struct CpuContextReport {
    // nullopt until the first sample after the first request (a second); its rates from the
    // second sample on (sample->seconds > 0).
    std::optional<CpuContextSample> sample;
    std::string unavailable;  // why there is none at all, when there is none
};

// The most interrupt sources a report lists (the busiest; a machine has hundreds).
inline constexpr std::size_t kMaxInterruptSourcesListed = 10;

struct LoadingReport {
    // Wall-clock time of the newest sample; nullopt before the first one.
    std::optional<std::chrono::system_clock::time_point> timestamp;
    std::size_t window_seconds = 0;
    std::vector<SourceLoad> machine;
    std::vector<CpuLoading> cpus;      // empty unless per-CPU figures were asked for
    std::optional<UnitLoading> units;  // when units were asked for
    // When the context was asked for; its per-CPU figures only with per_cpu.
    std::optional<CpuContextReport> context;
    std::optional<TaskLoading> tasks;  // when tasks were asked for
};

// The most units a report lists; the most tasks of each CPU.
inline constexpr std::int64_t kMaxUnitsListed = 1000;
inline constexpr std::int64_t kMaxTasksListed = 100;

struct LoadingQuery {
    bool per_cpu = false;
    bool history = false;
    bool states = false;  // the share of each CPU state, for the sources that know it
    bool totals = false;  // the CPU time in each state so far, for the sources that know it
    // The busiest units to list (UnitUsage::top), from 1 to kMaxUnitsListed; 0: none.
    std::int64_t units = 0;
    // The CPUs' context (CpuContextReport). Asking starts its sampling, which goes on while
    // reports ask for it (kContextKeptFor after the last).
    bool context = false;
    // The busiest tasks of each CPU to list (TaskUsage::top), from 1 to kMaxTasksListed; 0:
    // none. Asking starts their sampling, as for the context.
    std::int64_t tasks = 0;
    // A range of the history on disk instead of the window, in microseconds since the epoch
    // (the reply's timestamp's unit): from `since` (nullopt: the oldest kept) to `until`
    // (nullopt: now), both included. Units, context and tasks are not kept there.
    std::optional<std::int64_t> since;
    std::optional<std::int64_t> until;
    bool ranged() const { return since.has_value() || until.has_value(); }
};

inline constexpr std::chrono::seconds kContextKeptFor{600};
// The longest range whose per-second values (history) a reply carries: a day for the machine,
// an hour with each CPU's.
inline constexpr std::chrono::seconds kMaxRangeValues{86400};
inline constexpr std::chrono::seconds kMaxRangeValuesPerCpu{3600};

// BADARG naming the parameter and the range when a query asks for what no report can give.
Result<void> check(const LoadingQuery& query);

// The entry of `source` in `loads`, or nullptr.
const SourceLoad* find_source(const std::vector<SourceLoad>& loads, std::string_view source);

}  // namespace monitor
