#include "views.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "perf_views.hpp"

namespace monctl {
namespace {

// `s` with what would drive the terminal replaced by '?': C0 controls, DEL, and C1 controls
// (UTF-8's U+0080 to U+009F). A thread names itself as it likes (prctl PR_SET_NAME).
std::string printable(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
        if (c < 0x20 || c == 0x7F) {
            out += '?';
        } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {
            out += '?';
            ++i;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

std::vector<std::string> source_names(const monitor::LoadingReport& r) {
    std::vector<std::string> names;
    names.reserve(r.machine.size());
    for (const auto& l : r.machine) names.push_back(l.source);
    return names;
}

std::string cell(const std::optional<double>& v) {
    return v ? fmt::format("{:7.1f}", *v) : std::string{"      -"};
}

void stats_cells(std::string& out, const monitor::SourceLoad* l) {
    if (l == nullptr || !l->stats) {
        out += "      -      -      -      -";
        return;
    }
    const auto& s = *l->stats;
    out +=
        cell(s.avg_prev_sec) + cell(s.avg_prev_min) + cell(s.min_prev_min) + cell(s.max_prev_min);
}

// The rows of a report: the machine ("all"), then each CPU, with their sources.
struct Row {
    std::string cpu;  // "all", or the CPU's number
    std::string label;
    const std::vector<monitor::SourceLoad>* sources;
};

std::vector<Row> rows(const monitor::LoadingReport& r) {
    std::vector<Row> out{{"all", "all", &r.machine}};
    for (const auto& c : r.cpus) {
        out.push_back({std::to_string(c.cpu), format_cpu_label(c), &c.sources});
    }
    return out;
}

std::string csv_number(const std::optional<double>& v) {
    return v ? fmt::format("{:.3f}", *v) : std::string{};
}

// The sources that report states, in report order.
std::vector<std::string> state_sources(const monitor::LoadingReport& r) {
    std::vector<std::string> names;
    for (const auto& l : r.machine) {
        if (l.states) names.push_back(l.source);
    }
    return names;
}

// The states as mpstat prints them: its column titles, in its order (iowait before irq; the
// wire and TimeState keep the kernel's order of /proc/stat's fields).
struct StateColumn {
    monitor::TimeState state;
    std::string_view title;
};
constexpr StateColumn kStateColumns[] = {
    {monitor::TimeState::User, "%usr"},        {monitor::TimeState::Nice, "%nice"},
    {monitor::TimeState::System, "%sys"},      {monitor::TimeState::IoWait, "%iowait"},
    {monitor::TimeState::Irq, "%irq"},         {monitor::TimeState::SoftIrq, "%soft"},
    {monitor::TimeState::Steal, "%steal"},     {monitor::TimeState::Guest, "%guest"},
    {monitor::TimeState::GuestNice, "%gnice"}, {monitor::TimeState::Idle, "%idle"},
};
static_assert(std::size(kStateColumns) == monitor::kTimeStateCount);

int column_width(const StateColumn& c) {
    return static_cast<int>(std::max<std::size_t>(c.title.size(), 6)) + 1;
}

std::string state_cells(const std::optional<monitor::StateShares>& shares) {
    std::string out;
    for (const auto& c : kStateColumns) {
        out += shares ? fmt::format("{:>{}.1f}", (*shares)[c.state], column_width(c))
                      : fmt::format("{:>{}}", "-", column_width(c));
    }
    return out;
}

std::string state_header() {
    std::string out;
    for (const auto& c : kStateColumns) out += fmt::format("{:>{}}", c.title, column_width(c));
    return out;
}

}  // namespace

std::string format_cpu_list(const std::vector<int>& cpus) {
    std::string s;
    for (std::size_t i = 0; i < cpus.size();) {
        std::size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        if (!s.empty()) s += ',';
        s += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
        i = j + 1;
    }
    return s;
}

std::string format_cpu_label(const monitor::CpuLoading& c) {
    return fmt::format("cpu{}{}", c.cpu, c.online ? "" : "*");
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e12)
        return fmt::format("{} s", seconds);
    if (seconds < 59.95) return fmt::format("{:.1f} s", seconds);  // 59.96 would print 60.0
    auto total = static_cast<long long>(seconds);
    long long d = total / 86400;
    long long h = total / 3600 % 24;
    long long m = total / 60 % 60;
    long long s = total % 60;
    if (d > 0) return fmt::format("{}d {:02}:{:02}:{:02}", d, h, m, s);
    return fmt::format("{:02}:{:02}:{:02}", h, m, s);
}

std::string format_status(const monitor::protocol::DaemonStatus& st, const std::string& socket) {
    std::string out;
    out += fmt::format("monitord {} (pid {}), {}, up {}\n", st.version, st.pid, st.state,
                       format_duration(st.uptime));
    out += fmt::format("  socket:  {}\n", socket);
    out += fmt::format("  CPUs:    {} ({} online)\n", format_cpu_list(st.cpus), st.cpus.size());
    out += fmt::format("  sources: {}\n", fmt::join(st.sources, ", "));
    out += fmt::format("  history: {} s\n", st.history_seconds);
    out += fmt::format("  probes:  {}", st.probe_mode);
    if (st.probe_mode == "sleep") {
        out +=
            " (a thread per CPU at idle priority, woken at each tick while a watchdog is "
            "armed, which it pets from the kernel's idle time; the load is /proc/stat's)";
    } else if (st.probe_mode == "spin") {
        out += " (a thread per CPU at idle priority spins: the probe source, MON's method)";
    } else if (st.probe_mode == "off") {
        out += " (none: no watchdog; the load is /proc/stat's)";
    }
    if (const auto& g = st.probe_group) {
        if (g->kind == "autogroup") {
            out += fmt::format(", in autogroup {} at nice {}", g->name, g->nice.value_or(0));
        } else if (g->kind == "cgroup") {
            out += fmt::format(", in cgroup {}", g->name);
        } else {
            out += ", in the root task group";
        }
    }
    out += '\n';
    for (const auto& p : st.probes) {
        out += fmt::format("    cpu{:<3} {}", p.cpu, p.state);
        if (p.baseline_ns) {
            out += fmt::format(", loop {:.0f} ns calibrated", *p.baseline_ns);
            if (p.count > 0 && p.cpu_seconds > 0) {
                // How much slower the loop ran since, on average: frequency, a busy sibling
                // hyperthread, a virtual CPU sharing its host core.
                double mean = p.cpu_seconds * 1e9 / static_cast<double>(p.count);
                out += fmt::format(", {:.0f} ns on average ({:.2f}x)", mean, mean / *p.baseline_ns);
            }
        }
        if (!p.error.empty()) out += ": " + p.error;
        out += '\n';
    }
    // Where the probes compete, in a sentence: a warning when they do not yield.
    if (st.probe_group && !st.probe_group->note.empty()) {
        out += fmt::format("  {}{}\n",
                           st.probe_group->yields ? "" : "warning: ", st.probe_group->note);
    }
    if (st.probe_fallback) {
        out +=
            fmt::format("  warning: spinning probes were asked for, but {}\n", *st.probe_fallback);
    }
    out += fmt::format(
        "  watchdog: {}",
        st.watchdog ? fmt::format("{}, {}, {} pets", st.watchdog->device,
                                  st.watchdog->armed ? "armed" : "disarmed", st.watchdog->pets)
                    : std::string{"none"});
    out += '\n';
    return out;
}

std::string format_watchdog(const std::optional<monitor::protocol::WatchdogInfo>& w) {
    if (!w) {
        return "No watchdog: none is configured (it is opt-in: [watchdog] device in "
               "monitord.conf(5), or monitord --watchdog DEVICE).\n";
    }
    auto seconds = [](const std::optional<std::int64_t>& s) {
        return s ? fmt::format("{} s", *s) : std::string{"unknown (the driver does not say)"};
    };
    std::string out;
    out += fmt::format("Watchdog {}{}: {}\n", w->device,
                       w->identity ? " (" + *w->identity + ")" : std::string{},
                       w->armed ? "armed" : "disarmed");
    out += fmt::format("  timeout:        {}\n", seconds(w->timeout));
    if (w->armed) out += fmt::format("  time left:      {}\n", seconds(w->time_left));
    out += fmt::format(
        "  last pet:       {}\n",
        w->since_last_pet ? fmt::format("{:.2f} s ago", *w->since_last_pet) : std::string{"-"});
    out += fmt::format("  pets:           {}", w->pets);
    if (w->pet_errors > 0) {
        out += fmt::format(" ({} failed, last: {})", w->pet_errors, w->last_error.value_or("?"));
    }
    out += '\n';
    out += fmt::format(
        "  near misses:    {} pets later than half the timeout; the longest gap "
        "since armed {:.2f} s\n",
        w->late_pets, w->longest_pet_gap);
    out += fmt::format("  policy:         pet when {} CPUs earned an idle credit", w->policy);
    if (!w->waiting_for.empty()) {
        out += fmt::format(" (waiting for {})", format_cpu_list(w->waiting_for));
    }
    out += '\n';
    out += fmt::format("  on stop:        {}\n",
                       w->nowayout              ? "stays armed: the driver has nowayout (the "
                                                  "machine resets unless petted again)"
                       : w->on_stop == "disarm" ? "disarm (magic close)"
                                                : "keep armed (the machine resets unless "
                                                  "petted again)");
    out += fmt::format("  last reset:     {}\n", w->last_reset_by_watchdog
                                                     ? "caused by the watchdog"
                                                     : "not caused by the watchdog");
    return out;
}

std::string format_loading(const monitor::LoadingReport& r) {
    const auto sources = source_names(r);
    std::string out;
    if (r.timestamp) {
        auto t = std::chrono::system_clock::to_time_t(*r.timestamp);
        out += fmt::format(
            "Loading in percent at {:%H:%M:%S}: the last second, and the average, minimum and "
            "maximum of the last {} s\n",
            fmt::localtime(t), r.window_seconds);
    } else {
        out += "No sample yet: the first one is taken one second after the daemon starts.\n";
    }
    // Header: the source names over their four columns.
    out += fmt::format("{:<6}", "");
    for (const auto& s : sources) out += fmt::format("  {:^28}", s);
    out += fmt::format("\n{:<6}", "CPU");
    for (std::size_t i = 0; i < sources.size(); ++i) {
        out += fmt::format("  {:>7}{:>7}{:>7}{:>7}", "last", "avg", "min", "max");
    }
    out += fmt::format("\n{:<6}", "all");
    for (const auto& s : sources) {
        out += "  ";
        stats_cells(out, monitor::find_source(r.machine, s));
    }
    out += '\n';
    bool offline = false;
    for (const auto& c : r.cpus) {
        out += fmt::format("{:<6}", format_cpu_label(c));
        offline = offline || !c.online;
        for (const auto& s : sources) {
            out += "  ";
            stats_cells(out, monitor::find_source(c.sources, s));
        }
        out += '\n';
    }
    if (offline) out += "* offline now; figures from the time it was online\n";
    return out;
}

namespace {

// A wall-clock time in local time: "03:00:00" today, "2026-12-01 03:00:00" another day.
std::string wall_time(std::chrono::system_clock::time_point t) {
    const auto today = fmt::localtime(std::time(nullptr));
    const auto tm = fmt::localtime(std::chrono::system_clock::to_time_t(t));
    const bool same_day = tm.tm_year == today.tm_year && tm.tm_yday == today.tm_yday;
    return same_day ? fmt::format("{:%H:%M:%S}", tm) : fmt::format("{:%Y-%m-%d %H:%M:%S}", tm);
}

std::chrono::system_clock::time_point from_us(std::int64_t us) {
    return std::chrono::system_clock::time_point{
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::microseconds{us})};
}

}  // namespace

std::string format_range(const monitor::LoadingReport& r,
                         std::chrono::system_clock::time_point since,
                         std::chrono::system_clock::time_point until) {
    const auto& when = wall_time;
    // No since (--until alone): from the oldest second kept, whenever that is.
    const bool from_start = since == std::chrono::system_clock::time_point{};
    const auto asked = std::chrono::duration_cast<std::chrono::seconds>(until - since).count();
    const std::string span =
        from_start ? fmt::format("History up to {}", when(until))
                   : fmt::format("History from {} to {}", when(since), when(until));
    if (!r.timestamp) return span + ": nothing kept of it\n";
    // The seconds kept: the most any source measured (a gap is a second not kept).
    std::size_t kept = 0;
    for (const auto& l : r.machine) {
        if (l.stats) kept = std::max(kept, l.stats->samples);
    }
    const std::string length =
        from_start ? std::string{}
                   : fmt::format(" ({} s)", format_count(static_cast<std::uint64_t>(
                                                std::max<std::int64_t>(asked, 0))));
    return fmt::format("{}{}: {} s kept, the last at {}\n", span, length, format_count(kept),
                       when(*r.timestamp));
}

std::string format_history_runs(const monitor::protocol::HistoryRunsOut& out) {
    if (out.runs.empty()) return fmt::format("No runs kept in {}\n", out.file);
    std::string text = fmt::format("Runs of monitord kept in {}, the newest last:\n", out.file);
    for (const auto& r : out.runs) {
        const std::string end = r.last ? wall_time(from_us(*r.last)) : std::string{"-"};
        std::string how;
        if (r.ended == "running") {
            how = "running";
        } else if (r.ended == "stopped") {
            how = "stopped";
        } else if (r.ended == "daemon_ended") {
            how = "ended without a stop, the machine running on (killed, or a crash)";
        } else if (r.ended == "machine_down") {
            how =
                "the machine went down (a power loss, a crash, a reset; the watchdog's driver "
                "did not say it reset it)";
        } else if (r.ended == "watchdog_reset") {
            how = "the machine was reset by the watchdog";
        } else {
            how = "ended without a stop; nothing after it tells how";
        }
        if (r.watchdog) how += fmt::format("; armed {}", *r.watchdog);
        text += fmt::format("  {} to {}  {}\n", wall_time(from_us(r.started)),
                            r.ended == "running" ? std::string{"now"} : end, how);
        for (const auto& s : r.last_seconds) {
            text += fmt::format("      {}", wall_time(from_us(s.at)));
            for (const auto& v : s.machine) {
                text += v.load ? fmt::format("  {} {:5.1f} %", v.source, *v.load)
                               : fmt::format("  {}     -  ", v.source);
            }
            text += '\n';
        }
    }
    return text;
}

std::string format_history(const monitor::LoadingReport& r) {
    struct Column {
        std::string title;
        const std::vector<std::optional<double>>* values;
    };
    std::vector<Column> cols;
    for (const auto& s : source_names(r)) {
        if (const auto* l = monitor::find_source(r.machine, s)) {
            cols.push_back({s + ":all", &l->history});
        }
        for (const auto& c : r.cpus) {
            if (const auto* l = monitor::find_source(c.sources, s)) {
                cols.push_back({s + ":" + format_cpu_label(c), &l->history});
            }
        }
    }
    std::size_t rows = 0;
    for (const auto& c : cols) rows = std::max(rows, c.values->size());
    std::string out = fmt::format("{:>6}", "age");
    for (const auto& c : cols) out += fmt::format(" {:>14}", c.title);
    out += '\n';
    for (std::size_t i = 0; i < rows; ++i) {
        out += fmt::format("{:>5}s", static_cast<long long>(rows - 1 - i));
        for (const auto& c : cols) {
            // Columns are aligned on the newest sample.
            std::size_t offset = rows - c.values->size();
            std::optional<double> v;
            if (i >= offset) v = (*c.values)[i - offset];
            out += fmt::format(" {:>14}", v ? fmt::format("{:.1f}", *v) : std::string{"-"});
        }
        out += '\n';
    }
    return out;
}

std::string csv_time(std::chrono::system_clock::time_point t) {
    const auto seconds = std::chrono::floor<std::chrono::seconds>(t);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - seconds).count();
    return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", seconds, ms);
}

