#include "monitor/perf/derived_metrics.hpp"

#include <linux/perf_event.h>

#include <optional>
#include <string_view>

#include "monitor/perf/ppc750_events.hpp"

namespace monitor::perf {
namespace {

// What an event measures, as far as the metrics care.
enum class Kind {
    Other,
    Cycles,
    Instructions,
    CacheReferences,
    CacheMisses,
    Branches,
    BranchMisses,
    TaskClock,
    // PowerPC 750, by counter and select.
    IcacheMisses,      // PMC2 0x05
    InstrEaDelivered,  // PMC1 0x08
    DcacheMisses,      // PMC3 0x05
    ItlbMisses,        // PMC2 0x06
    DtlbMisses,        // PMC3 0x06
    L2InstrMisses,     // PMC2 0x07
    L2DataMisses,      // PMC3 0x07
    Mispredicted,      // PMC4 0x08
};

Kind kind_of(const EventSpec& e) {
    if (e.pmu == kPpc750Pmu) {
        const unsigned select = e.config & 0x7F;
        const unsigned pmc = (e.config >> 8) & 0x7;
        if (select == 1) return Kind::Cycles;
        if (select == 2) return Kind::Instructions;
        switch (pmc << 8 | select) {
            case 0x205:
                return Kind::IcacheMisses;
            case 0x108:
                return Kind::InstrEaDelivered;
            case 0x305:
                return Kind::DcacheMisses;
            case 0x206:
                return Kind::ItlbMisses;
            case 0x306:
                return Kind::DtlbMisses;
            case 0x207:
                return Kind::L2InstrMisses;
            case 0x307:
                return Kind::L2DataMisses;
            case 0x408:
                return Kind::Mispredicted;
            default:
                return Kind::Other;
        }
    }
    if (e.type == PERF_TYPE_HARDWARE) {
        switch (e.config) {
            case PERF_COUNT_HW_CPU_CYCLES:
                return Kind::Cycles;
            case PERF_COUNT_HW_INSTRUCTIONS:
                return Kind::Instructions;
            case PERF_COUNT_HW_CACHE_REFERENCES:
                return Kind::CacheReferences;
            case PERF_COUNT_HW_CACHE_MISSES:
                return Kind::CacheMisses;
            case PERF_COUNT_HW_BRANCH_INSTRUCTIONS:
                return Kind::Branches;
            case PERF_COUNT_HW_BRANCH_MISSES:
                return Kind::BranchMisses;
            default:
                return Kind::Other;
        }
    }
    if (e.type == PERF_TYPE_SOFTWARE && e.config == PERF_COUNT_SW_TASK_CLOCK) {
        return Kind::TaskClock;
    }
    return Kind::Other;
}

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
        if (a && b && g.set >= 0) {
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
                   double value, bool same_set) {
        Metric& m = n < out.size() ? out[n] : out.emplace_back();
        ++n;
        m.name.assign(name);
        m.description.assign(what);
        m.description.append(suffix);
        m.value = value;
        m.same_set = same_set;
    };
    auto find = [&](Kind k) -> std::optional<std::size_t> {
        for (std::size_t i = 0; i < plan.events.size(); ++i) {
            if (kind_of(plan.events[i]) == k) return i;
        }
        return std::nullopt;
    };
    auto add = [&](std::string_view name, std::string_view what, std::string_view suffix, Kind num,
                   Kind den, double factor) {
        auto a = find(num);
        auto b = find(den);
        if (!a || !b) return;
        if (auto r = ratio(report, *a, *b)) {
            put(name, what, suffix, r->value * factor, r->same_set);
        }
    };
    add("ipc", "instructions per cycle", "", Kind::Instructions, Kind::Cycles, 1.0);
    add("cpi", "cycles per instruction", "", Kind::Cycles, Kind::Instructions, 1.0);
    add("cache_miss_ratio", "cache misses per cache reference", "", Kind::CacheMisses,
        Kind::CacheReferences, 1.0);
    add("branch_miss_ratio", "mispredicted branches per branch", "", Kind::BranchMisses,
        Kind::Branches, 1.0);
    add("icache_miss_ratio", "L1 instruction-cache misses per instruction fetch delivered", "",
        Kind::IcacheMisses, Kind::InstrEaDelivered, 1.0);
    struct Pti {
        Kind kind;
        const char* name;
        const char* what;
    };
    static constexpr Pti kPti[] = {
        {Kind::CacheMisses, "cache_misses_pti", "cache misses"},
        {Kind::BranchMisses, "branch_misses_pti", "mispredicted branches"},
        {Kind::IcacheMisses, "l1_icache_misses_pti", "L1 instruction-cache misses"},
        {Kind::DcacheMisses, "l1_dcache_misses_pti", "L1 data-cache misses"},
        {Kind::ItlbMisses, "itlb_misses_pti", "ITLB misses"},
        {Kind::DtlbMisses, "dtlb_misses_pti", "DTLB misses"},
        {Kind::L2InstrMisses, "l2_instr_misses_pti", "L2 instruction misses"},
        {Kind::L2DataMisses, "l2_data_misses_pti", "L2 data misses"},
        {Kind::Mispredicted, "mispredicted_branches_pti", "mispredicted branches"},
    };
    for (const auto& p : kPti) {
        add(p.name, p.what, " per thousand instructions", p.kind, Kind::Instructions, 1000.0);
    }
    if (auto t = find(Kind::TaskClock); t && report.elapsed.count() > 0) {
        const auto& v = report.events[*t].total;
        put("cpus_utilized", "CPUs busy on average (task clock / elapsed time)", "",
            v.scaled() / static_cast<double>(report.elapsed.count()), v.running_ratio() >= 1.0);
    }
    out.resize(n);
}

std::vector<Metric> derive_metrics(const Plan& plan, const PerfReport& report) {
    std::vector<Metric> out;
    derive_metrics(plan, report, out);
    return out;
}

}  // namespace monitor::perf
