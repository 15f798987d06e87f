// CPU time that a load source must not count as load: the idle probes' own spinning, which
// the kernel accounts as user time although it only fills idle time.
#pragma once

#include <cstdint>

namespace monitor {

class CpuTimeExclusion {
  public:
    virtual ~CpuTimeExclusion() = default;
    // CPU time spent on `cpu` by what is excluded, in nanoseconds, cumulative and never
    // decreasing.
    virtual std::uint64_t excluded_cpu_ns(int cpu) const = 0;
};

}  // namespace monitor
