#include "monitor/loading/probe_source.hpp"

#include <algorithm>

namespace monitor {

std::optional<double> probe_load(std::chrono::duration<double, std::nano> idle,
                                 std::chrono::duration<double, std::nano> interval) {
    if (interval.count() <= 0) return std::nullopt;
    return std::clamp(100.0 - 100.0 * idle.count() / interval.count(), 0.0, 100.0);
}

Result<LoadSample> ProbeSource::sample() {
    const auto readings = read_();
    const auto now = clock_();
    LoadSample out;
    std::map<int, Previous> next;
    double idle_sum = 0;
    std::size_t monitored = 0;  // probes that did not fail: the CPUs this source covers
    bool machine_valid = last_.has_value();
    const std::chrono::duration<double, std::nano> interval =
        last_ ? now - *last_ : Clock::duration::zero();

    for (const auto& r : readings) {
        // A calibrating probe spins at SCHED_IDLE already: its CPU time is idle time too. (On
        // a CPU busy from the start it may calibrate for ever.)
        const bool running = r.state == ProbeState::Running || r.state == ProbeState::Calibrating;
        std::optional<double> load;
        auto prev = previous_.find(r.cpu);
        if (last_ && running && prev != previous_.end() && prev->second.running &&
            prev->second.generation == r.generation && r.cpu_ns >= prev->second.cpu_ns) {
            load = probe_load(std::chrono::duration<double, std::nano>(
                                  static_cast<double>(r.cpu_ns - prev->second.cpu_ns)),
                              interval);
        }
        // A probe that could not start (a CPU outside this process's cpuset, say) leaves its
        // CPU out of the machine figure; any other probe without a value makes it a gap.
        if (r.state != ProbeState::Failed) {
            ++monitored;
            if (load) {
                idle_sum += 100.0 - *load;
            } else {
                machine_valid = false;
            }
        }
        out.cpus.emplace_back(r.cpu, load);
        next[r.cpu] = Previous{r.generation, r.cpu_ns, running};
    }
    if (machine_valid && monitored > 0) {
        out.machine = 100.0 - idle_sum / static_cast<double>(monitored);
    }
    previous_ = std::move(next);
    last_ = now;
    return out;
}

}  // namespace monitor