std::string format_loading_csv(const monitor::LoadingReport& r, bool header) {
    std::string out;
    if (header) out += "time,cpu,source,last,avg,min,max,samples\n";
    const std::string time = r.timestamp ? csv_time(*r.timestamp) : std::string{};
    for (const auto& row : rows(r)) {
        for (const auto& l : *row.sources) {
            out += fmt::format("{},{},{},", time, row.cpu, l.source);
            if (l.stats) {
                const auto& s = *l.stats;
                out += fmt::format("{},{:.3f},{:.3f},{:.3f},{}\n", csv_number(s.avg_prev_sec),
                                   s.avg_prev_min, s.min_prev_min, s.max_prev_min, s.samples);
            } else {
                out += ",,,,0\n";
            }
        }
    }
    return out;
}

std::string format_history_csv(const monitor::LoadingReport& r, bool header, bool newest_only) {
    std::string out;
    if (header) out += "time,cpu,source,load\n";
    if (!r.timestamp) return out;
    for (const auto& row : rows(r)) {
        for (const auto& l : *row.sources) {
            // The newest value is the sample's own second; each one before it a second older.
            const std::size_t n = l.history.size();
            for (std::size_t i = newest_only && n > 0 ? n - 1 : 0; i < n; ++i) {
                const auto t = *r.timestamp - std::chrono::seconds(n - 1 - i);
                out += fmt::format("{},{},{},{}\n", csv_time(t), row.cpu, l.source,
                                   csv_number(l.history[i]));
            }
        }
    }
    return out;
}

