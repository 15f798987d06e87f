#include "monitor/watchdog/watchdog.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace monitor::watchdog {

std::string_view on_stop_name(OnStop s) noexcept {
    return name_of(kOnStopNames, s);
}

std::optional<OnStop> on_stop_from_name(std::string_view name) noexcept {
    return value_named(kOnStopNames, name);
}

// now_ is never empty (an empty `now` is the default clock): credit() calls it, and must not
// throw std::bad_function_call on a probe's thread.
Watchdog::Watchdog(PetPolicyKind policy, std::function<Clock::time_point()> now)
    : policy_(policy), now_(now ? std::move(now) : Clock::now), origin_(now_()) {}

// The probes hold the watchdog (the credit sink) until they have stopped: no pet is under way.
Watchdog::~Watchdog() {
    close_armed();
}

std::uint32_t Watchdog::ms_since_origin(Clock::time_point t) const noexcept {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - origin_);
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(ms.count()));
}

bool Watchdog::take(Lease& l) noexcept {
    std::uint32_t refs = l.refs.load();
    do {
        if (refs == 0) return false;
    } while (!l.refs.compare_exchange_weak(refs, refs + 1));
    return true;
}

void Watchdog::release(Lease& l) noexcept {
    if (l.refs.fetch_sub(1) != 1) return;
    l.device->close_armed();  // a magic close, when the owner wrote the 'V' before letting go
    l.closed.store(true);
}

Result<void> Watchdog::arm(const std::string& device, std::chrono::seconds timeout) {
    if (lease_.load() != nullptr) {
        return fail(Status::BadState, known_->path + " is already armed");
    }
    auto d = WatchdogDevice::open(device, timeout);
    if (!d) return std::unexpected(d.error());
    known_ =
        Known{d->path(), d->identity(), d->timeout(), d->last_reset_by_watchdog(), d->nowayout()};
    timeout_s_ = d->timeout().value_or(static_cast<int>(timeout.count()));
    // A lease whose last pet has ended, or a new one. No probe can take a reference to it
    // before refs is 1 again.
    Lease* lease = nullptr;
    for (auto& l : leases_) {
        if (l->closed.load() && l->refs.load() == 0) {
            lease = l.get();
            break;
        }
    }
    if (lease == nullptr) lease = leases_.emplace_back(std::make_unique<Lease>()).get();
    lease->device.emplace(std::move(*d));
    lease->closed.store(false);
    lease->refs.store(1);
    // Opening is the first keepalive.
    last_pet_ms_.store(ms_since_origin(now_()));
    longest_gap_ms_.store(0);
    lease_.store(lease);
    return {};
}

Result<void> Watchdog::disarm() {
    Lease* lease = lease_.exchange(nullptr);
    if (lease == nullptr) return {};
    auto written = lease->device->write_magic();
    release(*lease);
    return written;
}

void Watchdog::close_armed() {
    if (Lease* lease = lease_.exchange(nullptr)) release(*lease);
}

// NOLINTNEXTLINE(bugprone-exception-escape): now_ is never empty (see the constructor)
void Watchdog::credit(int cpu) noexcept {
    const auto now = now_();
    if (!policy_.credit(cpu, now)) return;
    (void)pet_at(now);
}

Result<void> Watchdog::pet() {
    if (lease_.load() == nullptr) {
        return fail(Status::BadState, "the watchdog is not armed, so there is nothing to pet");
    }
    if (const int err = pet_at(now_()); err != 0) {
        return fail_errno(err, fmt::format("{}: keepalive", known_ ? known_->path : "watchdog"));
    }
    return {};
}

int Watchdog::pet_at(Clock::time_point now) noexcept {
    Lease* lease = lease_.load();
    if (lease == nullptr || !take(*lease)) return 0;
    const int err = lease->device->keepalive();
    release(*lease);
    if (err != 0) {
        last_pet_errno_.store(err);
        pet_errors_.fetch_add(1);
        return err;
    }
    const std::uint32_t at = ms_since_origin(now);
    std::uint32_t gap = at - last_pet_ms_.exchange(at);
    // Two pets that overlap (a keepalive that took longer than the policy's 100 ms) may
    // store their times out of order: the later one then sees a gap "below zero".
    if (gap > UINT32_MAX / 2) gap = 0;
    pets_.fetch_add(1);
    // A pet that came after more than half the timeout is a near miss.
    if (gap > static_cast<std::uint32_t>(timeout_s_.load(std::memory_order_relaxed)) * 500U) {
        late_pets_.fetch_add(1);
    }
    std::uint32_t longest = longest_gap_ms_.load(std::memory_order_relaxed);
    while (gap > longest && !longest_gap_ms_.compare_exchange_weak(longest, gap)) {
    }
    return 0;
}

WatchdogStatus Watchdog::status() const {
    WatchdogStatus s;
    s.policy = policy_.kind();
    s.waiting_for = policy_.waiting_for();
    s.pets = pets_.load();
    s.pet_errors = pet_errors_.load();
    s.late_pets = late_pets_.load();
    s.longest_pet_gap = std::chrono::milliseconds(longest_gap_ms_.load());
    if (!known_) return s;
    if (s.pet_errors > 0) {
        s.last_error =
            fmt::format("{}: keepalive: {}", known_->path, errno_message(last_pet_errno_.load()));
    }
    s.device = known_->path;
    s.identity = known_->identity;
    s.timeout_s = known_->timeout_s;
    s.last_reset_by_watchdog = known_->last_reset_by_watchdog;
    s.nowayout = known_->nowayout;
    // Only this thread sets lease_, and while it is set the owner's reference keeps the
    // device open.
    if (const Lease* lease = lease_.load()) {
        s.armed = true;
        s.time_left_s = lease->device->time_left();
        s.since_last_pet = since_last_pet();
    }
    return s;
}

std::optional<std::chrono::nanoseconds> Watchdog::since_last_pet() const noexcept {
    if (lease_.load() == nullptr) return std::nullopt;
    return std::chrono::milliseconds(ms_since_origin(now_()) - last_pet_ms_.load());
}

}  // namespace monitor::watchdog
