// The performance-counter calls of io.monitord.Monitor between JSON and C++: the request
// (events, target, multiplexing), the plan, the reports with their metrics, the PMUs and
// events. Shapes as in lib/protocol/io.monitord.Monitor.varlink; the from_json functions
// expect values that were checked against it.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "monitor/enum_names.hpp"
#include "monitor/loading/cpu_topology.hpp"
#include "monitor/perf/derived_metrics.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/metric_definitions.hpp"
#include "monitor/perf/perf_session.hpp"

namespace monitor::protocol {

// Where to count or sample, as the interface's Target names it.
struct TargetRequest {
    enum class Kind { All, Each, Cpu, Process, Cgroup, Unit };
    Kind kind = Kind::All;
    std::optional<int> cpu;
    std::optional<std::int64_t> pid;
    std::string cgroup;
    std::string unit;
    // Kinds all and each: only these CPUs (perf stat -C 0,2-3); empty: every online CPU.
    std::vector<int> cpus;
    // Kind process: several processes (perf stat -p 1,2), counted as one; beside or instead of
    // `pid`.
    std::vector<std::int64_t> pids;
    // Kind each: the counts of each CPU, or of each core, die, socket or node (perf stat
    // --per-core ...).
    CpuLevel per = CpuLevel::Cpu;

    bool operator==(const TargetRequest&) const = default;
};

// The interface's names of the target kinds and of the multiplexing modes.
inline constexpr std::array<EnumName<TargetRequest::Kind>, 6> kTargetKindNames{{
    {TargetRequest::Kind::All, "all"},
    {TargetRequest::Kind::Each, "each"},
    {TargetRequest::Kind::Cpu, "cpu"},
    {TargetRequest::Kind::Process, "process"},
    {TargetRequest::Kind::Cgroup, "cgroup"},
    {TargetRequest::Kind::Unit, "unit"},
}};
inline constexpr std::array<EnumName<perf::MuxMode>, 2> kMuxModeNames{{
    {perf::MuxMode::Daemon, "daemon"},
    {perf::MuxMode::Kernel, "kernel"},
}};

nlohmann::json to_json(const TargetRequest& t);
// std::invalid_argument for a kind the interface does not name (a call checked against the
// interface file has none).
TargetRequest target_request_from_json(const nlohmann::json& j);
// What a target is, for people: "all CPUs", "each CPU", "each core", "cpu3", "cgroup X",
// "unit X", "process 42", "processes 42, 43".
std::string target_text(const TargetRequest& t);
// The one mapping of a Target onto what a session opens: numbers in range, a cgroup path
// checked to stay inside the tree at `cgroup_root`, a unit's cgroup found in it (NODEV when
// the unit does not run). BADARG naming what is missing or wrong.
Result<perf::CountTarget> count_target(const TargetRequest& t,
                                       const std::filesystem::path& cgroup_root);

struct CounterRequest {
    std::string events;  // "a,b,{c,d}"
    TargetRequest target;
    perf::MuxMode mux = perf::MuxMode::Daemon;
    std::optional<std::int64_t> slice_ms;
    std::optional<int> counter_budget;
    // Sample each event every N events as well, and give each record the last sampled
    // instruction address of each event (the SIA).
    std::optional<std::int64_t> sample_every;
    // Derived metrics to compute, by group or name ("ipc,branch"; perf::choose_metrics), with
    // the events they need counted as well; empty for the built-in ones alone.
    std::string metrics;

