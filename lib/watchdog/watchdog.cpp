#include "monitor/watchdog/watchdog.hpp"

namespace monitor::watchdog {
namespace {

// A time point of the steady clock (never before its epoch) as the pets keep it.
std::uint64_t nanoseconds_since_epoch(Watchdog::Clock::time_point t) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

}  // namespace

std::string_view on_stop_name(OnStop s) noexcept {
    return name_of(kOnStopNames, s);
}

std::optional<OnStop> on_stop_from_name(std::string_view name) noexcept {
    return value_named(kOnStopNames, name);
}

// now_ is never empty (an empty `now` is the default clock): credit() calls it, and must not
// throw std::bad_function_call on a probe's thread.
Watchdog::Watchdog(PetPolicyKind policy, std::function<Clock::time_point()> now)
    : policy_(policy), now_(now ? std::move(now) : Clock::now) {}

Watchdog::~Watchdog() = default;

Result<void> Watchdog::arm(const std::string& device, std::chrono::seconds timeout) {
    std::lock_guard lock(mutex_);
    if (device_ && device_->is_open()) {
        return fail(Status::BadState, device_->path() + " is already armed");
    }
    auto d = WatchdogDevice::open(device, timeout);
    if (!d) return std::unexpected(d.error());
    device_.emplace(std::move(*d));
    timeout_s_ = device_->timeout().value_or(static_cast<int>(timeout.count()));
    armed_ = true;
    // Opening is the first keepalive.
    last_pet_ns_.store(nanoseconds_since_epoch(now_()));
    return {};
}

Result<void> Watchdog::disarm() {
    std::lock_guard lock(mutex_);
    if (!device_) return {};
    armed_ = false;
    return device_->disarm();
}

void Watchdog::close_armed() {
    std::lock_guard lock(mutex_);
    armed_ = false;
    if (device_) device_->close_armed();
}

// NOLINTNEXTLINE(bugprone-exception-escape): now_ is never empty (see the constructor)
void Watchdog::credit(int cpu) noexcept {
    const auto now = now_();
    if (!policy_.credit(cpu, now)) return;
    std::lock_guard lock(mutex_);
    if (!device_ || !device_->is_open()) return;
    if (auto r = device_->pet(); !r) {
        std::lock_guard error_lock(error_mutex_);
        last_error_ = r.error().message;
        pet_errors_.add(1);
        return;
    }
    pets_.add(1);
    last_pet_ns_.store(nanoseconds_since_epoch(now));
}

WatchdogStatus Watchdog::status() const {
    WatchdogStatus s;
    s.policy = policy_.kind();
    if (auto w = policy_.try_waiting_for()) waiting_for_ = std::move(*w);
    s.waiting_for = waiting_for_;
    s.pets = pets_.load();
    s.pet_errors = pet_errors_.load();
    if (s.pet_errors > 0) {
        std::lock_guard error_lock(error_mutex_);
        s.last_error = last_error_;
    }
    // No mutex_ here: only this (the owner's) thread changes device_, and the probes only
    // read it.
    if (!device_) return s;
    s.device = device_->path();
    s.armed = device_->is_open();
    s.identity = device_->identity();
    s.timeout_s = device_->timeout();
    s.last_reset_by_watchdog = device_->last_reset_by_watchdog();
    s.nowayout = device_->nowayout();
    if (s.armed) {
        s.time_left_s = device_->time_left();
        if (auto last = last_pet_ns_.load(); last != 0) {
            s.since_last_pet = now_().time_since_epoch() -
                               std::chrono::nanoseconds(static_cast<std::int64_t>(last));
        }
    }
    return s;
}

}  // namespace monitor::watchdog
