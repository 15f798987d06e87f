#include "monitor/loading/proc_stat_source.hpp"

#include <algorithm>

namespace monitor {

std::optional<double> load_between(const CpuTimes& before, const CpuTimes& after) {
    const std::uint64_t b0 = before.busy();
    const std::uint64_t b1 = after.busy();
    const std::uint64_t i0 = before.idle();
    const std::uint64_t i1 = after.idle();
    if (b1 < b0 || i1 < i0) return std::nullopt;
    const std::uint64_t busy = b1 - b0;
    const std::uint64_t total = busy + (i1 - i0);
    if (total == 0) return std::nullopt;
    double load = 100.0 * static_cast<double>(busy) / static_cast<double>(total);
    return std::clamp(load, 0.0, 100.0);
}

Result<std::unique_ptr<ProcStatSource>> ProcStatSource::open(
    const std::filesystem::path& proc_root) {
    auto reader = ProcStatReader::open(proc_root);
    if (!reader) return std::unexpected(reader.error());
    return std::unique_ptr<ProcStatSource>(new ProcStatSource(std::move(*reader)));
}

Result<LoadSample> ProcStatSource::sample() {
    auto snap = reader_.read();
    if (!snap) return std::unexpected(snap.error());
    return update(*snap);
}

LoadSample ProcStatSource::update(const ProcStatSnapshot& snap) {
    LoadSample out;
    if (machine_) out.machine = load_between(*machine_, snap.machine);
    machine_ = snap.machine;

    std::map<int, CpuTimes> next;
    for (const auto& line : snap.cpus) {
        auto prev = cpus_.find(line.cpu);
        // A CPU absent from the previous reading (just came online) is listed, without a
        // value: this reading only sets its baseline.
        out.cpus.emplace_back(
            line.cpu, prev != cpus_.end() ? load_between(prev->second, line.times) : std::nullopt);
        next.emplace(line.cpu, line.times);
    }
    cpus_ = std::move(next);
    return out;
}

}  // namespace monitor
