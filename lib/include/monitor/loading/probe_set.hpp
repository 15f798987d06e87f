// The idle probes of every monitored CPU as threads of this process, following CPU hotplug.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "monitor/loading/idle_probe.hpp"
#include "monitor/loading/probes.hpp"

namespace monitor {

class ProbeSet final : public Probes {
  public:
    // `only` restricts the probes to those CPUs (the MON IDLE task's affinity); nullopt
    // probes every online CPU.
    // `sink`, when set, gets every probe's idle credits (the watchdog).
    ProbeSet(ProbeMode mode, ProbeThreadAttr attr, std::optional<std::vector<int>> only = {},
             CalibrationPlan plan = {}, std::shared_ptr<IdleCreditSink> sink = nullptr);
    // Stops every probe (see stop()).
    ~ProbeSet() override;

    // Asks every probe's thread to stop, and waits up to `grace` in all for them; returns the
    // CPUs whose thread had not ended by then (starved: it ends on its own when it next runs).
    // The probes read and count no more; the destructor then waits for none.
    std::vector<int> stop(std::chrono::milliseconds grace);

    void set_online(const std::vector<int>& cpus) override;
    bool wait_calibrated(std::chrono::milliseconds timeout) const override;
    std::vector<ProbeReading> read() const override;
    // The probe threads' kernel ids, by CPU (0 for a thread not started yet or gone).
    std::vector<std::pair<int, pid_t>> thread_ids() const;
    // CPU time of `cpu`'s probes that have stopped (a CPU that went and came back).
    std::uint64_t retired_cpu_ns(int cpu) const;

    // Sleep mode: `cpu`'s idle time so far as the kernel counts it, read at `at`; its probe
    // wakes and earns its credit from it (IdleProbe::publish_idle).
    void publish_idle(int cpu, std::uint64_t idle_ns, std::chrono::steady_clock::time_point at);

    std::uint64_t excluded_cpu_ns(int cpu) const override;
    ProbeMode mode() const override { return mode_; }

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
    bool stopped_ = false;  // stop() ran: nothing to wait for again
};

}  // namespace monitor
