#include "monitor/perf/generic_pmu.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <array>

namespace monitor::perf {
namespace {

// The processor's counters that the kernel's generic hardware events may take, when nothing
// says how many it has (libpfm4's module assumes the same for a processor it does not know).
constexpr int kCoreCounters = 4;
// The PMU that holds them, for the scheduler.
constexpr std::string_view kCorePmu = "cpu";

// A constant table of 20: its 8 bytes of padding each matter less than fields in
// perf_event_attr's order (type, then config) and the optional measure last.
// NOLINTNEXTLINE(clang-analyzer-optin.performance.Padding): see above
struct GenericEvent {
    std::string_view name;  // the kernel's (and libpfm4's first) name
    std::uint32_t type;
    std::uint64_t config;
    // libpfm4's other names for it, in the order it lists them.
    std::array<std::string_view, 2> aliases;
    Measure measure = Measure::Other;
};

constexpr GenericEvent kEvents[] = {
    {"PERF_COUNT_HW_CPU_CYCLES",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_CPU_CYCLES,
     {"CYCLES", "CPU-CYCLES"},
     Measure::Cycles},
    {"PERF_COUNT_HW_INSTRUCTIONS",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_INSTRUCTIONS,
     {"INSTRUCTIONS"},
     Measure::Instructions},
    {"PERF_COUNT_HW_CACHE_REFERENCES",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_CACHE_REFERENCES,
     {"CACHE-REFERENCES"},
     Measure::CacheReferences},
    {"PERF_COUNT_HW_CACHE_MISSES",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_CACHE_MISSES,
     {"CACHE-MISSES"},
     Measure::CacheMisses},
    {"PERF_COUNT_HW_BRANCH_INSTRUCTIONS",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
     {"BRANCH-INSTRUCTIONS", "BRANCHES"},
     Measure::Branches},
    {"PERF_COUNT_HW_BRANCH_MISSES",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_BRANCH_MISSES,
     {"BRANCH-MISSES"},
     Measure::BranchMisses},
    {"PERF_COUNT_HW_BUS_CYCLES", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES, {"BUS-CYCLES"}},
    {"PERF_COUNT_HW_STALLED_CYCLES_FRONTEND",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
     {"STALLED-CYCLES-FRONTEND", "IDLE-CYCLES-FRONTEND"}},
    {"PERF_COUNT_HW_STALLED_CYCLES_BACKEND",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
     {"STALLED-CYCLES-BACKEND", "IDLE-CYCLES-BACKEND"}},
    {"PERF_COUNT_HW_REF_CPU_CYCLES",
     PERF_TYPE_HARDWARE,
     PERF_COUNT_HW_REF_CPU_CYCLES,
     {"REF-CYCLES"}},
    {"PERF_COUNT_SW_CPU_CLOCK", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, {"CPU-CLOCK"}},
    {"PERF_COUNT_SW_TASK_CLOCK",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_TASK_CLOCK,
     {"TASK-CLOCK"},
     Measure::TaskClock},
    {"PERF_COUNT_SW_PAGE_FAULTS",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_PAGE_FAULTS,
     {"PAGE-FAULTS", "FAULTS"}},
    {"PERF_COUNT_SW_CONTEXT_SWITCHES",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_CONTEXT_SWITCHES,
     {"CONTEXT-SWITCHES", "CS"}},
    {"PERF_COUNT_SW_CPU_MIGRATIONS",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_CPU_MIGRATIONS,
     {"CPU-MIGRATIONS", "MIGRATIONS"}},
    {"PERF_COUNT_SW_PAGE_FAULTS_MIN",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_PAGE_FAULTS_MIN,
     {"MINOR-FAULTS"}},
    {"PERF_COUNT_SW_PAGE_FAULTS_MAJ",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_PAGE_FAULTS_MAJ,
     {"MAJOR-FAULTS"}},
    {"PERF_COUNT_SW_ALIGNMENT_FAULTS",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_ALIGNMENT_FAULTS,
     {"ALIGNMENT-FAULTS"}},
    {"PERF_COUNT_SW_EMULATION_FAULTS",
     PERF_TYPE_SOFTWARE,
     PERF_COUNT_SW_EMULATION_FAULTS,
     {"EMULATION-FAULTS"}},
    {"PERF_COUNT_SW_CGROUP_SWITCHES",
     PERF_TYPE_SOFTWARE,
     11 /* PERF_COUNT_SW_CGROUP_SWITCHES */,
     {"CGROUP-SWITCHES"}},
};

// The hardware cache events, named as perf and libpfm4 name them: CACHE-OPs and
// CACHE-OP-MISSES ("L1-DCACHE-LOAD-MISSES"). The kernel refuses the pairs a processor does not
// have when they are opened.
struct CacheName {
    std::string_view name;
    std::string_view description;
    std::uint64_t id;
};
constexpr CacheName kCaches[] = {
    {"L1-DCACHE", "L1 cache", PERF_COUNT_HW_CACHE_L1D},
    {"L1-ICACHE", "L1I cache", PERF_COUNT_HW_CACHE_L1I},
    {"LLC", "Last level cache", PERF_COUNT_HW_CACHE_LL},
    {"DTLB", "Data TLB", PERF_COUNT_HW_CACHE_DTLB},
    {"ITLB", "Instruction TLB", PERF_COUNT_HW_CACHE_ITLB},
    {"BRANCH", "Branch", PERF_COUNT_HW_CACHE_BPU},
    {"NODE", "Node", PERF_COUNT_HW_CACHE_NODE},
};
struct CacheOp {
    std::string_view singular;  // "LOAD"
    std::string_view plural;    // "LOADS"
    std::string_view description;
    std::uint64_t id;
};
constexpr CacheOp kCacheOps[] = {
    {"LOAD", "LOADS", "load", PERF_COUNT_HW_CACHE_OP_READ},
    {"STORE", "STORES", "store", PERF_COUNT_HW_CACHE_OP_WRITE},
    {"PREFETCH", "PREFETCHES", "prefetch", PERF_COUNT_HW_CACHE_OP_PREFETCH},
};

struct Resolved {
    std::string canonical;  // the event's first name, without the PMU
    std::string description;
    std::uint32_t type = 0;
    std::uint64_t config = 0;
    Measure measure = Measure::Other;
};

std::optional<Resolved> find_event(std::string_view event) {
    for (const auto& e : kEvents) {
        const bool named = iequals(e.name, event) || std::ranges::any_of(e.aliases, [&](auto a) {
                               return !a.empty() && iequals(a, event);
                           });
        if (named)
            return Resolved{std::string(e.name), std::string(e.name), e.type, e.config, e.measure};
    }
    for (const auto& c : kCaches) {
        if (event.size() <= c.name.size() + 1 || !iequals(event.substr(0, c.name.size()), c.name) ||
            event[c.name.size()] != '-') {
            continue;
        }
        const std::string_view rest = event.substr(c.name.size() + 1);
        for (const auto& op : kCacheOps) {
            const bool access = iequals(rest, op.plural);
            const bool miss = rest.size() == op.singular.size() + 7 &&
                              iequals(rest.substr(0, op.singular.size()), op.singular) &&
                              iequals(rest.substr(op.singular.size()), "-MISSES");
            if (!access && !miss) continue;
            const std::uint64_t result =
                miss ? PERF_COUNT_HW_CACHE_RESULT_MISS : PERF_COUNT_HW_CACHE_RESULT_ACCESS;
            Resolved r;
            r.canonical = miss ? fmt::format("{}-{}-MISSES", c.name, op.singular)
                               : fmt::format("{}-{}", c.name, op.plural);
            r.description = fmt::format("{} {} {}", c.description, op.description,
                                        miss ? "misses" : "accesses");
            r.type = PERF_TYPE_HW_CACHE;
            r.config = c.id | (op.id << 8) | (result << 16);
            return r;
        }
    }
    return std::nullopt;
}

class GenericPmu final : public PmuModule {
  public:
    std::vector<PmuInfo> pmus() const override;
    bool resolves_other_names() const override { return true; }
    Result<EventSpec> resolve(const EventName& name) const override;
    void list(std::string_view pmu, std::vector<EventInfo>& out) const override;
};

std::vector<PmuInfo> GenericPmu::pmus() const {
    PmuInfo p;
    p.name = kGenericPmu;
    p.description =
        "the kernel's generic events (built in: this libmonitor was built without "
        "libpfm4)";
    // Every name it lists, aliases too, as libpfm4 counts them.
    p.events = std::size(kCaches) * std::size(kCacheOps) * 2;
    for (const auto& e : kEvents) {
        p.events += 1 + static_cast<std::size_t>(
                            std::ranges::count_if(e.aliases, [](auto a) { return !a.empty(); }));
    }
    p.source = kBuiltInSource;
    return {std::move(p)};
}

Result<EventSpec> GenericPmu::resolve(const EventName& name) const {
    if (!name.pmu.empty() && !iequals(name.pmu, kGenericPmu)) {
        return fail(Status::NoEvent,
                    fmt::format("no PMU '{}' (this libmonitor was built without libpfm4: it "
                                "knows the kernel's generic events, perf::, and its built-in "
                                "tables)",
                                name.pmu));
    }
    auto found = find_event(name.event);
    if (!found) {
        return fail(Status::NoEvent,
                    fmt::format("the kernel's generic events have no '{}'", name.event));
    }
    auto m = parse_modifiers(name.modifiers, name.full);
    if (!m) return std::unexpected(m.error());
    EventSpec spec;
    spec.name = name.full;
    spec.canonical = fmt::format("{}::{}", kGenericPmu, found->canonical);
    spec.pmu = kGenericPmu;
    spec.description = std::move(found->description);
    spec.type = found->type;
    spec.config = found->config;
    spec.measure = found->measure;
    m->apply_to(spec);
    if (spec.type == PERF_TYPE_SOFTWARE) {
        spec.counter_pmu = kGenericPmu;  // no counter
    } else {
        spec.counter_pmu = kCorePmu;
        spec.counters = first_counters(kCoreCounters);
        spec.pinned =
            spec.type == PERF_TYPE_HARDWARE &&
            (spec.config == PERF_COUNT_HW_CPU_CYCLES || spec.config == PERF_COUNT_HW_INSTRUCTIONS);
    }
    return spec;
}

void GenericPmu::list(std::string_view, std::vector<EventInfo>& out) const {
    auto add = [&](std::string_view event) {
        EventName n{.full = event, .pmu = kGenericPmu, .event = event, .modifiers = {}};
        auto spec = resolve(n);
        if (!spec) return;
        out.push_back({.name = fmt::format("{}::{}", kGenericPmu, event),
                       .description = spec->description,
                       .pmu = std::string(kGenericPmu),
                       .counters = spec->counters,
                       .counter_names = {},
                       .pinned = spec->pinned});
    };
    for (const auto& e : kEvents) {
        add(e.name);
        for (auto a : e.aliases) {
            if (!a.empty()) add(a);
        }
    }
    for (const auto& c : kCaches) {
        for (const auto& op : kCacheOps) {
            add(fmt::format("{}-{}", c.name, op.plural));
            add(fmt::format("{}-{}-MISSES", c.name, op.singular));
        }
    }
}

}  // namespace

Result<std::unique_ptr<PmuModule>> make_generic_pmu() {
    return std::make_unique<GenericPmu>();
}

}  // namespace monitor::perf