std::string format_states_csv(const monitor::LoadingReport& r, bool header) {
    std::string out;
    if (header) {
        out += "time,cpu,source,interval";
        for (const auto& c : kStateColumns)
            out += fmt::format(",{}", monitor::time_state_name(c.state));
        out += '\n';
    }
    const std::string time = r.timestamp ? csv_time(*r.timestamp) : std::string{};
    auto line = [&](const Row& row, const std::string& source, std::string_view interval,
                    const std::optional<monitor::StateShares>& shares) {
        out += fmt::format("{},{},{},{}", time, row.cpu, source, interval);
        for (const auto& c : kStateColumns) {
            out += ',';
            if (shares) out += fmt::format("{:.3f}", (*shares)[c.state]);
        }
        out += '\n';
    };
    for (const auto& row : rows(r)) {
        for (const auto& l : *row.sources) {
            if (!l.states) continue;
            line(row, l.source, "last", l.states->last);
            line(row, l.source, "avg", l.states->avg);
        }
    }
    return out;
}

std::string format_states(const monitor::LoadingReport& r) {
    const auto sources = state_sources(r);
    if (!r.timestamp || sources.empty()) {
        return "No figures by state yet: the first are taken one second after the daemon "
               "starts, from /proc/stat (the procstat source).\n";
    }
    std::string out;
    auto t = std::chrono::system_clock::to_time_t(*r.timestamp);
    bool offline = false;
    for (const auto& source : sources) {
        for (bool last : {true, false}) {
            if (last) {
                out += fmt::format(
                    "Where the time went ({}), in percent, in the second to {:%H:%M:%S}\n", source,
                    fmt::localtime(t));
            } else {
                out += fmt::format("\nThe average of the last {} s\n", r.window_seconds);
            }
            out += fmt::format("{:<6}{}\n", "CPU", state_header());
            for (const auto& row : rows(r)) {
                const auto* l = monitor::find_source(*row.sources, source);
                std::optional<monitor::StateShares> shares;
                if (l != nullptr && l->states) {
                    shares = last ? l->states->last : std::optional{l->states->avg};
                }
                out += fmt::format("{:<6}{}\n", row.label, state_cells(shares));
                offline = offline || row.label.ends_with('*');
            }
        }
    }
    if (offline) out += "* offline now; figures from the time it was online\n";
    return out;
}

