#include "monitor/perf/derived_metrics.hpp"

#include <linux/perf_event.h>

#include <algorithm>
#include <optional>
#include <string_view>

namespace monitor::perf {
namespace {

struct Ratio {
    double value;
    bool same_set;
};

// num / den over the same window when possible.
std::optional<Ratio> ratio(const PerfReport& report, std::size_t num, std::size_t den) {
    for (const auto& g : report.groups) {
        std::optional<std::size_t> a, b;
        for (std::size_t m = 0; m < g.events.size(); ++m) {
            if (g.events[m] == num) a = m;
            if (g.events[m] == den) b = m;
        }
        if (a && b && g.set != kFreeRunningSet) {
            if (g.counts[*b] == 0) return std::nullopt;
            return Ratio{static_cast<double>(g.counts[*a]) / static_cast<double>(g.counts[*b]),
                         true};
        }
    }
    const auto& n = report.events[num].total;
    const auto& d = report.events[den].total;
    if (d.scaled() == 0) return std::nullopt;
    const bool full_time = n.running_ratio() >= 1.0 && d.running_ratio() >= 1.0;
    return Ratio{n.scaled() / d.scaled(), full_time};
}

}  // namespace

void derive_metrics(const Plan& plan, const PerfReport& report, std::vector<Metric>& out) {
    if (report.events.size() != plan.events.size()) {
        out.clear();
        return;
    }
    std::size_t n = 0;  // metrics written; out's elements keep their strings' capacity
    auto put = [&](std::string_view name, std::string_view what, std::string_view suffix,
                   double value, bool same_set, std::size_t event) {
        Metric& m = n < out.size() ? out[n] : out.emplace_back();
        ++n;
        m.name.assign(name);
        m.description.assign(what);
        m.description.append(suffix);
        m.value = value;
        m.same_set = same_set;
        m.event.assign(plan.events[event].name);
    };
    auto find = [&](Measure k) -> std::optional<std::size_t> {
        for (std::size_t i = 0; i < plan.events.size(); ++i) {
            if (plan.events[i].measure == k) return i;
        }
        return std::nullopt;
    };
    auto add = [&](std::string_view name, std::string_view what, std::string_view suffix,
                   Measure num, Measure den, double factor) {
        auto a = find(num);
        auto b = find(den);
        if (!a || !b) return;
        if (auto r = ratio(report, *a, *b)) {
            put(name, what, suffix, r->value * factor, r->same_set, *a);
        }
    };
    add("ipc", "instructions per cycle", "", Measure::Instructions, Measure::Cycles, 1.0);
    add("cpi", "cycles per instruction", "", Measure::Cycles, Measure::Instructions, 1.0);
    add("cache_miss_ratio", "cache misses per cache reference", "", Measure::CacheMisses,
        Measure::CacheReferences, 1.0);
    add("branch_miss_ratio", "mispredicted branches per branch", "", Measure::BranchMisses,
        Measure::Branches, 1.0);
    add("icache_miss_ratio", "L1 instruction-cache misses per instruction fetch delivered", "",
        Measure::L1IcacheMisses, Measure::InstructionFetches, 1.0);
    struct Pti {
        Measure measure;
        const char* name;
        const char* what;
    };
    static constexpr Pti kPti[] = {
        {Measure::CacheMisses, "cache_misses_pti", "cache misses"},
        {Measure::BranchMisses, "branch_misses_pti", "mispredicted branches"},
        {Measure::L1IcacheMisses, "l1_icache_misses_pti", "L1 instruction-cache misses"},
        {Measure::L1DcacheMisses, "l1_dcache_misses_pti", "L1 data-cache misses"},
        {Measure::ItlbMisses, "itlb_misses_pti", "ITLB misses"},
        {Measure::DtlbMisses, "dtlb_misses_pti", "DTLB misses"},
        {Measure::L2InstructionMisses, "l2_instr_misses_pti", "L2 instruction misses"},
        {Measure::L2DataMisses, "l2_data_misses_pti", "L2 data misses"},
        {Measure::MispredictedBranches, "mispredicted_branches_pti", "mispredicted branches"},
    };
    for (const auto& p : kPti) {
        add(p.name, p.what, " per thousand instructions", p.measure, Measure::Instructions, 1000.0);
    }
    // Over the time the session counted: a paused session's task clock stood still.
    const auto counted = report.elapsed - report.paused;
    if (auto t = find(Measure::TaskClock); t && counted.count() > 0) {
        const auto& v = report.events[*t].total;
        put("cpus_utilized", "CPUs busy on average (task clock / elapsed time)", "",
            v.scaled() / static_cast<double>(counted.count()), v.running_ratio() >= 1.0, *t);
    }
    // The session's own metrics (SessionOptions::metrics), in place of a built-in one of the
    // same name.
    thread_local std::vector<double> counts;
    const double seconds = std::chrono::duration<double>(counted).count();
    for (const auto& sm : plan.metrics) {
        if (sm.events.empty()) continue;  // a formula of numbers and seconds alone
        // Events of one counter set were counted over the very same time: their raw counts
        // are exact for a ratio. A rate takes the estimates, like events in different sets.
        const GroupCount* set = nullptr;
        if (!sm.formula.uses_seconds()) {
            for (const auto& g : report.groups) {
                if (g.set == kFreeRunningSet) continue;
                if (std::ranges::all_of(sm.events, [&g](std::size_t e) {
                        return std::ranges::find(g.events, e) != g.events.end();
                    })) {
                    set = &g;
                    break;
                }
            }
        }
        counts.clear();
        bool full_time = true;
        for (auto e : sm.events) {
            if (set != nullptr) {
                const auto at = std::ranges::find(set->events, e) - set->events.begin();
                counts.push_back(static_cast<double>(set->counts[static_cast<std::size_t>(at)]));
            } else {
                const auto& v = report.events[e].total;
                counts.push_back(v.scaled());
                full_time = full_time && v.running_ratio() >= 1.0;
            }
        }
        auto value = sm.formula.evaluate(counts, seconds);
        if (!value) continue;
        std::size_t at = 0;
        while (at < n && out[at].name != sm.name) ++at;
        if (at < n) {
            Metric& m = out[at];
            m.description.assign(sm.description);
            m.value = *value;
            m.same_set = set != nullptr || full_time;
            m.event.assign(plan.events[sm.events.front()].name);
        } else {
            put(sm.name, sm.description, "", *value, set != nullptr || full_time,
                sm.events.front());
        }
    }
    out.resize(n);
}

bool counts_nanoseconds(const EventSpec& spec) {
    return spec.type == PERF_TYPE_SOFTWARE &&
           (spec.config == PERF_COUNT_SW_CPU_CLOCK || spec.config == PERF_COUNT_SW_TASK_CLOCK);
}

std::vector<Metric> derive_metrics(const Plan& plan, const PerfReport& report) {
    std::vector<Metric> out;
    derive_metrics(plan, report, out);
    return out;
}

}  // namespace monitor::perf
