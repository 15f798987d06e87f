// What the counting code needs to know about one event: how to open it (the perf_event_attr
// fields), which PMU it belongs to, and which counters can hold it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace monitor::perf {

class PmuModule;

// Bit i set: counter i can hold the event (counter 0 is the first one, PMC1 on a 750).
using CounterMask = std::uint32_t;

// The mask of counters 0 to n - 1 (all 32 for n >= 32, none for n <= 0).
constexpr CounterMask first_counters(int n) {
    return n >= 32 ? ~CounterMask{0} : n <= 0 ? CounterMask{0} : (CounterMask{1} << n) - 1;
}

// What an event measures, as far as the derived metrics care: the PMU module that resolves an
// event says it (a built-in table in its rows, libpfm4's module from the kernel's generic
// event), so that metrics never decode another PMU's codes.
enum class Measure {
    Other,
    Cycles,
    Instructions,
    CacheReferences,
    CacheMisses,
    Branches,
    BranchMisses,
    TaskClock,
    L1IcacheMisses,
    InstructionFetches,  // instruction addresses delivered to the memory subsystem
    L1DcacheMisses,
    ItlbMisses,
    DtlbMisses,
    L2InstructionMisses,
    L2DataMisses,
    // A table's own mispredicted-branch event, without a branch count beside it; the kernel's
    // generic one is BranchMisses.
    MispredictedBranches,
};

struct EventSpec {
    // The name as requested, with its modifiers: "perf::TASK-CLOCK:u", "cycles".
    std::string name;
    // The catalog's full name of the event, without modifiers: "perf::PERF_COUNT_SW_TASK_CLOCK".
    std::string canonical;
    std::string pmu;  // "perf", "amd64_fam19h_zen3", a built-in table's, ...
    std::string description;

    // perf_event_attr fields.
    std::uint32_t type = 0;
    std::uint64_t config = 0;
    std::uint64_t config1 = 0;
    std::uint64_t config2 = 0;
    // A breakpoint's HW_BREAKPOINT_R|W|X; its address and length are config1 and config2
    // (bp_addr and bp_len share their places in perf_event_attr).
    std::uint32_t bp_type = 0;
    // A breakpoint named by a symbol of its target ("mem:counter+8"): the symbol and the
    // offset from it. Its address (config1) is found when a session starts, where the target
    // is known (place_breakpoint).
    std::string bp_symbol;
    std::uint64_t bp_offset = 0;
    bool exclude_user = false;
    bool exclude_kernel = false;
    bool exclude_hv = false;
    // perf_event_attr's precise_ip, 0 to 3 (perf's :p, :pp, :ppp).
    std::uint8_t precise_ip = 0;

    // The counters that can hold the event; 0 for an event that takes no counter (the
    // kernel's software events), which then counts all the time.
    CounterMask counters = 0;
    // The PMU whose counters those are: `pmu` itself, except for the kernel's generic
    // hardware events (perf::CYCLES), which live on the processor's PMU. Events of different
    // counter PMUs never compete for counters and are never in one kernel group.
    std::string counter_pmu;
    // Kept in every counter set when events are multiplexed (cycles, instructions), so that
    // every set has them for ratios.
    bool pinned = false;
    // Bits of the hardware counter (a 750's PMCs are 32 bits); 64 for the kernel's counts.
    int counter_width = 64;
    Measure measure = Measure::Other;
    // Each counter of the PMU has a list of events of its own (selects), and an event is one
    // counter's select or a select common to all, as on the 750's PMC1-PMC4; not one list
    // that every counter takes. The MON C API's four sets are then the PMU's counters, and it
    // counts such events in one kernel group, all on the counters at once.
    bool per_counter_selects = false;
    // The module that resolved it (EventCatalog::resolve), which the session and the counter
    // device ask what only its PMU knows: whether a set of its events fits, where one is
    // placed for a target, why the kernel refused one. Null for an event described by hand
    // (tests, probes): the generic answers then.
    std::shared_ptr<const PmuModule> module;
};

// The fields an event's description and the kernel's perf_event_attr share, copied from
// `from` to `to` in either direction: the one list of them (a libpfm4 encoding read into an
// EventSpec, an EventSpec opened as an attr).
template <typename To, typename From>
void copy_encoding(To& to, const From& from) {
    to.type = from.type;
    to.config = from.config;
    to.config1 = from.config1;
    to.config2 = from.config2;
    to.bp_type = from.bp_type;
    to.exclude_user = from.exclude_user;
    to.exclude_kernel = from.exclude_kernel;
    to.exclude_hv = from.exclude_hv;
    to.precise_ip = from.precise_ip;
}

}  // namespace monitor::perf
