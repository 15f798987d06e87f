// The standing counter sessions of monitord.conf's [[counters]] tables. Each counts from the
// daemon's start, or from the reload that added or changed it, as a run of the runtime whose
// periods of one second end on the loading tick: its totals and its last second are read
// there, whoever asks. A reload adds, restarts (when changed) and removes sessions; an
// unchanged one counts on. A session that cannot open (an event this machine lacks, a unit
// that does not run yet) is kept with its reason and tried again every 10 s. A session
// counting a cgroup (or a unit's) looks at it every 10 s too: a cgroup removed, or made again
// (a unit that restarted gets a new one at the same path), leaves the counters on the old
// one counting nothing, so the session opens again on what the path names now.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/runtime/runtime.hpp"

namespace monitord {

class StandingCounters {
  public:
    using Clock = monitor::Runtime::Clock;
    // Opens a request's counters (the counter service's catalog and device).
    using Opener = std::function<monitor::Result<std::unique_ptr<monitor::perf::PerfSession>>(
        const monitor::protocol::CounterRequest&)>;

    static constexpr std::chrono::seconds kRetryInterval{10};

    // `schedule_changed` is called when runs are added or removed.
    StandingCounters(monitor::Runtime& runtime, Opener open,
                     std::function<void()> schedule_changed);
    ~StandingCounters();
    StandingCounters(const StandingCounters&) = delete;
    StandingCounters& operator=(const StandingCounters&) = delete;

    // Makes the sessions those of `tables`: starts the new ones, restarts the changed ones,
    // ends the ones gone, keeps the others counting. Logs what it did.
    void configure(const std::vector<StandingSessionConfig>& tables, Clock::time_point now);
    // What run_due() did to a run; false when the run is not a standing session's.
    bool run_stepped(const monitor::Runtime::Due::RunStep& step, Clock::time_point now);
    // Tries the failed sessions again, and looks at the counted cgroups, when their time has
    // come (called on the tick).
    void retry_due(Clock::time_point now);

    // The sessions, in table order; the one named only (empty when there is none).
    std::vector<monitor::protocol::StandingSession> report(
        const std::optional<std::string>& name) const;
    std::vector<std::string> names() const;
    // Whether a session of that name is configured.
    bool has(const std::string& name) const;
    // Counts the named session from zero again (monitor::CounterRun::reset): returns its
    // counts up to now, since it started or was last reset. NOTRDY for one not counting.
    monitor::Result<monitor::protocol::CounterReport> reset(const std::string& name);
    // Pauses or resumes the named session (monitor::CounterRun::pause, resume): returns its
    // counts so far. A paused session stays paused when it is opened again (its cgroup
    // replaced, a retry); a reload that changes its table starts it anew, counting. NOTRDY
    // for one not counting.
    monitor::Result<monitor::protocol::CounterReport> set_paused(const std::string& name,
                                                                 bool paused);
    // The names of the counting sessions whose plans take counters of `plan`'s PMUs.
    std::vector<std::string> sharing(const monitor::perf::Plan& plan) const;

  private:
    struct Session {
        StandingSessionConfig config;
        monitor::Runtime::RunId run = 0;  // 0: not counting
        std::string error;                // why not
        // When to try again (not counting), or to look at the cgroup (counting one).
        Clock::time_point retry = Clock::time_point::max();
        monitor::protocol::ReportShape shape;  // per CPU for a target of each CPU
        std::string cgroup;  // the directory of a cgroup or unit target, as opened
        ino_t cgroup_ino = 0;
        bool paused = false;  // PauseCounters, until ResumeCounters
    };

    void open(Session& s, Clock::time_point now);
    // The named session and its run; BADARG for none, NOTRDY for one not counting.
    monitor::Result<std::pair<Session*, monitor::CounterRun*>> counting(const std::string& name);
    // Whether the cgroup the session counts is gone or another directory now.
    static bool cgroup_replaced(const Session& s);
    void close(Session& s);
    const monitor::CounterRun* run_of(const Session& s) const;

    monitor::Runtime& runtime_;
    Opener open_;
    std::function<void()> schedule_changed_;
    std::vector<Session> sessions_;
};

}  // namespace monitord
