// MON's counters over a perf session: a MON_perf_config (one event per set, the target) made
// into session options, and a session's report made into MON_perf_stats.
#pragma once

#include <array>

#include "mon.h"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/status.hpp"

namespace monitor::mon {

// The session's event of each set, -1 for an unused set.
using EventOfSet = std::array<int, MON_PERF_SETS>;

// The session options for `config` on the `online` CPUs: one event per used set. Events of a
// PMU whose counters each have selects of their own (the 750's table: MON's four sets are its
// four PMCs) go in one kernel group, all on the counters at once, one per set; the others are
// multiplexed by the kernel if they must be. MON_PERF_THREAD with another process's pid
// counts every thread of that process. Errors name the set or the field.
Result<perf::SessionOptions> perf_options(const perf::EventCatalog& catalog,
                                          const MON_perf_config& config,
                                          const std::vector<int>& online, EventOfSet& event_of_set);

// Each set's counts, from a session's report.
MON_perf_stats to_stats(const perf::PerfReport& report, const EventOfSet& event_of_set);

}  // namespace monitor::mon
