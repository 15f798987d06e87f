#include "monitor/perf/event_catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <mutex>

#include "monitor/perf/sysfs_pmus.hpp"

namespace monitor::perf {
namespace {

std::string lowered(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// How many times each kind of character occurs in a lower-case text: the 26 letters, the digits
// in 4 kinds, '_', and everything else. An edit changes one count, or two of one kind each, by
// one: two texts are at least as many edits apart as the larger of the sums of the counts one
// has more of and of those the other has more of.
using CharCounts = std::array<std::uint16_t, 32>;

CharCounts char_counts(std::string_view lower) {
    CharCounts n{};
    for (const char c : lower) {
        std::size_t kind = 31;
        if (c >= 'a' && c <= 'z') {
            kind = static_cast<std::size_t>(c - 'a');
        } else if (c >= '0' && c <= '9') {
            kind = 26 + static_cast<std::size_t>(c - '0') % 4;
        } else if (c == '_') {
            kind = 30;
        }
        ++n[kind];
    }
    return n;
}

std::size_t fewest_edits(const CharCounts& a, const CharCounts& b) {
    std::size_t more = 0;
    std::size_t fewer = 0;
    for (std::size_t k = 0; k < a.size(); ++k) {
        if (a[k] > b[k]) {
            more += a[k] - b[k];
        } else {
            fewer += b[k] - a[k];
        }
    }
    return std::max(more, fewer);
}

// The edit distance between a and b when it is at most `limit`; limit + 1 when it is more.
// Only the cells within `limit` of the diagonal are computed (no path through the others is
// that short), and the comparison ends at the first row whose cells all exceed the limit.
// `rows` is scratch space, reused from one call to the next.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit,
                          std::vector<std::size_t>& rows) {
    const std::size_t n = a.size();
    const std::size_t m = b.size();
    const std::size_t over = limit + 1;
    if ((n > m ? n - m : m - n) > limit) return over;
    rows.resize(2 * (m + 1));
    std::size_t* prev = rows.data();
    std::size_t* cur = prev + m + 1;
    for (std::size_t j = 0; j <= m; ++j) prev[j] = std::min(j, over);
    for (std::size_t i = 1; i <= n; ++i) {
        const std::size_t lo = i > limit ? i - limit : 1;
        const std::size_t hi = std::min(m, i + limit);
        cur[lo - 1] = lo == 1 ? std::min(i, over) : over;
        std::size_t lowest = cur[lo - 1];
        for (std::size_t j = lo; j <= hi; ++j) {
            std::size_t v = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            if (over < v) v = over;
            cur[j] = v;
            if (v < lowest) lowest = v;
        }
        if (hi < m) cur[hi + 1] = over;   // what the next row reads beyond this row's band
        if (lowest > limit) return over;  // the distance only grows from here
        std::swap(prev, cur);
    }
    return prev[m];
}

}  // namespace

struct EventCatalog::EventNames {
    // An event's name as listed, in lower case, where its event part starts (after "PMU::",
    // else 0), and the characters of the whole and of that part: most names are further from
    // a query than the limit by these alone.
    struct Known {
        std::string name;
        std::string lower;
        std::size_t event_part = 0;
        CharCounts counts{};
        CharCounts event_counts{};
    };
    std::once_flag once;
    std::vector<Known> names;
};

Result<EventCatalog> EventCatalog::create(const std::filesystem::path& proc_root,
                                          const std::filesystem::path& sys_root) {
    EventCatalog c;
    c.names_ = std::make_shared<EventNames>();
    c.processor_ = read_processor(proc_root, sys_root);
    for (PmuFactory make : pmu_modules()) {
        auto module = make();
        if (!module) return std::unexpected(module.error());
        c.add(std::move(*module));
    }
    // perf's own syntax (PMU/TERMS/, rHEX) last: its events take the counters of the core PMU
    // the other modules found.
    CoreCounters core;
    if (auto it = std::ranges::find_if(c.pmus_, [](const PmuInfo& p) { return p.core; });
        it != c.pmus_.end()) {
        core = {it->name, it->counters};
    }
    c.add(make_sysfs_pmus(sys_root, std::move(core)));
    return c;
}

EventCatalog EventCatalog::of_modules(std::vector<std::shared_ptr<const PmuModule>> modules,
                                      Processor processor) {
    EventCatalog c;
    c.names_ = std::make_shared<EventNames>();
    c.processor_ = std::move(processor);
    for (auto& m : modules) c.add(std::move(m));
    return c;
}

void EventCatalog::add(std::shared_ptr<const PmuModule> module) {
    auto here = module->counts_on(processor_);
    for (auto& pmu : module->pmus()) {
        if (!here) pmu.unavailable = here.error().message;
        pmu.note = module->note(pmu);
        pmus_.push_back(std::move(pmu));
        pmu_modules_.push_back(module);
    }
    modules_.push_back(std::move(module));
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

std::shared_ptr<const PmuModule> EventCatalog::module_of(std::string_view name) const {
    const PmuInfo* pmu = find_pmu(name);
    return pmu == nullptr ? nullptr : pmu_modules_[static_cast<std::size_t>(pmu - pmus_.data())];
}

Result<EventSpec> EventCatalog::resolve(std::string_view name) const {
    if (name.empty()) return fail(Status::BadArg, "an empty event name");
    const EventName parts = split_event_name(name);
    auto owner = std::ranges::find_if(modules_, [&](const auto& m) { return m->owns_name(name); });
    std::shared_ptr<const PmuModule> module;
    if (owner != modules_.end()) {
        module = *owner;
    } else if (!parts.pmu.empty()) {
        module = module_of(parts.pmu);
    }
    if (module == nullptr) {
        auto other =
            std::ranges::find_if(modules_, [](const auto& m) { return m->resolves_other_names(); });
        if (other == modules_.end()) return std::unexpected(unknown_event(name));
        module = *other;
    }
    auto spec = module->resolve(parts);
    if (!spec && spec.error().status == Status::NoEvent && owner == modules_.end()) {
        return std::unexpected(unknown_event(name));
    }
    if (spec) spec->module = std::move(module);
    return spec;
}

Result<std::vector<EventInfo>> EventCatalog::list(std::string_view pmu) const {
    if (!pmu.empty() && find_pmu(pmu) == nullptr) {
        std::vector<std::string> names;
        names.reserve(pmus_.size());
        for (const auto& p : pmus_) names.push_back(p.name);
        return fail(Status::NoEvent,
                    fmt::format("unknown PMU '{}' (known here: {})", pmu, fmt::join(names, ", ")));
    }
    std::vector<EventInfo> out;
    for (std::size_t i = 0; i < pmus_.size(); ++i) {
        const PmuInfo& p = pmus_[i];
        if (!pmu.empty() && !iequals(p.name, pmu)) continue;
        const std::size_t first = out.size();
        pmu_modules_[i]->list(p.name, out);
        for (std::size_t e = first; e < out.size(); ++e) {
            for (int c = 0; c < std::numeric_limits<CounterMask>::digits; ++c) {
                if ((out[e].counters >> c & 1U) == 0) continue;
                out[e].counter_names.push_back(pmu_modules_[i]->counter_name(p.name, c));
            }
        }
    }
    return out;
}

std::string EventCatalog::counter_name(std::string_view pmu, int counter) const {
    if (auto module = module_of(pmu)) return module->counter_name(pmu, counter);
    return numbered_counter_name(counter);
}

Error EventCatalog::unknown_event(std::string_view name) const {
    auto near = closest(name);
    return Error{Status::NoEvent,
                 fmt::format("unknown event '{}'{}{}", name, near.empty() ? "" : "; did you mean ",
                             fmt::join(near, ", "))};
}

const EventCatalog::EventNames& EventCatalog::event_names() const {
    std::call_once(names_->once, [this] {
        auto all = list();
        if (!all) return;
        names_->names.reserve(all->size());
        for (auto& e : *all) {
            EventNames::Known k;
            const auto separator = e.name.find(kPmuSeparator);
            k.event_part = separator == std::string::npos ? 0 : separator + kPmuSeparator.size();
            k.lower = lowered(e.name);
            k.counts = char_counts(k.lower);
            k.event_counts = char_counts(std::string_view(k.lower).substr(k.event_part));
            k.name = std::move(e.name);
            names_->names.push_back(std::move(k));
        }
    });
    return *names_;
}

std::vector<std::string> EventCatalog::closest(std::string_view name, std::size_t n) const {
    // No event's name is near one this long, and comparing it with every name would take the
    // caller's time in proportion (a client's megabyte of name: seconds of the daemon's loop).
    if (name.size() > kLongestSuggestedName) return {};
    // Compare like with like: a name without a PMU against the event part only.
    const bool qualified = name.find(kPmuSeparator) != std::string_view::npos;
    std::string_view bare =
        name.substr(0, name.find(':', qualified ? name.find(kPmuSeparator) + 2 : 0));
    const std::string query = lowered(bare);
    const CharCounts query_counts = char_counts(query);
    // Names further than this are no suggestion.
    const std::size_t limit = std::max<std::size_t>(3, bare.size() / 2);
    const EventNames& known = event_names();
    std::vector<std::pair<std::size_t, std::string_view>> scored;
    std::vector<std::size_t> rows;
    for (const auto& k : known.names) {
        if (fewest_edits(query_counts, qualified ? k.counts : k.event_counts) > limit) continue;
        std::string_view candidate = k.lower;
        if (!qualified) candidate.remove_prefix(k.event_part);
        if (auto d = edit_distance(query, candidate, limit, rows); d <= limit) {
            scored.emplace_back(d, k.name);
        }
    }
    std::ranges::stable_sort(scored, {}, &std::pair<std::size_t, std::string_view>::first);
    std::vector<std::string> out;
    for (const auto& [d, s] : scored) {
        if (out.size() == n) break;
        out.emplace_back(s);
    }
    return out;
}

}  // namespace monitor::perf
