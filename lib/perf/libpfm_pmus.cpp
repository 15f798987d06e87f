#include "monitor/perf/libpfm_pmus.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <perfmon/pfmlib_perf_event.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace monitor::perf {
namespace {

// The kernel's generic hardware events need a counter of the processor's PMU; when libpfm4
// does not recognise the processor, planning assumes this many.
constexpr int kUnknownCoreCounters = 4;

// What a kernel's generic event measures (PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE).
Measure measure_of(std::uint32_t type, std::uint64_t config) {
    if (type == PERF_TYPE_HARDWARE) {
        switch (config) {
            case PERF_COUNT_HW_CPU_CYCLES:
                return Measure::Cycles;
            case PERF_COUNT_HW_INSTRUCTIONS:
                return Measure::Instructions;
            case PERF_COUNT_HW_CACHE_REFERENCES:
                return Measure::CacheReferences;
            case PERF_COUNT_HW_CACHE_MISSES:
                return Measure::CacheMisses;
            case PERF_COUNT_HW_BRANCH_INSTRUCTIONS:
                return Measure::Branches;
            case PERF_COUNT_HW_BRANCH_MISSES:
                return Measure::BranchMisses;
            default:
                return Measure::Other;
        }
    }
    if (type == PERF_TYPE_SOFTWARE && config == PERF_COUNT_SW_TASK_CLOCK) {
        return Measure::TaskClock;
    }
    return Measure::Other;
}

class LibpfmPmus final : public PmuModule {
  public:
    LibpfmPmus();

    std::vector<PmuInfo> pmus() const override { return pmus_; }
    bool resolves_other_names() const override { return true; }
    Result<EventSpec> resolve(const EventName& name) const override;
    void list(std::string_view pmu, std::vector<EventInfo>& out) const override;

  private:
    // libpfm4's encoding of a whole name, modifiers included.
    Result<EventSpec> resolve_encoded(std::string_view name) const;
    Result<EventSpec> resolve_raw(const PmuInfo& pmu, std::uint64_t code,
                                  const EventName& name) const;
    const PmuInfo* find(std::string_view name) const;
    const PmuInfo* core() const;
    // The counters of the processor's PMU, for the kernel's generic hardware events.
    CounterMask core_counters() const;

