#include "monitor/perf/ppc750_pmu.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>

#include "monitor/perf/ppc750_events.hpp"

namespace monitor::perf {
namespace {

class Ppc750Pmu final : public PmuModule {
  public:
    std::vector<PmuInfo> pmus() const override;
    Result<EventSpec> resolve(const EventName& name) const override;
    void list(std::string_view pmu, std::vector<EventInfo>& out) const override;
    std::string counter_name(std::string_view, int counter) const override {
        return std::string(ppc750_counter_name(counter));
    }
    Result<void> counts_on(const Processor& processor) const override {
        return ppc750_counts_on(processor);
    }
};

std::vector<PmuInfo> Ppc750Pmu::pmus() const {
    PmuInfo ppc;
    ppc.name = kPpc750Pmu;
    ppc.description = "PowerPC 750 (RAD750) performance monitor";
    ppc.counters = kPpc750Counters;
    ppc.counter_width = kPpc750CounterWidth;
    ppc.events = ppc750_events().size();
    ppc.source = kBuiltInSource;
    return {std::move(ppc)};
}

// What the table says of `e`, or of no event (a raw code with a common select on any
// counter names one; every valid code does).
void describe(const Ppc750Event* e, EventSpec& spec) {
    if (e == nullptr) return;
    spec.description = e->description;
    spec.pinned = e->pinned;
    spec.measure = e->measure;
}

Result<EventSpec> Ppc750Pmu::resolve(const EventName& name) const {
    EventSpec spec;
    spec.name = name.full;
    spec.pmu = kPpc750Pmu;
    spec.counter_pmu = kPpc750Pmu;
    spec.type = PERF_TYPE_RAW;
    spec.counter_width = kPpc750CounterWidth;
    spec.per_counter_selects = true;
    if (auto raw = parse_raw_code(name.event)) {
        auto decoded = decode_ppc750_raw(*raw);
        if (!decoded) {
            return fail(Status::BadArg, fmt::format("{}: {}", name.full, decoded.error().message));
        }
        auto m = parse_modifiers(name.modifiers, name.full);
        if (!m) return std::unexpected(m.error());
        m->apply_to(spec);
        spec.config = *raw;
        spec.counters = decoded->counters;
        spec.canonical = fmt::format("{}::r{:x}", kPpc750Pmu, *raw);
        describe(decoded->event, spec);
        return spec;
    }
    const Ppc750Event* e = find_ppc750_event(name.event);
    if (e == nullptr) {
        return fail(Status::NoEvent,
                    fmt::format("the {} table has no event '{}'", kPpc750Pmu, name.event));
    }
    std::optional<NumberModifier> threshold;
    if (e->uses_threshold) {
        threshold = NumberModifier{"threshold", static_cast<unsigned>(kPpc750MaxThreshold)};
    }
    auto m = parse_modifiers(name.modifiers, name.full, threshold);
    if (!m) return std::unexpected(m.error());
    m->apply_to(spec);
    spec.config = ppc750_raw_code(*e, m->number.value_or(0));
    // The threshold counted with, also when none was given (0): the name says what was granted.
    auto granted = decode_ppc750_raw(spec.config);
    spec.canonical = e->uses_threshold && granted ? fmt::format("{}::{}:threshold={}", kPpc750Pmu,
                                                                e->name, granted->threshold)
                                                  : fmt::format("{}::{}", kPpc750Pmu, e->name);
    spec.counters = e->counters;
    describe(e, spec);
    return spec;
}

void Ppc750Pmu::list(std::string_view, std::vector<EventInfo>& out) const {
    for (const auto& e : ppc750_events()) {
        EventInfo ev;
        ev.name = fmt::format("{}::{}", kPpc750Pmu, e.name);
        ev.description = e.description;
        ev.pmu = kPpc750Pmu;
        ev.counters = e.counters;
        ev.pinned = e.pinned;
        out.push_back(std::move(ev));
    }
}

}  // namespace

Result<std::unique_ptr<PmuModule>> make_ppc750_pmu() {
    return std::make_unique<Ppc750Pmu>();
}

}  // namespace monitor::perf
