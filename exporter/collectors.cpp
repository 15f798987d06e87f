#include "collectors.hpp"

#include <algorithm>
#include <array>

namespace exporter {
namespace {

constexpr std::array<CollectorInfo, kCollectorCount> kCollectors = {{
    {Collector::Cpu, "cpu", true,
     "CPU time in each mode per CPU, as node_exporter's cpu collector names it "
     "(monitord_cpu_seconds_total)"},
    {Collector::Load, "load", true,
     "the machine's load by source over the last second and the window, and each CPU's "
     "busiest second of the window (monitord_cpu_load_window_max_ratio)"},
    {Collector::CpuLoad, "cpu_load", false,
     "each CPU's load by source over the last second, and its window's average and lowest "
     "second"},
    {Collector::Probes, "probes", true, "how many idle probes are in each state"},
    {Collector::ProbeCpu, "probe_cpu", false,
     "each CPU's idle probe: its state, the idle time it measured, its baseline"},
    {Collector::Watchdog, "watchdog", true, "the watchdog monitord pets, when it pets one"},
    {Collector::Perf, "perf", true,
     "the standing counter sessions of monitord.conf: their events and metrics"},
    {Collector::Units, "units", false,
     "the busiest systemd units' CPU time over the last second and the window "
     "(--collector.units.limit of them, 10 by default)"},
    {Collector::Context, "context", true,
     "the machine's runnable, blocked and waiting tasks, CPU pressure (PSI), and interrupts "
     "and softirqs per second over the last second, by source"},
    {Collector::CpuContext, "cpu_context", false,
     "each CPU's waiting tasks, clock frequency, and interrupts and softirqs per second"},
}};

}  // namespace

std::span<const CollectorInfo> collectors() {
    return kCollectors;
}

std::optional<Collector> collector_named(std::string_view name) {
    const auto* it = std::ranges::find(kCollectors, name, &CollectorInfo::name);
    if (it == kCollectors.end()) return std::nullopt;
    return it->id;
}

CollectorSet CollectorSet::defaults() {
    CollectorSet s;
    for (const auto& c : kCollectors) s.set(c.id, c.by_default);
    return s;
}

std::string CollectorSet::names() const {
    std::string out;
    for (const auto& c : kCollectors) {
        if (!on(c.id)) continue;
        if (!out.empty()) out += ',';
        out += c.name;
    }
    return out;
}

}  // namespace exporter
