#include "machine_metrics.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <string_view>

#include "monitor/loading/cpu_states.hpp"

namespace exporter {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// The families in the order they are added (a deque: references to them stay valid); a family
// without samples is left out.
class Families {
  public:
    MetricFamily& family(std::string name, std::string help, MetricType type) {
        out_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
        return out_.back();
    }
    std::vector<MetricFamily> take() {
        std::vector<MetricFamily> v;
        for (auto& f : out_) {
            if (!f.metric.empty()) v.push_back(std::move(f));
        }
        out_.clear();
        return v;
    }

  private:
    std::deque<MetricFamily> out_;
};

void add(MetricFamily& f, Labels labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    switch (f.type) {
        case MetricType::Counter:
            m.counter.value = value;
            break;
        case MetricType::Gauge:
            m.gauge.value = value;
            break;
        default:
            m.untyped.value = value;
            break;
    }
    f.metric.push_back(std::move(m));
}

// The probe's states, as the interface lists them.
constexpr std::array<std::string_view, 6> kProbeStates = {"starting",  "calibrating", "running",
                                                          "displaced", "failed",      "stopped"};

// A source's statistics: the last second and the window, as ratios of 0-1. A family left
// out (nullptr) is a collector switched off.
struct LoadFamilies {
    MetricFamily* last = nullptr;
    MetricFamily* avg = nullptr;
    MetricFamily* min = nullptr;
    MetricFamily* max = nullptr;

