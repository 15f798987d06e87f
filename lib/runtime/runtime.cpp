#include "monitor/runtime/runtime.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace monitor {

Result<std::unique_ptr<Runtime>> Runtime::create(EngineOptions options,
                                                 std::shared_ptr<watchdog::Watchdog> watchdog,
                                                 const std::function<Clock::time_point()>& clock) {
    options.idle_sink = watchdog;
    auto engine = Engine::create(options, clock);
    if (!engine) return std::unexpected(engine.error());
    return std::unique_ptr<Runtime>(new Runtime(std::move(*engine), std::move(watchdog), clock()));
}

Runtime::Runtime(std::unique_ptr<Engine> engine, std::shared_ptr<watchdog::Watchdog> watchdog,
                 Clock::time_point start)
    : watchdog_(std::move(watchdog)), engine_(std::move(engine)), ticks_(start) {
    // A watchdog still armed (MON_stop leaves it so) is petted by these probes from now on.
    if (watchdog_) {
        watchdog_cpus_ = probing_cpus();
        watchdog_->set_cpus(watchdog_cpus_);
    }
}

// The runs' counters close before the engine's probes stop.
Runtime::~Runtime() {
    samplings_.clear();
    runs_.clear();
}

std::vector<int> Runtime::probing_cpus() const {
    std::vector<int> cpus;
    if (const auto* probes = engine_->petting_probes()) {
        for (const auto& r : probes->read()) {
            if (r.state != ProbeState::Failed && r.state != ProbeState::Stopped) {
                cpus.push_back(r.cpu);
            }
        }
    }
    return cpus;
}

Result<void> Runtime::arm_watchdog(const std::string& device, std::chrono::seconds timeout) {
    if (!watchdog_) return fail(Status::BadArg, "watchdog: none was given to the runtime");
    if (timeout.count() < 1 || timeout > kMaxWatchdogTimeout) {
        return fail(Status::BadArg, "a watchdog timeout of " + std::to_string(timeout.count()) +
                                        " s: choose from 1 to " +
                                        std::to_string(kMaxWatchdogTimeout.count()));
    }
    if (engine_->probe_mode() == ProbeMode::Off) {
        return fail(Status::BadArg, device +
                                        " is petted by the idle probes, and --probe off runs "
                                        "none; use spin or sleep");
    }
    const auto* petters = engine_->petting_probes();
    if (petters != nullptr && petters->mode() == ProbeMode::Sleep &&
        timeout < kMinSleepWatchdogTimeout) {
        return fail(Status::BadArg,
                    fmt::format("a watchdog timeout of {} s: the probes earn their credits from "
                                "the idle time each loading tick reads, once a second, so the "
                                "pets come about a second apart; use {} s or more",
                                timeout.count(), kMinSleepWatchdogTimeout.count()));
    }
    return watchdog_->arm(device, timeout);
}

Runtime::RunId Runtime::add_run(std::unique_ptr<perf::PerfSession> session,
                                CounterRunOptions options, Clock::time_point started) {
    const RunId id = next_run_++;
    runs_.emplace(id, std::make_unique<CounterRun>(std::move(session), options, started, &ticks_));
    return id;
}

CounterRun* Runtime::run(RunId id) {
    auto it = runs_.find(id);
    return it == runs_.end() ? nullptr : it->second.get();
}

const CounterRun* Runtime::run(RunId id) const {
    auto it = runs_.find(id);
    return it == runs_.end() ? nullptr : it->second.get();
}

void Runtime::remove_run(RunId id) {
    runs_.erase(id);
}

Runtime::RunId Runtime::add_sampling(std::unique_ptr<SampleRun> run) {
    const RunId id = next_run_++;
    run->pace_with(&ticks_);
    samplings_.emplace(id, std::move(run));
    return id;
}

SampleRun* Runtime::sampling(RunId id) {
    auto it = samplings_.find(id);
    return it == samplings_.end() ? nullptr : it->second.get();
}

void Runtime::remove_sampling(RunId id) {
    samplings_.erase(id);
}

Runtime::Clock::time_point Runtime::next_due() const {
    Clock::time_point due = ticks_.next();
    for (const auto& [id, run] : runs_) due = std::min(due, run->next_due());
    for (const auto& [id, run] : samplings_) due = std::min(due, run->next_due());
    return due;
}

Runtime::Due Runtime::run_due(Clock::time_point now) {
    Due due;
    if (ticks_.due(now)) {
        due.ticked = true;
        due.tick = engine_->tick(now);
        keep_watchdog(due);
        ticks_.advance(now);
    }
    for (auto& [id, run] : runs_) {
        if (run->next_due() <= now) due.runs.push_back({id, run->advance(now)});
    }
    for (auto& [id, run] : samplings_) {
        if (run->next_due() <= now) due.samplings.push_back({id, run->advance(now)});
    }
    return due;
}

void Runtime::keep_watchdog(Due& due) {
    if (!watchdog_) return;
    // Only on a change: set_cpus rewrites the policy's bitmaps, which the probes read.
    if (auto cpus = probing_cpus(); cpus != watchdog_cpus_) {
        watchdog_->set_cpus(cpus);
        watchdog_cpus_ = std::move(cpus);
    }
    const auto s = watchdog_->status();
    if (s.pet_errors != pet_errors_seen_) {
        due.failed_pets = s.pet_errors - pet_errors_seen_;
        due.last_pet_error = s.last_error;
        pet_errors_seen_ = s.pet_errors;
    }
}

}  // namespace monitor
