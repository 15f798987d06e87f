#include "monitor/engine.hpp"

#include <sched.h>

#include <algorithm>

#include "monitor/loading/probe_source.hpp"
#include "monitor/loading/proc_stat_source.hpp"

namespace monitor {

const SourceLoad* find_source(const std::vector<SourceLoad>& loads, std::string_view source) {
    auto it = std::find_if(loads.begin(), loads.end(),
                           [&](const SourceLoad& l) { return l.source == source; });
    return it == loads.end() ? nullptr : &*it;
}

Result<void> check(const LoadingQuery& query) {
    if (query.units < 0 || query.units > kMaxUnitsListed) {
        return fail(Status::BadArg,
                    "units: " + std::to_string(query.units) + " is out of range; ask for 1 to " +
                        std::to_string(kMaxUnitsListed) + " of the busiest units, or 0 for none");
    }
    if (query.tasks < 0 || query.tasks > kMaxTasksListed) {
        return fail(Status::BadArg, "tasks: " + std::to_string(query.tasks) +
                                        " is out of range; ask for 1 to " +
                                        std::to_string(kMaxTasksListed) +
                                        " of each CPU's busiest tasks, or 0 for none");
    }
    if (!query.ranged()) return {};
    if (query.units > 0 || query.context || query.tasks > 0 || query.totals) {
        return fail(Status::BadArg,
                    "since/until: the history on disk keeps the loading and the states, not "
                    "the units, the CPUs' context, the tasks or the totals; ask for those "
                    "without a range");
    }
    if ((query.since && *query.since < 0) || (query.until && *query.until < 0)) {
        return fail(Status::BadArg,
                    "since/until: a time before 1970 (microseconds since the "
                    "epoch are asked for)");
    }
    if (query.since && query.until && *query.since > *query.until) {
        return fail(Status::BadArg, "since/until: the range ends (" + std::to_string(*query.until) +
                                        ") before it begins (" + std::to_string(*query.since) +
                                        ")");
    }
    return {};
}

Engine::Engine(EngineOptions options, Clock::time_point now)
    : options_(std::move(options)), last_tick_(now) {
    options_.history_seconds = std::max<std::size_t>(options_.history_seconds, 1);
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options,
                                               Clock::time_point now) {
    return create(options, [now] { return now; });
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options,
                                               const std::function<Clock::time_point()>& clock) {
    std::unique_ptr<Engine> engine{new Engine(options, Clock::time_point{})};
    if (auto r = engine->setup(clock); !r) return std::unexpected(r.error());
    return engine;
}

Result<void> Engine::setup(const std::function<Clock::time_point()>& clock) {
    auto online = OnlineCpusReader::open(options_.sys_root);
    if (online) {
        online_reader_.emplace(std::move(*online));
    } else if (online.error().status != Status::NoDev) {
        return std::unexpected(online.error());
    }  // else no sysfs here (a container): the CPUs /proc/stat lists are the online ones

    const ProbeMode mode = options_.probe;
    const bool elsewhere = mode == ProbeMode::Spin && options_.spinners != nullptr;
    if (mode != ProbeMode::Off) {
        probes_ = std::make_unique<ProbeSet>(elsewhere ? ProbeMode::Sleep : mode,
                                             options_.probe_attr, options_.probe_cpus,
                                             options_.calibration, options_.idle_sink);
    }
    if (mode == ProbeMode::Spin) {
        spinning_ = elsewhere ? options_.spinners.get() : static_cast<Probes*>(probes_.get());
    }
    // The probes' time is accounted to user at nice 0 and below, to nice above (whatever
    // their policy: the kernel books by the task's nice value).
    const bool niced = options_.probe_attr.nice > 0;
    auto procstat = ProcStatSource::open(options_.proc_root, spinning_, 0,
                                         niced ? TimeState::Nice : TimeState::User);
    if (!procstat) return std::unexpected(procstat.error());
    auto baseline = (*procstat)->sample();
    if (!baseline) return std::unexpected(baseline.error());
    if (auto r = refresh_online(&*baseline); !r) return r;

    if (probes_) {
        probes_->set_online(online_);
        if (elsewhere) spinning_->set_online(online_);
        probes_->wait_calibrated(options_.calibration_wait);
        if (elsewhere) spinning_->wait_calibrated(options_.calibration_wait);
        // Calibration took a while: the first interval starts now, for every source.
        if (auto again = (*procstat)->sample(); !again) return std::unexpected(again.error());
    }
    if (mode == ProbeMode::Spin) {
        auto probe = std::make_unique<ProbeSource>([p = spinning_] { return p->read(); });
        (void)probe->sample();  // the baseline reading; never fails
        sources_.push_back({std::move(probe), LoadHistory(options_.history_seconds), {}, {}, {}});
    }
    procstat_ = sources_.size();
    sources_.push_back({std::move(*procstat),
                        LoadHistory(options_.history_seconds),
                        {},
                        StateHistory(options_.history_seconds),
                        {}});
    if (!options_.cgroup_root.empty()) {
        auto units = UnitUsage::open(options_.cgroup_root, options_.history_seconds);
        if (units) {
            units_.emplace(std::move(*units));
        } else {
            units_error_ = units.error().message;
        }
    }
    if (options_.cpu_context) {
        auto context = CpuContext::open(options_.proc_root, options_.sys_root);
        if (context) {
            context_.emplace(std::move(*context));
        } else {
            context_error_ = context.error().message;
        }
    }
    if (options_.tasks) {
        // Named by the units' hierarchy, as the units are.
        std::optional<CgroupAccounting> hierarchy;
        if (units_) hierarchy = units_->accounting();
        auto tasks = TaskUsage::open(options_.proc_root, hierarchy);
        if (tasks) {
            tasks_.emplace(std::move(*tasks));
        } else {
            tasks_error_ = tasks.error().message;
        }
    }
    last_tick_ = clock();
    // The units' baseline: what a tree that cannot be read holds back is said by the ticks.
    if (units_) (void)units_->sample(last_tick_);
    return {};
}

Result<void> Engine::refresh_online(const LoadSample* fallback) {
    if (online_reader_) {
        auto cpus = online_reader_->read();
        if (!cpus) return std::unexpected(cpus.error());
        online_ = std::move(*cpus);
        return {};
    }
    if (fallback) {
        online_.clear();
        for (const auto& [cpu, load] : fallback->cpus) online_.push_back(cpu);
    }
    return {};
}

std::vector<int> Engine::stop_probes(std::chrono::milliseconds grace) {
    return probes_ ? probes_->stop(grace) : std::vector<int>{};
}

Result<void> Engine::tick(Clock::time_point now) {
    const double seconds = std::chrono::duration<double>(now - last_tick_).count();
    last_tick_ = now;
    last_seconds_ = seconds;
    Result<void> status;

    // Sample every source first, as close together as possible.
    std::vector<LoadSample> samples(sources_.size());
    std::vector<bool> sampled(sources_.size());
    for (std::size_t i = 0; i < sources_.size(); ++i) {
        auto sample = sources_[i].source->sample();
        sampled[i] = sample.has_value();
        if (sample) {
            samples[i] = std::move(*sample);
        } else if (status) {
            status = std::unexpected(sample.error());  // a gap everywhere this second
        }
    }

    // A failed reading says nothing about which CPUs are online: keep the last list.
    const auto before = online_;
    if (auto r = refresh_online(sampled[procstat_] ? &samples[procstat_] : nullptr); !r && status) {
        status = r;
    }
    if (probes_ && online_ != before) {
        probes_->set_online(online_);
        if (spinning_ != nullptr && spinning_ != probes_.get()) spinning_->set_online(online_);
    }

    for (std::size_t i = 0; i < sources_.size(); ++i) record(sources_[i], samples[i], seconds);
    if (probes_ && probes_->mode() == ProbeMode::Sleep && sampled[procstat_] &&
        options_.idle_sink && options_.idle_sink->wants_credits()) {
        publish_idle(now);
    }
    // After the loading, which a slow walk of a large tree must not delay.
    if (units_) {
        if (auto r = units_->sample(now); !r && status) status = r;
    }
    // The context while reports ask for it; when they stopped, its readings are forgotten,
    // so that the first rates after a pause are of one interval, not of the pause.
    if (context_ && context_wanted_until_ && now < *context_wanted_until_) {
        auto c = context_->sample(now);
        if (c) {
            context_sample_ = std::move(*c);
            context_error_.clear();
        } else {
            context_sample_.reset();
            context_error_ = c.error().message;
        }
    } else if (context_sample_) {
        context_sample_.reset();
        context_->forget();
    }
    // The tasks likewise.
    if (tasks_ && tasks_wanted_until_ && now < *tasks_wanted_until_) {
        // A stat line that is not the kernel's (only an injected root has one) is skipped;
        // the other tasks' figures stand.
        (void)tasks_->sample(now);
        tasks_sampled_ = true;
    } else if (tasks_sampled_) {
        tasks_sampled_ = false;
        tasks_->forget();
    }
    last_sample_wall_ = std::chrono::system_clock::now();
    return status;
}

// The kernel's idle time of each CPU (idle and iowait, as the procstat source has added it up
// interval by interval: it never goes back, and an interval it cannot measure adds nothing;
// with spinning probes elsewhere, their CPU time given back to idle), for the sleeping
// probes' credits.
void Engine::publish_idle(Clock::time_point now) {
    const auto& st = sources_[procstat_];
    for (const auto& [cpu, seconds] : st.cpu_seconds) {
        const double idle = seconds[TimeState::Idle] + seconds[TimeState::IoWait];
        probes_->publish_idle(cpu, static_cast<std::uint64_t>(idle * 1e9), now);
    }
}

// Every online CPU gets a sample or a gap, so that all windows cover the same time; a CPU the
// source measured but sysfs does not list yet is recorded too.
namespace {

// Pushes a value into the history of each CPU of `cpus` (sorted), made when it is new: the
// value of the CPU at index i is value_of(i). A history whose CPU is not listed gets a gap,
// and goes once nothing of it is left in the window. The map and the list are walked side by
// side: no lookup per CPU.
template <class Histories, class ValueOf>
void push_each(Histories& histories, const std::vector<int>& cpus, std::size_t window,
               double seconds, ValueOf value_of) {
    auto it = histories.begin();
    auto unlisted = [&] {
        it->second.push(std::nullopt, seconds);
        it = it->second.empty_of_data() ? histories.erase(it) : std::next(it);
    };
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        while (it != histories.end() && it->first < cpus[i]) unlisted();
        if (it == histories.end() || it->first != cpus[i]) {
            it = histories.try_emplace(it, cpus[i], window);
        }
        it->second.push(value_of(i), seconds);
        ++it;
    }
    while (it != histories.end()) unlisted();
}

}  // namespace

