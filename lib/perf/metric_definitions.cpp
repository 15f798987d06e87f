#include "monitor/perf/metric_definitions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace monitor::perf {
namespace {

bool same_words(std::string_view a, std::string_view b) {
    return std::ranges::equal(a, b, [](char x, char y) {
        return std::tolower(static_cast<unsigned char>(x)) ==
               std::tolower(static_cast<unsigned char>(y));
    });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
        s.remove_prefix(1);
    }
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
        s.remove_suffix(1);
    }
    return s;
}

bool same_event(const EventSpec& a, const EventSpec& b) {
    return a.type == b.type && a.config == b.config && a.config1 == b.config1 &&
           a.config2 == b.config2 && a.bp_type == b.bp_type && a.bp_symbol == b.bp_symbol &&
           a.bp_offset == b.bp_offset && a.exclude_user == b.exclude_user &&
           a.exclude_kernel == b.exclude_kernel && a.exclude_hv == b.exclude_hv &&
           a.precise_ip == b.precise_ip && a.pmu == b.pmu;
}

}  // namespace

EventProbe opening_probe(CounterDevice& device) {
    return [&device](const EventSpec& event) -> std::optional<Error> {
        EventSpec user = event;
        user.exclude_kernel = user.exclude_hv = true;
        auto handle = device.open(user, OpenTarget{.cpu = -1, .pid = 0}, -1);
        if (handle) {
            device.close(*handle);
            return std::nullopt;
        }
        if (handle.error().status != Status::NoPmu && handle.error().status != Status::NoEvent) {
            return std::nullopt;
        }
        // "cycles on process 0: ..." names the probe's own thread: what matters is the event.
        Error e = handle.error();
        const std::string own = user.name + " on process 0";
        if (e.message.starts_with(own)) e.message.replace(0, own.size(), event.name);
        return e;
    };
}

std::optional<Error> cannot_count(const MetricDefinition& d, const EventCatalog& catalog,
                                  const EventProbe& probe) {
    for (const auto& name : d.formula.events()) {
        auto spec = catalog.resolve(name);
        if (!spec) return spec.error();
        if (auto ok = catalog.countable(*spec); !ok) return ok.error();
        if (probe) {
            if (auto refused = probe(*spec)) return refused;
        }
    }
    return std::nullopt;
}

Result<void> check_metric_name(std::string_view name, std::string_view what) {
    const bool ok = !name.empty() && name.size() <= 64 &&
                    std::islower(static_cast<unsigned char>(name[0])) != 0 &&
                    std::ranges::all_of(name, [](char c) {
                        return std::islower(static_cast<unsigned char>(c)) != 0 ||
                               std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '_';
                    });
    if (ok) return {};
    return fail(Status::BadArg,
                fmt::format("{} \"{}\": 1 to 64 lower-case letters, digits and '_', starting "
                            "with a letter",
                            what, name));
}

std::vector<std::string> metric_groups(std::span<const MetricDefinition> definitions) {
    std::vector<std::string> out;
    for (const auto& d : definitions) {
        for (const auto& g : d.groups) {
            if (std::ranges::find(out, g) == out.end()) out.push_back(g);
        }
    }
    return out;
}

Result<std::vector<const MetricDefinition*>> choose_metrics(
    std::span<const MetricDefinition> definitions, std::string_view names,
    const EventCatalog& catalog, const EventProbe& probe) {
    std::vector<const MetricDefinition*> chosen;
    auto taken = [&chosen](std::string_view metric) {
        return std::ranges::any_of(chosen, [&](const auto* d) { return d->name == metric; });
    };
    // The first definition of `metric` that can count here; else why the last one cannot.
    auto pick = [&](std::string_view metric) -> Result<const MetricDefinition*> {
        std::optional<Error> why;
        for (const auto& d : definitions) {
            if (d.name != metric) continue;
            why = cannot_count(d, catalog, probe);
            if (!why) return &d;
        }
        if (!why) return fail(Status::NoEvent, fmt::format("no metric {}", metric));
        return std::unexpected(*why);
    };
    std::size_t start = 0;
    for (;;) {
        const auto comma = names.find(',', start);
        const auto word = trim(names.substr(start, comma - start));
        if (word.empty()) {
            return fail(Status::BadArg,
                        fmt::format("metrics \"{}\": an empty name; give groups or metrics "
                                    "separated by commas",
                                    names));
        }
        std::vector<std::string_view> members;  // the metrics the word names, in file order
        for (const auto& d : definitions) {
            const bool in_group = std::ranges::any_of(
                d.groups, [&](const std::string& g) { return same_words(g, word); });
            if (in_group && std::ranges::find(members, d.name) == members.end()) {
                members.push_back(d.name);
            }
        }
        if (!members.empty()) {
            std::vector<std::string> left_out;
            std::size_t counted = 0;
            for (auto metric : members) {
                auto d = pick(metric);
                if (!d) {
                    left_out.push_back(fmt::format("{}: {}", metric, d.error().message));
                    continue;
                }
                ++counted;
                if (!taken(metric)) chosen.push_back(*d);
            }
            if (counted == 0) {
                return fail(Status::NoPmu,
                            fmt::format("metric group {}: none of its metrics can count here "
                                        "({})",
                                        word, fmt::join(left_out, "; ")));
            }
        } else if (std::ranges::any_of(definitions,
                                       [&](const auto& d) { return d.name == word; })) {
            auto d = pick(word);
            if (!d) {
                return fail(Status::NoPmu, fmt::format("metric {} cannot count here: {}", word,
                                                       d.error().message));
            }
            if (!taken(word)) chosen.push_back(*d);
        } else {
            const auto groups = metric_groups(definitions);
            return fail(
                Status::NoEvent,
                fmt::format("no metric or metric group \"{}\" (groups: {}; monctl "
                            "perf list --metrics lists the metrics)",
                            word,
                            groups.empty() ? "none" : fmt::format("{}", fmt::join(groups, ", "))));
        }
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return chosen;
}

Result<void> add_metrics(SessionOptions& options, std::span<const MetricDefinition* const> chosen,
                         const EventCatalog& catalog) {
    // The requests' events as resolved, for those asked under another name.
    std::vector<std::optional<EventSpec>> resolved;
    auto spec_of = [&](std::size_t i) -> const std::optional<EventSpec>& {
        if (resolved.size() <= i) resolved.resize(i + 1);
        if (!resolved[i]) {
            if (auto s = catalog.resolve(options.events[i].name)) resolved[i] = std::move(*s);
        }
        return resolved[i];
    };
    for (const auto* d : chosen) {
        SessionMetric m{d->name, d->description, d->formula, {}};
        for (const auto& name : d->formula.events()) {
            auto spec = catalog.resolve(name);
            if (!spec) {
                return fail(spec.error().status, fmt::format("metric {} ({}): {}", d->name,
                                                             d->where, spec.error().message));
            }
            std::optional<std::size_t> at;
            for (std::size_t i = 0; i < options.events.size() && !at; ++i) {
                if (options.events[i].name == name) at = i;
            }
            for (std::size_t i = 0; i < options.events.size() && !at; ++i) {
                if (const auto& s = spec_of(i); s && same_event(*s, *spec)) at = i;
            }
            if (!at) {
                at = options.events.size();
                options.events.push_back(EventRequest{name, kNoGroup});
            }
            m.events.push_back(*at);
        }
        options.metrics.push_back(std::move(m));
    }
    return {};
}

}  // namespace monitor::perf
