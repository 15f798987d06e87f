// Loading from /proc/stat deltas: busy = total - idle - iowait over the interval, and the share
// of each state. The idle probes' own CPU time is given back to idle. The machine's figures are
// those of its CPUs together (their times added up), never outside the range of the CPUs'.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "monitor/loading/cpu_time_exclusion.hpp"
#include "monitor/loading/load_source.hpp"
#include "monitor/loading/proc_stat.hpp"

namespace monitor {

// Load in percent between two readings of one CPU's counters, or nullopt when the interval
// cannot be measured: no time passed, or a counter went backwards (CPU hotplug, the NO_HZ
// iowait accounting of some kernels). A regression never yields a value outside 0-100.
// `excluded_ticks` of the busy time (the idle probes' spinning) count as idle instead.
std::optional<double> load_between(const CpuTimes& before, const CpuTimes& after,
                                   double excluded_ticks = 0);

class ProcStatSource final : public LoadSource {
  public:
    // With `exclude`, the CPU time it reports per CPU is taken out of the busy time, from the
    // state the kernel accounted it to (`excluded_state`: user for the idle probes at nice 0,
    // nice above it), and given back to idle; `user_hz` is the unit of /proc/stat,
    // sysconf(_SC_CLK_TCK) when 0. `exclude` must outlive the source.
    static Result<std::unique_ptr<ProcStatSource>> open(const std::filesystem::path& proc_root,
                                                        const CpuTimeExclusion* exclude = nullptr,
                                                        double user_hz = 0,
                                                        TimeState excluded_state = TimeState::User);

    std::string_view name() const override { return "procstat"; }
    bool has_states() const override { return true; }
    Result<LoadSample> sample() override;

    // The delta step on its own, for a snapshot obtained elsewhere.
    LoadSample update(const ProcStatSnapshot& snap);

  private:
    struct Previous {
        CpuTimes times;
        std::uint64_t excluded_ns = 0;
    };

    ProcStatSource(ProcStatReader reader, const CpuTimeExclusion* exclude, double user_hz,
                   TimeState excluded_state)
        : reader_(std::move(reader)),
          exclude_(exclude),
          user_hz_(user_hz),
          excluded_state_(excluded_state) {}

    ProcStatReader reader_;
    const CpuTimeExclusion* exclude_;
    double user_hz_;
    TimeState excluded_state_;
    // The previous reading of each CPU present in it, sorted by CPU (as readings are); and
    // the vector the next one is made in, kept to be reused.
    std::vector<std::pair<int, Previous>> cpus_;
    std::vector<std::pair<int, Previous>> next_;
};

}  // namespace monitor
