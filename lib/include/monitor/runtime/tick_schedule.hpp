// When the loading tick is due: once a period (a second), each tick one period after the one
// before, so that ticks do not drift with the time it takes to run them. After a stall (a
// suspend, SIGSTOP, a machine too busy to run the caller) the schedule restarts from the late
// tick instead of firing the missed ticks back to back: a missed second is a gap, never a
// burst of samples of no length.
#pragma once

#include <chrono>

namespace monitor {

class TickSchedule {
  public:
    using Clock = std::chrono::steady_clock;
    static constexpr Clock::duration kPeriod = std::chrono::seconds(1);

    // The first tick is due one period after `start`.
    explicit TickSchedule(Clock::time_point start, Clock::duration period = kPeriod)
        : period_(period), next_(start + period) {}

    Clock::duration period() const { return period_; }
    // When the next tick is due.
    Clock::time_point next() const { return next_; }
    bool due(Clock::time_point now) const { return now >= next_; }
    // The tick due at next() ran at `now`: the next one is due a period after it, or a period
    // after `now` when that is already past (a stall).
    void advance(Clock::time_point now);
    // The tick of the schedule nearest to `target`, counting from next() on: a time that
    // ends on a tick, so that whatever is due then is done in the same wake-up.
    Clock::time_point nearest(Clock::time_point target) const;

  private:
    Clock::duration period_;
    Clock::time_point next_;
};

}  // namespace monitor