    void add_stats(const Labels& labels, const monitor::LoadStats& s) const {
        if (last != nullptr && s.avg_prev_sec) add(*last, labels, *s.avg_prev_sec / 100.0);
        if (s.samples == 0) return;
        if (avg != nullptr) add(*avg, labels, s.avg_prev_min / 100.0);
        if (min != nullptr) add(*min, labels, s.min_prev_min / 100.0);
        if (max != nullptr) add(*max, labels, s.max_prev_min / 100.0);
    }
};

// The families of `prefix`: the window's maximum when `peak`, the others when `rest`.
LoadFamilies load_families(Families& fs, const std::string& prefix, const std::string& whose,
                           bool peak, bool rest) {
    LoadFamilies f;
    if (rest) {
        f.last = &fs.family(prefix + "_load_ratio",
                            "Load of " + whose + " over the last second (0-1), by source.",
                            MetricType::Gauge);
        f.avg = &fs.family(prefix + "_load_window_avg_ratio",
                           "Mean load of " + whose + " over the history window (0-1), by source.",
                           MetricType::Gauge);
        f.min = &fs.family(prefix + "_load_window_min_ratio",
                           "Lowest per-second load of " + whose + " in the history window (0-1).",
                           MetricType::Gauge);
    }
    if (peak) {
        f.max = &fs.family(prefix + "_load_window_max_ratio",
                           "Highest per-second load of " + whose +
                               " in the history window (0-1): the busiest second between "
                               "two scrapes.",
                           MetricType::Gauge);
    }
    return f;
}

void add_loading(Families& fs, const monitor::LoadingReport& loading, const CollectorSet& on) {
    if (on.on(Collector::Load)) {
        auto& window = fs.family("monitord_load_window_seconds",
                                 "Length of monitord's loading history window.", MetricType::Gauge);
        add(window, {}, static_cast<double>(loading.window_seconds));
        const auto machine = load_families(fs, "monitord", "all online CPUs", true, true);
        for (const auto& l : loading.machine) {
            if (l.stats) machine.add_stats({{"source", l.source}}, *l.stats);
        }
    }
    const auto cpu = load_families(fs, "monitord_cpu", "a CPU", on.on(Collector::Load),
                                   on.on(Collector::CpuLoad));
    MetricFamily* seconds = nullptr;
    if (on.on(Collector::Cpu)) {
        seconds = &fs.family(
            "monitord_cpu_seconds_total",
            "CPU time in each mode (node_exporter's label and names) as /proc/stat accounts it, "
            "since monitord started, with the idle probes' own time given back to idle; guest "
            "and guest_nice are modes of their own, not inside user and nice.",
            MetricType::Counter);
    }
    const auto names = monitor::time_state_names();
    for (const auto& c : loading.cpus) {
        const std::string id = std::to_string(c.cpu);
        for (const auto& l : c.sources) {
            if (l.stats) cpu.add_stats({{"cpu", id}, {"source", l.source}}, *l.stats);
            if (seconds == nullptr || !l.state_seconds) continue;
            for (std::size_t i = 0; i < monitor::kTimeStateCount; ++i) {
                add(*seconds, {{"cpu", id}, {"mode", std::string{names[i]}}},
                    l.state_seconds->seconds[i]);
            }
        }
    }
}

void add_probes(Families& fs, const monitor::protocol::DaemonStatus& s, const CollectorSet& on) {
    if (on.on(Collector::Probes) && !s.probes.empty()) {
        auto& count = fs.family("monitord_probes",
                                "How many CPUs' idle probes are in each state (monctl status "
                                "names the CPUs).",
                                MetricType::Gauge);
        for (auto name : kProbeStates) {
            add(count, {{"state", std::string{name}}},
                static_cast<double>(
                    std::ranges::count(s.probes, name, &monitor::protocol::ProbeStatus::state)));
        }
    }
    if (!on.on(Collector::ProbeCpu)) return;
    auto& state =
        fs.family("monitord_probe_state",
                  "The idle probe's state on a CPU: 1 for the state it is in.", MetricType::Gauge);
    auto& idle = fs.family("monitord_probe_idle_seconds_total",
                           "CPU time the idle probe got on a CPU: the idle time it measured.",
                           MetricType::Counter);
    auto& baseline = fs.family(
        "monitord_probe_baseline_seconds",
        "Calibrated time of one outer probe loop (10,000 register copies) on an unloaded CPU.",
        MetricType::Gauge);
    for (const auto& p : s.probes) {
        const std::string id = std::to_string(p.cpu);
        for (auto name : kProbeStates) {
            add(state, {{"cpu", id}, {"state", std::string{name}}}, p.state == name ? 1 : 0);
        }
        add(idle, {{"cpu", id}}, p.cpu_seconds);
        if (p.baseline_ns) add(baseline, {{"cpu", id}}, *p.baseline_ns * 1e-9);
    }
}

void add_watchdog(Families& fs, const monitor::protocol::WatchdogInfo& w) {
    auto gauge = [&](std::string name, std::string help, double value) {
        add(fs.family(std::move(name), std::move(help), MetricType::Gauge), {}, value);
    };
    add(fs.family("monitord_watchdog_info", "The watchdog device monitord pets, and how.",
                  MetricType::Gauge),
        {{"device", w.device},
         {"identity", w.identity.value_or("")},
         {"policy", w.policy},
         {"on_stop", w.on_stop}},
        1);
    gauge("monitord_watchdog_armed", "1 while the watchdog is open and counting down.",
          w.armed ? 1 : 0);
    if (w.timeout) {
        gauge("monitord_watchdog_timeout_seconds",
              "The watchdog's timeout as the driver granted it.", static_cast<double>(*w.timeout));
    }
    if (w.time_left) {
        gauge("monitord_watchdog_time_left_seconds",
              "Seconds until the watchdog fires, as the driver tells.",
              static_cast<double>(*w.time_left));
    }
    if (w.since_last_pet) {
        gauge("monitord_watchdog_last_pet_age_seconds",
              "Seconds since the idle probes last petted the watchdog.", *w.since_last_pet);
    }
    add(fs.family("monitord_watchdog_pets_total", "Pets of the watchdog.", MetricType::Counter), {},
        static_cast<double>(w.pets));
    add(fs.family("monitord_watchdog_pet_errors_total", "Pets the driver refused.",
                  MetricType::Counter),
        {}, static_cast<double>(w.pet_errors));
    add(fs.family("monitord_watchdog_late_pets_total",
                  "Near misses: pets that came more than half the timeout after the one before "
                  "(the probes pet ten times a second while a CPU has idle time).",
                  MetricType::Counter),
        {}, static_cast<double>(w.late_pets));
    gauge("monitord_watchdog_longest_pet_gap_seconds",
          "The longest time between two pets since the watchdog was armed.", w.longest_pet_gap);
    gauge("monitord_watchdog_nowayout",
          "1 when the driver cannot be stopped (nowayout): it stays armed on any stop.",
          w.nowayout ? 1 : 0);
    gauge("monitord_watchdog_last_reset_by_watchdog",
          "1 when the driver says the last reset of the machine was the watchdog's doing.",
          w.last_reset_by_watchdog ? 1 : 0);
}

// Each standing session's events as counters (the raw count and the times it was enabled and
// on a counter: rate(count) x rate(enabled) / rate(running) is the scaled rate), per CPU for
// the target "each"; its metrics of the last second as gauges.
void add_standing(Families& fs, const std::vector<monitor::protocol::StandingSession>& sessions) {
    auto& counting = fs.family("monitord_perf_session_counting",
                               "1 when the standing counter session counts, 0 when it could "
                               "not open (monctl perf show says why).",
                               MetricType::Gauge);
    auto& paused = fs.family("monitord_perf_session_paused",
                             "1 while the standing counter session is paused (monctl perf "
                             "pause), its counts standing still; 0 while it counts.",
                             MetricType::Gauge);
    auto& paused_seconds = fs.family("monitord_perf_paused_seconds_total",
                                     "Time the standing counter session spent paused since it "
                                     "started.",
                                     MetricType::Counter);
    auto& events = fs.family("monitord_perf_events_total",
                             "Events counted by a standing session while on a counter (task "
                             "and CPU clocks: nanoseconds).",
                             MetricType::Counter);
    auto& enabled = fs.family("monitord_perf_enabled_seconds_total",
                              "Time the event was enabled, added up over the CPUs it counts on.",
                              MetricType::Counter);
    auto& running = fs.family("monitord_perf_running_seconds_total",
                              "Time the event was on a counter (below enabled when counters "
                              "were shared).",
                              MetricType::Counter);
    auto& metrics = fs.family("monitord_perf_metric",
                              "A metric derived from a standing session's events over the last "
                              "second (ipc, cpus_utilized, ...).",
                              MetricType::Gauge);
    auto add_count = [&](Labels labels, const monitor::protocol::Count& c) {
        add(events, labels, static_cast<double>(c.count));
        add(enabled, labels, static_cast<double>(c.enabled_ns) / 1e9);
        add(running, std::move(labels), static_cast<double>(c.running_ns) / 1e9);
    };
    for (const auto& s : sessions) {
        add(counting, {{"session", s.name}}, s.counting ? 1 : 0);
        if (s.totals) {
            add(paused, {{"session", s.name}}, s.totals->paused ? 1 : 0);
            add(paused_seconds, {{"session", s.name}}, s.totals->paused_seconds);
            for (const auto& e : s.totals->events) {
                if (e.cpus.empty()) {
                    add_count({{"session", s.name}, {"event", e.name}}, e.value);
                    continue;
                }
                for (const auto& [cpu, c] : e.cpus) {
                    add_count(
                        {{"session", s.name}, {"event", e.name}, {"cpu", std::to_string(cpu)}}, c);
                }
            }
        }
        if (s.last) {
            for (const auto& m : s.last->metrics) {
                add(metrics, {{"session", s.name}, {"metric", m.name}}, m.value);
            }
        }
    }
}

// The busiest units (GetLoading's units), in CPUs: 1 is one CPU's worth of time, a unit busy
// on four CPUs has 4. A machine without cgroup accounting has no unit series.
void add_units(Families& fs, const monitor::UnitLoading& units) {
    if (!units.unavailable.empty()) return;
    add(fs.family("monitord_units",
                  "Units the cgroup tree holds (monctl loading --units), by the kernel's "
                  "accounting their CPU time comes from.",
                  MetricType::Gauge),
        {{"accounting", units.accounting}}, static_cast<double>(units.count));
    auto& last = fs.family("monitord_unit_cpu_ratio",
                           "CPU time of one of the busiest systemd units over the last second, "
                           "in CPUs (1: one CPU's worth).",
                           MetricType::Gauge);
    auto& mode = fs.family("monitord_unit_cpu_mode_ratio",
                           "Of a busiest unit's CPU time over the last second, that in user mode "
                           "and in the kernel, in CPUs (split by ticks: need not add up).",
                           MetricType::Gauge);
    auto& avg = fs.family("monitord_unit_cpu_window_avg_ratio",
                          "Mean CPU time of a busiest unit over the history window, in CPUs.",
                          MetricType::Gauge);
    auto& pressure = fs.family("monitord_unit_cpu_pressure_avg_ratio",
                               "A busiest unit's CPU pressure: the share of the last 10 s in "
                               "which some of its tasks waited for a CPU (PSI avg10 of its "
                               "cgroup2 cpu.pressure).",
                               MetricType::Gauge);
    auto& max = fs.family("monitord_unit_cpu_window_max_ratio",
                          "A busiest unit's highest per-second CPU time in the history window, "
                          "in CPUs.",
                          MetricType::Gauge);
    for (const auto& u : units.top) {
        const Labels labels{{"unit", u.unit}, {"cgroup", u.cgroup}};
        add(last, labels, u.cpu / 100);
        for (auto [name, value] : {std::pair{"user", u.user}, std::pair{"system", u.system}}) {
            Labels with_mode = labels;
            with_mode.push_back({"mode", name});
            add(mode, std::move(with_mode), value / 100);
        }
        add(avg, labels, u.window_avg / 100);
        add(max, labels, u.window_max / 100);
        if (u.pressure) add(pressure, labels, *u.pressure / 100);  // the kernel's percent
    }
}

// The CPUs' context (GetLoading's context): the machine's figures with `machine`, each CPU's
// with `per_cpu`. Rates over the last second; none before monitord's second reading, which
// follows the first scrape that asks by a second. A figure the machine lacks (PSI, cpufreq,
// schedstats) has no series.
void add_context(Families& fs, const monitor::CpuContextSample& c, bool machine, bool per_cpu) {
    const bool rates = c.seconds > 0;
    if (machine) {
        auto gauge = [&](std::string name, std::string help, const auto& value) {
            auto& f = fs.family(std::move(name), std::move(help), MetricType::Gauge);
            if (value) add(f, {}, static_cast<double>(*value));
        };
        gauge("monitord_tasks_running",
              "Runnable tasks now, running or waiting for a CPU (/proc/stat procs_running).",
              c.procs_running);
        gauge("monitord_tasks_blocked", "Tasks waiting for I/O now (/proc/stat procs_blocked).",
              c.procs_blocked);
        if (rates) {
            gauge("monitord_tasks_waiting",
                  "Tasks waiting for a CPU on average over the last second, summed over the "
                  "CPUs (their run-queue wait, /proc/schedstat).",
                  c.waiting);
            gauge("monitord_cpu_pressure_ratio",
                  "Share of the last second in which some runnable task waited for a CPU (PSI, "
                  "/proc/pressure/cpu some).",
                  c.pressure_some);
        }
        auto& avg = fs.family("monitord_cpu_pressure_avg_ratio",
                              "The kernel's running average of the CPU pressure (PSI some) over "
                              "its window.",
                              MetricType::Gauge);
        for (auto [window, value] :
             {std::pair{"10s", c.pressure_avg10}, std::pair{"60s", c.pressure_avg60},
              std::pair{"300s", c.pressure_avg300}}) {
            if (value) add(avg, {{"window", window}}, *value / 100);  // the kernel's percent
        }
        if (rates) {
            gauge("monitord_interrupts_per_second",
                  "Interrupts served per second over the last second, every CPU and source "
                  "(/proc/interrupts).",
                  c.interrupts);
            auto& sources = fs.family(
                "monitord_interrupt_source_per_second",
                "Interrupts per second over the last second of one of the busiest sources (at "
                "most 10), every CPU.",
                MetricType::Gauge);
            for (const auto& i : c.interrupt_sources) {
                add(sources, {{"source", i.source}, {"description", i.description}}, i.per_second);
            }
            auto& kinds = fs.family("monitord_softirqs_per_second",
                                    "Softirqs run per second over the last second, every CPU, by "
                                    "kind (/proc/softirqs).",
                                    MetricType::Gauge);
            for (const auto& k : c.softirq_kinds) add(kinds, {{"kind", k.source}}, k.per_second);
        }
    }
    if (!per_cpu) return;
    auto& waiting =
        fs.family("monitord_cpu_tasks_waiting",
                  "Tasks waiting for the CPU on average over the last second.", MetricType::Gauge);
    auto& frequency = fs.family("monitord_cpu_frequency_hertz",
                                "The CPU's clock now, as cpufreq reports it (scaling_cur_freq).",
                                MetricType::Gauge);
    auto& interrupts =
        fs.family("monitord_cpu_interrupts_per_second",
                  "Interrupts the CPU served per second over the last second.", MetricType::Gauge);
    auto& softirqs =
        fs.family("monitord_cpu_softirqs_per_second",
                  "Softirqs the CPU ran per second over the last second.", MetricType::Gauge);
    for (const auto& cpu : c.cpus) {
        const Labels labels{{"cpu", std::to_string(cpu.cpu)}};
        if (cpu.frequency_mhz) add(frequency, labels, *cpu.frequency_mhz * 1e6);
        if (!rates) continue;
        if (cpu.waiting) add(waiting, labels, *cpu.waiting);
        if (cpu.interrupts) add(interrupts, labels, *cpu.interrupts);
        if (cpu.softirqs) add(softirqs, labels, *cpu.softirqs);
    }
}

}  // namespace

