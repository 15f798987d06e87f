// Pressure stall information (PSI) for the CPU: the share of the time in which some runnable
// task waited for a CPU, as the kernel keeps it for the machine (/proc/pressure/cpu) and for
// each cgroup of a cgroup2 tree (cpu.pressure). Both files have the same format:
//
//   some avg10=1.25 avg60=0.50 avg300=0.10 total=123456
//   full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// The averages are percentages over 10, 60 and 300 s; total is the stalled time so far, in
// microseconds. The "full" line (the time every task of a cgroup waited) is left out: the
// kernel keeps it for cgroups only, and prints zeros for the machine (Documentation/
// accounting/psi.rst).
#pragma once

#include <cstdint>
#include <string_view>

#include "monitor/status.hpp"

namespace monitor {

struct CpuPressureLine {
    double avg10 = 0, avg60 = 0, avg300 = 0;  // percent
    std::uint64_t total_us = 0;
};

// The "some" line of a cpu pressure file's text. BADDATA naming `file`, the line and the
// format when the line is missing or not the kernel's.
Result<CpuPressureLine> parse_cpu_pressure(std::string_view text, std::string_view file);

}  // namespace monitor
