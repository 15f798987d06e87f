// Event names to EventSpecs, through the PMU modules (pmu.hpp): libpfm4's tables for every PMU
// it detects (including the kernel's generic `perf::` events, the software ones of which count
// on any machine) and raw codes `PMU::rHEX` of the core PMU, then the built-in tables. A name
// with a PMU goes to the module that lists that PMU; any other name to libpfm4's. perf's own
// syntax, `PMU/term=value,.../` and raw `rHEX`, goes to the sysfs module (sysfs_pmus.hpp),
// which reads the PMUs under the catalog's sys root. Modifiers: perf's `:u`, `:k`, `:h`, `:p`
// (perf_event_syntax.hpp, event_name.hpp), and those a module adds for its events.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/event_spec.hpp"
#include "monitor/perf/pmu.hpp"
#include "monitor/perf/processor.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

class EventCatalog {
  public:
    // The modules of pmu_modules(). Fails only when one cannot start (libpfm4); the built-in
    // tables are always there. The processor, for the modules' processor check, is read from
    // these roots (tests point them at a described machine).
    static Result<EventCatalog> create(const std::filesystem::path& proc_root = "/proc",
                                       const std::filesystem::path& sys_root = "/sys");
    // A catalog of these modules only, in this order, for `processor` (a test's own table).
    static EventCatalog of_modules(std::vector<std::shared_ptr<const PmuModule>> modules,
                                   Processor processor);

    // The PMUs of every module, in the modules' order: those libpfm4 detects on this machine,
    // then the built-in tables.
    const std::vector<PmuInfo>& pmus() const { return pmus_; }
    const PmuInfo* find_pmu(std::string_view name) const;

    // The event, with the module that resolved it (EventSpec::module). NOEVENT naming the
    // closest known names for an unknown event; BADARG for a known event with a bad modifier
    // or a raw code no counter can hold. Events of a PMU that cannot count
    // here resolve too (for listing and planning); countable() says whether they may open.
    Result<EventSpec> resolve(std::string_view name) const;

    // Whether `event` may be opened on this machine: NOPMU naming the event, the processor
    // found and what would count instead for an event of a PMU whose module says it does not
    // count on this processor (a built-in table written for another one).
    Result<void> countable(const EventSpec& event) const;

    // The processor the catalog was made for.
    const Processor& processor() const { return processor_; }

    // The events of one PMU, or of all of them when `pmu` is empty. NOEVENT for an unknown PMU.
    Result<std::vector<EventInfo>> list(std::string_view pmu = {}) const;

    // How messages name counter `counter` (0-based) of `pmu`, as its module names it:
    // "PMC2", "counter 3".
    std::string counter_name(std::string_view pmu, int counter) const;

    // Up to `n` known event names closest to `name` (edit distance, case-insensitive),
    // best first; none for a name longer than kLongestSuggestedName.
    std::vector<std::string> closest(std::string_view name, std::size_t n = 3) const;
    static constexpr std::size_t kLongestSuggestedName = 256;

  private:
    EventCatalog() = default;
    void add(std::shared_ptr<const PmuModule> module);
    // The module that lists PMU `name`; nullptr for none.
    std::shared_ptr<const PmuModule> module_of(std::string_view name) const;
    // NOEVENT for `name`, with the closest known names.
    Error unknown_event(std::string_view name) const;

    // Every event's name, listed once (listing resolves each event), for closest(); shared by
    // the copies of a catalog, which list the same events.
    struct EventNames;
    const EventNames& event_names() const;

    std::vector<std::shared_ptr<const PmuModule>> modules_;
    std::vector<PmuInfo> pmus_;
    std::vector<std::shared_ptr<const PmuModule>> pmu_modules_;  // the module of each PMU of pmus_
    Processor processor_;
    std::shared_ptr<EventNames> names_;
};

}  // namespace monitor::perf