std::string format_units(const monitor::LoadingReport& r) {
    if (!r.units) return {};
    const auto& u = *r.units;
    if (!u.unavailable.empty()) return fmt::format("No CPU time per unit: {}\n", u.unavailable);
    if (!r.timestamp) {
        return "No CPU time per unit yet: the first figures come one second after the daemon "
               "starts.\n";
    }
    auto t = std::chrono::system_clock::to_time_t(*r.timestamp);
    std::string out = fmt::format(
        "CPU time per unit ({}), in percent of one CPU, in the second to {:%H:%M:%S} and over "
        "the last {} s; {} units\n",
        u.accounting, fmt::localtime(t), r.window_seconds, u.count);
    if (u.top.empty()) {
        return out + fmt::format("No unit had CPU time in the last {} s\n", r.window_seconds);
    }
    std::size_t width = 4;
    for (const auto& l : u.top) width = std::max(width, l.unit.size());
    width = std::min<std::size_t>(width, 48);
    // PSI10: where the kernel keeps a pressure per unit (cgroup2 with PSI).
    const bool pressure =
        std::ranges::any_of(u.top, [](const auto& l) { return l.pressure.has_value(); });
    out += fmt::format("{:<{}} {:>7} {:>7} {:>7} {:>7} {:>7}{}\n", "UNIT", width, "LAST", "USER",
                       "SYS", "AVG", "MAX", pressure ? "   PSI10" : "");
    for (const auto& l : u.top) {
        // A name longer than the column keeps its end, where a unit's name is told apart.
        const std::string name =
            l.unit.size() > width ? "…" + l.unit.substr(l.unit.size() - width + 1) : l.unit;
        out += fmt::format("{:<{}} {:7.1f} {:7.1f} {:7.1f} {:7.1f} {:7.1f}", name, width, l.cpu,
                           l.user, l.system, l.window_avg, l.window_max);
        if (pressure) {
            out += l.pressure ? fmt::format(" {:7.2f}", *l.pressure) : fmt::format(" {:>7}", "-");
        }
        out += '\n';
    }
    if (pressure) {
        out += "PSI10: the share of the last 10 s some of the unit's tasks waited for a CPU, %\n";
    }
    return out;
}

