// The idle probes of the monitored CPUs, wherever their threads run: in this process
// (ProbeSet) or in a helper process of their own (ProbeProcess, the daemon's spinning probes).
// The engine reads them for the probe source, and takes their CPU time out of /proc/stat's.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/loading/cpu_time_exclusion.hpp"
#include "monitor/loading/idle_probe.hpp"

namespace monitor {

struct ProbeReading {
    int cpu = 0;
    std::uint64_t generation = 0;  // changes when the CPU's probe thread is replaced
    ProbeState state = ProbeState::Starting;
    std::uint64_t count = 0;   // loops (spin) or wake-ups (sleep)
    std::uint64_t cpu_ns = 0;  // CPU time of this probe thread so far
    std::optional<std::chrono::duration<double, std::nano>> baseline;
    std::string error;
};

class Probes : public CpuTimeExclusion {
  public:
    // Starts probes on CPUs that came online and stops those of CPUs that went away.
    virtual void set_online(const std::vector<int>& cpus) = 0;
    // Waits until no probe is starting or calibrating any more, or `timeout` passed;
    // returns whether all are done.
    virtual bool wait_calibrated(std::chrono::milliseconds timeout) const = 0;
    // The probes' states and counters, by CPU.
    virtual std::vector<ProbeReading> read() const = 0;
    virtual ProbeMode mode() const = 0;
};

}  // namespace monitor
