// The kernel's text monitord reads every second, which a container or an injected root may
// make anything: /proc/stat, and the CPU lists of /sys/devices/system/cpu. A parsed list is
// sorted, unique and non-negative, as its callers take it; a parsed /proc/stat has its cpuN
// lines sorted by N.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/loading/proc_stat.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto cpus = monitor::parse_cpu_list(text)) {
        if (!std::ranges::is_sorted(*cpus) ||
            std::ranges::adjacent_find(*cpus) != cpus->end() ||
            (!cpus->empty() && cpus->front() < 0)) {
            std::abort();
        }
    }
    if (auto stat = monitor::parse_proc_stat(text)) {
        if (!std::ranges::is_sorted(stat->cpus, {}, [](const auto& c) { return c.cpu; })) {
            std::abort();
        }
    }
    return 0;
}