    std::vector<PmuInfo> pmus_;
};

LibpfmPmus::LibpfmPmus() {
    for (int i = PFM_PMU_NONE; i < PFM_PMU_MAX; ++i) {
        const auto p = static_cast<pfm_pmu_t>(i);
        pfm_pmu_info_t info{};
        info.size = sizeof info;
        if (pfm_get_pmu_info(p, &info) != PFM_SUCCESS || !info.is_present) continue;
        PmuInfo pmu;
        pmu.name = info.name;
        pmu.description = info.desc != nullptr ? info.desc : "";
        pmu.counters = info.num_cntrs;
        pmu.fixed_counters = info.num_fixed_cntrs;
        pmu.events = static_cast<std::size_t>(std::max(info.nevents, 0));
        pmu.source = "libpfm4";
        pmu.core = info.type == PFM_PMU_TYPE_CORE;
        pmus_.push_back(std::move(pmu));
    }
}

const PmuInfo* LibpfmPmus::find(std::string_view name) const {
    auto it = std::ranges::find_if(pmus_, [&](const PmuInfo& p) { return iequals(p.name, name); });
    return it == pmus_.end() ? nullptr : &*it;
}

const PmuInfo* LibpfmPmus::core() const {
    auto it = std::ranges::find_if(pmus_, [](const PmuInfo& p) { return p.core; });
    return it == pmus_.end() ? nullptr : &*it;
}

CounterMask LibpfmPmus::core_counters() const {
    const PmuInfo* c = core();
    return first_counters(c != nullptr && c->counters > 0 ? c->counters : kUnknownCoreCounters);
}

Result<EventSpec> LibpfmPmus::resolve(const EventName& name) const {
    if (const PmuInfo* p = find(name.pmu); p != nullptr && p->core) {
        if (auto code = parse_raw_code(name.event)) return resolve_raw(*p, *code, name);
    }
    return resolve_encoded(name.full);
}

Result<EventSpec> LibpfmPmus::resolve_raw(const PmuInfo& pmu, std::uint64_t code,
                                          const EventName& name) const {
    auto m = parse_modifiers(name.modifiers, name.full);
    if (!m) return std::unexpected(m.error());
    EventSpec spec;
    spec.name = name.full;
    spec.canonical = fmt::format("{}::{}", pmu.name, name.event);
    spec.pmu = pmu.name;
    spec.counter_pmu = pmu.name;
    spec.description = "raw event code";
    spec.type = PERF_TYPE_RAW;
    spec.config = code;
    spec.counters = first_counters(pmu.counters);
    m->apply_to(spec);
    return spec;
}

Result<EventSpec> LibpfmPmus::resolve_encoded(std::string_view name) const {
    const std::string str(name);
    perf_event_attr attr{};
    char* fstr = nullptr;
    pfm_perf_encode_arg_t arg{};
    arg.attr = &attr;
    arg.size = sizeof arg;
    arg.fstr = &fstr;
    int r =
        pfm_get_os_event_encoding(str.c_str(), PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
    std::unique_ptr<char, decltype(&std::free)> fstr_owner(fstr, &std::free);
    if (r == PFM_ERR_NOTFOUND) {
        return fail(Status::NoEvent, fmt::format("libpfm4 has no event '{}'", name));
    }
    if (r != PFM_SUCCESS) {
        return fail(Status::BadArg, fmt::format("{}: {} (modifiers: :u user mode only, :k kernel "
                                                "mode only; `monctl perf list` shows the events)",
                                                name, pfm_strerror(r)));
    }
    pfm_event_info_t einfo{};
    einfo.size = sizeof einfo;
    pfm_pmu_info_t pinfo{};
    pinfo.size = sizeof pinfo;
    if (pfm_get_event_info(arg.idx, PFM_OS_PERF_EVENT_EXT, &einfo) != PFM_SUCCESS ||
        pfm_get_pmu_info(einfo.pmu, &pinfo) != PFM_SUCCESS) {
        return fail(Status::BadData, fmt::format("{}: libpfm4 has no information on it", name));
    }
    EventSpec spec;
    spec.name = name;
    spec.pmu = pinfo.name;
    spec.canonical = fmt::format("{}::{}", pinfo.name, einfo.name);
    spec.description = einfo.desc != nullptr ? einfo.desc : "";
    copy_encoding(spec, attr);
    spec.measure = measure_of(attr.type, attr.config);
    switch (attr.type) {
        case PERF_TYPE_SOFTWARE:
        case PERF_TYPE_TRACEPOINT:
        case PERF_TYPE_BREAKPOINT:
            break;  // no counter
        case PERF_TYPE_HARDWARE:
        case PERF_TYPE_HW_CACHE: {
            spec.counters = core_counters();
            const PmuInfo* c = core();
            spec.counter_pmu = c != nullptr ? c->name : "cpu";
            spec.pinned =
                attr.type == PERF_TYPE_HARDWARE && (attr.config == PERF_COUNT_HW_CPU_CYCLES ||
                                                    attr.config == PERF_COUNT_HW_INSTRUCTIONS);
            break;
        }
        default:
            spec.counter_pmu = spec.pmu;
            if (const PmuInfo* p = find(spec.pmu); p != nullptr && p->counters > 0) {
                spec.counters = first_counters(p->counters);
            } else {
                spec.counters = core_counters();
            }
            break;
    }
    return spec;
}

void LibpfmPmus::list(std::string_view pmu, std::vector<EventInfo>& out) const {
    for (int id = PFM_PMU_NONE; id < PFM_PMU_MAX; ++id) {
        pfm_pmu_info_t info{};
        info.size = sizeof info;
        if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(id), &info) != PFM_SUCCESS || pmu != info.name)
            continue;
        for (int i = info.first_event; i != -1; i = pfm_get_event_next(i)) {
            pfm_event_info_t e{};
            e.size = sizeof e;
            if (pfm_get_event_info(i, PFM_OS_PERF_EVENT_EXT, &e) != PFM_SUCCESS) continue;
            EventInfo ev;
            ev.name = fmt::format("{}::{}", info.name, e.name);
            ev.description = e.desc != nullptr ? e.desc : "";
            ev.pmu = info.name;
            // Resolving gives the counters and the pinned flag as counting will see them.
            if (auto spec = resolve_encoded(ev.name)) {
                ev.counters = spec->counters;
                ev.pinned = spec->pinned;
            }
            out.push_back(std::move(ev));
        }
    }
}

std::once_flag pfm_once;
int pfm_status = PFM_SUCCESS;

}  // namespace

Result<std::unique_ptr<PmuModule>> make_libpfm_pmus() {
    std::call_once(pfm_once, [] { pfm_status = pfm_initialize(); });
    if (pfm_status != PFM_SUCCESS) {
        return fail(Status::NoPmu,
                    fmt::format("libpfm4 failed to start: {}", pfm_strerror(pfm_status)));
    }
    return std::make_unique<LibpfmPmus>();
}

}  // namespace monitor::perf
