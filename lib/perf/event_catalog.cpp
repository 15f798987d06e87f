#include "monitor/perf/event_catalog.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <perfmon/pfmlib_perf_event.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <mutex>

#include "monitor/perf/ppc750_events.hpp"

namespace monitor::perf {
namespace {

constexpr std::string_view kSeparator = "::";
// The kernel's generic hardware events need a counter of the processor's PMU; when libpfm4
// does not recognise the processor, planning assumes this many.
constexpr int kUnknownCoreCounters = 4;

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::ranges::equal(a, b, [](unsigned char x, unsigned char y) {
               return std::tolower(x) == std::tolower(y);
           });
}

// "rHEX" -> the value; nullopt when `s` is not a raw code.
std::optional<std::uint64_t> parse_raw(std::string_view s) {
    if (s.size() < 2 || s.size() > 17 || s[0] != 'r') return std::nullopt;
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data() + 1, s.data() + s.size(), v, 16);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return v;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t up = row[j];
            bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

// The u/k modifiers shared by raw codes and the ppc750 table: `:u` counts user mode only,
// `:k` kernel mode only, both (or neither) count both.
struct Modifiers {
    bool user = false;
    bool kernel = false;
    std::optional<unsigned> threshold;
};

Result<Modifiers> parse_modifiers(std::string_view mods, std::string_view name, bool threshold_ok) {
    Modifiers m;
    while (!mods.empty()) {
        auto colon = mods.find(':');
        std::string_view mod = mods.substr(0, colon);
        mods = colon == std::string_view::npos ? std::string_view{} : mods.substr(colon + 1);
        if (mod == "u") {
            m.user = true;
        } else if (mod == "k") {
            m.kernel = true;
        } else if (threshold_ok && mod.starts_with("threshold=")) {
            unsigned v = 0;
            auto digits = mod.substr(10);
            auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
            if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() ||
                v > static_cast<unsigned>(kPpc750MaxThreshold)) {
                return fail(Status::BadArg,
                            fmt::format("{}: threshold must be a number from 0 to {}, not '{}'",
                                        name, kPpc750MaxThreshold, digits));
            }
            m.threshold = v;
        } else {
            return fail(Status::BadArg,
                        fmt::format("{}: unknown modifier ':{}' (accepted: :u user mode only, "
                                    ":k kernel mode only{})",
                                    name, mod, threshold_ok ? ", :threshold=0-63" : ""));
        }
    }
    return m;
}

void apply(const Modifiers& m, EventSpec& spec) {
    if (m.user != m.kernel) {
        spec.exclude_user = !m.user;
        spec.exclude_kernel = !m.kernel;
    }
}

std::once_flag pfm_once;
int pfm_status = PFM_SUCCESS;

}  // namespace

Result<EventCatalog> EventCatalog::create(const std::filesystem::path& proc_root,
                                          const std::filesystem::path& sys_root) {
    std::call_once(pfm_once, [] { pfm_status = pfm_initialize(); });
    if (pfm_status != PFM_SUCCESS) {
        return fail(Status::NoPmu,
                    fmt::format("libpfm4 failed to start: {}", pfm_strerror(pfm_status)));
    }
    EventCatalog c;
    c.processor_ = read_processor(proc_root, sys_root);
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
        c.pmus_.push_back(std::move(pmu));
    }
    PmuInfo ppc;
    ppc.name = kPpc750Pmu;
    ppc.description = "PowerPC 750 (RAD750) performance monitor";
    ppc.counters = kPpc750Counters;
    ppc.counter_width = kPpc750CounterWidth;
    ppc.events = ppc750_events().size();
    ppc.source = "built-in";
    if (auto here = ppc750_counts_on(c.processor_); !here) ppc.unavailable = here.error().message;
    c.pmus_.push_back(std::move(ppc));
    return c;
}

Result<void> EventCatalog::countable(const EventSpec& event) const {
    const PmuInfo* pmu = find_pmu(event.counter_pmu.empty() ? event.pmu : event.counter_pmu);
    if (pmu == nullptr || pmu->unavailable.empty()) return {};
    return fail(Status::NoPmu, fmt::format("{}: {}", event.name, pmu->unavailable));
}

