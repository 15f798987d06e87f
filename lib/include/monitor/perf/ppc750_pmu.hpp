// The PowerPC 750's PMU as a module of the catalog: the `ppc750::` names of its table
// (ppc750_events.hpp) and its raw codes, with the `:threshold=N` modifier where it applies,
// PMC1-PMC4, what its events measure, and the processor check (ppc750_counts_on).
#pragma once

#include <memory>

#include "monitor/perf/pmu.hpp"

namespace monitor::perf {

Result<std::unique_ptr<PmuModule>> make_ppc750_pmu();

}  // namespace monitor::perf
