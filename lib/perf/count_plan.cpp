#include "monitor/perf/count_plan.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>

#include "monitor/perf/perf_event_syntax.hpp"
#include "monitor/perf/pmu.hpp"

namespace monitor::perf {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// The modes an event counts in, as one value: events of one set must agree on it.
unsigned mode_of(const EventSpec& e) {
    return (e.exclude_user ? 1U : 0U) | (e.exclude_kernel ? 2U : 0U) | (e.exclude_hv ? 4U : 0U);
}

}  // namespace

Result<std::vector<EventRequest>> parse_event_list(std::string_view list) {
    std::vector<EventRequest> out;
    int group = kNoGroup;
    int next_group = 0;
    std::size_t group_start = 0;
    std::string_view rest = list;
    while (true) {
        rest = trim(rest);
        bool opens = !rest.empty() && rest.front() == '{';
        if (opens) {
            if (group >= 0) {
                return fail(Status::BadArg,
                            fmt::format("event list '{}': groups cannot nest", list));
            }
            group = next_group++;
            group_start = out.size();
            rest = trim(rest.substr(1));
        }
        auto end = find_event_end(rest, ",}");
        std::string_view name = trim(rest.substr(0, end));
        if (name.empty()) {
            return fail(Status::BadArg,
                        fmt::format("event list '{}': an empty event name (write names "
                                    "separated by commas, a group in braces: a,{{b,c}})",
                                    list));
        }
        out.push_back({std::string(name), group});
        if (end == std::string_view::npos) break;
        if (rest[end] == '}') {
            if (group < 0) {
                return fail(Status::BadArg,
                            fmt::format("event list '{}': '}}' without '{{'", list));
            }
            if (out.size() - group_start < 1) {
                return fail(Status::BadArg, fmt::format("event list '{}': an empty group", list));
            }
            group = kNoGroup;
            rest = trim(rest.substr(end + 1));
            if (rest.empty()) break;
            if (rest.front() != ',') {
                return fail(Status::BadArg,
                            fmt::format("event list '{}': expected ',' after '}}'", list));
            }
            rest.remove_prefix(1);
            continue;
        }
        rest = rest.substr(end + 1);
    }
    if (group >= 0) {
        return fail(Status::BadArg, fmt::format("event list '{}': '{{' without '}}'", list));
    }
    return out;
}

namespace {

bool holds_while_open(const EventSpec& e) {
    return e.module != nullptr && e.module->holds_while_open();
}

// Whether the events of each module that holds something per event fit it (breakpoints: the
// machine's debug registers, which never take turns).
Result<void> fits_modules(const std::vector<EventSpec>& events) {
    std::vector<const PmuModule*> modules;
    for (const auto& e : events) {
        if (holds_while_open(e) && std::ranges::find(modules, e.module.get()) == modules.end()) {
            modules.push_back(e.module.get());
        }
    }
    std::vector<const EventSpec*> of_module;
    for (const PmuModule* m : modules) {
        of_module.clear();
        for (const auto& e : events) {
            if (e.module.get() == m) of_module.push_back(&e);
        }
        if (auto r = m->fits(of_module); !r) return r;
    }
    return {};
}

}  // namespace

bool shares_counters(const Plan& a, const Plan& b) {
    auto takes_counters = [](const Plan::Group& g) {
        return std::any_of(g.members.begin(), g.members.end(),
                           [](const Plan::Member& m) { return m.counter != kNoCounter; });
    };
    for (const auto& ga : a.kernel_groups) {
        if (!takes_counters(ga)) continue;
        for (const auto& gb : b.kernel_groups) {
            if (gb.pmu == ga.pmu && takes_counters(gb)) return true;
        }
    }
    return false;
}

