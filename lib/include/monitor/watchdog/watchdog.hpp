// The hardware watchdog as the idle probes pet it: the device, the pet policy, and what has
// happened so far. The probes call credit() from their threads; the owner arms, disarms and
// reads the status from its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "monitor/enum_names.hpp"
#include "monitor/loading/idle_probe.hpp"
#include "monitor/lock_free_u64.hpp"
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

    // Opens the device, which arms it. BADSTATE when already armed.
    Result<void> arm(const std::string& device, std::chrono::seconds timeout);
    // The magic close. Credits afterwards do nothing. A driver with nowayout keeps counting
    // down all the same (status().nowayout).
    Result<void> disarm();
    // Closes without the magic close: the watchdog fires unless someone pets it in time.
    void close_armed();

    // The CPUs whose probes must earn credits (see PetPolicy::set_cpus).
    void set_cpus(const std::vector<int>& cpus) { policy_.set_cpus(cpus); }

    // From the owner's thread only (the one that arms and disarms). It never waits for a
    // lock a probe holds: a SCHED_IDLE probe preempted on a busy CPU may hold it for long.

    // From a probe's thread.
    // NOLINTNEXTLINE(bugprone-exception-escape): now_ is never empty (see the constructor)
    void credit(int cpu) noexcept override;
    // The timeout in force (as granted, else as asked), or 10 s before the first arm().
    std::chrono::nanoseconds credit_expiry() const noexcept override {
        return std::chrono::seconds(timeout_s_.load(std::memory_order_relaxed));
    }
    // While armed.
    bool wants_credits() const noexcept override { return armed_.load(); }

    WatchdogStatus status() const;

  private:
    PetPolicy policy_;
    std::function<Clock::time_point()> now_;
    mutable std::mutex mutex_;  // the device: pets from the probes, arm and disarm from the owner
    std::optional<WatchdogDevice> device_;
    // Written under mutex_ (by the probes, and arm()), read by the owner without it.
    LockFreeU64 pets_{0};
    LockFreeU64 pet_errors_{0};
    LockFreeU64 last_pet_ns_{0};  // on now_'s clock; 0: never
    // Read by the probes at every update: 32 bits, lock-free on every target.
    std::atomic<int> timeout_s_{static_cast<int>(kDefaultCreditExpiry.count())};
    std::atomic<bool> armed_{false};        // the device is open
    mutable std::mutex error_mutex_;        // taken by a probe only when a pet failed
    std::string last_error_;                // under error_mutex_
    mutable std::vector<int> waiting_for_;  // the last known, for status()
};

}  // namespace monitor::watchdog
