#include "monitor/loading/history_range.hpp"

#include <algorithm>
#include <cmath>

namespace monitor {

namespace {

// Seconds missing between two stored ones further apart than this count as gaps.
constexpr double kMissingAfter = 1.5;
// The most gaps one absence adds to the per-second values (a week's absence in a range read
// with history is bounded by the range itself; this bounds a clock that jumped).
constexpr std::size_t kMostGaps = std::size_t{7} * 24 * 3600;

}  // namespace

void HistoryRange::pad(Series& s, std::size_t to) const {
    if (query_.history && s.values.size() < to) s.values.resize(to);
}

void HistoryRange::push(Series& s, std::optional<double> load,
                        const std::optional<StateShares>* states, double seconds, std::size_t span,
                        std::optional<double> low, std::optional<double> high) {
    pad(s, seconds_ - span);
    if (query_.history) s.values.insert(s.values.end(), span, load);
    s.last = load;
    if (load) {
        const double lo = std::min(low.value_or(*load), *load);
        const double hi = std::max(high.value_or(*load), *load);
        if (s.samples == 0) {
            s.min = lo;
            s.max = hi;
        } else {
            s.min = std::min(s.min, lo);
            s.max = std::max(s.max, hi);
        }
        // A minute counts as its seconds.
        s.weighted += *load * seconds;
        s.weight += seconds;
        s.plain += *load * static_cast<double>(span);
        s.samples += span;
    }
    if (states == nullptr) return;
    s.has_states = true;
    s.last_states = *states;
    if (!*states) return;
    for (std::size_t k = 0; k < kTimeStateCount; ++k) {
        s.states_weighted[k] += (*states)->percent[k] * seconds;
        s.states_plain[k] += (*states)->percent[k] * static_cast<double>(span);
    }
    s.states_weight += seconds;
    s.state_samples += span;
}

namespace {

const HistorySource* source_named(const HistorySecond* second, const std::string& name) {
    if (second == nullptr) return nullptr;
    for (const auto& s : second->sources) {
        if (s.name == name) return &s;
    }
    return nullptr;
}

std::optional<double> load_of_cpu(const HistorySource* source, int cpu) {
    if (source == nullptr) return std::nullopt;
    auto it = std::lower_bound(source->cpus.begin(), source->cpus.end(), cpu,
                               [](const HistoryCpu& c, int n) { return c.cpu < n; });
    if (it == source->cpus.end() || it->cpu != cpu) return std::nullopt;
    return it->load;
}

}  // namespace

void HistoryRange::add(Time at, const HistorySecond& second, const HistorySecond* low,
                       const HistorySecond* high) {
    const double seconds = std::isfinite(second.seconds) && second.seconds > 0 ? second.seconds : 0;
    // The seconds this row stands for: 1, or a minute's 60.
    const std::size_t span =
        std::clamp<std::size_t>(static_cast<std::size_t>(std::lround(seconds)), 1, 3600);
    std::size_t missing = 0;
    if (last_) {
        const double apart =
            std::chrono::duration<double>(at - *last_).count() - static_cast<double>(span - 1);
        if (apart > kMissingAfter) {
            missing = std::min(kMostGaps, static_cast<std::size_t>(std::lround(apart)) - 1);
        }
    }
    last_ = at;
    seconds_ += missing + span;
    for (const auto& src : second.sources) {
        const HistorySource* lo = source_named(low, src.name);
        const HistorySource* hi = source_named(high, src.name);
        const std::optional<StateShares>* machine_states =
            src.has_states && query_.states ? &src.machine_states : nullptr;
        push(machine_[src.name], src.machine, machine_states, seconds, span,
             lo ? lo->machine : std::nullopt, hi ? hi->machine : std::nullopt);
        if (!query_.per_cpu) continue;
        for (const auto& c : src.cpus) {
            const std::optional<StateShares>* states =
                src.has_states && query_.states ? &c.states : nullptr;
            push(cpus_[c.cpu][src.name], c.load, states, seconds, span, load_of_cpu(lo, c.cpu),
                 load_of_cpu(hi, c.cpu));
        }
    }
}

SourceLoad HistoryRange::load_of(const std::string& source, const Series& s) const {
    SourceLoad l;
    l.source = source;
    if (s.samples > 0) {
        LoadStats st;
        st.avg_prev_sec = s.last;
        st.min_prev_min = s.min;
        st.max_prev_min = s.max;
        st.avg_prev_min =
            s.weight > 0 ? s.weighted / s.weight : s.plain / static_cast<double>(s.samples);
        st.avg_prev_min = std::clamp(st.avg_prev_min, s.min, s.max);
        st.samples = s.samples;
        l.stats = st;
    }
    if (query_.history) {
        l.history = s.values;
        l.history.resize(seconds_);
    }
    if (s.has_states && s.state_samples > 0) {
        StateStats st;
        st.last = s.last_states;
        st.samples = s.state_samples;
        for (std::size_t k = 0; k < kTimeStateCount; ++k) {
            st.avg.percent[k] = s.states_weight > 0
                                    ? s.states_weighted[k] / s.states_weight
                                    : s.states_plain[k] / static_cast<double>(s.state_samples);
        }
        l.states = st;
    }
    return l;
}

LoadingReport HistoryRange::report() const {
    LoadingReport r;
    r.timestamp = last_;
    r.window_seconds = seconds_;
    // The sources in report order, whichever seconds had them.
    auto in_order = [](const std::map<std::string, Series>& series, auto&& each) {
        for (std::string_view name : kLoadSources) {
            auto it = series.find(std::string{name});
            if (it != series.end()) each(it->first, it->second);
        }
    };
    in_order(machine_, [&](const std::string& name, const Series& s) {
        r.machine.push_back(load_of(name, s));
    });
    for (const auto& [cpu, series] : cpus_) {
        CpuLoading c;
        c.cpu = cpu;
        in_order(series, [&](const std::string& name, const Series& s) {
            c.sources.push_back(load_of(name, s));
        });
        r.cpus.push_back(std::move(c));
    }
    return r;
}

}  // namespace monitor