Result<Plan> make_plan(const EventCatalog& catalog, const SessionOptions& options) {
    if (options.events.empty()) return fail(Status::BadArg, "no events to count");
    Plan plan;
    for (const auto& req : options.events) {
        auto spec = catalog.resolve(req.name);
        if (!spec) return std::unexpected(spec.error());
        // A budget gives the free-running events a counter too, except those that hold
        // something of their own while open (a breakpoint's debug register): they never take
        // turns.
        if (options.counter_budget > 0 && !holds_while_open(*spec)) {
            if (spec->counters == 0) {
                spec->counters = first_counters(options.counter_budget);
                spec->counter_pmu = spec->pmu;
            } else if ((spec->counters & first_counters(options.counter_budget)) == 0) {
                return fail(Status::BadArg,
                            fmt::format("{} cannot be counted with a budget of {} counter{}: "
                                        "the counters that can hold it are outside it",
                                        spec->name, options.counter_budget,
                                        options.counter_budget == 1 ? "" : "s"));
            } else {
                spec->counters &= first_counters(options.counter_budget);
            }
        }
        if (!options.no_kernel_addresses.empty() && spec->module != nullptr) {
            if (auto ok = spec->module->refuse_unprivileged(*spec, options.no_kernel_addresses);
                !ok) {
                return std::unexpected(ok.error());
            }
        }
        if (!options.user_only.empty() && !spec->exclude_kernel) {
            if (spec->exclude_user) {
                return fail(Status::Perm,
                            fmt::format("{} counts kernel mode only, and {}: count user mode "
                                        "(:u), or ask root",
                                        spec->name, options.user_only));
            }
            spec->exclude_kernel = spec->exclude_hv = true;
            spec->name += ":u";
        }
        plan.events.push_back(std::move(*spec));
        plan.requested_groups.push_back(req.group);
    }
    if (auto r = fits_modules(plan.events); !r) return std::unexpected(r.error());
    for (const auto& m : options.metrics) {
        if (m.events.size() != m.formula.events().size()) {
            return fail(Status::BadArg,
                        fmt::format("metric {} reads {} events, its formula {}", m.name,
                                    m.events.size(), m.formula.events().size()));
        }
        for (auto e : m.events) {
            if (e >= plan.events.size()) {
                return fail(Status::BadArg,
                            fmt::format("metric {} reads event {} of a session of {}", m.name,
                                        e + 1, plan.events.size()));
            }
        }
    }
    plan.metrics = options.metrics;

    // A group must live on one PMU: the kernel groups events of one PMU only (software
    // events, which count all the time anyway, excepted).
    std::map<int, std::string> group_pmu;
    std::map<int, std::size_t> group_modes;  // group -> its first counter event
    for (std::size_t i = 0; i < plan.events.size(); ++i) {
        const auto& e = plan.events[i];
        if (plan.requested_groups[i] == kNoGroup || e.counters == 0) continue;
        auto [it, fresh] = group_pmu.emplace(plan.requested_groups[i], e.counter_pmu);
        if (!fresh && it->second != e.counter_pmu) {
            return fail(Status::BadArg,
                        fmt::format("{} ({}) cannot be in one group with events of {}: a group "
                                    "counts on one PMU",
                                    e.name, e.counter_pmu, it->second));
        }
        auto [mods, first] = group_modes.emplace(plan.requested_groups[i], i);
        if (!first && mode_of(plan.events[mods->second]) != mode_of(e)) {
            return fail(Status::BadArg,
                        fmt::format("{} and {} cannot be in one group: the events of a group "
                                    "count in the same modes (give both the same :u or :k)",
                                    plan.events[mods->second].name, e.name));
        }
    }

    // Free-running events: the kernel's software events share one group, which one read
    // returns whole (they count all the time, so grouping them changes no count); any other
    // free-running event is a group of its own.
    std::optional<std::size_t> software_group;
    for (std::size_t i = 0; i < plan.events.size(); ++i) {
        if (plan.events[i].counters != 0) continue;
        const bool software = plan.events[i].type == PERF_TYPE_SOFTWARE;
        if (software && software_group) {
            plan.kernel_groups[*software_group].members.push_back({i, kNoCounter, {}});
            continue;
        }
        if (software) software_group = plan.kernel_groups.size();
        Plan::Group g;
        g.pmu = plan.events[i].pmu;
        g.members.push_back({i, kNoCounter, {}});
        plan.kernel_groups.push_back(std::move(g));
    }

    // The other events, scheduled PMU by PMU in order of first appearance.
    std::vector<std::string> pmus;
    for (const auto& e : plan.events) {
        if (e.counters != 0 && std::ranges::find(pmus, e.counter_pmu) == pmus.end()) {
            pmus.push_back(e.counter_pmu);
        }
    }
    for (const auto& pmu : pmus) {
        // The counters freeze per mode (the 750's FCS/FCP apply to all of them), so events that
        // count in different modes never share a set: each mode gets sets of its own, and
        // all the sets of the PMU take turns.
        std::vector<unsigned> modes;
        for (const auto& e : plan.events) {
            if (e.counters != 0 && e.counter_pmu == pmu &&
                std::ranges::find(modes, mode_of(e)) == modes.end()) {
                modes.push_back(mode_of(e));
            }
        }
        const std::size_t pmu_first_group = plan.kernel_groups.size();
        int pmu_sets = 0;
        for (unsigned mode : modes) {
            std::vector<std::size_t> index;
            std::vector<SchedulerEvent> request;
            for (std::size_t i = 0; i < plan.events.size(); ++i) {
                const auto& e = plan.events[i];
                if (e.counters == 0 || e.counter_pmu != pmu || mode_of(e) != mode) continue;
                index.push_back(i);
                request.push_back({e.name, e.counters, e.pinned, plan.requested_groups[i]});
            }
            int counters = 0;
            if (const PmuInfo* info = catalog.find_pmu(pmu);
                info != nullptr && info->counters > 0) {
                counters = info->counters;
            } else {
                for (const auto& r : request) {
                    counters = std::max(counters, static_cast<int>(std::bit_width(r.counters)));
                }
            }
            if (options.counter_budget > 0) counters = std::min(counters, options.counter_budget);
            if (options.counter_budget > 0 && counters == 0) counters = options.counter_budget;
            std::vector<std::string> names;
            names.reserve(static_cast<std::size_t>(counters));
            for (int c = 0; c < counters; ++c) {
                names.push_back(catalog.counter_name(pmu, c));
            }
            auto schedule = schedule_events(request, counters, names);
            if (!schedule) return std::unexpected(schedule.error());
            const int sets = static_cast<int>(schedule->sets.size());
            for (int s = 0; s < sets; ++s) {
                Plan::Group g;
                g.set = pmu_sets + s;
                g.pmu = pmu;
                for (const auto& p : schedule->sets[static_cast<std::size_t>(s)].events) {
                    g.members.push_back(
                        {index[p.event], p.counter, names[static_cast<std::size_t>(p.counter)]});
                }
                plan.kernel_groups.push_back(std::move(g));
            }
            pmu_sets += sets;
        }
        for (std::size_t g = pmu_first_group; g < plan.kernel_groups.size(); ++g) {
            plan.kernel_groups[g].pmu_sets = pmu_sets;
        }
        plan.slots = std::max(plan.slots, pmu_sets);
    }
    return plan;
}

namespace {

std::string over_budget(std::size_t most, std::string_view source) {
    return fmt::format("perf_event files, more than the {} allowed ({})", most, source);
}

}  // namespace

Result<void> FileBudget::check(std::size_t needed, std::string_view what) const {
    if (most == 0 || needed <= most) return {};
    return fail(Status::BadArg, fmt::format("{} opens {} {}: measure fewer events, CPUs or threads",
                                            what, needed, over_budget(most, source)));
}

bool FileBudget::refused(const Error& e) const {
    return most > 0 && e.status == Status::BadArg &&
           e.message.find(over_budget(most, source)) != std::string::npos;
}

}  // namespace monitor::perf