std::string format_tasks(const monitor::LoadingReport& r) {
    if (!r.tasks) return {};
    const auto& t = *r.tasks;
    if (!t.unavailable.empty()) return fmt::format("No tasks: {}\n", t.unavailable);
    if (t.seconds <= 0 || !r.timestamp) {
        return "No tasks yet: the daemon reads them from its next second on.\n";
    }
    auto when = std::chrono::system_clock::to_time_t(*r.timestamp);
    std::string out = fmt::format(
        "Busiest tasks of each CPU over the {:.1f} s to {:%H:%M:%S}, in percent of one CPU; "
        "{} threads in {} processes\n",
        t.seconds, fmt::localtime(when), t.count, t.processes);
    if (t.top.empty()) return out + "No task had CPU time in that interval\n";
    // The unit column as wide as its longest entry, within bounds; a dash for none.
    std::size_t width = 4;
    for (const auto& l : t.top) width = std::max(width, l.unit.size());
    width = std::min<std::size_t>(width, 32);
    out += fmt::format("{:>4} {:>8} {:>8} {:<16} {:<{}} {:>6} {:>6} {:>6}\n", "CPU", "PID", "TID",
                       "COMM", "UNIT", width, "LOAD", "USER", "SYS");
    for (const auto& l : t.top) {
        std::string unit = l.unit.empty() ? std::string{"-"} : printable(l.unit);
        if (unit.size() > width) unit = "…" + unit.substr(unit.size() - width + 1);
        out += fmt::format("{:>4} {:>8} {:>8} {:<16} {:<{}} {:6.1f} {:6.1f} {:6.1f}\n", l.cpu,
                           l.pid, l.tid, printable(l.comm), unit, width, l.load, l.user, l.system);
    }
    out += "CPU: the one each task ran on last, where its time of the interval is counted\n";
    return out;
}