    bool operator==(const CounterRequest&) const = default;
};

nlohmann::json to_json(const CounterRequest& r);
// What a request counts, for people (target_text of its target).
std::string target_text(const CounterRequest& r);
CounterRequest counter_request_from_json(const nlohmann::json& j);

// The one mapping of a request onto a session's options. What it asks to count and how the
// counters are shared (events parsed, numbers in range), without the target: what a plan
// needs, and what monctl perf stat, which counts its own command, takes from it.
Result<perf::SessionOptions> counting_options(const CounterRequest& r);
// The same with the target: a cgroup path checked to stay inside the tree at `cgroup_root`,
// a unit's cgroup found in it (NODEV when the unit does not run).
Result<perf::SessionOptions> session_options(const CounterRequest& r,
                                             const std::filesystem::path& cgroup_root);

struct Count {
    std::uint64_t count = 0;
    std::uint64_t enabled_ns = 0;
    std::uint64_t running_ns = 0;
    double scaled = 0;
    double running = 1;
};

// An event's counts in a report, as they go on the wire (perf::EventCount is the session's).
struct ReportedEvent {
    std::string name;
    std::string canonical;
    std::string pmu;
    Count value;
    std::vector<std::pair<int, Count>> cpus;  // per CPU, with target "each"
    // Per group of CPUs (target "each" per core, die, socket or node), as CounterReport::groups.
    std::vector<std::pair<std::string, Count>> groups;
    // With sample_every: the instruction address of the last sample the record covers.
    std::optional<std::uint64_t> sampled_address;
    std::string unit;  // "ns" for an event that counts nanoseconds, else empty
};

struct CounterReport {
    double elapsed = 0;
    std::optional<std::int64_t> period;
    bool final = false;
    std::optional<int> threads;  // a process target: the threads counted from the start
    // The report's CPUs that were offline when it was read, ascending.
    std::vector<int> offline_cpus;
    // Target "each" per core, die, socket or node: the groups, in the events' order.
    std::vector<CpuGroup> groups;
    bool paused = false;        // the session was paused as the report was read
    double paused_seconds = 0;  // the part of elapsed spent paused
    int slots = 0;
    int rotations = 0;
    std::vector<ReportedEvent> events;
    std::vector<perf::Metric> metrics;
};

// What a report says of the CPUs besides the totals: each CPU's counts (target "each"), or
// those of each group of CPUs, its CPUs' counts, enabled and running times added up before
// the scaling, as perf stat's --per-core does.
struct ReportShape {
    bool per_cpu = false;
    std::vector<CpuGroup> groups;  // not empty: per group, in place of per CPU
};

// The shape of the reports of a session on `target` whose CPUs are `cpus`: per group of the
// topology under `sys_root` when the target asks for it (BADDATA when sysfs tells nonsense).
Result<ReportShape> report_shape(const TargetRequest& target, std::span<const int> cpus,
                                 const std::filesystem::path& sys_root);

// From a session's report, shaped as `shape` says; the report's CPUs not in `online` (the CPUs
// online now) are its offline_cpus.
CounterReport make_report(const perf::Plan& plan, const perf::PerfReport& report,
                          const ReportShape& shape, std::optional<std::int64_t> period, bool final,
                          std::span<const int> online);
// The same into `into`, reusing its vectors and strings (a stream's records, every period).
void make_report(const perf::Plan& plan, const perf::PerfReport& report, const ReportShape& shape,
                 std::optional<std::int64_t> period, bool final, std::span<const int> online,
                 CounterReport& into);

nlohmann::json to_json(const CounterReport& r);
// Makes `j`, the JSON of an earlier report of the same session, that of `r` by assigning its
// numbers in place (the records of a stream differ only in them), without allocating. False,
// with `j` partly changed, when `r` has another shape (other events, CPUs, offline CPUs,
// metrics or period): the caller then rebuilds it with to_json(r).
bool update_json(nlohmann::json& j, const CounterReport& r);
CounterReport counter_report_from_json(const nlohmann::json& j);

// A perf::Plan as the interface carries it (its fields are named as on the wire).
struct PlanMember {
    std::string event;
    std::optional<std::string> counter;  // none for an event that takes no counter
};
// One kernel group (perf::Plan::Group).
struct PlanGroup {
    std::string pmu;
    std::optional<int> set;  // which of its PMU's sets, 0-based; none for a free-running group
    int sets = 1;            // how many sets its PMU has (perf::Plan::Group::pmu_sets)
    std::vector<PlanMember> members;
};
struct CounterPlan {
    int slots = 0;  // the slots of one rotation, at least 1
    std::vector<PlanGroup> groups;
    // The standing sessions that take counters of the same PMUs (perf::shares_counters):
    // the kernel multiplexes them with this plan's sets.
    std::vector<std::string> shared_with;
};

CounterPlan make_plan_message(const perf::Plan& plan);
nlohmann::json to_json(const CounterPlan& p);
CounterPlan counter_plan_from_json(const nlohmann::json& j);

// A standing counter session (monitord.conf's [[counters]]) as GetStandingCounters gives it.
struct StandingSession {
    std::string name;
    CounterRequest request;
    std::string source;  // "FILE:LINE" of its table
    bool counting = false;
    std::optional<std::string> error;  // why it is not counting
    std::optional<CounterPlan> plan;
    // The counts since it started, as of the last loading tick; and those of the second
    // that tick ended.
    std::optional<CounterReport> totals;
    std::optional<CounterReport> last;
};

nlohmann::json to_json(const StandingSession& s);
StandingSession standing_session_from_json(const nlohmann::json& j);

nlohmann::json to_json(const perf::PmuInfo& p);
perf::PmuInfo pmu_from_json(const nlohmann::json& j);
// An event as ListEvents lists it.
struct EventListing {
    std::string name;
    std::string description;
    std::string pmu;
    std::vector<std::string> counters;
    bool pinned = false;
};
EventListing event_listing(const perf::EventInfo& e);
nlohmann::json to_json(const EventListing& e);
EventListing event_from_json(const nlohmann::json& j);

// A derived metric's definition as ListMetrics lists it.
struct MetricListing {
    std::string name;
    std::string description;
    std::string formula;
    std::vector<std::string> groups;
    std::string source;       // "FILE:LINE" of its table
    std::string unavailable;  // why it cannot count here; empty when it can
};
// `d`, with why it cannot count on the machine of `catalog` (perf::cannot_count's reason, with
// `probe`).
MetricListing metric_listing(const perf::MetricDefinition& d, const perf::EventCatalog& catalog,
                             const perf::EventProbe& probe = {});
nlohmann::json to_json(const MetricListing& m);
MetricListing metric_listing_from_json(const nlohmann::json& j);

}  // namespace monitor::protocol
