// The idle probes of every monitored CPU, following CPU hotplug.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
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

class ProbeSet final : public CpuTimeExclusion {
  public:
    // `only` restricts the probes to those CPUs (the MON IDLE task's affinity); nullopt
    // probes every online CPU.
    // `sink`, when set, gets every probe's idle credits (the watchdog).
    ProbeSet(ProbeMode mode, ProbeThreadAttr attr, std::optional<std::vector<int>> only = {},
             CalibrationPlan plan = {}, std::shared_ptr<IdleCreditSink> sink = nullptr);
    ~ProbeSet() override;

    // Starts probes on CPUs that came online and stops those of CPUs that went away.
    void set_online(const std::vector<int>& cpus);

    // Waits until no probe is starting or calibrating any more, or `timeout` passed;
    // returns whether all are done.
    bool wait_calibrated(std::chrono::milliseconds timeout) const;

    // The probes' states and counters, by CPU.
    std::vector<ProbeReading> read() const;

    std::uint64_t excluded_cpu_ns(int cpu) const override;
    ProbeMode mode() const { return mode_; }

  private:
    struct Slot {
        std::unique_ptr<IdleProbe> probe;
        std::uint64_t generation = 0;
    };

    ProbeMode mode_;
    ProbeThreadAttr attr_;
    std::optional<std::vector<int>> only_;
    CalibrationPlan plan_;
    std::shared_ptr<IdleCreditSink> sink_;
    mutable std::mutex mutex_;
    std::map<int, Slot> probes_;
    std::map<int, std::uint64_t> retired_cpu_ns_;           // CPU time of probes already stopped
    mutable std::map<int, std::uint64_t> reported_cpu_ns_;  // excluded_cpu_ns's last answer
    std::uint64_t next_generation_ = 1;
};

}  // namespace monitor
