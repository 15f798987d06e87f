// A PMU module: what monitord knows about one kind of performance-monitoring unit, in one
// place. It names and decodes the events of its PMUs into EventSpecs (saying what each one
// measures, for the derived metrics), lists them, names its counters, and says whether it can
// count on the processor found. libpfm4's PMUs are one module (every PMU libpfm4 detects,
// with the kernel's generic perf:: events and raw codes of the core PMU); each built-in table
// is another. The EventCatalog holds them all, as pmu_modules() lists them.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/count_target.hpp"
#include "monitor/perf/event_name.hpp"
#include "monitor/perf/event_spec.hpp"
#include "monitor/perf/processor.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

// PmuInfo::source of a module's own table, as opposed to libpfm4's.
inline constexpr std::string_view kBuiltInSource = "built-in";

// A PMU as counting sees it (seeds' PAL_PERF_MON_INFO / the Query of the OSF/1 pfm device).
struct PmuInfo {
    std::string name;         // "perf", "amd64_fam19h_zen3"
    std::string description;  // "perf_events generic PMU"
    int counters = 0;         // general-purpose counters; 0: its events take none (software)
    int fixed_counters = 0;
    int counter_width = 64;  // bits of one hardware counter (what the kernel folds into 64)
    std::size_t events = 0;
    std::string source;  // "libpfm4" or kBuiltInSource
    bool core = false;   // the processor's own PMU
    // Why its events cannot count on this machine (a built-in table for another processor);
    // empty when they can, as far as anything but opening them can tell.
    std::string unavailable;
    // What a listing says about it below the table (PmuModule::note); empty for nothing.
    std::string note;
};

struct EventInfo {
    std::string name;  // "perf::PERF_COUNT_SW_TASK_CLOCK"
    std::string description;
    std::string pmu;
    CounterMask counters = 0;
    // The names of those counters, as messages name them ("PMC2", "counter 3").
    std::vector<std::string> counter_names;
    bool pinned = false;
};

// "counter 3" for counter 2 (0-based): how messages name a counter the hardware has no name for.
std::string numbered_counter_name(int counter);

class PmuModule {
  public:
    virtual ~PmuModule() = default;

    // The PMUs it brings, in listing order (`unavailable` is the catalog's, from counts_on).
    virtual std::vector<PmuInfo> pmus() const = 0;

    // Whether it also resolves names of no PMU it lists: names without a PMU ("cycles"), and
    // PMUs it knows by other names. The catalog gives such names to the first module that does.
    virtual bool resolves_other_names() const { return false; }

    // Whether `name` is in a syntax of the module's own, outside PMU::EVENT (the breakpoint
    // module's "mem:ADDR"). The catalog gives such names to it before any other.
    virtual bool owns_name(std::string_view) const { return false; }

    // The event `name` names: its EventSpec, with what it measures. NOEVENT when the module
    // has no such event (the catalog then names the closest known ones), BADARG for a bad
    // modifier or a code that no counter can hold. Events resolve on any machine; whether
    // they may count is counts_on's question.
    virtual Result<EventSpec> resolve(const EventName& name) const = 0;

    // The events of `pmu`, one of the module's PMUs, appended to `out` (counter_names left
    // empty: the catalog fills them from counter_name()).
    virtual void list(std::string_view pmu, std::vector<EventInfo>& out) const = 0;

    // How messages name counter `counter` (0-based) of its PMU `pmu`: numbered_counter_name
    // unless the hardware has names for them ("PMC2").
    virtual std::string counter_name(std::string_view pmu, int counter) const;

    // Whether its events count on `processor`: NOPMU saying which processor this is and what
    // counts instead when they would not (a built-in table for another processor, or one
    // whose kernel has no PMU driver for them). Anywhere by default.
    virtual Result<void> counts_on(const Processor& processor) const;

    // What a listing says about its PMU `pmu` below the table (how many of its events count at
    // once); empty for nothing (the default).
    virtual std::string note(const PmuInfo& pmu) const;

    // Whether each of its events holds something of its own for as long as it is open and
    // never takes turns with others (a breakpoint holds a debug register): a counter budget
    // then gives it no counter, and fits() bounds how many a session opens. No by default.
    virtual bool holds_while_open() const { return false; }

    // BADARG when `events`, a session's events of this module in request order, cannot all be
    // open at once. Counters that take turns always fit (the default).
    virtual Result<void> fits(std::span<const EventSpec* const> events) const;

    // PERM when the kernel refuses `event` to a caller without privilege for a reason of this
    // PMU's own (a breakpoint on a kernel address); `why` says why the caller has none. The
    // caller's other limits are the session's. Nothing by default.
    virtual Result<void> refuse_unprivileged(const EventSpec& event, std::string_view why) const;

    // Completes `event` for `target` where its encoding depends on the target (a breakpoint
    // named by a symbol: the address the target has it at); errors name the event. Nothing to
    // do by default.
    virtual Result<void> place(EventSpec& event, const CountTarget& target) const;

    // Its own explanation of perf_event_open's refusal `err` of its event `event` on `what`
    // ("mem:0x1000 on cpu0"), where its PMU gives the errno a meaning of its own; nullopt for
    // the counter device's general one (the default).
    virtual std::optional<Error> explain_open_error(int err, const EventSpec& event,
                                                    std::string_view what) const;
};

// Makes a module for this machine; fails only when it cannot start at all (libpfm4).
using PmuFactory = Result<std::unique_ptr<PmuModule>> (*)();

// Every module the catalog is made of, in listing order: libpfm4's PMUs, then the built-in
// tables. A new built-in table is one more entry here.
std::span<const PmuFactory> pmu_modules();

}  // namespace monitor::perf
