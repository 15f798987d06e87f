// When the idle probes may pet the watchdog. A probe earns a credit for every 100 ms of idle
// time it gets within the watchdog's timeout (CPU time of its SCHED_IDLE thread, i.e. time
// nothing else wanted the CPU; see IdleCreditMeter; a sleeping probe earns one per wake-up).
// The watchdog is petted when the policy holds:
//   any  a credit from any monitored CPU since the last pet (the machine is not starved)
//   all  a credit from every monitored CPU since the last pet (no CPU is starved)
// and at most once per `min_interval` (10 Hz). Credits count from the last pet, so a CPU
// starved for the whole timeout under `all`, or every CPU under `any`, lets the watchdog fire.
//
// Thread-safe: the probes call credit() from their own threads. The clock is passed in, so
// tests drive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "monitor/enum_names.hpp"

namespace monitor::watchdog {

enum class PetPolicyKind { Any, All };
inline constexpr std::array<EnumName<PetPolicyKind>, 2> kPetPolicyNames{
    {{PetPolicyKind::Any, "any"}, {PetPolicyKind::All, "all"}}};
std::string_view pet_policy_name(PetPolicyKind k) noexcept;
std::optional<PetPolicyKind> pet_policy_from_name(std::string_view name) noexcept;

class PetPolicy {
  public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::nanoseconds kMinInterval = std::chrono::milliseconds(100);

    explicit PetPolicy(PetPolicyKind kind, std::chrono::nanoseconds min_interval = kMinInterval)
        : kind_(kind), min_interval_(min_interval) {}

    // The CPUs whose probes count (those running). Credits of other CPUs are ignored; a CPU
    // that leaves no longer holds a pet back.
    void set_cpus(const std::vector<int>& cpus);

    // A credit from `cpu`'s probe at `now`; true when the caller must pet now (and the credits
    // start over).
    bool credit(int cpu, Clock::time_point now);

    PetPolicyKind kind() const { return kind_; }
    // The CPUs that have not earned a credit since the last pet.
    std::vector<int> waiting_for() const;
    // The same, or nullopt when a probe holds the lock right now: a SCHED_IDLE probe
    // preempted while holding it may not run again for a long time on a busy CPU, and the
    // main loop must not wait for it.
    std::optional<std::vector<int>> try_waiting_for() const;

  private:
    const PetPolicyKind kind_;
    const std::chrono::nanoseconds min_interval_;
    mutable std::mutex mutex_;
    std::set<int> cpus_;
    std::set<int> credited_;
    std::optional<Clock::time_point> last_pet_;
};

}  // namespace monitor::watchdog
