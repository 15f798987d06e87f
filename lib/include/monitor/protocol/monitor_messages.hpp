// The parameters of io.monitord.Monitor calls and replies, between JSON and C++ structs.
// The shapes are those of lib/protocol/io.monitord.Monitor.varlink; the from_json functions
// expect values that were checked against it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/loading/loading_report.hpp"
#include "monitor/loading/probe_group.hpp"
#include "monitor/loading/probe_set.hpp"
#include "monitor/watchdog/watchdog.hpp"

namespace monitor::protocol {

struct ProbeStatus {
    int cpu = 0;
    std::string state;  // starting, calibrating, running, displaced, failed, stopped
    std::optional<double> baseline_ns;
    std::uint64_t count = 0;
    double cpu_seconds = 0;
    std::string error;  // empty unless failed
};

struct WatchdogInfo {
    std::string device;
    std::optional<std::string> identity;
    bool armed = false;
    std::optional<std::int64_t> timeout;
    std::optional<std::int64_t> time_left;
    std::optional<double> since_last_pet;
    std::uint64_t pets = 0;
    std::uint64_t pet_errors = 0;
    std::uint64_t late_pets = 0;  // near misses: more than half the timeout after the last
    double longest_pet_gap = 0;   // seconds, since the last arm
    std::optional<std::string> last_error;
    bool last_reset_by_watchdog = false;
    bool nowayout = false;
    std::string policy = "all";  // any, all
    std::vector<int> waiting_for;
    std::string on_stop = "disarm";  // disarm, keep_armed: enum_value(on_stop_name(...))
};

// The task group the idle probes are in (monitor/loading/probe_group.hpp).
struct ProbeGroupInfo {
    std::string kind;  // root, autogroup, cgroup
    std::string name;
    std::optional<std::int64_t> nice;
    bool yields = true;
    std::string note;  // describe_probe_group()
};

ProbeGroupInfo probe_group_info(const ProbeGroup& group);

struct DaemonStatus {
    std::string version;
    double uptime = 0;  // seconds
    std::string state;  // starting, running, reloading, stopping
    std::int64_t pid = 0;
    std::vector<int> cpus;
    std::vector<std::string> sources;
    std::string probe_mode = "off";  // spin, sleep, off
    std::vector<ProbeStatus> probes;
    std::optional<ProbeGroupInfo> probe_group;  // spinning probes only
    // Why the probes do not spin although spin was asked for (no place where they yield).
    std::optional<std::string> probe_fallback;
    std::int64_t history_seconds = 0;
    std::optional<WatchdogInfo> watchdog;
};

// GetStatus's view of a probe, and of the watchdog: nullopt for one that was never armed.
// `on_stop`: what an orderly stop of the daemon does to it, "disarm" or "keep_armed".
ProbeStatus probe_status(const ProbeReading& r);
std::optional<WatchdogInfo> watchdog_info(const watchdog::WatchdogStatus& s, std::string on_stop);

nlohmann::json to_json(const WatchdogInfo& w);
WatchdogInfo watchdog_from_json(const nlohmann::json& j);
nlohmann::json to_json(const DaemonStatus& s);
DaemonStatus status_from_json(const nlohmann::json& j);

// A name as a varlink enum value: enum values are identifiers, so the hyphen of a name such
// as on-stop's "keep-armed" is an underscore on the wire ("keep_armed").
std::string enum_value(std::string_view name);

nlohmann::json to_json(const LoadingReport& r);
LoadingReport loading_from_json(const nlohmann::json& j);

LoadingQuery loading_query_from_json(const nlohmann::json& params);
nlohmann::json to_json(const LoadingQuery& q);

}  // namespace monitor::protocol
