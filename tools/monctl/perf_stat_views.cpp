#include "perf_stat_views.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "perf_views.hpp"

namespace monctl {
namespace {

using monitor::protocol::Count;
using monitor::protocol::CounterReport;
using monitor::protocol::ReportedEvent;

constexpr int kCountWidth = 18;  // perf's COUNTS_LEN
constexpr int kNameWidth = 32;   // perf's EVNAME_LEN
constexpr int kMetricTextWidth = 25;
constexpr double kNsPerMs = 1e6;
constexpr double kNsPerS = 1e9;

bool counted(const Count& c) {
    return c.running_ns > 0 && c.enabled_ns > 0;
}
bool in_ns(const ReportedEvent& e) {
    return e.unit == "ns";
}

// The count as perf shows it: the clocks in milliseconds, the others whole; the scaled
// estimate, which is the count itself for an event counted all the time.
std::string shown_count(const ReportedEvent& e, const Count& c, bool grouped) {
    if (!counted(c)) return "<not counted>";
    if (in_ns(e)) {
        return grouped ? format_fixed(c.scaled / kNsPerMs, 2)
                       : fmt::format("{:.2f}", c.scaled / kNsPerMs);
    }
    const auto n = static_cast<std::uint64_t>(std::llround(std::max(0.0, c.scaled)));
    return grouped ? format_count(n) : std::to_string(n);
}

// The metric shown beside an event, as perf stat: the report's metric whose event it is, else
// its rate per second of the clock (task clock, else CPU clock), which an event in
// nanoseconds has none of.
struct ShownMetric {
    double value = 0;
    std::string text;
};
// perf's words for the metric it shows on every run, else the metric's description.
std::string metric_text(const monitor::perf::Metric& m) {
    return m.name == "cpus_utilized" ? std::string{"CPUs utilized"} : m.description;
}

std::optional<ShownMetric> metric_of(const CounterReport& r, const ReportedEvent& e) {
    if (!counted(e.value)) return std::nullopt;
    for (const auto& m : r.metrics) {
        if (m.event == e.name) {
            return ShownMetric{m.value, metric_text(m)};
        }
    }
    if (in_ns(e)) return std::nullopt;
    const ReportedEvent* clock = nullptr;
    for (const auto& c : r.events) {
        if (in_ns(c) && counted(c.value) && c.value.scaled > 0) {
            clock = &c;
            break;
        }
    }
    if (clock == nullptr) return std::nullopt;
    double rate = e.value.scaled / (clock->value.scaled / kNsPerS);
    const char* unit = "/sec";
    for (const char* u : {"K/sec", "M/sec", "G/sec"}) {
        if (rate < 1000) break;
        rate /= 1000;
        unit = u;
    }
    return ShownMetric{rate, unit};
}

std::string time_prefix(const StatLayout& layout) {
    return layout.time ? fmt::format("{:>16.9f} ", *layout.time) : std::string{};
}

std::string noise(double percent) {
    return fmt::format("  ( +-{:>6.2f}% )", percent);
}

void line(std::string& out, const StatLayout& layout, const std::string& label,
          const std::string& count, std::string_view unit, std::string_view name,
          const std::optional<ShownMetric>& metric, std::optional<double> spread,
          std::optional<double> running) {
    std::string s = time_prefix(layout) + label +
                    fmt::format("{:>{}} {:<4} {:<{}}", count, kCountWidth, unit, name, kNameWidth);
    if (metric) {
        s += fmt::format(" # {:>8.3f} {:<{}}", metric->value, metric->text, kMetricTextWidth);
    } else if (spread || running) {
        s += std::string(3 + 8 + 1 + kMetricTextWidth, ' ');
    }
    if (spread) s += noise(*spread);
    if (running) s += fmt::format("  ({:.2f}%)", *running * 100);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out += s;
    out += '\n';
}

std::optional<double> running_share(const Count& c) {
    if (!counted(c) || c.running >= 1.0) return std::nullopt;
    return c.running;
}

bool per_cpu(const CounterReport& r) {
    return !r.events.empty() && !r.events[0].cpus.empty();
}

// Per core, die, socket or node: the events' counts by group.
bool per_group(const CounterReport& r) {
    return !r.events.empty() && !r.events[0].groups.empty();
}

// The CPUs of the report's group `id` (perf stat --per-core's second column).
std::size_t cpus_of(const CounterReport& r, const std::string& id) {
    auto it = std::ranges::find(r.groups, id, &monitor::CpuGroup::id);
    return it == r.groups.end() ? 0 : it->cpus.size();
}

bool offline(const CounterReport& r, int cpu) {
    return std::ranges::find(r.offline_cpus, cpu) != r.offline_cpus.end();
}

// perf's precision for a mean and its deviation: two digits past the deviation's first.
int precision_of(double deviation) {
    if (deviation <= 0 || deviation > 1) return 2;
    return static_cast<int>(std::lround(std::ceil(-std::log10(deviation)))) + 2;
}

// Sample mean and the standard deviation of the mean (perf's stddev_stats).
std::pair<double, double> mean_and_deviation(std::span<const double> v) {
    if (v.empty()) return {0, 0};
    double sum = 0;
    for (double x : v) sum += x;
    const double mean = sum / static_cast<double>(v.size());
    if (v.size() < 2) return {mean, 0};
    double m2 = 0;
    for (double x : v) m2 += (x - mean) * (x - mean);
    const double n = static_cast<double>(v.size());
    return {mean, std::sqrt(m2 / (n - 1) / n)};
}

bool same_events(const CounterReport& a, const CounterReport& b) {
    return a.events.size() == b.events.size() &&
           std::ranges::equal(a.events, b.events,
                              [](const auto& x, const auto& y) { return x.name == y.name; });
}

}  // namespace

std::optional<AveragedRuns> average_runs(std::span<const CounterReport> runs) {
    if (runs.empty()) return std::nullopt;
    std::vector<const CounterReport*> same;
    for (const auto& r : runs) {
        if (same_events(runs.front(), r)) same.push_back(&r);
    }
    AveragedRuns a;
    a.mean = runs.front();
    a.spread.runs = static_cast<int>(same.size());
    std::vector<double> values(same.size());
    auto each = [&](auto&& value) {
        for (std::size_t i = 0; i < same.size(); ++i) values[i] = value(*same[i]);
        return mean_and_deviation(values);
    };
    const auto [elapsed, elapsed_dev] = each([](const CounterReport& r) { return r.elapsed; });
    a.mean.elapsed = elapsed;
    a.spread.elapsed = elapsed;
    a.spread.elapsed_stddev = elapsed_dev;
    for (std::size_t k = 0; k < a.mean.events.size(); ++k) {
        auto& e = a.mean.events[k];
        e.cpus.clear();  // a command is counted on no one CPU
        auto field = [&](auto member) {
            return each([&](const CounterReport& r) {
                       return static_cast<double>(r.events[k].value.*member);
                   })
                .first;
        };
        const auto [scaled, dev] =
            each([&](const CounterReport& r) { return r.events[k].value.scaled; });
        e.value.scaled = scaled;
        e.value.count = static_cast<std::uint64_t>(std::llround(field(&Count::count)));
        e.value.enabled_ns = static_cast<std::uint64_t>(std::llround(field(&Count::enabled_ns)));
        e.value.running_ns = static_cast<std::uint64_t>(std::llround(field(&Count::running_ns)));
        e.value.running = field(&Count::running);
        a.spread.events.push_back(scaled == 0 ? 0.0 : 100.0 * dev / scaled);
    }
    // The metrics every run has, averaged; the others would mislead.
    std::erase_if(a.mean.metrics, [&](const monitor::perf::Metric& m) {
        return !std::ranges::all_of(same, [&](const CounterReport* r) {
            return std::ranges::any_of(r->metrics, [&](const auto& x) { return x.name == m.name; });
        });
    });
    for (auto& m : a.mean.metrics) {
        m.value =
            each([&](const CounterReport& r) {
                return std::ranges::find(r.metrics, m.name, &monitor::perf::Metric::name)->value;
            }).first;
    }
    return a;
}

std::string format_counter_report(const CounterReport& r, const std::string& what,
                                  const StatLayout& layout) {
    std::string out;
    const bool interval = layout.time.has_value();
    if (interval && layout.time_header) {
        out += fmt::format("#{:>15} {:>{}} unit events\n", "time", "counts", kCountWidth);
    }
    if (!interval) {
        out += fmt::format("\n Performance counter stats for {}{}:\n\n", what,
                           layout.spread && layout.spread->runs > 1
                               ? fmt::format(" ({} runs)", layout.spread->runs)
                               : std::string{});
    }
    const bool cpus = per_cpu(r) || per_group(r);
    for (std::size_t k = 0; k < r.events.size(); ++k) {
        const auto& e = r.events[k];
        const std::string_view unit = in_ns(e) ? "msec" : "";
        std::optional<double> spread;
        if (layout.spread && k < layout.spread->events.size() && layout.spread->runs > 1) {
            spread = layout.spread->events[k];
        }
        if (!e.groups.empty()) {
            // As perf stat --per-core: a line per group, with the number of its CPUs.
            for (const auto& [id, v] : e.groups) {
                line(out, layout, fmt::format("{:<12}{:>4} ", id, cpus_of(r, id)),
                     shown_count(e, v, true), unit, e.name, std::nullopt, std::nullopt,
                     running_share(v));
            }
            continue;
        }
        if (cpus) {
            // As perf stat -A: a line per CPU, its metrics with the others below.
            for (const auto& [cpu, v] : e.cpus) {
                line(out, layout,
                     fmt::format("CPU{:<4}", fmt::format("{}{}", cpu, offline(r, cpu) ? "*" : "")),
                     shown_count(e, v, true), unit, e.name, std::nullopt, std::nullopt,
                     running_share(v));
            }
            continue;
        }
        line(out, layout, "", shown_count(e, e.value, true), unit, e.name, metric_of(r, e), spread,
             running_share(e.value));
    }
    // The metrics no event line carries: an event's line carries the first metric of it only
    // (metric_of), and a metric group may derive several from one event.
    for (std::size_t i = 0; i < r.metrics.size(); ++i) {
        const auto& m = r.metrics[i];
        const bool first_of_its_event =
            std::none_of(r.metrics.begin(), r.metrics.begin() + static_cast<std::ptrdiff_t>(i),
                         [&](const auto& other) { return other.event == m.event; });
        const bool shown =
            !cpus && first_of_its_event && std::ranges::any_of(r.events, [&](const auto& e) {
                return e.name == m.event && counted(e.value);
            });
        if (shown) continue;
        line(out, layout, "", "", "", "", ShownMetric{m.value, metric_text(m)}, std::nullopt,
             std::nullopt);
    }
    // The time it counted nothing: a paused session's counts cover the rest.
    const std::string paused_now = r.paused ? " (paused now)" : "";
    if (interval) {
        if (r.paused_seconds > 0) {
            out += fmt::format("{}paused {:.3f} s of the interval, counting nothing{}\n",
                               time_prefix(layout), r.paused_seconds, paused_now);
        }
        return out;
    }

    if (layout.spread && layout.spread->runs > 1) {
        const auto& s = *layout.spread;
        const int p = precision_of(s.elapsed_stddev);
        out += fmt::format("\n {:>17.{}f} +- {:.{}f} seconds time elapsed{}\n", s.elapsed, p,
                           s.elapsed_stddev, p,
                           s.elapsed > 0 ? noise(100 * s.elapsed_stddev / s.elapsed) : "");
    } else {
        out += fmt::format("\n {:>17.9f} seconds time elapsed\n", r.elapsed);
    }
    if (r.paused || r.paused_seconds > 0) {
        out += fmt::format(" {:>17.9f} seconds of it paused, counting nothing{}\n",
                           r.paused_seconds, paused_now);
    }
    if (r.slots > 1) {
        out += fmt::format(
            "\n{} counter sets took turns on the counters ({} rotations): an event's count is "
            "its count scaled up to the whole time, the share of the time it was counted in "
            "parentheses\n",
            r.slots, r.rotations);
    }
    if (!r.offline_cpus.empty()) {
        // Marked as in the loading's table; the totals lack these CPUs' time too.
        out += fmt::format(
            "\n{}cpu{} offline when read: the kernel counts nothing on an offline CPU\n",
            cpus ? "* " : "", fmt::join(r.offline_cpus, ", cpu"));
    }
    return out;
}

std::string format_counter_separated(const CounterReport& r, std::string_view sep,
                                     const StatLayout& layout) {
    std::string out;
    const std::string time =
        layout.time ? fmt::format("{:>16.9f}{}", *layout.time, sep) : std::string{};
    const bool runs = layout.spread && layout.spread->runs > 1;
    auto put = [&](const ReportedEvent& e, const Count& c, const std::string& cpu,
                   const std::optional<ShownMetric>& metric, std::optional<double> spread) {
        out += time + cpu;
        out += fmt::format("{}{}{}{}{}", shown_count(e, c, false), sep, in_ns(e) ? "msec" : "", sep,
                           e.name);
        if (runs) out += fmt::format("{}{:.2f}%", sep, spread.value_or(0));
        out +=
            fmt::format("{}{}{}{:.2f}", sep, c.running_ns, sep, counted(c) ? c.running * 100 : 0.0);
        if (metric) {
            out += fmt::format("{}{:.3f}{}{}\n", sep, metric->value, sep, metric->text);
        } else {
            out += fmt::format("{}{}\n", sep, sep);
        }
    };
    for (std::size_t k = 0; k < r.events.size(); ++k) {
        const auto& e = r.events[k];
        if (!e.groups.empty()) {
            for (const auto& [id, v] : e.groups) {
                put(e, v, fmt::format("{}{}{}{}", id, sep, cpus_of(r, id), sep), std::nullopt,
                    std::nullopt);
            }
            continue;
        }
        if (!e.cpus.empty()) {
            for (const auto& [cpu, v] : e.cpus) {
                put(e, v, fmt::format("CPU{}{}", cpu, sep), std::nullopt, std::nullopt);
            }
            continue;
        }
        std::optional<double> spread;
        if (runs && k < layout.spread->events.size()) spread = layout.spread->events[k];
        put(e, e.value, "", metric_of(r, e), spread);
    }
    return out;
}

std::string stat_target_words(const monitor::protocol::TargetRequest& t) {
    using enum monitor::protocol::TargetRequest::Kind;
    switch (t.kind) {
        case All:
        case Each:
            return t.cpus.empty() ? std::string{"'system wide'"}
                                  : fmt::format("'CPU(s) {}'", fmt::join(t.cpus, ","));
        case Cpu:
            return fmt::format("'CPU(s) {}'", t.cpu.value_or(-1));
        case Process:
            if (!t.pids.empty()) return fmt::format("process id '{}'", fmt::join(t.pids, ","));
            return fmt::format("process id '{}'", t.pid.value_or(-1));
        case Cgroup:
            return fmt::format("cgroup '{}'", t.cgroup);
        case Unit:
            return fmt::format("unit '{}'", t.unit);
    }
    return "'system wide'";
}

}  // namespace monctl
