// A counting session that paces itself: it says when it next needs its caller (next_due())
// and does what is due when called (advance()). What is due:
//   - every slice, the next counter set when the sets take turns (daemon multiplexing);
//   - once a second, a read of counters narrower than 64 bits (a 750's 32-bit PMCs wrap in
//     21 s at 200 MHz), so that none wraps twice between two reads;
//   - every interval, the end of a period (its counts are the difference of two readings);
//     intervals of whole seconds end on the loading ticks of a TickSchedule, so that a
//     caller that ticks once a second also wakes only once a second for its periods;
//   - after its duration, the end: the counters stop and the totals are read.
// The daemon, the MON_* C API and `monctl perf stat` each drive one with their own loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "monitor/perf/perf_session.hpp"
#include "monitor/runtime/tick_schedule.hpp"
#include "monitor/status.hpp"

namespace monitor {

// The longest a session may count for a duration (a collect): a week.
inline constexpr std::chrono::milliseconds kMaxCountingDuration{7LL * 24 * 3600 * 1000};
// The shortest interval between two periods' records.
inline constexpr std::chrono::milliseconds kMinCountingInterval{10};

struct CounterRunOptions {
    // Ends by itself this long after it started; nullopt: runs until finish().
    std::optional<std::chrono::milliseconds> duration;
    // A period ends every interval (within the duration); nullopt: no periods.
    std::optional<std::chrono::milliseconds> interval;

    // BADARG naming the value and what would work: a duration from 1 ms to kMaxCountingDuration,
    // an interval from kMinCountingInterval to the duration.
    Result<void> check() const;
};

class CounterRun {
  public:
    using Clock = std::chrono::steady_clock;

    // What one advance() did.
    struct Step {
        bool period_ended = false;  // period() holds the counts of the period that ended
        bool finished = false;      // the duration is over: the counters stopped, totals() final
    };

    // `session` has been counting since `started`. `ticks` (may be null; must outlive the
    // run) is the loading tick's schedule that periods of whole seconds end on.
    CounterRun(std::unique_ptr<perf::PerfSession> session, CounterRunOptions options,
               Clock::time_point started, const TickSchedule* ticks = nullptr);
    ~CounterRun();
    CounterRun(const CounterRun&) = delete;
    CounterRun& operator=(const CounterRun&) = delete;

    // When advance() must next be called; Clock::time_point::max() when never (a session
    // whose counters need no care, without periods or a duration, or a finished one).
    Clock::time_point next_due() const;
    // Does what is due at `now`: rotates, reads, ends a period, ends the run. A failure
    // leaves the run unusable: its owner ends it (the message names what failed).
    Result<Step> advance(Clock::time_point now);
    // Ends the run now (a stop before its duration): the counters stop and totals() holds
    // the final counts. Does nothing more when the run is finished already.
    Result<void> finish();
    // Counts from zero again (perf::PerfSession::reset): returns the counts so far, since
    // the start or the last reset. totals() and the period under way then count from here;
    // the periods keep their schedule. NOTRDY once the run is finished.
    Result<perf::PerfReport> reset();
    // Stops counting until resume() (perf::PerfSession::pause): the periods and the duration
    // go on, counting nothing. Return the counts so far, the time paused with them. Pausing
    // a paused run, or resuming one that is not, changes nothing. NOTRDY once the run is
    // finished.
    Result<perf::PerfReport> pause();
    Result<perf::PerfReport> resume();
    bool paused() const { return session_->paused(); }

    bool finished() const { return finished_; }
    const CounterRunOptions& options() const { return options_; }
    // When the duration ends; Clock::time_point::max() without one.
    Clock::time_point ends() const { return ends_; }
    // The periods that have ended so far.
    std::int64_t periods() const { return periods_; }
    // The counts as of the last period's end or finish(); empty before either.
    const perf::PerfReport& totals() const { return readings_[current_]; }
    // The counts of the last period that ended.
    const perf::PerfReport& period() const { return period_; }

    const perf::PerfSession& session() const { return *session_; }
    // For reads outside the pace (a client asking for the counts so far).
    perf::PerfSession& session() { return *session_; }

  private:
    // How often the counters need care: every slice when the sets take turns, every second
    // when they are narrow; nullopt when never.
    std::optional<Clock::duration> care_interval() const;
    // When the period that would end at `target` ends: on the nearest tick for whole
    // seconds, never after the run's end.
    Clock::time_point period_end(Clock::time_point target) const;
    Result<void> read_next();

    std::unique_ptr<perf::PerfSession> session_;
    CounterRunOptions options_;
    const TickSchedule* ticks_;
    Clock::time_point ends_;
    Clock::time_point care_due_ = Clock::time_point::max();
    Clock::time_point period_due_ = Clock::time_point::max();
    // Two readings, the newest at current_: a period's counts are their difference. Reused
    // from period to period, so that a stream's records allocate (almost) nothing.
    perf::PerfReport readings_[2];
    int current_ = 0;
    perf::PerfReport period_;
    std::int64_t periods_ = 0;
    bool finished_ = false;
};

}  // namespace monitor
