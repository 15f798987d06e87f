// Event lists as users write them (names, PMUs, modifiers, braces, raw codes, breakpoints
// mem:ADDR/LEN:rwx and mem:SYMBOL+OFF), and profile address ranges: parsed, every name resolved
// through the catalog of this machine's PMU modules, and a plan made of the list when every
// name resolves.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/protocol/profile_messages.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const auto catalog = monitor::perf::EventCatalog::create();
    if (!catalog) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)monitor::protocol::parse_address_range(text);
    auto events = monitor::perf::parse_event_list(text);
    if (!events) return 0;
    bool all = true;
    for (const auto& e : *events) {
        auto spec = catalog->resolve(e.name);
        if (spec) (void)catalog->countable(*spec);
        all = all && spec.has_value();
    }
    if (all && events->size() <= 64) {
        monitor::perf::SessionOptions options;
        options.events = *events;
        (void)monitor::perf::make_plan(*catalog, options);
    }
    return 0;
}
