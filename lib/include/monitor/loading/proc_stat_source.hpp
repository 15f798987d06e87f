// Loading from /proc/stat deltas: busy = total - idle - iowait over the interval.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "monitor/loading/load_source.hpp"
#include "monitor/loading/proc_stat.hpp"

namespace monitor {

// Load in percent between two readings of one CPU's counters, or nullopt when the interval
// cannot be measured: no time passed, or a counter went backwards (CPU hotplug, the NO_HZ
// iowait accounting of some kernels). A regression never yields a value outside 0-100.
std::optional<double> load_between(const CpuTimes& before, const CpuTimes& after);

class ProcStatSource final : public LoadSource {
  public:
    static Result<std::unique_ptr<ProcStatSource>> open(const std::filesystem::path& proc_root);

    std::string_view name() const override { return "procstat"; }
    Result<LoadSample> sample() override;

    // The delta step on its own, for a snapshot obtained elsewhere.
    LoadSample update(const ProcStatSnapshot& snap);

  private:
    explicit ProcStatSource(ProcStatReader reader) : reader_(std::move(reader)) {}

    ProcStatReader reader_;
    std::optional<CpuTimes> machine_;
    std::map<int, CpuTimes> cpus_;  // previous reading per CPU present in it
};

}  // namespace monitor
