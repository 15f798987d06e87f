// What one scrape of monitord says, as Prometheus metric families: the loading and the CPU
// time by state per CPU, the idle probes, the watchdog and the standing counter sessions, named as
// Prometheus names things (base units, `_total` for counters, labels rather than names).
#pragma once

#include <prometheus/metric_family.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors.hpp"
#include "monitor/loading/loading_report.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/monitor_messages.hpp"

namespace exporter {

// The replies of one scrape; nullopt when monitord did not answer.
struct Scrape {
    std::optional<monitor::protocol::DaemonStatus> status;
    std::optional<monitor::LoadingReport> loading;  // with per_cpu and totals
    // The standing counter sessions ([[counters]] of monitord.conf).
    std::vector<monitor::protocol::StandingSession> standing;
    std::chrono::system_clock::time_point at;  // when the replies came
    double duration_seconds = 0;               // how long asking monitord took
};

// The exporter's own figures.
struct ExporterFacts {
    std::string version;
    std::uint64_t scrapes = 0;  // counting this one
    std::uint64_t errors = 0;   // scrapes monitord did not answer, counting this one
};

// The families of the collectors `on`, and those always there (monitord_up, the exporter's
// own, monitord's version, start and CPUs). monitord_up is 0 and only the exporter's own
// metrics follow when the scrape has no status.
std::vector<prometheus::MetricFamily> machine_metrics(
    const Scrape& scrape, const ExporterFacts& facts,
    const CollectorSet& on = CollectorSet::defaults());

}  // namespace exporter
