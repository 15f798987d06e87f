// When the idle probes may pet the watchdog. A probe earns a credit for every 100 ms of idle
// time it gets within the watchdog's timeout (CPU time of its SCHED_IDLE thread, i.e. time
// nothing else wanted the CPU; see IdleCreditMeter; a sleeping probe earns one per wake-up).
// The watchdog is petted when the policy holds:
//   any  a credit from any monitored CPU since the last pet (the machine is not starved)
//   all  a credit from every monitored CPU since the last pet (no CPU is starved)
// and at most once per `min_interval` (10 Hz). Credits count from the last pet, so a CPU
// starved for the whole timeout under `all`, or every CPU under `any`, lets the watchdog fire.
//
// Lock-free: the probes call credit() from their SCHED_IDLE threads, the owner (the daemon's
// main loop) calls set_cpus() and waiting_for(), and none of them ever waits for another. A
// lock would not do: a probe preempted while holding it, on a CPU that real work keeps busy,
// may not run again for seconds, and everyone else would wait with it (under `any`, an idle
// CPU's probe too, so that the watchdog could fire on a machine with an idle CPU). The sets
// are bitmaps of atomic words; the one pet that a set of credits earns is claimed by
// exchanging the time of the last pet. The clock is passed in, so tests drive it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
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
    // CPUs numbered from this on earn nothing: the kernel's own limit (NR_CPUS) on the
    // distributions' largest builds.
    static constexpr int kMaxCpus = 8192;

    explicit PetPolicy(PetPolicyKind kind, std::chrono::nanoseconds min_interval = kMinInterval);

    // The CPUs whose probes count (those running). Credits of other CPUs are ignored; a CPU
    // that leaves no longer holds a pet back. From the owner's thread.
    void set_cpus(const std::vector<int>& cpus) noexcept;

    // A credit from `cpu`'s probe at `now`; true when the caller must pet now (the credits
    // then start over). From any thread; when two probes complete a set at once, one pets.
    bool credit(int cpu, Clock::time_point now) noexcept;

    PetPolicyKind kind() const { return kind_; }
    // The CPUs that have not earned a credit since the last pet.
    std::vector<int> waiting_for() const;

  private:
    static constexpr int kWordBits = 32;
    static constexpr int kWords = kMaxCpus / kWordBits;
    using Bitmap = std::array<std::atomic<std::uint32_t>, kWords>;

    // `now` in milliseconds of the steady clock, as 32 bits that wrap (every 49 days): only
    // differences of less than that are taken. Never 0, which stands for "no pet yet".
    static std::uint32_t stamp(Clock::time_point now) noexcept;

    const PetPolicyKind kind_;
    const std::uint32_t min_interval_ms_;
    Bitmap cpus_{};              // written by the owner
    Bitmap credited_{};          // set by the probes, cleared by the pet that used them
    std::atomic<int> words_{0};  // the words that hold a monitored CPU: [0, words_)
    std::atomic<std::uint32_t> last_pet_{0};  // stamp() of the last pet; 0: none yet
};

}  // namespace monitor::watchdog
