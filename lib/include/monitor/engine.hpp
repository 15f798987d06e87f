// The Engine owns libmonitor's moving parts and is driven by tick(now) once a second: the
// daemon calls it from its event loop, the MON_* C API from its POLL thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "monitor/loading/cpu_context.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "monitor/loading/cpu_map.hpp"
#include "monitor/loading/history_record.hpp"
#include "monitor/loading/idle_probe.hpp"
#include "monitor/loading/load_history.hpp"
#include "monitor/loading/load_source.hpp"
#include "monitor/loading/loading_report.hpp"
#include "monitor/loading/probe_set.hpp"
#include "monitor/loading/probes.hpp"
#include "monitor/loading/task_usage.hpp"
#include "monitor/loading/unit_usage.hpp"
#include "monitor/status.hpp"

namespace monitor {

// The longest history window, in per-second samples (an hour), and the default (a minute).
inline constexpr std::size_t kMaxHistorySeconds = 3600;
inline constexpr std::size_t kDefaultHistorySeconds = 60;

struct EngineOptions {
    std::filesystem::path proc_root = "/proc";  // tests point these at fixtures
    std::filesystem::path sys_root = "/sys";
    std::size_t history_seconds = kDefaultHistorySeconds;  // length of the window

    // Idle probes: spin adds the "probe" source and takes the probes' CPU time out of the
    // procstat figures; sleep runs probes that measure nothing and earn the watchdog's
    // credits from the kernel's idle time, which each tick gives them.
    ProbeMode probe = ProbeMode::Off;
    ProbeThreadAttr probe_attr;
    std::optional<std::vector<int>> probe_cpus;  // nullopt: every online CPU
    CalibrationPlan calibration;
    // How long create() waits for the probes to calibrate; those still calibrating after
    // it give gaps until they are done.
    std::chrono::milliseconds calibration_wait{3000};
    // Gets the probes' idle credits (the watchdog); the probes must spin or sleep.
    std::shared_ptr<IdleCreditSink> idle_sink;
    // Spinning probes that run elsewhere, with probe = Spin: a helper process placed where
    // they yield to every scheduling group (the daemon's ProbeProcess). The probe source and
    // the correction of /proc/stat read them; the engine's own probes then sleep and earn the
    // credits from the idle time of /proc/stat so corrected. nullptr: spinning probes are
    // threads of this process and earn them from their own CPU time (the MON C API).
    std::shared_ptr<Probes> spinners;
    // CPU time per systemd unit from the cgroup hierarchies mounted there (UnitUsage; the
    // daemon's /sys/fs/cgroup); empty: none (the MON C API). A machine without cgroup
    // accounting does not fail the engine: its reports say why they have no units.
    std::filesystem::path cgroup_root;
    // The CPUs' context (CpuContext, from proc_root and sys_root), sampled at each tick while
    // reports ask for it (LoadingQuery::context); false: reports say it is off.
    bool cpu_context = false;
    // Each CPU's busiest tasks (TaskUsage, from proc_root), sampled at each tick while reports
    // ask for them (LoadingQuery::tasks); false: reports say they are off.
    bool tasks = false;
};

class Engine {
  public:
    using Clock = std::chrono::steady_clock;

    // Opens the sources, starts the probes and waits for them to calibrate (see
    // EngineOptions), then takes the baseline readings; `clock` gives their time, which the
    // first tick's interval starts from.
    static Result<std::unique_ptr<Engine>> create(const EngineOptions& options,
                                                  const std::function<Clock::time_point()>& clock);
    // The same with the baseline readings taken as of `now` (for tests with a made-up clock).
    static Result<std::unique_ptr<Engine>> create(const EngineOptions& options,
                                                  Clock::time_point now);

    // Takes one sample of every source covering the time since the previous tick, and
    // re-reads the list of online CPUs. A failing source records a gap and the first such
    // error is returned; the other sources are still sampled.
    Result<void> tick(Clock::time_point now);

