// An event's name as written, taken apart for the PMU module that resolves it: the PMU, the
// event, the modifiers; and what the modules share in reading those parts (raw codes `rHEX`,
// perf's modifiers `:u`, `:k`, `:h` and `:p`, a number modifier such as the 750's `:threshold=N`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "monitor/perf/event_spec.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

// Between a name's PMU and its event: "perf::TASK-CLOCK".
inline constexpr std::string_view kPmuSeparator = "::";

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

// A number as perf and the kernel's files write them: decimal, or hexadecimal after 0x;
// nullopt for anything else (empty, other characters, more than 64 bits). Addresses, lengths,
// terms' values.
std::optional<std::uint64_t> parse_number(std::string_view text);

// "rHEX" -> the value; nullopt when `event` is not a raw code.
std::optional<std::uint64_t> parse_raw_code(std::string_view event);

// A modifier that takes a number from 0 to `max`, `:NAME=N`, which some events of a module
// accept (the 750's `:threshold=N`).
struct NumberModifier {
    std::string_view name;
    unsigned max = 0;
};

// The modifiers perf takes after an event, as perf reads them: `:u` counts user mode, `:k`
// kernel mode, `:h` the hypervisor; any of them, alone or together (`:uk`, `:ku`, `:u:k`),
// counts those modes only, none counts all three. `:p`, `:pp`, `:ppp` ask for precise events
// (perf_event_attr's precise_ip 1 to 3), where the event's PMU takes them.
struct Modifiers {
    bool user = false;
    bool kernel = false;
    bool hypervisor = false;
    unsigned precise = 0;
    std::optional<unsigned> number;  // the NumberModifier's value, when given

    // Sets the event's exclude_user, exclude_kernel, exclude_hv and precise_ip.
    void apply_to(EventSpec& spec) const;
};

// How precise the events of a PMU may be: up to `max` p's; `why_not` says why no more (or
// none), for the message ("PMU 'software' takes no precise events: ...").
struct PreciseLimit {
    unsigned max = 0;
    std::string why_not;
};

// The modifiers of event `name` (for messages); BADARG naming the modifiers it accepts for
// one it does not know, for a number out of range, or for more p's than `precise` allows.
Result<Modifiers> parse_modifiers(std::string_view modifiers, std::string_view name,
                                  std::optional<NumberModifier> number = std::nullopt,
                                  const PreciseLimit& precise = {});

}  // namespace monitor::perf