const PmuInfo* EventCatalog::find_pmu(std::string_view name) const {
    auto it = std::ranges::find_if(pmus_, [&](const PmuInfo& p) { return iequals(p.name, name); });
    return it == pmus_.end() ? nullptr : &*it;
}

CounterMask EventCatalog::core_counters() const {
    auto it = std::ranges::find_if(pmus_, [](const PmuInfo& p) { return p.core; });
    return first_counters(it != pmus_.end() && it->counters > 0 ? it->counters
                                                                : kUnknownCoreCounters);
}

Result<EventSpec> EventCatalog::resolve(std::string_view name) const {
    if (name.empty()) return fail(Status::BadArg, "an empty event name");
    auto sep = name.find(kSeparator);
    if (sep != std::string_view::npos) {
        std::string_view pmu = name.substr(0, sep);
        std::string_view rest = name.substr(sep + kSeparator.size());
        auto colon = rest.find(':');
        std::string_view event = rest.substr(0, colon);
        std::string_view mods =
            colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        if (iequals(pmu, kPpc750Pmu)) return resolve_ppc750(event, mods, name);
        if (const PmuInfo* p = find_pmu(pmu); p != nullptr && p->core && parse_raw(event)) {
            return resolve_raw(*p, event, mods, name);
        }
    }
    return resolve_libpfm(name);
}

Result<EventSpec> EventCatalog::resolve_ppc750(std::string_view event, std::string_view mods,
                                               std::string_view name) const {
    EventSpec spec;
    spec.name = name;
    spec.pmu = kPpc750Pmu;
    spec.counter_pmu = kPpc750Pmu;
    spec.type = PERF_TYPE_RAW;
    spec.counter_width = kPpc750CounterWidth;
    const Ppc750Event* e = nullptr;
    unsigned threshold = 0;
    if (auto raw = parse_raw(event)) {
        auto decoded = decode_ppc750_raw(*raw);
        if (!decoded) {
            return fail(Status::BadArg, fmt::format("{}: {}", name, decoded.error().message));
        }
        auto m = parse_modifiers(mods, name, false);
        if (!m) return std::unexpected(m.error());
        apply(*m, spec);
        e = decoded->event;
        spec.config = *raw;
        spec.counters = decoded->counters;
        spec.canonical = fmt::format("ppc750::r{:x}", *raw);
        if (e != nullptr) {
            spec.description = e->description;
            spec.pinned = e->pinned;
        }
        return spec;
    }
    e = find_ppc750_event(event);
    if (e == nullptr) return std::unexpected(unknown_event(name));
    auto m = parse_modifiers(mods, name, e->uses_threshold);
    if (!m) return std::unexpected(m.error());
    apply(*m, spec);
    threshold = m->threshold.value_or(0);
    spec.canonical = fmt::format("ppc750::{}", e->name);
    spec.description = e->description;
    spec.config = ppc750_raw_code(*e, threshold);
    spec.counters = e->counters;
    spec.pinned = e->pinned;
    return spec;
}

Result<EventSpec> EventCatalog::resolve_raw(const PmuInfo& pmu, std::string_view hex,
                                            std::string_view mods, std::string_view name) const {
    auto m = parse_modifiers(mods, name, false);
    if (!m) return std::unexpected(m.error());
    EventSpec spec;
    spec.name = name;
    spec.canonical = fmt::format("{}::{}", pmu.name, hex);
    spec.pmu = pmu.name;
    spec.counter_pmu = pmu.name;
    spec.description = "raw event code";
    spec.type = PERF_TYPE_RAW;
    spec.config = *parse_raw(hex);
    spec.counters = first_counters(pmu.counters);
    apply(*m, spec);
    return spec;
}

