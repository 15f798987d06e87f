// The hardware watchdog as the idle probes pet it: the device, the pet policy, and what has
// happened so far. The probes call credit() from their threads; the owner arms, disarms and
// reads the status from its own. No lock is shared between them (see PetPolicy).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "monitor/enum_names.hpp"
#include "monitor/loading/idle_probe.hpp"
#include "monitor/status.hpp"
#include "monitor/watchdog/pet_policy.hpp"
#include "monitor/watchdog/watchdog_device.hpp"

namespace monitor::watchdog {

// What the owner does with an armed watchdog when it stops in order: the magic close
// (disarm()), or leave it counting down (close_armed()).
enum class OnStop { Disarm, KeepArmed };
inline constexpr std::array<EnumName<OnStop>, 2> kOnStopNames{
    {{OnStop::Disarm, "disarm"}, {OnStop::KeepArmed, "keep-armed"}}};
std::string_view on_stop_name(OnStop s) noexcept;
std::optional<OnStop> on_stop_from_name(std::string_view name) noexcept;

struct WatchdogStatus {
    bool armed = false;
    std::string device;
    std::optional<DeviceIdentity> identity;
    std::optional<int> timeout_s;    // as granted by the driver
    std::optional<int> time_left_s;  // when the driver can tell
    std::optional<std::chrono::nanoseconds> since_last_pet;
    std::uint64_t pets = 0;
    std::uint64_t pet_errors = 0;
    // Near misses: pets that came more than half the timeout after the one before (or the
    // arm), and the longest time between two pets since the last arm. The idle probes pet
    // ten times a second on a machine with idle time: a late pet is a machine that came
    // within half a timeout of its reset.
    std::uint64_t late_pets = 0;
    std::chrono::milliseconds longest_pet_gap{0};
    std::string last_error;  // of the last failed pet
    bool last_reset_by_watchdog = false;
    bool nowayout = false;  // the driver cannot be stopped: it stays armed on any stop
    PetPolicyKind policy = PetPolicyKind::All;
    std::vector<int> waiting_for;  // CPUs without a credit since the last pet
};

class Watchdog final : public IdleCreditSink {
  public:
    using Clock = std::chrono::steady_clock;

    // `now` is the clock the pets are timed with (tests pass their own; empty: Clock::now).
    explicit Watchdog(PetPolicyKind policy, std::function<Clock::time_point()> now = Clock::now);
    ~Watchdog() override;  // closes an armed device without the magic close
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    // From the owner's thread only (the one that arms and disarms). None of these waits for
    // a probe: a SCHED_IDLE probe preempted in the middle of a pet, on a CPU that real work
    // keeps busy, may not run again for seconds.

    // Opens the device, which arms it. BADSTATE when already armed.
    Result<void> arm(const std::string& device, std::chrono::seconds timeout);
    // The magic close. Credits afterwards do nothing. A driver with nowayout keeps counting
    // down all the same (status().nowayout). A pet under way keeps the device open until it
    // ends: the device stops when the last of them lets go of it.
    Result<void> disarm();
    // Closes without the magic close: the watchdog fires unless someone pets it in time.
    void close_armed();
    // One pet now, whatever the credits (the MON API's pet after MON_stop, when no probe
    // runs): counted as the probes' pets are. BADSTATE when not armed; the keepalive's error.
    Result<void> pet();
    // The CPUs whose probes must earn credits (see PetPolicy::set_cpus).
    void set_cpus(const std::vector<int>& cpus) noexcept { policy_.set_cpus(cpus); }
    WatchdogStatus status() const;
    // While armed, the time since the last pet (or the arm); status() without the device's
    // time left and the strings: cheap enough for every tick.
    // NOLINTNEXTLINE(bugprone-exception-escape): now_ is never empty (see the constructor)
    std::optional<std::chrono::nanoseconds> since_last_pet() const noexcept;

    // From a probe's thread. Lock-free, and allocates nothing.
    // NOLINTNEXTLINE(bugprone-exception-escape): now_ is never empty (see the constructor)
    void credit(int cpu) noexcept override;
    // The timeout in force (as granted, else as asked), or 10 s before the first arm().
    std::chrono::nanoseconds credit_expiry() const noexcept override {
        return std::chrono::seconds(timeout_s_.load(std::memory_order_relaxed));
    }
    // While armed.
    bool wants_credits() const noexcept override { return lease_.load() != nullptr; }

  private:
    // An open device and the references to it: the owner's while it is armed, and one for
    // each pet under way. Whoever lets go of the last one closes the descriptor, so that the
    // owner never waits for a pet to end and a pet never uses a closed descriptor.
    struct Lease {
        std::optional<WatchdogDevice> device;
        std::atomic<std::uint32_t> refs{0};
        std::atomic<bool> closed{true};  // the last reference is gone and the device closed
    };
    // A reference to `l`, unless its last one is gone already (a probe that read lease_
    // just before a disarm).
    static bool take(Lease& l) noexcept;
    static void release(Lease& l) noexcept;
    // Pets the armed device, counting the pet (or the error, returned as an errno; 0 for a
    // pet, or for no device to pet). From any thread; lock-free.
    int pet_at(Clock::time_point now) noexcept;
    // Milliseconds since origin_, in 32 bits that wrap every 49 days.
    std::uint32_t ms_since_origin(Clock::time_point t) const noexcept;

    PetPolicy policy_;
    std::function<Clock::time_point()> now_;
    Clock::time_point origin_;
    std::atomic<Lease*> lease_{nullptr};  // the armed device's; set and cleared by the owner
    // Every lease made, by the owner; one whose device closed is used again.
    std::vector<std::unique_ptr<Lease>> leases_;
    // What the owner knows of the device it armed last, also once it is disarmed.
    struct Known {
        std::string path;
        std::optional<DeviceIdentity> identity;
        std::optional<int> timeout_s;
        bool last_reset_by_watchdog = false;
        bool nowayout = false;
    };
    std::optional<Known> known_;
    // Counted by the probes, read by the owner. 32 bits, lock-free on every target: 10 pets
    // a second take 13 years to wrap them.
    std::atomic<std::uint32_t> pets_{0};
    std::atomic<std::uint32_t> pet_errors_{0};
    std::atomic<std::uint32_t> late_pets_{0};
    std::atomic<std::uint32_t> longest_gap_ms_{0};  // since the last arm
    std::atomic<int> last_pet_errno_{0};            // of the last failed pet
    std::atomic<std::uint32_t> last_pet_ms_{0};     // ms_since_origin() of the last pet (or arm)
    std::atomic<int> timeout_s_{static_cast<int>(kDefaultCreditExpiry.count())};
};

}  // namespace monitor::watchdog