std::string format_context(const monitor::LoadingReport& r) {
    if (!r.context) return {};
    const auto& c = *r.context;
    if (!c.unavailable.empty()) return fmt::format("No CPU context: {}\n", c.unavailable);
    if (!c.sample) return "No CPU context yet: the daemon samples it from its next second on.\n";
    const auto& s = *c.sample;
    std::string out;
    auto rates = [](const std::vector<monitor::InterruptRate>& list, std::size_t n) {
        std::string line;
        for (std::size_t i = 0; i < list.size() && i < n; ++i) {
            line +=
                fmt::format("{}{} {:.0f}", i == 0 ? "" : ", ", list[i].source, list[i].per_second);
            if (!list[i].description.empty()) line += " (" + list[i].description + ")";
        }
        return line;
    };
    if (s.seconds > 0 && r.timestamp) {
        auto t = std::chrono::system_clock::to_time_t(*r.timestamp);
        out += fmt::format("CPU context over the {:.1f} s to {:%H:%M:%S}\n", s.seconds,
                           fmt::localtime(t));
    } else {
        out += "CPU context now (its rates from the daemon's next second on)\n";
    }
    if (s.procs_running || s.procs_blocked || s.waiting) {
        std::string line = "  tasks:";
        if (s.procs_running) line += fmt::format(" {} runnable", *s.procs_running);
        if (s.procs_blocked) line += fmt::format(", {} blocked on I/O", *s.procs_blocked);
        if (s.waiting) line += fmt::format(", {:.2f} waiting for a CPU on average", *s.waiting);
        out += line + "\n";
    }
    if (s.pressure_avg10 || s.pressure_some) {
        std::string line = "  CPU pressure (PSI):";
        if (s.pressure_some) {
            line +=
                fmt::format(" some task waited {:.1f} % of the interval;", *s.pressure_some * 100);
        }
        if (s.pressure_avg10) {
            line += fmt::format(" avg10 {:.2f} avg60 {:.2f} avg300 {:.2f} %", *s.pressure_avg10,
                                s.pressure_avg60.value_or(0), s.pressure_avg300.value_or(0));
        }
        out += line + "\n";
    }
    if (s.interrupts) {
        out += fmt::format("  interrupts {:.0f}/s{}{}\n", *s.interrupts,
                           s.interrupt_sources.empty() ? "" : ": ", rates(s.interrupt_sources, 5));
    }
    if (s.softirqs) {
        out += fmt::format("  softirqs {:.0f}/s{}{}\n", *s.softirqs,
                           s.softirq_kinds.empty() ? "" : ": ", rates(s.softirq_kinds, 10));
    }
    if (!s.cpus.empty()) {
        auto cell = [](const std::optional<double>& v, const char* format) {
            return v ? fmt::format(fmt::runtime(format), *v) : std::string{"-"};
        };
        out += fmt::format("{:>5} {:>8} {:>7} {:>9} {:>9}  {}\n", "CPU", "WAITING", "MHZ", "IRQ/S",
                           "SOFTIRQ/S", "TOP IRQ");
        for (const auto& f : s.cpus) {
            out += fmt::format("{:>5} {:>8} {:>7} {:>9} {:>9}  {}\n", f.cpu,
                               cell(f.waiting, "{:.2f}"), cell(f.frequency_mhz, "{:.0f}"),
                               cell(f.interrupts, "{:.0f}"), cell(f.softirqs, "{:.0f}"),
                               f.top_interrupt.empty() ? "-" : f.top_interrupt);
        }
    }
    for (const auto& why : s.unavailable) out += "  not here: " + why + "\n";
    return out;
}

}  // namespace monctl
