#include "monitor/runtime/tick_schedule.hpp"

#include <algorithm>

namespace monitor {

void TickSchedule::advance(Clock::time_point now) {
    next_ += period_;
    if (next_ <= now) next_ = now + period_;
}

TickSchedule::Clock::time_point TickSchedule::nearest(Clock::time_point target) const {
    if (target <= next_) return next_;
    // Rounded to the nearest whole period (half a period rounds up).
    const auto periods = (target - next_ + period_ / 2) / period_;
    return next_ + periods * period_;
}

}  // namespace monitor