void Engine::record(SourceState& st, const LoadSample& sample, double seconds) {
    st.machine.push(sample.machine, seconds);
    if (st.machine_states) st.machine_states->push(sample.machine_states, seconds);
    // The CPUs online and those the sample measured (both sorted), each with its index in
    // the sample (npos when it has no value there).
    constexpr std::size_t npos = static_cast<std::size_t>(-1);
    auto& cpus = record_cpus_;
    auto& measured = record_measured_;
    cpus.clear();
    measured.clear();
    {
        auto online = online_.begin();
        std::size_t m = 0;
        while (online != online_.end() || m < sample.cpus.size()) {
            const bool take_sample = m < sample.cpus.size() &&
                                     (online == online_.end() || sample.cpus[m].first <= *online);
            if (take_sample) {
                if (online != online_.end() && *online == sample.cpus[m].first) ++online;
                // A CPU listed twice by a malformed source counts once.
                if (cpus.empty() || cpus.back() != sample.cpus[m].first) {
                    cpus.push_back(sample.cpus[m].first);
                    measured.push_back(m);
                }
                ++m;
            } else {
                if (cpus.empty() || cpus.back() != *online) {
                    cpus.push_back(*online);
                    measured.push_back(npos);
                }
                ++online;
            }
        }
    }
    const std::size_t window = options_.history_seconds;
    push_each(st.cpus, cpus, window, seconds, [&](std::size_t i) -> std::optional<double> {
        return measured[i] == npos ? std::nullopt : sample.cpus[measured[i]].second;
    });
    if (!st.machine_states) return;
    push_each(st.cpu_states, cpus, window, seconds,
              [&](std::size_t i) -> std::optional<StateShares> {
                  const std::size_t m = measured[i];
                  return m < sample.cpu_states.size() ? sample.cpu_states[m] : std::nullopt;
              });
    auto secs = st.cpu_seconds.begin();
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        const std::size_t m = measured[i];
        if (m >= sample.cpu_seconds.size() || !sample.cpu_seconds[m]) continue;
        while (secs != st.cpu_seconds.end() && secs->first < cpus[i]) ++secs;
        if (secs == st.cpu_seconds.end() || secs->first != cpus[i]) {
            secs = st.cpu_seconds.try_emplace(secs, cpus[i]);
        }
        secs->second += *sample.cpu_seconds[m];
        st.machine_seconds += *sample.cpu_seconds[m];
    }
}

