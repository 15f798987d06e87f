// The kernel's generic events (PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE and the hardware cache
// events) as a built-in module, for a libmonitor built without libpfm4 (a board's build): the
// same names libpfm4 gives them (perf::CYCLES, perf::TASK-CLOCK, perf::PERF_COUNT_SW_TASK_CLOCK,
// task-clock), so that a configuration means the same thing with or without it.
#pragma once

#include <memory>

#include "monitor/perf/pmu.hpp"

namespace monitor::perf {

// The PMU the module lists, as libpfm4 names it.
inline constexpr std::string_view kGenericPmu = "perf";

Result<std::unique_ptr<PmuModule>> make_generic_pmu();

}  // namespace monitor::perf
