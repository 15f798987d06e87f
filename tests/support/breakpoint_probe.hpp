// Whether this machine's breakpoints fire, found without monitord's code: a write breakpoint
// opened directly with perf_event_open on the calling thread, over a variable written 10
// times. Some hypervisors give a guest debug registers that take breakpoints but never raise
// the exceptions (perf stat -e mem:ADDR:w counts 0 there too); counts cannot be checked there,
// and the tests that check them skip saying so.
#pragma once

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace test_support {

namespace detail {
inline volatile std::uint32_t breakpoint_probe_variable = 0;
}  // namespace detail

// Empty when breakpoints count here; else why they cannot be checked.
inline std::string breakpoints_do_not_fire() {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.bp_type = HW_BREAKPOINT_W;
    attr.bp_addr = reinterpret_cast<std::uintptr_t>(&detail::breakpoint_probe_variable);
    attr.bp_len = HW_BREAKPOINT_LEN_4;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    const long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) {
        return std::string{"a breakpoint cannot be opened here: "} + std::strerror(errno);
    }
    for (std::uint32_t i = 0; i < 10; ++i) detail::breakpoint_probe_variable = i;
    std::uint64_t count = 0;
    const bool read = ::read(static_cast<int>(fd), &count, sizeof count) == sizeof count;
    ::close(static_cast<int>(fd));
    if (read && count == 10) return {};
    return "this machine's breakpoints are taken but never fire (a write breakpoint opened "
           "with perf_event_open counted " +
           std::to_string(count) +
           " of 10 writes; perf stat -e mem:ADDR:w counts none either on such a machine): a "
           "hypervisor that does "
           "not deliver debug exceptions to its guest";
}

}  // namespace test_support