Result<EventSpec> EventCatalog::resolve_libpfm(std::string_view name) const {
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
    if (r == PFM_ERR_NOTFOUND) return std::unexpected(unknown_event(name));
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
    spec.type = attr.type;
    spec.config = attr.config;
    spec.config1 = attr.config1;
    spec.config2 = attr.config2;
    spec.exclude_user = attr.exclude_user;
    spec.exclude_kernel = attr.exclude_kernel;
    spec.exclude_hv = attr.exclude_hv;
    switch (attr.type) {
        case PERF_TYPE_SOFTWARE:
        case PERF_TYPE_TRACEPOINT:
        case PERF_TYPE_BREAKPOINT:
            break;  // no counter
        case PERF_TYPE_HARDWARE:
        case PERF_TYPE_HW_CACHE: {
            spec.counters = core_counters();
            auto core = std::ranges::find_if(pmus_, [](const PmuInfo& p) { return p.core; });
            spec.counter_pmu = core != pmus_.end() ? core->name : "cpu";
            spec.pinned =
                attr.type == PERF_TYPE_HARDWARE && (attr.config == PERF_COUNT_HW_CPU_CYCLES ||
                                                    attr.config == PERF_COUNT_HW_INSTRUCTIONS);
            break;
        }
        default:
            spec.counter_pmu = spec.pmu;
            if (const PmuInfo* p = find_pmu(spec.pmu); p != nullptr && p->counters > 0) {
                spec.counters = first_counters(p->counters);
            } else {
                spec.counters = core_counters();
            }
            break;
    }
    return spec;
}

Result<std::vector<EventInfo>> EventCatalog::list(std::string_view pmu) const {
    if (!pmu.empty() && find_pmu(pmu) == nullptr) {
        std::vector<std::string> names;
        for (const auto& p : pmus_) names.push_back(p.name);
        return fail(Status::NoEvent,
                    fmt::format("unknown PMU '{}' (known here: {})", pmu, fmt::join(names, ", ")));
    }
    std::vector<EventInfo> out;
    for (const auto& p : pmus_) {
        if (!pmu.empty() && !iequals(p.name, pmu)) continue;
        if (p.source == "built-in") {
            for (const auto& e : ppc750_events()) {
                out.push_back({fmt::format("{}::{}", p.name, e.name), std::string(e.description),
                               p.name, e.counters, e.pinned});
            }
            continue;
        }
        for (int id = PFM_PMU_NONE; id < PFM_PMU_MAX; ++id) {
            pfm_pmu_info_t info{};
            info.size = sizeof info;
            if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(id), &info) != PFM_SUCCESS ||
                p.name != info.name)
                continue;
            for (int i = info.first_event; i != -1; i = pfm_get_event_next(i)) {
                pfm_event_info_t e{};
                e.size = sizeof e;
                if (pfm_get_event_info(i, PFM_OS_PERF_EVENT_EXT, &e) != PFM_SUCCESS) continue;
                EventInfo ev;
                ev.name = fmt::format("{}::{}", p.name, e.name);
                ev.description = e.desc != nullptr ? e.desc : "";
                ev.pmu = p.name;
                // Resolving gives the counters and the pinned flag as counting will see them.
                if (auto spec = resolve_libpfm(ev.name)) {
                    ev.counters = spec->counters;
                    ev.pinned = spec->pinned;
                }
                out.push_back(std::move(ev));
            }
        }
    }
    return out;
}

Error EventCatalog::unknown_event(std::string_view name) const {
    auto near = closest(name);
    return Error{Status::NoEvent,
                 fmt::format("unknown event '{}'{}{}", name, near.empty() ? "" : "; did you mean ",
                             fmt::join(near, ", "))};
}

std::string counter_name(std::string_view pmu, int counter) {
    return pmu == kPpc750Pmu ? std::string(ppc750_counter_name(counter))
                             : fmt::format("counter {}", counter + 1);
}

std::vector<std::string> EventCatalog::closest(std::string_view name, std::size_t n) const {
    // Compare like with like: a name without a PMU against the event part only.
    const bool qualified = name.find(kSeparator) != std::string_view::npos;
    std::string_view bare =
        name.substr(0, name.find(':', qualified ? name.find(kSeparator) + 2 : 0));
    std::vector<std::pair<std::size_t, std::string>> scored;
    auto all = list();
    if (!all) return {};
    for (auto& e : *all) {
        std::string_view candidate = e.name;
        if (!qualified) candidate = candidate.substr(candidate.find(kSeparator) + 2);
        scored.emplace_back(edit_distance(bare, candidate), std::move(e.name));
    }
    std::ranges::stable_sort(scored, {}, &std::pair<std::size_t, std::string>::first);
    std::vector<std::string> out;
    for (auto& [d, s] : scored) {
        if (out.size() == n || d > std::max<std::size_t>(3, bare.size() / 2)) break;
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace monitor::perf
