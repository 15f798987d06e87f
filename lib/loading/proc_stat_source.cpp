#include "monitor/loading/proc_stat_source.hpp"

#include <unistd.h>

#include <algorithm>

namespace monitor {

std::optional<double> load_between(const CpuTimes& before, const CpuTimes& after,
                                   double excluded_ticks) {
    const std::uint64_t b0 = before.busy();
    const std::uint64_t b1 = after.busy();
    const std::uint64_t i0 = before.idle();
    const std::uint64_t i1 = after.idle();
    if (b1 < b0 || i1 < i0) return std::nullopt;
    const auto busy = static_cast<double>(b1 - b0);
    const double total = busy + static_cast<double>(i1 - i0);
    if (total <= 0) return std::nullopt;
    // Tick accounting and the excluded CPU time disagree by up to a tick: never below zero.
    const double corrected = busy - std::clamp(excluded_ticks, 0.0, busy);
    return std::clamp(100.0 * corrected / total, 0.0, 100.0);
}

Result<std::unique_ptr<ProcStatSource>> ProcStatSource::open(const std::filesystem::path& proc_root,
                                                             const CpuTimeExclusion* exclude,
                                                             double user_hz) {
    auto reader = ProcStatReader::open(proc_root);
    if (!reader) return std::unexpected(reader.error());
    if (user_hz <= 0) user_hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
    return std::unique_ptr<ProcStatSource>(
        new ProcStatSource(std::move(*reader), exclude, user_hz));
}

Result<LoadSample> ProcStatSource::sample() {
    auto snap = reader_.read();
    if (!snap) return std::unexpected(snap.error());
    return update(*snap);
}

LoadSample ProcStatSource::update(const ProcStatSnapshot& snap) {
    LoadSample out;
    std::map<int, Previous> next;
    double machine_excluded = 0;  // ticks
    for (const auto& line : snap.cpus) {
        const std::uint64_t excluded_ns = exclude_ ? exclude_->excluded_cpu_ns(line.cpu) : 0;
        auto prev = cpus_.find(line.cpu);
        std::optional<double> load;
        if (prev != cpus_.end()) {
            const double ticks =
                excluded_ns >= prev->second.excluded_ns
                    ? static_cast<double>(excluded_ns - prev->second.excluded_ns) * user_hz_ / 1e9
                    : 0.0;
            load = load_between(prev->second.times, line.times, ticks);
            // The machine loses only what each CPU could give: a CPU whose excluded time
            // exceeds its busy ticks (tick accounting is coarse) must not eat into another
            // CPU's real work.
            const std::uint64_t b0 = prev->second.times.busy();
            const std::uint64_t b1 = line.times.busy();
            const double busy = b1 >= b0 ? static_cast<double>(b1 - b0) : 0.0;
            machine_excluded += std::clamp(ticks, 0.0, busy);
        }
        // A CPU absent from the previous reading (just came online) is listed, without a
        // value: this reading only sets its baseline.
        out.cpus.emplace_back(line.cpu, load);
        next.emplace(line.cpu, Previous{line.times, excluded_ns});
    }
    if (machine_) out.machine = load_between(*machine_, snap.machine, machine_excluded);
    machine_ = snap.machine;
    cpus_ = std::move(next);
    return out;
}

}  // namespace monitor
