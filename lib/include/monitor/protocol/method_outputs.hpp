// The replies of each method of the interfaces, as C++ (the `Out` of its Method descriptor):
// what the daemon's handler fills in and replies with (reply_of(), to_json()), and what a
// client receives, read once with read_output() from the reply's parameters. Shapes as in
// lib/protocol/io.monitord.Monitor.varlink and org.varlink.service.varlink; a test holds every
// field of each to the interface files.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "monitor/loading/loading_report.hpp"
#include "monitor/perf/pmu.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/method_descriptors.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitor/protocol/profile_messages.hpp"
#include "monitor/protocol/varlink_message.hpp"

namespace monitor::protocol {

// org.varlink.service.GetInfo
struct ServiceInfo {
    std::string vendor;
    std::string product;
    std::string version;
    std::string url;
    std::vector<std::string> interfaces;
};

// org.varlink.service.GetInterfaceDescription
struct InterfaceDescription {
    std::string description;
};

// GetStatus: the DaemonStatus of monitor_messages.hpp. GetLoading: the LoadingReport of
// loading/loading_report.hpp.

// GetHistoryRuns.
struct SourceLoadValue {
    std::string source;
    std::optional<double> load;  // percent
};
struct HistoryRunSecond {
    std::int64_t at = 0;  // the second's end, microseconds since the epoch
    std::vector<SourceLoadValue> machine;
};
struct HistoryRunInfo {
    std::int64_t id = 0;
    std::string boot_id;
    std::int64_t started = 0;  // microseconds since the epoch, as the two below
    std::optional<std::int64_t> last;
    std::optional<std::int64_t> stopped;
    // running, stopped, daemon_ended, machine_down, watchdog_reset, unknown
    std::string ended;
    std::optional<std::string> watchdog;
    std::optional<bool> boot_reset_by_watchdog;
    std::vector<HistoryRunSecond> last_seconds;
};
struct HistoryRunsOut {
    std::string file;
    std::vector<HistoryRunInfo> runs;
};

struct PmuInfoOut {
    std::vector<perf::PmuInfo> pmus;
    std::optional<int> paranoid;  // /proc/sys/kernel/perf_event_paranoid
};

struct EventsOut {
    std::vector<EventListing> events;
};

// ListMetrics: every definition, in the order a session takes them.
struct MetricsOut {
    std::vector<MetricListing> metrics;
};

// PlanCounters.
struct PlanOut {
    CounterPlan plan;
};

// CollectCounters: the plan comes with the first period and with the totals.
struct CollectOut {
    std::optional<CounterPlan> plan;
    CounterReport report;
};

struct StartCountersOut {
    CounterPlan plan;
    std::optional<int> threads;
};

// ReadCounters, StopCounters, ResetCounters, PauseCounters, ResumeCounters.
struct ReportOut {
    CounterReport report;
};

// GetStandingCounters.
struct StandingSessionsOut {
    std::vector<StandingSession> sessions;
};

// Profile: started (the first reply of a stream), or a report.
struct ProfileOut {
    std::optional<bool> started;
    std::optional<ProfileMessage> report;
};

// WatchOverflows: started, or a batch.
struct OverflowsOut {
    std::optional<bool> started;
    std::optional<OverflowBatch> batch;
};

nlohmann::json to_json(const ServiceInfo& out);
nlohmann::json to_json(const InterfaceDescription& out);
nlohmann::json to_json(const HistoryRunsOut& out);
nlohmann::json to_json(const PmuInfoOut& out);
nlohmann::json to_json(const EventsOut& out);
nlohmann::json to_json(const MetricsOut& out);
nlohmann::json to_json(const PlanOut& out);
nlohmann::json to_json(const CollectOut& out);
nlohmann::json to_json(const StartCountersOut& out);
nlohmann::json to_json(const ReportOut& out);
nlohmann::json to_json(const StandingSessionsOut& out);
nlohmann::json to_json(const ProfileOut& out);
nlohmann::json to_json(const OverflowsOut& out);

// Reads a reply's parameters into `out`. A reply that lacks a field its type requires, or
// has one of another type, throws nlohmann::json::exception (out_of_range, type_error) or
// std::invalid_argument naming it: the reply does not match the interface.
void read_output(const nlohmann::json& j, ServiceInfo& out);
void read_output(const nlohmann::json& j, InterfaceDescription& out);
void read_output(const nlohmann::json& j, DaemonStatus& out);
void read_output(const nlohmann::json& j, LoadingReport& out);
void read_output(const nlohmann::json& j, HistoryRunsOut& out);
void read_output(const nlohmann::json& j, PmuInfoOut& out);
void read_output(const nlohmann::json& j, EventsOut& out);
void read_output(const nlohmann::json& j, MetricsOut& out);
void read_output(const nlohmann::json& j, PlanOut& out);
void read_output(const nlohmann::json& j, CollectOut& out);
void read_output(const nlohmann::json& j, StartCountersOut& out);
void read_output(const nlohmann::json& j, ReportOut& out);
void read_output(const nlohmann::json& j, StandingSessionsOut& out);
void read_output(const nlohmann::json& j, ProfileOut& out);
void read_output(const nlohmann::json& j, OverflowsOut& out);

template <typename Out>
Out output_from_json(const nlohmann::json& j) {
    Out out{};
    read_output(j, out);
    return out;
}

// The replies of a CollectCounters stream, period after period. The records of one stream
// differ only in their numbers, so the JSON of the last is updated in place (update_json)
// rather than built again: encoding a record allocates (almost) nothing.
// Its implicit moves reach a throw of nlohmann::json's other_error that cannot run (in
// json_value(value_t), a null type in the case of the types that are not null).
// NOLINTNEXTLINE(bugprone-exception-escape): see above
class CollectRecords {
  public:
    // The reply carrying `out`, encoded (the message text without its NUL).
    std::string encode(const CollectOut& out, bool continues);

  private:
    nlohmann::json report_;
};

// The reply of `method` carrying `out`; `continues`: more replies of its stream follow.
template <typename In, typename Out>
varlink::Reply reply_of(const Method<In, Out>&, const std::type_identity_t<Out>& out,
                        bool continues = false) {
    varlink::Reply r;
    r.parameters = to_json(out);
    r.continues = continues;
    return r;
}

}  // namespace monitor::protocol
