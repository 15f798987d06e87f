// libpfm4's PMUs as a module of the catalog: every PMU libpfm4 detects on this machine, the
// kernel's generic events among them (perf::, whose software events count on any machine),
// and raw codes `PMU::rHEX` of the processor's core PMU. The only place that calls libpfm4.
#pragma once

#include <memory>

#include "monitor/perf/pmu.hpp"

namespace monitor::perf {

// Initializes libpfm4 (once per process); NOPMU when it cannot start.
Result<std::unique_ptr<PmuModule>> make_libpfm_pmus();

}  // namespace monitor::perf
