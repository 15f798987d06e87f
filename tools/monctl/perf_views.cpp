#include "perf_views.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <locale>

#include "perf_stat_views.hpp"
#include "views.hpp"

namespace monctl {
namespace {

const std::locale& user_locale() {
    static const std::locale loc = [] {
        try {
            return std::locale("");
        } catch (const std::runtime_error&) {
            return std::locale::classic();
        }
    }();
    return loc;
}

}  // namespace

std::string format_count(std::uint64_t n) {
    return fmt::format(user_locale(), "{:L}", n);
}

std::string format_fixed(double v, int digits) {
    return fmt::format(user_locale(), "{:.{}Lf}", v, digits);
}

std::string format_counter_csv(const monitor::protocol::CounterReport& r, bool header,
                               std::chrono::system_clock::time_point time) {
    std::string out;
    if (header) out += "time,period,event,cpu,count,enabled_ns,running_ns,scaled,running\n";
    const std::string period =
        csv_time(time) + "," + (r.period ? std::to_string(*r.period) : "total");
    auto line = [&](const std::string& name, const std::string& cpu,
                    const monitor::protocol::Count& c) {
        out += fmt::format("{},{},{},{},{},{},{:.0f},{:.4f}\n", period, name, cpu, c.count,
                           c.enabled_ns, c.running_ns, c.scaled, c.running);
    };
    for (const auto& e : r.events) {
        line(e.name, "all", e.value);
        for (const auto& [cpu, v] : e.cpus) line(e.name, std::to_string(cpu), v);
        for (const auto& [id, v] : e.groups) line(e.name, id, v);  // per core, die, ...
    }
    return out;
}

std::string format_plan(const monitor::protocol::CounterPlan& p) {
    std::string out;
    out += p.slots > 1 ? fmt::format("{} counter sets take turns on the counters\n", p.slots)
                       : std::string{"Every event counts all the time (no multiplexing)\n"};
    for (const auto& g : p.groups) {
        if (g.set) {
            out += fmt::format("  {} set {} of {}:\n", g.pmu, *g.set + 1, g.sets);
        } else {
            out += fmt::format("  always counting ({}, no counter needed):\n", g.pmu);
        }
        for (const auto& m : g.members) {
            out += fmt::format("    {:<10} {}\n", m.counter.value_or("-"), m.event);
        }
    }
    if (!p.shared_with.empty()) {
        out += fmt::format(
            "Shares counters with the standing session{} {}: the kernel multiplexes them, and "
            "the running percentages show each event's share\n",
            p.shared_with.size() == 1 ? "" : "s", fmt::join(p.shared_with, ", "));
    }
    return out;
}

std::string format_standing_session(const monitor::protocol::StandingSession& s) {
    std::string out = fmt::format("Standing session '{}' ({}): {} on {}\n", s.name, s.source,
                                  s.request.events, monitor::protocol::target_text(s.request));
    if (!s.counting) {
        return out + fmt::format("  not counting: {}\n", s.error.value_or("unknown reason"));
    }
    if (!s.totals) return out + "  counting; its first reading comes with the next tick\n";
    out += format_counter_report(*s.totals, fmt::format("'{}' since it started", s.name));
    if (s.last) {
        auto last = *s.last;
        last.period.reset();
        out += format_counter_report(last, fmt::format("'{}', the last second", s.name));
    }
    return out;
}

std::string format_pmus(const std::vector<monitor::perf::PmuInfo>& pmus,
                        std::optional<int> paranoid) {
    std::string out = fmt::format("{:<24} {:>8} {:>6} {:>6} {:>7}  {}\n", "PMU", "counters",
                                  "fixed", "width", "events", "description");
    for (const auto& p : pmus) {
        out += fmt::format("{:<24} {:>8} {:>6} {:>6} {:>7}  {}{}\n", p.name, p.counters,
                           p.fixed_counters, p.counter_width, p.events, p.description,
                           p.source == monitor::perf::kBuiltInSource ? " (built-in table)" : "");
    }
    for (const auto& p : pmus) {
        if (!p.note.empty() && p.unavailable.empty())
            out += fmt::format("\n{}: {}\n", p.name, p.note);
    }
    for (const auto& p : pmus) {
        if (!p.unavailable.empty()) {
            out += fmt::format("\n{} cannot count here (listing and planning work): {}\n", p.name,
                               p.unavailable);
        }
    }
    if (paranoid) out += fmt::format("\nkernel.perf_event_paranoid = {}\n", *paranoid);
    return out;
}

std::string format_events(const std::vector<monitor::protocol::EventListing>& events) {
    std::string out;
    for (const auto& e : events) {
        std::string counters = e.counters.empty() ? std::string{"no counter"}
                               : e.counters.size() > 4
                                   ? fmt::format("any of {} counters", e.counters.size())
                                   : fmt::format("{}", fmt::join(e.counters, ","));
        out += fmt::format("{:<48} {:<20} {}{}\n", e.name, counters, e.description,
                           e.pinned ? " (pinned)" : "");
    }
    return out;
}

std::string format_metric_definitions(
    const std::vector<monitor::protocol::MetricListing>& metrics) {
    std::string out;
    std::size_t elsewhere = 0;
    for (const auto& m : metrics) {
        if (!m.unavailable.empty()) {
            ++elsewhere;
            continue;
        }
        out += fmt::format(
            "{:<32} {:<12} {}\n{:<32} {:<12} {}\n", m.name,
            m.groups.empty() ? std::string{"-"} : fmt::format("{}", fmt::join(m.groups, ",")),
            m.formula, "", "", m.description);
    }
    if (out.empty()) out = "No metric can count on this machine.\n";
    if (elsewhere != 0) {
        out += fmt::format(
            "({} more defined for events this machine cannot count: --all lists "
            "them, with why)\n",
            elsewhere);
    }
    return out;
}

std::string format_all_metric_definitions(
    const std::vector<monitor::protocol::MetricListing>& metrics) {
    std::string out;
    for (const auto& m : metrics) {
        out += fmt::format("{} [{}] {}: {}\n  {}\n", m.name, fmt::join(m.groups, ","), m.source,
                           m.formula, m.description);
        if (!m.unavailable.empty()) out += fmt::format("  cannot count here: {}\n", m.unavailable);
    }
    return out;
}

namespace {

std::string share(std::uint64_t n, std::uint64_t total) {
    return fmt::format(
        "{:.1f}%", total == 0 ? 0.0 : 100.0 * static_cast<double>(n) / static_cast<double>(total));
}

void append_lines(std::string& out, const char* title,
                  const std::vector<monitor::perf::ProfileLine>& lines, std::size_t top = 0,
                  const char* indent = "  ") {
    if (lines.empty()) return;
    out += fmt::format("\n{}{:>7}  {:>10}  {}\n", indent, "%", "samples", title);
    for (std::size_t i = 0; i < lines.size() && (top == 0 || i < top); ++i) {
        const auto& l = lines[i];
        out += fmt::format("{}{:>6.2f}%  {:>10}  {}\n", indent, l.percent, format_count(l.samples),
                           l.name);
    }
}

// "N samples: user 80.0%, kernel 15.0%, idle 5.0%"
std::string mode_split(const monitor::perf::ProfileReport& r) {
    std::string out = fmt::format("{} samples: user {}, kernel {}, idle {}",
                                  format_count(r.samples), share(r.modes.user, r.samples),
                                  share(r.modes.kernel, r.samples), share(r.modes.idle, r.samples));
    if (r.modes.other != 0) out += fmt::format(", other {}", share(r.modes.other, r.samples));
    return out;
}

// Never hidden: what the kernel dropped or held back is said even when it is nothing, and
// what the daemon dropped unnamed when it is something.
std::string lost_and_throttled(const monitor::perf::ProfileReport& r) {
    auto out = fmt::format("lost {} sample{} (the ring was full), throttled {} time{}",
                           format_count(r.lost), r.lost == 1 ? "" : "s", format_count(r.throttled),
                           r.throttled == 1 ? "" : "s");
    if (r.unnamed > 0) {
        out += fmt::format(", {} not named (the daemon's naming fell behind)",
                           format_count(r.unnamed));
    }
    return out;
}

}  // namespace

std::string format_profile(const monitor::protocol::ProfileMessage& m, std::size_t top) {
    const auto& r = m.report;
    std::string out;
    std::string target = m.target;
    if (m.threads) {
        target += fmt::format(" ({} thread{} at the start, and those it started)",
                              format_count(static_cast<std::uint64_t>(*m.threads)),
                              *m.threads == 1 ? "" : "s");
    }
    if (m.interval) {
        out += fmt::format("Interval {} ({:.3f} s), {} of {}\n", *m.interval, m.elapsed, m.event,
                           target);
    } else {
        out += fmt::format("Profile of {}, {}, {:.3f} s{}\n", target, m.event, m.elapsed,
                           m.ended.empty() ? std::string{} : fmt::format(" ({})", m.ended));
    }
    out += "  " + mode_split(r) + '\n';
    if (!m.kernel_symbols.empty() && r.modes.kernel > 0) {
        out += "  kernel functions unnamed: " + m.kernel_symbols + '\n';
    }
    out += "  " + lost_and_throttled(r) + '\n';
    append_lines(out, "function", r.functions, top);
    append_lines(out, "object", r.objects, top);
    // As many stacks as functions.
    const std::size_t functions = top == 0 ? r.functions.size() : std::min(top, r.functions.size());
    append_lines(out, "stack (outermost first)", r.stacks, std::max<std::size_t>(functions, 1));
    for (const auto& c : r.cpus) {
        out += fmt::format("\n  cpu{}: {}; {}\n", c.cpu, mode_split(c.report),
                           lost_and_throttled(c.report));
        append_lines(out, "function", c.report.functions, top, "    ");
    }
    if (m.histogram) {
        const auto& h = *m.histogram;
        out += fmt::format("\n  Addresses {:#x}-{:#x} in {}-byte buckets: {} samples ({} of all)\n",
                           h.range.start, h.range.end, h.range.bucket, format_count(h.samples),
                           share(h.samples, r.samples));
        for (const auto& [address, n] : h.buckets) {
            out += fmt::format("  {:#018x}  {:>10}  {:>6}\n", address, format_count(n),
                               share(n, r.samples));
        }
    }
    return out;
}

void keep_top(nlohmann::json& profile, std::size_t top) {
    if (top == 0 || !profile.is_object()) return;
    auto cut = [top](nlohmann::json& j) {
        for (const char* key : {"functions", "objects"}) {
            auto it = j.find(key);
            if (it != j.end() && it->is_array() && it->size() > top) {
                it->erase(it->begin() + static_cast<std::ptrdiff_t>(top), it->end());
            }
        }
    };
    cut(profile);
    if (auto cpus = profile.find("cpus"); cpus != profile.end() && cpus->is_array()) {
        for (auto& c : *cpus) cut(c);
    }
}

std::string format_overflow_batch(const monitor::protocol::OverflowBatch& b) {
    const std::uint64_t events = b.total * static_cast<std::uint64_t>(b.period);
    std::string out;
    if (b.final) {
        out = fmt::format("{} overflows in {:.3f} s ({} events){}; lost {}, throttled {}",
                          format_count(b.total), b.elapsed, format_count(events),
                          b.ended.empty() ? std::string{} : fmt::format(" ({})", b.ended),
                          format_count(b.lost), format_count(b.throttled));
    } else {
        out = fmt::format("+{:.3f} s  {} overflow{}, {} in all ({} events)", b.elapsed,
                          format_count(b.overflows), b.overflows == 1 ? "" : "s",
                          format_count(b.total), format_count(events));
    }
    if (b.last) {
        const auto& s = *b.last;
        out += fmt::format("; the last at {:#x} in {}/{} on cpu{}, {}", s.ip, s.pid, s.tid, s.cpu,
                           s.mode == monitor::perf::SampleMode::User     ? "user"
                           : s.mode == monitor::perf::SampleMode::Kernel ? "kernel"
                                                                         : "other");
    }
    return out + '\n';
}

}  // namespace monctl
