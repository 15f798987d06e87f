// What every front end of libmonitor runs: the Engine on its tick schedule, the hardware
// watchdog the engine's idle probes pet (armed with the CPUs that can earn credits, kept in
// step with them), and the counter and sample runs that pace themselves. The front ends are
// adapters over it: the daemon drives it from its sd-event loop, the MON_* C API from its POLL
// task; each asks next_due() when to wake and calls run_due() when woken, so that every rule of
// timing lives here once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "monitor/engine.hpp"
#include "monitor/runtime/counter_run.hpp"
#include "monitor/runtime/sample_run.hpp"
#include "monitor/runtime/tick_schedule.hpp"
#include "monitor/status.hpp"
#include "monitor/watchdog/watchdog.hpp"

namespace monitor {

// The longest watchdog timeout asked of a driver, and the one asked by default.
inline constexpr std::chrono::seconds kMaxWatchdogTimeout{3600};
inline constexpr std::chrono::seconds kDefaultWatchdogTimeout{10};
// The shortest timeout sleeping probes pet: their credits come with the loading tick, once a
// second, and a tick may be late.
inline constexpr std::chrono::seconds kMinSleepWatchdogTimeout{3};

class Runtime {
  public:
    using Clock = std::chrono::steady_clock;
    using RunId = std::uint64_t;

    // Creates the engine (its probes calibrate first), with `watchdog` (may be null) getting
    // the probes' idle credits; the first tick is due a second after clock().
    static Result<std::unique_ptr<Runtime>> create(EngineOptions options,
                                                   std::shared_ptr<watchdog::Watchdog> watchdog,
                                                   const std::function<Clock::time_point()>& clock);
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    Engine& engine() { return *engine_; }
    const Engine& engine() const { return *engine_; }
    const TickSchedule& ticks() const { return ticks_; }

    // The CPUs whose probes can earn idle credits (not failed, not stopped): a failed probe
    // must not hold every pet back.
    std::vector<int> probing_cpus() const;
    // Opens (arms) `device` with `timeout`, to be petted when the probes of probing_cpus()
    // earn credits; the list follows the probes at every tick. BADARG without probes (they
    // pet it), with sleeping ones (they pet once a tick; spinning ones elsewhere have them)
    // and a timeout under kMinSleepWatchdogTimeout, or without a watchdog given to create();
    // the device's errors otherwise.
    Result<void> arm_watchdog(const std::string& device, std::chrono::seconds timeout);
    watchdog::Watchdog* watchdog() const { return watchdog_.get(); }

    // Counter runs paced with the loading tick: their periods of whole seconds end on it.
    RunId add_run(std::unique_ptr<perf::PerfSession> session, CounterRunOptions options,
                  Clock::time_point started);
    // nullptr when there is no such run (any more).
    CounterRun* run(RunId id);
    const CounterRun* run(RunId id) const;
    // Ends a run: its counters close.
    void remove_run(RunId id);

    // Sample runs (profiles, watches of overflows, counted events' sampled addresses), in the
    // same id space as the counter runs, paced with the ticks (SampleRun::pace_with). A run is
    // also due when one of its fds() is readable: its owner then calls its advance() itself,
    // and asks next_due() again.
    RunId add_sampling(std::unique_ptr<SampleRun> run);
    // nullptr when there is no such run (any more).
    SampleRun* sampling(RunId id);
    // Ends a sample run: its rings close (a namer still naming drops what it names).
    void remove_sampling(RunId id);

    // When run_due() must next be called: the next tick or the earliest run's due time.
    Clock::time_point next_due() const;

    // What one run_due() did.
    struct Due {
        bool ticked = false;
        Result<void> tick;  // the sample's outcome when ticked (a failure is a gap)
        // Pets that failed since the last run_due() (the probes pet from their threads), and
        // the last one's reason.
        std::uint64_t failed_pets = 0;
        std::string last_pet_error;
        struct RunStep {
            RunId id = 0;
            Result<CounterRun::Step> step;
        };
        // The runs that were due, with what they did or why they failed (the owner then
        // removes them).
        std::vector<RunStep> runs;
        struct SampleStep {
            RunId id = 0;
            Result<SampleRun::Step> step;
        };
        // The same of the sample runs.
        std::vector<SampleStep> samplings;
    };
    // Does whatever is due at `now`: the tick (a sample of every source, then the
    // watchdog's CPUs brought in step with the probes), and the runs' work.
    Due run_due(Clock::time_point now);

  private:
    Runtime(std::unique_ptr<Engine> engine, std::shared_ptr<watchdog::Watchdog> watchdog,
            Clock::time_point start);
    void keep_watchdog(Due& due);

    std::shared_ptr<watchdog::Watchdog> watchdog_;  // before the engine: its probes credit it
    std::unique_ptr<Engine> engine_;
    TickSchedule ticks_;
    std::vector<int> watchdog_cpus_;  // as last given to the watchdog
    std::uint64_t pet_errors_seen_ = 0;
    std::map<RunId, std::unique_ptr<CounterRun>> runs_;
    std::map<RunId, std::unique_ptr<SampleRun>> samplings_;
    RunId next_run_ = 1;
};

}  // namespace monitor
