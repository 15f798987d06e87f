// What the counting code needs to know about one event: how to open it (the perf_event_attr
// fields), which PMU it belongs to, and which counters can hold it.
#pragma once

#include <cstdint>
#include <string>

namespace monitor::perf {

// Bit i set: counter i can hold the event (counter 0 is the first one, PMC1 on a 750).
using CounterMask = std::uint32_t;

// The mask of counters 0 to n - 1 (all 32 for n >= 32, none for n <= 0).
constexpr CounterMask first_counters(int n) {
    return n >= 32 ? ~CounterMask{0} : n <= 0 ? CounterMask{0} : (CounterMask{1} << n) - 1;
}

struct EventSpec {
    // The name as requested, with its modifiers: "perf::TASK-CLOCK:u", "ppc750::L1_ICACHE_MISSES".
    std::string name;
    // The catalog's full name of the event, without modifiers: "perf::PERF_COUNT_SW_TASK_CLOCK".
    std::string canonical;
    std::string pmu;  // "perf", "ppc750", "amd64_fam19h_zen3", ...
    std::string description;

    // perf_event_attr fields.
    std::uint32_t type = 0;
    std::uint64_t config = 0;
    std::uint64_t config1 = 0;
    std::uint64_t config2 = 0;
    bool exclude_user = false;
    bool exclude_kernel = false;
    bool exclude_hv = false;

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
};

}  // namespace monitor::perf
