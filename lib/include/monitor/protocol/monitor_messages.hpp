// The parameters of io.monitord.Monitor calls and replies, between JSON and C++ structs.
// The shapes are those of lib/protocol/io.monitord.Monitor.varlink; the from_json functions
// expect values that were checked against it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "monitor/loading/loading_report.hpp"

namespace monitor::protocol {

struct ProbeStatus {
    int cpu = 0;
    std::string state;  // starting, calibrating, running, displaced, failed, stopped
    std::optional<double> baseline_ns;
    std::uint64_t count = 0;
    double cpu_seconds = 0;
    std::string error;  // empty unless failed
};

struct DaemonStatus {
    std::string version;
    double uptime = 0;  // seconds
    std::string state;  // starting, running, reloading, stopping
    std::int64_t pid = 0;
    std::vector<int> cpus;
    std::vector<std::string> sources;
    std::string probe_mode = "off";  // spin, sleep, off
    std::vector<ProbeStatus> probes;
    std::int64_t history_seconds = 0;
};

nlohmann::json to_json(const DaemonStatus& s);
DaemonStatus status_from_json(const nlohmann::json& j);

nlohmann::json to_json(const LoadingReport& r);
LoadingReport loading_from_json(const nlohmann::json& j);

LoadingQuery loading_query_from_json(const nlohmann::json& params);
nlohmann::json to_json(const LoadingQuery& q);

}  // namespace monitor::protocol
