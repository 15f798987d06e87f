// The processor this machine has and the core PMU its kernel registered, as far as counting
// needs them: a built-in event table may only count on the processor it was written for.
// Read from a /proc and a /sys root, so that tests can describe any machine.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace monitor::perf {

struct Processor {
    // As /proc/cpuinfo names it: "model name" (x86), "cpu" (PowerPC), "Processor" or the
    // implementer and part (ARM); empty when it does not say.
    std::string name;
    // The PowerPC processor version register, from cpuinfo's "revision : ... (pvr 0008 2214)".
    std::optional<std::uint32_t> pvr;
    // The kernel registered a core PMU (<sys>/bus/event_source/devices/cpu), and what its
    // driver calls it (caps/pmu_name, kernels from 5.19) when it says.
    bool core_pmu = false;
    std::string core_pmu_name;
    // Why cpuinfo could not be read; empty when it was.
    std::string error;

    // "750CXe (pvr 0008 2214)", "Intel(R) Xeon(R) ...", "an unknown processor".
    std::string describe() const;
};

Processor read_processor(const std::filesystem::path& proc_root = "/proc",
                         const std::filesystem::path& sys_root = "/sys");

}  // namespace monitor::perf
