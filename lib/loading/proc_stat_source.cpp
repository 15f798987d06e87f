#include "monitor/loading/proc_stat_source.hpp"

#include <unistd.h>

#include <algorithm>

namespace monitor {

std::optional<double> load_between(const CpuTimes& before, const CpuTimes& after,
                                   double excluded_ticks) {
    auto t = state_times_between(before, after);
    if (!t) return std::nullopt;
    t->give_back_to_idle(excluded_ticks);
    return t->load();
}

Result<std::unique_ptr<ProcStatSource>> ProcStatSource::open(const std::filesystem::path& proc_root,
                                                             const CpuTimeExclusion* exclude,
                                                             double user_hz,
                                                             TimeState excluded_state) {
    auto reader = ProcStatReader::open(proc_root);
    if (!reader) return std::unexpected(reader.error());
    if (user_hz <= 0) user_hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
    return std::unique_ptr<ProcStatSource>(
        new ProcStatSource(std::move(*reader), exclude, user_hz, excluded_state));
}

Result<LoadSample> ProcStatSource::sample() {
    auto snap = reader_.read();
    if (!snap) return std::unexpected(snap.error());
    return update(*snap);
}

LoadSample ProcStatSource::update(const ProcStatSnapshot& snap) {
    LoadSample out;
    const std::size_t n = snap.cpus.size();
    out.cpus.reserve(n);
    out.cpu_states.reserve(n);
    out.cpu_seconds.reserve(n);
    next_.clear();
    next_.reserve(n);
    // Both lists are sorted by CPU: one walk pairs each CPU with its previous reading.
    auto prev = cpus_.begin();
    // The machine is its CPUs together: the times of those measured over the interval, added
    // up (not the kernel's "cpu" line, whose rounding and hotplug can put it outside them).
    // A CPU that came or went during the interval is left out; one whose counters went back
    // makes the machine's interval a gap, as it makes its own.
    StateTimes machine;
    bool measured = false;
    bool unmeasurable = false;
    for (const auto& line : snap.cpus) {
        const std::uint64_t excluded_ns = exclude_ ? exclude_->excluded_cpu_ns(line.cpu) : 0;
        while (prev != cpus_.end() && prev->first < line.cpu) ++prev;
        const bool known = prev != cpus_.end() && prev->first == line.cpu;
        std::optional<StateTimes> times;
        if (known) times = state_times_between(prev->second.times, line.times);
        if (times) {
            const double ticks =
                excluded_ns >= prev->second.excluded_ns
                    ? static_cast<double>(excluded_ns - prev->second.excluded_ns) * user_hz_ / 1e9
                    : 0.0;
            times->give_back_to_idle(ticks, excluded_state_);
            machine += *times;
            measured = true;
        } else if (known) {
            unmeasurable = true;
        }
        // A CPU absent from the previous reading (just came online) is listed, without a
        // value: this reading only sets its baseline.
        out.cpus.emplace_back(line.cpu, times ? times->load() : std::nullopt);
        out.cpu_states.push_back(times ? times->shares() : std::nullopt);
        out.cpu_seconds.push_back(times ? std::optional{StateSeconds::of(*times, user_hz_)}
                                        : std::nullopt);
        next_.emplace_back(line.cpu, Previous{line.times, excluded_ns});
    }
    if (measured && !unmeasurable) {
        out.machine = machine.load();
        out.machine_states = machine.shares();
    }
    cpus_.swap(next_);
    return out;
}

}  // namespace monitor
