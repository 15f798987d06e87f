// An event's name as written, taken apart for the PMU module that resolves it: the PMU, the
// event, the modifiers; and what the modules share in reading those parts (raw codes `rHEX`,
// the `:u` and `:k` modifiers, a number modifier such as the 750's `:threshold=N`).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "monitor/perf/event_spec.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

// "PMU::EVENT:MOD:MOD". The parts are views into the name, which must outlive them.
struct EventName {
    std::string_view full;       // as written, modifiers included
    std::string_view pmu;        // empty for a name without one ("cycles")
    std::string_view event;      // the part after "::", up to its first ':'
    std::string_view modifiers;  // after that ':', without it; empty for none
};

EventName split_event_name(std::string_view name);

// Whether two names are the same but for the case of their letters (PMU and event names).
bool iequals(std::string_view a, std::string_view b);

// "rHEX" -> the value; nullopt when `event` is not a raw code.
std::optional<std::uint64_t> parse_raw_code(std::string_view event);

// A modifier that takes a number from 0 to `max`, `:NAME=N`, which some events of a module
// accept (the 750's `:threshold=N`).
struct NumberModifier {
    std::string_view name;
    unsigned max = 0;
};

// `:u` counts user mode only, `:k` kernel mode only; both, or neither, count both.
struct Modifiers {
    bool user = false;
    bool kernel = false;
    std::optional<unsigned> number;  // the NumberModifier's value, when given

    // Sets the event's exclude_user and exclude_kernel.
    void apply_to(EventSpec& spec) const;
};

// The modifiers of event `name` (for messages); BADARG naming the modifiers it accepts for
// one it does not know, or for a number out of range.
Result<Modifiers> parse_modifiers(std::string_view modifiers, std::string_view name,
                                  std::optional<NumberModifier> number = std::nullopt);

}  // namespace monitor::perf