    LoadingReport loading(const LoadingQuery& query) const;
    // The newest second of every source, the machine and each CPU it has a history of, as
    // the history on disk keeps it; nullopt before the first tick.
    std::optional<HistorySecond> last_second() const;

    // Online CPUs as of the last tick.
    const std::vector<int>& online_cpus() const { return online_; }
    std::vector<std::string_view> source_names() const;
    // The idle probes that measure (spinning ones, wherever they run), or the sleeping ones;
    // nullptr with ProbeMode::Off.
    const Probes* probes() const { return spinning_ != nullptr ? spinning_ : probes_.get(); }
    // The probes that earn the watchdog's credits: this process's threads; nullptr with
    // ProbeMode::Off.
    const ProbeSet* petting_probes() const { return probes_.get(); }
    // CPU time per unit; nullptr without a cgroup root or cgroup accounting (units_error()
    // says why for the second).
    const UnitUsage* units() const { return units_ ? &*units_ : nullptr; }
    const std::string& units_error() const { return units_error_; }
    // Stops this process's probe threads (ProbeSet::stop): the CPUs whose thread had not ended
    // within `grace`. They measure nothing afterwards: for an engine that is ending.
    std::vector<int> stop_probes(std::chrono::milliseconds grace);
    ProbeMode probe_mode() const { return options_.probe; }
    std::size_t history_seconds() const { return options_.history_seconds; }
    // Changes the window length, keeping the newest samples.
    void set_history_seconds(std::size_t seconds);

  private:
    struct SourceState {
        std::unique_ptr<LoadSource> source;
        LoadHistory machine;
        CpuMap<LoadHistory> cpus;
        // Sources that know where the time went: the states' history, beside the loads'.
        std::optional<StateHistory> machine_states;
        CpuMap<StateHistory> cpu_states;
        // The time by state so far: the machine's is the sum of its CPUs'. A CPU that goes
        // away keeps its counters, so that they never go back when it returns.
        StateSeconds machine_seconds;
        CpuMap<StateSeconds> cpu_seconds;
    };

    Engine(EngineOptions options, Clock::time_point now);
    Result<void> setup(const std::function<Clock::time_point()>& clock);
    Result<void> refresh_online(const LoadSample* fallback);
    SourceLoad report(const SourceState& st, const LoadHistory& h, const StateHistory* states,
                      const StateSeconds* seconds, const LoadingQuery& query) const;
    void record(SourceState& st, const LoadSample& sample, double seconds);
    void publish_idle(Clock::time_point now);

    EngineOptions options_;
    std::unique_ptr<ProbeSet> probes_;  // before sources_: the sources refer to them
    Probes* spinning_ = nullptr;        // probes_, or options_.spinners, when they spin
    std::vector<SourceState> sources_;
    std::size_t procstat_ = 0;  // index of the procstat source in sources_
    std::vector<int> online_;
    // record()'s scratch lists, kept to be reused: the CPUs of a sample, and where each is in it.
    std::vector<int> record_cpus_;
    std::vector<std::size_t> record_measured_;
    // The sysfs online list; nullopt when it does not exist: then the CPUs of /proc/stat are
    // the online ones.
    std::optional<OnlineCpusReader> online_reader_;
    Clock::time_point last_tick_;
    std::optional<double> last_seconds_;  // the last tick's interval
    std::optional<std::chrono::system_clock::time_point> last_sample_wall_;
    std::optional<UnitUsage> units_;
    std::string units_error_;
    std::optional<CpuContext> context_;
    std::string context_error_;
    std::optional<CpuContextSample> context_sample_;
    // Until when the context is sampled: kContextKeptFor after the last report that asked
    // for it (a report is const, and asking is what starts the sampling).
    mutable std::optional<Clock::time_point> context_wanted_until_;
    // The tasks, as the context: sampled until kContextKeptFor after the last report that
    // asked for them.
    std::optional<TaskUsage> tasks_;
    std::string tasks_error_;  // why there is no TaskUsage
    bool tasks_sampled_ = false;
    mutable std::optional<Clock::time_point> tasks_wanted_until_;
};

}  // namespace monitor
