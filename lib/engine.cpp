#include "monitor/engine.hpp"

#include <algorithm>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/loading/proc_stat_source.hpp"

namespace monitor {

const SourceLoad* find_source(const std::vector<SourceLoad>& loads, std::string_view source) {
    auto it = std::find_if(loads.begin(), loads.end(),
                           [&](const SourceLoad& l) { return l.source == source; });
    return it == loads.end() ? nullptr : &*it;
}

Engine::Engine(EngineOptions options, Clock::time_point now)
    : options_(std::move(options)), last_tick_(now) {
    options_.history_seconds = std::max<std::size_t>(options_.history_seconds, 1);
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options,
                                               Clock::time_point now) {
    std::unique_ptr<Engine> engine{new Engine(options, now)};
    auto procstat = ProcStatSource::open(engine->options_.proc_root);
    if (!procstat) return std::unexpected(procstat.error());
    if (auto r = engine->add_source(std::move(*procstat)); !r) return std::unexpected(r.error());
    return engine;
}

Result<void> Engine::add_source(std::unique_ptr<LoadSource> source) {
    auto baseline = source->sample();
    if (!baseline) return std::unexpected(baseline.error());
    if (sources_.empty()) {
        if (auto r = refresh_online(&*baseline); !r) return r;
    }
    sources_.push_back({std::move(source), LoadHistory(options_.history_seconds), {}});
    return {};
}

Result<void> Engine::refresh_online(const LoadSample* fallback) {
    if (sysfs_online_) {
        auto cpus = read_online_cpus(options_.sys_root);
        if (cpus) {
            online_ = std::move(*cpus);
            return {};
        }
        if (cpus.error().status != Status::NoDev) return std::unexpected(cpus.error());
        sysfs_online_ = false;  // no sysfs here: the CPUs /proc/stat lists are the online ones
    }
    if (fallback) {
        online_.clear();
        for (const auto& [cpu, load] : fallback->cpus) online_.push_back(cpu);
    }
    return {};
}

Result<void> Engine::tick(Clock::time_point now) {
    const double seconds = std::chrono::duration<double>(now - last_tick_).count();
    last_tick_ = now;
    Result<void> status;
    bool first_source = true;

    for (auto& st : sources_) {
        auto sample = st.source->sample();
        const bool sampled = sample.has_value();
        if (!sampled) {
            if (status) status = std::unexpected(sample.error());
            sample = LoadSample{};  // a gap everywhere this second
        }
        if (first_source) {
            // A failed reading says nothing about which CPUs are online: keep the last list.
            if (auto r = refresh_online(sampled ? &*sample : nullptr); !r && status) status = r;
            first_source = false;
        }
        st.machine.push(sample->machine, seconds);

        // Every online CPU gets a sample or a gap, so that all windows cover the same time;
        // a CPU the source measured but sysfs does not list yet is recorded too.
        auto measured = sample->cpus.begin();
        std::vector<int> cpus = online_;
        for (const auto& [cpu, load] : sample->cpus) cpus.push_back(cpu);
        std::sort(cpus.begin(), cpus.end());
        cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
        for (int cpu : cpus) {
            while (measured != sample->cpus.end() && measured->first < cpu) ++measured;
            std::optional<double> load;
            if (measured != sample->cpus.end() && measured->first == cpu) load = measured->second;
            st.cpus.try_emplace(cpu, options_.history_seconds).first->second.push(load, seconds);
        }
        // CPUs that went away keep their history until it has aged out of the window.
        for (auto it = st.cpus.begin(); it != st.cpus.end();) {
            bool listed = std::binary_search(cpus.begin(), cpus.end(), it->first);
            if (!listed) it->second.push(std::nullopt, seconds);
            it = !listed && it->second.empty_of_data() ? st.cpus.erase(it) : std::next(it);
        }
    }
    last_sample_wall_ = std::chrono::system_clock::now();
    return status;
}

void Engine::set_history_seconds(std::size_t seconds) {
    options_.history_seconds = std::max<std::size_t>(seconds, 1);
    for (auto& st : sources_) {
        st.machine.resize(options_.history_seconds);
        for (auto& [cpu, h] : st.cpus) h.resize(options_.history_seconds);
    }
}

std::vector<std::string_view> Engine::source_names() const {
    std::vector<std::string_view> names;
    for (const auto& st : sources_) names.push_back(st.source->name());
    return names;
}

SourceLoad Engine::report(const SourceState& st, const LoadHistory& h, bool history) const {
    SourceLoad l;
    l.source = std::string{st.source->name()};
    l.stats = h.stats();
    if (history) l.history = h.values();
    return l;
}

LoadingReport Engine::loading(const LoadingQuery& query) const {
    LoadingReport r;
    r.timestamp = last_sample_wall_;
    r.window_seconds = options_.history_seconds;
    for (const auto& st : sources_) r.machine.push_back(report(st, st.machine, query.history));
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
                c.sources.push_back(report(st, h->second, query.history));
            } else {
                c.sources.push_back(SourceLoad{std::string{st.source->name()}, std::nullopt, {}});
            }
        }
        r.cpus.push_back(std::move(c));
    }
    return r;
}

}  // namespace monitor