void Engine::set_history_seconds(std::size_t seconds) {
    options_.history_seconds = std::max<std::size_t>(seconds, 1);
    for (auto& st : sources_) {
        st.machine.resize(options_.history_seconds);
        for (auto& [cpu, h] : st.cpus) h.resize(options_.history_seconds);
        if (st.machine_states) st.machine_states->resize(options_.history_seconds);
        for (auto& [cpu, h] : st.cpu_states) h.resize(options_.history_seconds);
    }
    if (units_) units_->set_window(options_.history_seconds);
}

std::vector<std::string_view> Engine::source_names() const {
    std::vector<std::string_view> names;
    names.reserve(sources_.size());
    for (const auto& st : sources_) names.push_back(st.source->name());
    return names;
}

SourceLoad Engine::report(const SourceState& st, const LoadHistory& h, const StateHistory* states,
                          const StateSeconds* seconds, const LoadingQuery& query) const {
    SourceLoad l;
    l.source = std::string{st.source->name()};
    l.stats = h.stats();
    if (query.history) l.history = h.values();
    if (query.states && states != nullptr) l.states = states->stats();
    if (query.totals && seconds != nullptr && l.stats) l.state_seconds = *seconds;
    return l;
}

std::optional<HistorySecond> Engine::last_second() const {
    if (!last_seconds_) return std::nullopt;
    HistorySecond out;
    out.seconds = *last_seconds_;
    out.sources.reserve(sources_.size());
    for (const auto& st : sources_) {
        HistorySource s;
        s.name = std::string{st.source->name()};
        s.machine = st.machine.newest();
        s.has_states = st.machine_states.has_value();
        if (s.has_states) s.machine_states = st.machine_states->newest();
        s.cpus.reserve(st.cpus.size());
        // Both maps hold the same CPUs (record() pushes into both).
        auto states = st.cpu_states.begin();
        for (const auto& [cpu, h] : st.cpus) {
            HistoryCpu c{.cpu = cpu, .load = h.newest(), .states = std::nullopt};
            while (states != st.cpu_states.end() && states->first < cpu) ++states;
            if (states != st.cpu_states.end() && states->first == cpu) {
                c.states = states->second.newest();
            }
            s.cpus.push_back(c);
        }
        out.sources.push_back(std::move(s));
    }
    return out;
}

