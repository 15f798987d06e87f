#include "monitor/runtime/counter_run.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace monitor {

using namespace std::chrono;

namespace {

// Within this of its end, a run's period is its last: a timer may fire up to its accuracy
// early, and a last period of a millisecond would say nothing.
constexpr milliseconds kEndSlack{1};

}  // namespace

Result<void> CounterRunOptions::check() const {
    if (duration && (duration->count() < 1 || *duration > kMaxCountingDuration)) {
        return fail(Status::BadArg,
                    fmt::format("duration of {} ms: choose from 1 ms to 7 days ({} ms)",
                                duration->count(), kMaxCountingDuration.count()));
    }
    if (interval) {
        const milliseconds longest = duration.value_or(kMaxCountingDuration);
        if (*interval < kMinCountingInterval || *interval > longest) {
            return fail(
                Status::BadArg,
                fmt::format("interval of {} ms: choose from {} ms to the duration ({} ms)",
                            interval->count(), kMinCountingInterval.count(), longest.count()));
        }
    }
    return {};
}

CounterRun::CounterRun(std::unique_ptr<perf::PerfSession> session, CounterRunOptions options,
                       Clock::time_point started, const TickSchedule* ticks)
    : session_(std::move(session)),
      options_(options),
      ticks_(ticks),
      ends_(options.duration ? started + *options.duration : Clock::time_point::max()) {
    if (auto every = care_interval()) care_due_ = started + *every;
    period_due_ = options_.interval ? period_end(started + *options_.interval) : ends_;
}

CounterRun::~CounterRun() = default;

std::optional<CounterRun::Clock::duration> CounterRun::care_interval() const {
    if (session_->rotates()) return session_->options().slice;
    if (session_->narrow()) return seconds(1);
    return std::nullopt;
}

CounterRun::Clock::time_point CounterRun::period_end(Clock::time_point target) const {
    if (ticks_ != nullptr && options_.interval && options_.interval->count() % 1000 == 0) {
        target = ticks_->nearest(target);
    }
    return std::min(target, ends_);
}

CounterRun::Clock::time_point CounterRun::next_due() const {
    return finished_ ? Clock::time_point::max() : std::min(care_due_, period_due_);
}

Result<void> CounterRun::read_next() {
    perf::PerfReport& next = readings_[1 - current_];
    if (auto r = session_->read(next); !r) return r;
    current_ = 1 - current_;
    return {};
}

Result<CounterRun::Step> CounterRun::advance(Clock::time_point now) {
    Step step;
    if (finished_) return step;
    if (now >= care_due_) {
        // Rotating reads the set that leaves the counters. Without rotation the narrow
        // counters are read into the spare reading, which the next period reads again.
        auto r = session_->rotates() ? session_->rotate() : session_->read(readings_[1 - current_]);
        if (!r) return std::unexpected(r.error());
        const auto every = *care_interval();
        care_due_ += every;
        if (care_due_ <= now) care_due_ = now + every;
    }
    if (now < period_due_) return step;
    const bool last = now + kEndSlack >= ends_;
    if (last) {
        if (auto r = session_->stop(); !r) return std::unexpected(r.error());
    }
    if (auto r = read_next(); !r) return std::unexpected(r.error());
    if (options_.interval) {
        ++periods_;
        // Assigned element by element: no allocation once the sizes hold.
        period_ = readings_[current_];
        period_.subtract(readings_[1 - current_]);  // the first period: from nothing
        step.period_ended = true;
    }
    if (last) {
        finished_ = true;
        step.finished = true;
        return step;
    }
    period_due_ = options_.interval ? period_end(now + *options_.interval) : ends_;
    return step;
}

Result<perf::PerfReport> CounterRun::reset() {
    if (finished_) return fail(Status::NotRdy, "the session has ended");
    auto before = session_->reset();
    if (!before) return before;
    // The reading the period under way started from is now zero, in the shape of a reading:
    // the period counts from the reset, not from a read after it.
    readings_[current_] = *before;
    readings_[current_].subtract(*before);
    return before;
}

Result<perf::PerfReport> CounterRun::pause() {
    if (finished_) return fail(Status::NotRdy, "the session has ended");
    if (auto r = session_->pause(); !r) return std::unexpected(r.error());
    return session_->read();
}

Result<perf::PerfReport> CounterRun::resume() {
    if (finished_) return fail(Status::NotRdy, "the session has ended");
    if (auto r = session_->resume(); !r) return std::unexpected(r.error());
    return session_->read();
}

Result<void> CounterRun::finish() {
    if (finished_) return {};
    finished_ = true;
    if (auto r = session_->stop(); !r) return r;
    return read_next();
}

}  // namespace monitor
