// Event names to EventSpecs: libpfm4's tables for every PMU it detects (including the kernel's
// generic `perf::` events, the software ones of which count on any machine), the built-in
// `ppc750::` table, and raw codes `PMU::rHEX`. Modifiers: `:u` (user only), `:k` (kernel only),
// and for ppc750 `:threshold=N`.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/event_spec.hpp"
#include "monitor/perf/processor.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

// A PMU as counting sees it (seeds' PAL_PERF_MON_INFO / the Query of the OSF/1 pfm device).
struct PmuInfo {
    std::string name;         // "perf", "ppc750", "amd64_fam19h_zen3"
    std::string description;  // "perf_events generic PMU"
    int counters = 0;         // general-purpose counters; 0: its events take none (software)
    int fixed_counters = 0;
    int counter_width = 64;  // bits of one hardware counter (what the kernel folds into 64)
    std::size_t events = 0;
    std::string source;  // "libpfm4" or "built-in"
    bool core = false;   // the processor's own PMU
    // Why its events cannot count on this machine (a built-in table for another processor);
    // empty when they can, as far as anything but opening them can tell.
    std::string unavailable;
};

struct EventInfo {
    std::string name;  // "perf::PERF_COUNT_SW_TASK_CLOCK", "ppc750::L1_ICACHE_MISSES"
    std::string description;
    std::string pmu;
    CounterMask counters = 0;
    bool pinned = false;
};

// How messages name counter `counter` (0-based) of `pmu`: "PMC2" on ppc750, "counter 3" else.
std::string counter_name(std::string_view pmu, int counter);

class EventCatalog {
  public:
    // Initializes libpfm4 (once per process). Fails only when libpfm4 cannot start; the
    // built-in table is always there. The processor, for the built-in tables' processor
    // check, is read from these roots (tests point them at a described machine).
    static Result<EventCatalog> create(const std::filesystem::path& proc_root = "/proc",
                                       const std::filesystem::path& sys_root = "/sys");

    // The PMUs libpfm4 detects on this machine, then ppc750.
    const std::vector<PmuInfo>& pmus() const { return pmus_; }
    const PmuInfo* find_pmu(std::string_view name) const;

    // NOEVENT naming the closest known names for an unknown event; BADARG for a known event
    // with a bad modifier or a raw code no counter can hold. Events of a PMU that cannot count
    // here resolve too (for listing and planning); countable() says whether they may open.
    Result<EventSpec> resolve(std::string_view name) const;

    // Whether `event` may be opened on this machine: NOPMU naming the event, the processor
    // found and what would count instead for an event of a built-in table that is not this
    // processor's (a ppc750 code on an x86 or a 7450, or on a 750 without a PMU driver).
    Result<void> countable(const EventSpec& event) const;

    // The processor the catalog was made for.
    const Processor& processor() const { return processor_; }

    // The events of one PMU, or of all of them when `pmu` is empty. NOEVENT for an unknown PMU.
    Result<std::vector<EventInfo>> list(std::string_view pmu = {}) const;

    // Up to `n` known event names closest to `name` (edit distance, case-insensitive),
    // best first.
    std::vector<std::string> closest(std::string_view name, std::size_t n = 3) const;

  private:
    EventCatalog() = default;
    Result<EventSpec> resolve_ppc750(std::string_view event, std::string_view modifiers,
                                     std::string_view name) const;
    Result<EventSpec> resolve_libpfm(std::string_view name) const;
    Result<EventSpec> resolve_raw(const PmuInfo& pmu, std::string_view hex,
                                  std::string_view modifiers, std::string_view name) const;
    // NOEVENT for `name`, with the closest known names.
    Error unknown_event(std::string_view name) const;
    // The counters of the processor's PMU, for the kernel's generic hardware events.
    CounterMask core_counters() const;

    std::vector<PmuInfo> pmus_;
    Processor processor_;
};

}  // namespace monitor::perf