std::vector<prometheus::MetricFamily> machine_metrics(const Scrape& scrape,
                                                      const ExporterFacts& facts,
                                                      const CollectorSet& on) {
    Families fs;
    add(fs.family("monitord_up", "1 when monitord answered this scrape.", MetricType::Gauge), {},
        scrape.status ? 1 : 0);
    add(fs.family("monitord_exporter_build_info", "The exporter's version.", MetricType::Gauge),
        {{"version", facts.version}}, 1);
    add(fs.family("monitord_exporter_scrape_duration_seconds",
                  "How long asking monitord took in this scrape.", MetricType::Gauge),
        {}, scrape.duration_seconds);
    add(fs.family("monitord_exporter_scrapes_total", "Scrapes served.", MetricType::Counter), {},
        static_cast<double>(facts.scrapes));
    add(fs.family("monitord_exporter_scrape_errors_total", "Scrapes that monitord did not answer.",
                  MetricType::Counter),
        {}, static_cast<double>(facts.errors));
    if (!scrape.status) return fs.take();

    const auto& s = *scrape.status;
    add(fs.family("monitord_build_info", "monitord's version and probe mode.", MetricType::Gauge),
        {{"version", s.version}, {"probe_mode", s.probe_mode}}, 1);
    add(fs.family("monitord_probe_fallback",
                  "1 when spinning probes were asked for but could not be placed where they "
                  "yield to the busy threads of every other group, and sleep instead (monctl "
                  "status says why).",
                  MetricType::Gauge),
        {}, s.probe_fallback ? 1 : 0);
    const double now = std::chrono::duration<double>(scrape.at.time_since_epoch()).count();
    add(fs.family("monitord_start_time_seconds", "When monitord started, since the epoch.",
                  MetricType::Gauge),
        {}, now - s.uptime);
    add(fs.family("monitord_cpus_online", "CPUs online.", MetricType::Gauge), {},
        static_cast<double>(s.cpus.size()));
    if (scrape.loading) add_loading(fs, *scrape.loading, on);
    add_probes(fs, s, on);
    if (s.watchdog && on.on(Collector::Watchdog)) add_watchdog(fs, *s.watchdog);
    if (on.on(Collector::Perf)) add_standing(fs, scrape.standing);
    if (on.on(Collector::Units) && scrape.loading && scrape.loading->units) {
        add_units(fs, *scrape.loading->units);
    }
    if (scrape.loading && scrape.loading->context && scrape.loading->context->sample) {
        add_context(fs, *scrape.loading->context->sample, on.on(Collector::Context),
                    on.on(Collector::CpuContext));
    }
    return fs.take();
}

}  // namespace exporter
