// A source of per-CPU load measurements. The Engine samples every source once per tick and
// keeps a history for each; /proc/stat is one source, the idle probe threads another.
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/loading/cpu_states.hpp"
#include "monitor/status.hpp"

namespace monitor {

// The loads measured over the interval since the previous sample, in percent (0-100).
// nullopt means the source could not measure that CPU over the interval. `cpus` lists every
// CPU the source saw in this reading.
struct LoadSample {
    std::optional<double> machine;
    std::vector<std::pair<int, std::optional<double>>> cpus;  // sorted by CPU id
    // Sources that know where the time went (procstat): each state's share, for the machine
    // and per CPU (in the order of `cpus`); empty for the others.
    std::optional<StateShares> machine_states;
    std::vector<std::optional<StateShares>> cpu_states;
    // The same CPUs' time in each state over the interval, in seconds as the kernel counted
    // it (not the shares times the tick's length, which loses the time of an interval in
    // which the counters did not move).
    std::vector<std::optional<StateSeconds>> cpu_seconds;
};

class LoadSource {
  public:
    virtual ~LoadSource() = default;

    // The key of this source in reports and on the wire: "procstat", "probe".
    virtual std::string_view name() const = 0;
    // Whether its samples say where the time went (LoadSample's states).
    virtual bool has_states() const { return false; }

    // Measures the interval since the previous call. The first call only sets the baseline:
    // it lists the CPUs it found, without values.
    virtual Result<LoadSample> sample() = 0;
};

}  // namespace monitor
