#include "views.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cmath>
#include <ctime>

namespace monctl {
namespace {

std::vector<std::string> source_names(const monitor::LoadingReport& r) {
    std::vector<std::string> names;
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

std::string row_label(const monitor::CpuLoading& c) {
    return fmt::format("cpu{}{}", c.cpu, c.online ? "" : "*");
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
    out += fmt::format("  probes:  {}\n", st.probe_mode);
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
        return "No watchdog: none is configured, or /dev/watchdog did not exist when the daemon "
               "started (see [watchdog] in monitord.conf(5)).\n";
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
    out += fmt::format("  policy:         pet when {} CPUs earned an idle credit", w->policy);
    if (!w->waiting_for.empty()) {
        out += fmt::format(" (waiting for {})", format_cpu_list(w->waiting_for));
    }
    out += '\n';
    out += fmt::format("  on stop:        {}\n", w->on_stop == "disarm"
                                                     ? "disarm (magic close)"
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
        out += fmt::format("{:<6}", row_label(c));
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
                cols.push_back({s + ":" + row_label(c), &l->history});
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

}  // namespace monctl
