// The PowerPC 750 performance-monitor events (the RAD750's PMU), which libpfm4 does not have:
// every select of PMC1-PMC4, named in libpfm4's style, with the counters that can count it and
// its raw code in the layout of Linux's mpc7450 PMU driver (arch/powerpc/perf/mpc7450-pmu.c):
//
//   bits 0-6    PMCSEL, the select value
//   bits 8-10   PMC number 1-4; 0 = any counter (only for the selects 0-4 common to all)
//   bits 12-17  THRESHOLD (for PMC1 select 0x0A)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "monitor/perf/event_spec.hpp"
#include "monitor/perf/processor.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

inline constexpr std::string_view kPpc750Pmu = "ppc750";
inline constexpr int kPpc750Counters = 4;
// 32-bit PMCs: the most significant bit is the overflow bit, the count goes on through it.
inline constexpr int kPpc750CounterWidth = 32;
inline constexpr int kPpc750MaxThreshold = 63;

struct Ppc750Event {
    std::string_view name;         // without the "ppc750::" prefix: "L1_ICACHE_MISSES"
    std::string_view description;  // one short sentence
    std::uint8_t select = 0;       // PMCSEL
    // The counters that can count it: 0xF for the common selects, one bit otherwise
    // (bit 0 = PMC1).
    CounterMask counters = 0;
    bool uses_threshold = false;       // PMC1 0x0A: MMCR0[THRESHOLD] applies
    bool pinned = false;               // cycles and instructions completed
    Measure measure = Measure::Other;  // what the derived metrics take it for
};

// Every event, common selects first, then PMC1, PMC2, PMC3, PMC4 in select order.
std::span<const Ppc750Event> ppc750_events();

// By name, case-insensitive, without the PMU prefix; nullptr when unknown.
const Ppc750Event* find_ppc750_event(std::string_view name);

// The raw code of an event; `threshold` (0-63) only for events that use it.
std::uint64_t ppc750_raw_code(const Ppc750Event& event, unsigned threshold = 0);

// What a raw code means: the event (nullptr for none) and the counters that can count it.
struct Ppc750Raw {
    const Ppc750Event* event = nullptr;
    CounterMask counters = 0;
    unsigned threshold = 0;
};
// BADARG with the reason for a code that no 750 counter can count: a reserved select, a PMC
// number above 4, PMC 0 with a counter-specific select, bits outside the layout.
Result<Ppc750Raw> decode_ppc750_raw(std::uint64_t config);

// "PMC1", ..., "PMC4" for counter 0-3.
std::string_view ppc750_counter_name(int counter);

// Whether a processor version register is a 750's: version 0x0008 (740/750, 745/755, 750CX,
// 750CXe), 0x7000 (750FX) or 0x7002 (750GX), as Linux's cputable names them. The 7400/7410
// (0x000C, 0x800C) and the 7450 family (0x8000-0x8004) have other PMUs.
bool is_ppc750_pvr(std::uint32_t pvr);

// Whether the table's codes count on `p`: a 750 whose kernel registered a core PMU driver
// for it. Elsewhere a raw code would count whatever that number means to another PMU, or
// fail to open: NOPMU saying which processor this is and what counts instead.
Result<void> ppc750_counts_on(const Processor& p);

}  // namespace monitor::perf
