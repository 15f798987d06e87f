// The exporter's collectors: the families of metrics an operator switches on and off, as
// node_exporter's --collector.NAME and --no-collector.NAME do, to keep the series a machine
// sends within what the Prometheus server can hold. By default, per CPU, node_exporter's cpu
// collector (the time in each mode) and the peak second of the window; the figures of each
// CPU's every second and its probe's details on request.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "monitor/loading/loading_report.hpp"

namespace exporter {

enum class Collector : std::uint8_t {
    Cpu,         // monitord_cpu_seconds_total{cpu,mode}
    Load,        // the machine's load by source; each CPU's peak second of the window
    CpuLoad,     // each CPU's last second and window average and minimum, by source
    Probes,      // how many probes are in each state
    ProbeCpu,    // each CPU's probe: its state, idle time and baseline
    Watchdog,    // the watchdog monitord pets
    Perf,        // the standing counter sessions
    Units,       // the busiest systemd units' CPU time
    Context,     // the machine's tasks, CPU pressure, interrupts and softirqs
    CpuContext,  // each CPU's waiting tasks, clock, interrupts and softirqs
};
inline constexpr std::size_t kCollectorCount = 10;

// How many units the units collector exports by default, and at most (as many as a loading
// report lists).
inline constexpr std::int64_t kDefaultUnitsLimit = 10;
inline constexpr std::int64_t kMaxUnitsLimit = monitor::kMaxUnitsListed;

struct CollectorInfo {
    Collector id;
    std::string_view name;  // as in --collector.NAME
    bool by_default;
    std::string_view help;  // what it exports, for --help and the man page
};

// Every collector, in Collector order.
std::span<const CollectorInfo> collectors();
std::optional<Collector> collector_named(std::string_view name);

class CollectorSet {
  public:
    // The collectors on by default.
    static CollectorSet defaults();
    static CollectorSet none() { return CollectorSet{}; }

    bool on(Collector c) const { return bits_.test(static_cast<std::size_t>(c)); }
    void set(Collector c, bool enabled) { bits_.set(static_cast<std::size_t>(c), enabled); }
    // The names of those on, separated by commas ("cpu,load,probes,watchdog,perf").
    std::string names() const;

    // What the scrape asks monitord for.
    bool needs_per_cpu() const {
        return on(Collector::Cpu) || on(Collector::Load) || on(Collector::CpuLoad) ||
               on(Collector::CpuContext);
    }
    // The CPUs' context (GetLoading's context), which monitord samples from the first scrape
    // that asks for it until 10 minutes after the last.
    bool needs_context() const { return on(Collector::Context) || on(Collector::CpuContext); }
    bool needs_totals() const { return on(Collector::Cpu); }
    bool needs_standing() const { return on(Collector::Perf); }
    // The busiest units to ask for (GetLoading's units): the limit, 0 when the collector is off.
    std::int64_t units_asked() const { return on(Collector::Units) ? units_limit_ : 0; }
    // The operator's limit on the units exported (--collector.units.limit), from 1 to
    // kMaxUnitsLimit.
    void set_units_limit(std::int64_t limit) { units_limit_ = limit; }

  private:
    std::bitset<kCollectorCount> bits_;
    std::int64_t units_limit_ = kDefaultUnitsLimit;
};

}  // namespace exporter