LoadingReport Engine::loading(const LoadingQuery& query) const {
    LoadingReport r;
    r.timestamp = last_sample_wall_;
    r.window_seconds = options_.history_seconds;
    for (const auto& st : sources_) {
        const bool states = st.machine_states.has_value();
        r.machine.push_back(report(st, st.machine, states ? &*st.machine_states : nullptr,
                                   states ? &st.machine_seconds : nullptr, query));
    }
    if (query.units > 0) {
        UnitLoading u;
        if (units_) {
            u.accounting = cgroup_accounting_name(units_->accounting());
            u.count = units_->unit_count();
            u.top = units_->top(static_cast<std::size_t>(query.units));
        } else {
            u.unavailable = options_.cgroup_root.empty()
                                ? std::string{"no cgroup tree was given to read units from"}
                                : units_error_;
        }
        r.units = std::move(u);
    }
    if (query.context) {
        // Only an engine that samples the context is changed by asking (the daemon's, whose
        // reports and ticks come from one thread).
        if (options_.cpu_context) context_wanted_until_ = last_tick_ + kContextKeptFor;
        CpuContextReport c;
        if (!options_.cpu_context) {
            c.unavailable = "the CPUs' context is not sampled by this engine";
        } else if (context_sample_) {
            c.sample = *context_sample_;
            if (c.sample->interrupt_sources.size() > kMaxInterruptSourcesListed) {
                c.sample->interrupt_sources.resize(kMaxInterruptSourcesListed);
            }
            if (!query.per_cpu) c.sample->cpus.clear();
        } else {
            c.unavailable = context_error_;  // empty until the first sample, when none failed
        }
        r.context = std::move(c);
    }
    if (query.tasks > 0) {
        if (options_.tasks && tasks_) tasks_wanted_until_ = last_tick_ + kContextKeptFor;
        TaskLoading t;
        if (!options_.tasks) {
            t.unavailable = "the tasks are not sampled by this engine";
        } else if (!tasks_) {
            t.unavailable = tasks_error_;
        } else if (tasks_sampled_) {
            t.seconds = tasks_->seconds();
            t.count = tasks_->task_count();
            t.processes = tasks_->process_count();
            if (t.seconds > 0) {
                t.top = tasks_->top(static_cast<std::size_t>(query.tasks));
            }
        }
        r.tasks = std::move(t);
    }
    if (!query.per_cpu) return r;

    std::vector<int> cpus = online_;
    for (const auto& st : sources_) {
        for (const auto& [cpu, h] : st.cpus) cpus.push_back(cpu);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    for (int cpu : cpus) {
        CpuLoading c;
        c.cpu = cpu;
        c.online = std::binary_search(online_.begin(), online_.end(), cpu);
        for (const auto& st : sources_) {
            auto h = st.cpus.find(cpu);
            if (h != st.cpus.end()) {
                auto states = st.cpu_states.find(cpu);
                auto seconds = st.cpu_seconds.find(cpu);
                c.sources.push_back(
                    report(st, h->second, states != st.cpu_states.end() ? &states->second : nullptr,
                           seconds != st.cpu_seconds.end() ? &seconds->second : nullptr, query));
            } else {
                c.sources.push_back(SourceLoad{std::string{st.source->name()}, std::nullopt, {}});
            }
        }
        r.cpus.push_back(std::move(c));
    }
    return r;
}

}  // namespace monitor
