// A sampling session that paces itself, as a CounterRun paces a counting one: it says when it
// next needs its caller (next_due()), which descriptors make it due at once (fds()), and does
// what is due when called (advance()). What is due:
//   - the rings read, when the kernel says one fills and every `drain` besides (a process is
//     named from its memory map, which has to be read while it still runs);
//   - every interval, the end of an interval: a profile's is named (it comes back in a later
//     step), a watch of overflows' is told to its caller;
//   - after its duration, or once the process sampled has exited, the end: sampling stops and
//     what the rings hold is read; a profile's whole is named and comes back in a later step.
// A run either names its samples, on a ProfileNamer thread (a profile), or hands each to an
// observer as it is read and names none (a watch of overflows). The daemon's profiles and
// watches and the MON_* C API's overflow handlers are such runs, in the Runtime.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "monitor/perf/profile_namer.hpp"
#include "monitor/perf/profile_session.hpp"
#include "monitor/runtime/tick_schedule.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor {

// How often a run's rings are read besides when they fill, by default.
inline constexpr std::chrono::milliseconds kDefaultSampleDrain{50};

struct SampleRunOptions {
    // Ends by itself this long after it started; nullopt: runs until the process sampled exits
    // or finish().
    std::optional<std::chrono::milliseconds> duration;
    // An interval ends every interval (within the duration); nullopt: no intervals.
    std::optional<std::chrono::milliseconds> interval;
    // The rings are read at least this often; a drain of whole seconds on the loading ticks,
    // once the run is paced with them (pace_with()).
    std::chrono::milliseconds drain = kDefaultSampleDrain;

    // BADARG naming the value and what would work, as CounterRunOptions::check() says it.
    Result<void> check() const;
};

class SampleRun {
  public:
    using Clock = std::chrono::steady_clock;
    using Observer = std::function<void(const perf::Sample&)>;

    // Why sampling ended.
    enum class End {
        Duration,  // its duration passed
        Exited,    // the process sampled exited
        Finished,  // finish() was called
    };

    // A profile named by the namer, with the time it covers.
    struct Named {
        bool whole = false;  // the whole profile, the run's last; false: an interval
        perf::Profile profile;
        Clock::time_point from;
        Clock::time_point to;
    };

    // What one advance() did.
    struct Step {
        bool interval_ended = false;  // an interval ended (a profile's comes back in `named`)
        std::optional<End> ended;     // sampling ended at this step
        std::vector<Named> named;     // named since the last step, in the order asked for
    };

    // `session` has been sampling since `started`. Without `observer`, its samples are named on
    // a ProfileNamer thread of its own (the session's builder goes to it); with one, each is
    // handed to `observer` as it is read and none is named. `pidfd` (may be empty) is the
    // process sampled: the run ends once it is readable. The error when the namer cannot
    // start.
    static Result<std::unique_ptr<SampleRun>> start(std::unique_ptr<perf::ProfileSession> session,
                                                    SampleRunOptions options,
                                                    Clock::time_point started, UniqueFd pidfd = {},
                                                    Observer observer = {});
    ~SampleRun();
    SampleRun(const SampleRun&) = delete;
    SampleRun& operator=(const SampleRun&) = delete;

    // Drains of whole seconds from now on end on the ticks of `ticks` (null: none; it must
    // outlive the run), so that a caller that ticks once a second wakes only then for them.
    void pace_with(const TickSchedule* ticks);

    // When advance() must next be called, unless one of fds() becomes readable first;
    // Clock::time_point::max() once sampling ended (a profile then waits for its namer only).
    Clock::time_point next_due() const;
    // The descriptors whose readiness makes the run due at once: each ring (filling) and the
    // process's pidfd while sampling, the namer's until the whole is named. Fewer once sampling
    // ended (a step's `ended`): a ring of a process gone would stay readable.
    std::vector<int> fds() const;
    // Does what is due at `now`. A failure (sampling cannot be stopped) leaves the run unusable:
    // its owner ends it.
    Result<Step> advance(Clock::time_point now);
    // Ends sampling now (End::Finished), before its duration: as advance() does at the end.
    // Does nothing more once sampling ended.
    Result<Step> finish(Clock::time_point now);

    // Stops sampling until resume() (perf::ProfileSession::pause); the run goes on. Neither
    // does anything once sampling ended.
    Result<void> pause();
    Result<void> resume();

    // Sampling ended.
    bool ended() const { return ended_; }
    // Nothing more will come: sampling ended and, for a profile, the whole was named.
    bool done() const { return ended_ && (!namer_ || whole_named_); }
    Clock::time_point started() const { return started_; }
    const SampleRunOptions& options() const { return options_; }
    const perf::ProfileSession& session() const { return *session_; }

  private:
    SampleRun(std::unique_ptr<perf::ProfileSession> session, SampleRunOptions options,
              Clock::time_point started, UniqueFd pidfd, Observer observer);
    void read();
    // When the drain after one at `now` is due.
    Clock::time_point next_drain(Clock::time_point now) const;
    bool exited() const;
    Result<void> end(End why, Clock::time_point now, Step& step);
    void take_named(Step& step);

    std::unique_ptr<perf::ProfileSession> session_;
    SampleRunOptions options_;
    Clock::time_point started_;
    UniqueFd pidfd_;
    Observer observer_;
    const TickSchedule* ticks_ = nullptr;
    std::unique_ptr<perf::ProfileNamer> namer_;
    Clock::time_point drain_due_;
    Clock::time_point interval_due_ = Clock::time_point::max();
    Clock::time_point ends_ = Clock::time_point::max();
    Clock::time_point interval_started_;
    // The intervals asked of the namer and not named yet, oldest first; then the whole.
    std::deque<std::pair<Clock::time_point, Clock::time_point>> asked_;
    bool ended_ = false;
    bool whole_named_ = false;
};

}  // namespace monitor
